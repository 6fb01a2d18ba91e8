import re

from tests.examples.run_example import numbers
from tests.examples.run_example import run_example


def test_distributed_training_splits_the_streams_between_two_devices():
    # The strategy of this backend (mirrored or jax-data-parallel) on 2
    # logical CPU devices, a global batch of 4 streams.
    output = run_example("distributed_training.py", "--smoke")
    assert "2 replicas, global batch 4 streams, 2 per replica" in output
    # Each replica carries the memory of its 2 streams, full after fit.
    replicas = re.findall(r"replica (\d): memory \((\d+), 1, 16, 32\)", output)
    assert replicas == [("0", "2"), ("1", "2")]
    assert output.count("valid slots [16, 16]") == 2
    bpc = numbers(r"validation, memory +\d+: ([\d.]+) bits", output)
    assert len(bpc) == 2 and all(0 < value < 8 for value in bpc)
