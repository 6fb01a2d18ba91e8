import re

import pytest

from tests.examples.run_example import numbers
from tests.examples.run_example import run_example


# The example runs on any backend; its process (and the three
# `keras-txl generate` commands it starts) costs about half a CPU-minute,
# so CI runs it under TensorFlow only (`generate` and `score` with a
# memory are tested on every backend in tests/models/).
@pytest.mark.one_backend
def test_streams_across_calls_commands_pieces_and_segments():
    output = run_example("streaming.py", "--smoke")
    assert "story: 2 calls == one call: True" in output
    assert "commands: 2 commands == 2 calls: True" in output
    # The memory carried is the same size after every piece.
    (sizes,) = re.findall(
        r"^score: memory after each piece: (.*) numbers$", output, re.M
    )
    assert len(sizes.strip("[]").split(",")) == 1, sizes
    (difference,) = numbers(
        r"pieces differ from one call by (\S+) nats", output
    )
    assert difference < 1e-4
    # A new first segment of a 4-segment document moves the prediction
    # with a memory of 3 segments, and not at all without memory.
    with_memory, without = numbers(
        r"^classify: memory +\d+: .* moves the logits by (\S+)$", output
    )
    assert with_memory > 1e-6 and without == 0.0
