import re

import keras

from tests.examples.run_example import numbers
from tests.examples.run_example import run_example

# The example's bound on the loss after 10 steps against one device
# (measured: 0 for `mirrored` and JAX model parallel, 4.8e-7 for JAX data
# parallel).
LOSS_TOLERANCE = 1e-4


def test_distributed_training_splits_the_streams_between_two_devices():
    # On 2 logical CPU devices, a global batch of 4 streams: TensorFlow
    # `mirrored`; JAX data then model parallel in ONE process (one start
    # of the interpreter and the engines for both).
    jax = keras.backend.backend() == "jax"
    args = ["--smoke"]
    if jax:
        args += ["--strategy", "jax-data-parallel", "jax-model-parallel"]
    output = run_example("distributed_training.py", *args)
    data_parallel = "jax-data-parallel" if jax else "mirrored"
    assert (
        f"strategy '{data_parallel}': 2 replica(s), global batch 4 "
        "streams, 2 per replica" in output
    )
    # Data parallel: each replica carries the memory of its 2 streams,
    # full after fit.
    replicas = re.findall(r"replica (\d): memory \((\d+), 1, 16, 32\)", output)
    expected = [("0", "2"), ("1", "2")] + ([("0", "4")] if jax else [])
    assert replicas == expected
    assert output.count("valid slots [16, 16]") == 2
    strategies = [data_parallel] + (["jax-model-parallel"] if jax else [])
    # Validation with memories 0 and 32 after each training.
    bpc = numbers(r"validation, memory +\d+: ([\d.]+) bits", output)
    assert len(bpc) == 2 * len(strategies)
    assert all(0 < value < 8 for value in bpc)
    # Every strategy reaches the loss of one device after 10 steps.
    checks = re.findall(
        r"^(\S+): loss after 10 steps ([\d.]+), one device ([\d.]+)",
        output,
        re.M,
    )
    assert [name for name, _, _ in checks] == strategies
    for _, loss, reference in checks:
        assert 0 < float(reference) < 8
        assert abs(float(loss) - float(reference)) <= LOSS_TOLERANCE
    if jax:
        _check_model_parallel(output)


def _check_model_parallel(output):
    """A (batch 1, model 2) mesh: one replica of the 4 streams (memory
    whole on both devices), the kernels split in two along "model"."""
    assert "device mesh {'batch': 1, 'model': 2}" in output
    assert (
        "strategy 'jax-model-parallel': 1 replica(s), global batch 4 "
        "streams, 4 per replica" in output
    )
    assert "valid slots [16, 16, 16, 16]" in output
    assert (
        "intermediate kernel (32, 128): sharding ('batch', 'model'), "
        "(32, 64) on each of ['cpu:0', 'cpu:1']" in output
    )
    (split,) = re.findall(
        r"\d+ of \d+ weights split along 'model' \(([\d,]+) of ([\d,]+) "
        "parameters\\)",
        output,
    )
    sharded, total = (int(n.replace(",", "")) for n in split)
    assert sharded > 0.9 * total  # all but layer norms, hidden biases
