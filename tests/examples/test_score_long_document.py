import pytest

from tests.examples.run_example import numbers
from tests.examples.run_example import run_example


# The example runs on any backend; its subprocess costs 20-45 CPU-seconds,
# so CI runs it under TensorFlow only (the library paths it calls are
# tested on every backend elsewhere).
@pytest.mark.one_backend
def test_score_long_document_with_and_without_memory(tmp_path):
    plot = tmp_path / "score.png"
    output = run_example("score_long_document.py", "--smoke", "--plot", plot)
    with_memory, without = numbers(
        r"^ *(?:memory \d+|no memory): ([\d.]+) bits per character$", output
    )
    assert 0 < with_memory < 8 and 0 < without < 8
    # The per-token losses average to the library's evaluation.
    (difference,) = numbers(r"mean differs by ([\d.e+-]+) nats", output)
    assert difference < 1e-4
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
