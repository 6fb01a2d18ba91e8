import math

from tests.examples.run_example import numbers
from tests.examples.run_example import run_example


def test_train_char_lm_trains_validates_and_saves_a_preset(tmp_path):
    output = run_example(
        "train_char_lm.py", "--smoke", "--output", tmp_path / "preset"
    )
    # Validation with memories 0, 16 and 32: half a bit better than a
    # uniform guess over the characters, the untrained model's score. The
    # smoke run's 42 steps bring it from log2(52) = 5.70 to 4.73 (JAX);
    # with `--learning-rate 1e-9` (not trained) it stays at 5.69.
    characters = numbers(r"^(\d+) characters", output)[0]
    bpc = numbers(r"validation, memory +\d+: ([\d.]+) bits", output)
    assert len(bpc) == 3
    assert all(value < math.log2(characters) - 0.5 for value in bpc)
    # The preset reloads with the same weights and the tokenizer.
    assert numbers(r"reloaded logits differ by ([\d.e+-]+)", output) == [0.0]
    assert (tmp_path / "preset" / "task.json").is_file()
    assert (tmp_path / "preset" / "tokenizer.json").is_file()
    assert "sample (" in output
    # Its output goes to a pipe, not a terminal: fit logs plain lines, as
    # in a log file (no progress bar's carriage returns or codes).
    assert "\r" not in output and "\x1b" not in output
    assert numbers(r"^\d+/\d+ - [\d.]+m?s - .*loss: ([\d.]+)", output)
