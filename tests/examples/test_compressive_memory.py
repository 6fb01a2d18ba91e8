import re

import pytest

from tests.examples.run_example import numbers
from tests.examples.run_example import run_example


# The example runs on any backend; its subprocess costs 20-45 CPU-seconds,
# so CI runs it under TensorFlow only (the library paths it calls are
# tested on every backend elsewhere).
@pytest.mark.one_backend
def test_compressive_memory_trains_beside_the_plain_model():
    output = run_example("compressive_memory.py", "--smoke")
    # Both trained and validated; only the compressive one logs the
    # reconstruction loss and holds a full compressed memory (4 slots).
    bpc = numbers(r"^validation: ([\d.]+) bits", output)
    assert len(bpc) == 2 and all(0 < value < 8 for value in bpc)
    assert len(numbers(r"^reconstruction_loss ([\d.e+-]+)$", output)) == 1
    assert re.findall(r"compressed_valid_length \[(\d+)\]", output) == ["4"]
    assert "compressed_memory (1, 2, 4, 32)" in output
    assert "attends up to 16 characters back" in output
