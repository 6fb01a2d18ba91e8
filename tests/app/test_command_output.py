"""What the `keras-txl` command writes, read as bytes from fresh
processes whose output goes to a file, as in `keras-txl evaluate RUN >
log`: plain lines (no carriage return, no terminal code) unless
`--progress bar`; the `<unk>` notice of `evaluate --corpus`; the one line
of `export`, which names the signatures, and the SavedModel's
`assets/vocabulary.json`."""

import json
import os
import re
import subprocess
import sys

import pytest

from keras_txl_cli import artifacts
from tests.test_case import REPO


def _command(*argv, cwd=None):
    """`python -m keras_txl_cli ARGV` with stdout and stderr to files:
    `(exit status, stdout bytes, stderr bytes)`."""
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as in a user's shell
    result = subprocess.run(
        [sys.executable, "-m", "keras_txl_cli", *map(str, argv)],
        env=env,
        cwd=cwd,
        capture_output=True,
    )
    return result.returncode, result.stdout, result.stderr


@pytest.fixture(scope="module")
def run(readme_run):
    """The README's tiny `keras-txl train` run on the built-in text, made
    once per session (`tests.test_case.readme_run`, which
    tests/test_docs.py reads too)."""
    return readme_run


@pytest.mark.slow
def test_evaluate_to_a_file_writes_plain_lines(run):
    # The run's own validation text (46,512 tokens) in 512 streams: 11
    # steps, where its batch size of 2 took 2,906 (ten CPU seconds a
    # command), enough for a bar to redraw.
    argv = ("evaluate", run, "--streams", "512")
    status, out, err = _command(*argv)
    assert status == 0, err.decode()[-3000:]
    assert err == b"", err
    assert b"bits per character" in out
    assert b"\r" not in out + err and b"\x1b" not in out + err, out + err
    # `--progress bar` asks for the bar, carriage returns and all: what
    # the check above would find.
    status, out, err = _command(*argv, "--progress", "bar")
    assert status == 0, err.decode()[-3000:]
    assert b"\r" in out
    # `none`: the results only.
    status, quiet, err = _command(*argv, "--progress", "none")
    assert status == 0, err.decode()[-3000:]
    assert b"bits per character" in quiet
    assert b"\r" not in quiet and len(quiet) < len(out)


@pytest.mark.slow
def test_evaluate_corpus_names_the_characters_read_as_unk(run, tmp_path):
    output = run
    text = tmp_path / "text.txt"
    # The run's text (Shakespeare's) has no tab, accent or euro sign: the
    # tab is named escaped.
    text.write_text("the lazy fox:\tété, €5.\n" * 20, encoding="utf-8")
    status, out, err = _command("evaluate", output, "--corpus", text)
    assert status == 0, err.decode()[-3000:]
    assert err.decode().splitlines() == [
        f"keras-txl evaluate: 3 character(s) of '{text}' not in the "
        "run's vocabulary, read as <unk>: '\\t' 'é' '€'"
    ]
    assert b"bits per character" in out


@pytest.mark.slow
def test_export_says_what_it_wrote_and_carries_the_vocabulary(run, tmp_path):
    output = run
    served = tmp_path / "served"
    status, out, err = _command("export", output, served)
    assert status == 0, err.decode()[-3000:]
    assert err == b""
    assert out.decode().splitlines() == [
        f"Exported a SavedModel to {served}: serving_default(token_ids "
        "int32 (?, 8), memory float32 (?, 2, 8, 128), valid_length int32 "
        "(?)) -> logits, memory, valid_length; initial_memory(batch_size "
        "int32 ()) -> memory, valid_length; vocabulary: "
        f"{served}/assets/vocabulary.json."
    ]
    with open(served / "assets" / "vocabulary.json", encoding="utf-8") as f:
        vocabulary = json.load(f)
    tokenizer = artifacts.load_tokenizer(output)
    assert vocabulary == {
        "format": "keras_txl.vocabulary/1",
        "kind": "character",
        "vocabulary": list(tokenizer.get_vocabulary()),
        "oov_token": "<unk>",
        "end_token": None,
    }
    assert vocabulary["vocabulary"][tokenizer.tokenize("t")[0]] == "t"
    # `--verbose` describes the signatures at their final path, never the
    # folder written beside it.
    again = tmp_path / "again"
    status, out, err = _command("export", output, again, "--verbose")
    assert status == 0, err.decode()[-3000:]
    assert f"Saved artifact at '{again}'" in out.decode(), out
    assert b".partial" not in out + err


def test_export_help_says_what_the_savedmodel_holds():
    status, out, err = _command("export", "--help")
    assert status == 0, err
    text = " ".join(out.decode().split())
    assert "serving_default(token_ids, memory, valid_length)" in text
    assert "assets/vocabulary.json" in text


def test_train_help_and_the_readme_give_the_same_time():
    status, out, err = _command("--help")  # lists train and its time
    assert status == 0, err
    said = re.findall(r"about ([\d.]+) minutes", " ".join(out.decode().split()))
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as file:
        readme = " ".join(file.read().split())
    measured = re.findall(r"in ([\d.]+) minutes on an idle 2-core", readme)
    assert said and said == measured, (said, measured)
