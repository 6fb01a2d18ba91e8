"""The `keras-txl` command: a tiny run end to end, and its errors."""

import json
import os
import subprocess
import sys

import keras
import pytest

from keras_txl.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = (
    "The quick brown fox jumps over the lazy dog. "
    "Pack my box with five dozen liquor jugs. "
) * 4
TINY_RUN = [
    "--preset",
    "tiny",
    "--steps",
    "4",
    "--segment-length",
    "8",
    "--batch-size",
    "2",
    "--memory-length",
    "8",
    "--eval-memory-length",
    "16",
    "--steps-per-epoch",
    "2",
]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return str(path)


def _one_line_error(capsys, status, expected_status, match):
    captured = capsys.readouterr()
    assert status == expected_status, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("keras-txl"), lines
    assert match in lines[0], lines
    assert "Traceback" not in captured.err + captured.out


@pytest.mark.slow
@pytest.mark.torch_ok
def test_train_evaluate_generate_end_to_end(tmp_path, corpus, capsys):
    output = str(tmp_path / "run")
    metrics_path = str(tmp_path / "metrics.json")
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
    if keras.backend.backend() == "torch":
        # One thread, as in this process (see tests/training/conftest.py):
        # torch's spinning threads crawl beside the other pytest worker.
        env["OMP_NUM_THREADS"] = "1"
    command = [sys.executable, "-m", "keras_txl", "train", "--corpus"]
    command += [corpus, "--output", output, "--metrics-json", metrics_path]
    result = subprocess.run(
        command + TINY_RUN, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Epoch 2/2" in result.stdout  # Keras progress
    assert "with memory (16)" in result.stdout
    assert "Sample:" in result.stdout
    for name in (
        "model.keras",
        "tokenizer/tokenizer.json",
        "training_curve.png",
        "bpc_vs_memory.png",
        "metrics.json",
    ):
        assert os.path.isfile(os.path.join(output, name)), name
    with open(metrics_path) as file:
        metrics = json.load(file)
    assert metrics["steps"] == 4 and len(metrics["train_loss"]) == 4
    assert metrics["tokens_per_second"] > 0
    assert metrics["config"]["segment_length"] == 8
    assert 0 < metrics["valid_bpc_with_memory"] < 10
    assert 0 < metrics["valid_bpc_without_memory"] < 10
    assert metrics["valid_perplexity_with_memory"] == pytest.approx(
        2 ** metrics["valid_bpc_with_memory"]
    )
    table = metrics["bpc_by_memory_length"]
    assert [row["memory_length"] for row in table] == [0, 2, 8, 16, 32]

    evaluation = str(tmp_path / "evaluation.json")
    status = main(
        ["evaluate", output, "--corpus", corpus, "--memory-length", "0"]
        + ["--metrics-json", evaluation]
    )
    assert status == 0
    with open(evaluation) as file:
        result = json.load(file)
    assert result["memory_length"] == 0
    # The validation text is the end of the corpus: same ballpark.
    assert (
        abs(result["bits_per_character"] - metrics["valid_bpc_without_memory"])
        < 1.0
    )
    assert "bits per character" in capsys.readouterr().out

    assert main(["generate", output, "--prompt", "The", "--length", "5"]) == 0
    assert capsys.readouterr().out.startswith("The")

    # A second run never replaces the model without --overwrite.
    before = os.path.getmtime(os.path.join(output, "model.keras"))
    status = main(["train", "--corpus", corpus, "--output", output])
    _one_line_error(capsys, status, 1, "already holds a model")
    assert os.path.getmtime(os.path.join(output, "model.keras")) == before


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "content, extra, match",
    [
        (None, [], "does not exist"),
        (b"", [], "empty"),
        (b"too short", [], "too short"),
        (b"caf\xe9 " * 2000, [], "utf-8"),
        (TEXT.encode(), ["--resume"], "Nothing to resume"),
        (TEXT.encode(), ["--resume", "--overwrite"], "exclude each other"),
        (TEXT.encode(), ["--steps", "5", "--warmup-steps", "5"], "below"),
    ],
)
def test_train_errors_are_one_line(tmp_path, capsys, content, extra, match):
    path = tmp_path / "corpus.txt"
    if content is not None:
        path.write_bytes(content)
    argv = ["train", "--corpus", str(path), "--output", str(tmp_path / "out")]
    _one_line_error(capsys, main(argv + extra), 1, match)


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "argv, match",
    [
        (["train", "--steps", "0"], "--steps: must be an integer >= 1"),
        (["train", "--preset", "huge"], "--preset: invalid choice"),
        (["train", "--dropout", "1.5"], "--dropout: must be a number"),
        (["train", "--memory-length", "x"], "--memory-length"),
        (["evaluate", "somewhere"], "--corpus"),
        (["generate"], "MODEL_DIR"),
        ([], "required"),
    ],
)
def test_bad_options_are_one_line(capsys, argv, match):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    _one_line_error(capsys, exit_info.value.code, 2, match)


@pytest.mark.torch_ok
def test_evaluate_and_generate_need_a_saved_model(tmp_path, corpus, capsys):
    status = main(["evaluate", str(tmp_path), "--corpus", corpus])
    _one_line_error(capsys, status, 1, "No model")
    status = main(["generate", str(tmp_path), "--prompt", "a"])
    _one_line_error(capsys, status, 1, "No model")
