"""The `keras-txl` command: a tiny run end to end, and its errors."""

import json
import os
import subprocess
import sys

import keras
import keras_hub
import numpy as np
import pytest

from keras_txl import data
from keras_txl.cli import main
from keras_txl.training import artifacts

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

    _check_generate(output, capsys)

    # A second run never replaces the model without --overwrite.
    before = os.path.getmtime(os.path.join(output, "model.keras"))
    status = main(["train", "--corpus", corpus, "--output", output])
    _one_line_error(capsys, status, 1, "already holds a model")
    assert os.path.getmtime(os.path.join(output, "model.keras")) == before


def _check_generate(output, capsys):
    """`keras-txl generate` is `lm.generate` with the sampler asked for:
    greedy twice gives the same text, that of `lm.generate` called
    directly with a greedy sampler and the run's evaluation memory."""
    prompt, max_length = "The quick", 24
    argv = ["generate", output, "--prompt", prompt, "--sampler", "greedy"]
    argv += ["--max-length", str(max_length)]
    printed = []
    for _ in range(2):
        assert main(argv) == 0
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] and len(printed[0]) == max_length + 1

    lm = artifacts.load_model(output)
    tokenizer = artifacts.load_tokenizer(output)
    ids = data.encode(tokenizer, prompt)
    lm.compile(sampler=keras_hub.samplers.GreedySampler())
    inputs = {
        "token_ids": np.zeros((1, max_length), "int32"),
        "padding_mask": np.zeros((1, max_length), bool),
    }
    inputs["token_ids"][0, : len(ids)] = ids
    inputs["padding_mask"][0, : len(ids)] = True
    outputs = lm.generate(inputs, stop_token_ids=None, memory_length=16)
    tokens = np.asarray(outputs["token_ids"])[0]
    np.testing.assert_array_equal(tokens[: len(ids)], ids)
    assert printed[0] == data.decode(tokenizer, tokens) + "\n"

    # Sampled: the seed fixes the text.
    argv = ["generate", output, "--prompt", prompt, "--top-k", "3"]
    assert main(argv + ["--max-length", "20"]) == 0
    assert main(argv + ["--max-length", "20"]) == 0
    first, second = capsys.readouterr().out.splitlines()[-2:]
    assert first == second and len(first) == 20

    for extra, match in (
        (["--max-length", "5"], "shorter than the prompt (9 tokens)"),
        (["--top-p", "0.5"], "applies to the 'top_p' sampler only"),
    ):
        argv = ["generate", output, "--prompt", prompt] + extra
        _one_line_error(capsys, main(argv), 1, match)


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
        (
            ["generate", "run", "--prompt", "a", "--sampler", "nucleus"],
            "--sampler: invalid choice: 'nucleus'",
        ),
        (
            ["generate", "run", "--prompt", "a", "--max-length", "0"],
            "--max-length: must be an integer >= 1",
        ),
        (
            ["generate", "run", "--prompt", "a", "--top-p", "0"],
            "--top-p: must be a number in",
        ),
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
