"""`keras-txl generate --state FILE` refuses, before Keras is imported,
a state file that is damaged or that is the stream of another run,
vocabulary or memory length: one line that names what differs and the
fix, exit status 1, and neither the state file nor the run touched.
(That two calls with a state give the text of one call on the whole
text is `tests/app/test_cli.py`'s, on its trained run.)"""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np

from keras_txl import data
from keras_txl_cli import artifacts
from keras_txl_cli import path_checks
from keras_txl_cli import stream_state
from tests.test_case import REPO

# Keras, its backends, and the library (which loads Keras).
HEAVY = {"keras", "keras_hub", "tensorflow", "jax", "torch", "keras_txl"}
TEXT = "a small text to read"


def _run_folder(folder, weights=b"weights", text=TEXT):
    """A folder that passes for a run before Keras loads it: the run's
    character tokenizer (of `text`) as the library saves it, a
    `task.json`, and a weights file of bytes `weights`."""
    os.makedirs(folder)
    artifacts.save_tokenizer(data.make_tokenizer("char", text), folder)
    with open(os.path.join(folder, path_checks.TASK_FILE), "w") as file:
        file.write("{}")
    _write(os.path.join(folder, path_checks.WEIGHTS_FILES[0]), weights)
    return str(folder)


def _write(path, content):
    with open(path, "wb") as file:
        file.write(content)


def _memory(slots=8, valid=3):
    """A memory of one row as `generate` returns it, flattened."""
    return {
        "memory": np.full((1, 2, slots, 4), 0.5, "float32"),
        "valid_length": np.array([valid], "int32"),
    }


def _npz(**arrays):
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _digest(folder):
    """SHA-256 of every file of `folder`, names included."""
    digest = hashlib.sha256()
    for root, folders, names in sorted(os.walk(folder)):
        folders.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            digest.update(path.encode())
            with open(path, "rb") as file:
                digest.update(file.read())
    return digest.hexdigest()


def _generate(run, state, *extra, cwd):
    """`python -X importtime -m keras_txl_cli --verbose generate RUN
    --prompt ... --state STATE`: `(process, its error lines, the
    top-level packages it imported)`."""
    argv = ["generate", run, "--prompt", "a", "--state", state, *extra]
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "keras_txl_cli"]
        + ["--verbose", *argv],
        env=dict(os.environ, PYTHONPATH=REPO),
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    lines = result.stderr.splitlines()
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in lines
        if line.startswith("import time:")
    }
    errors = [line for line in lines if not line.startswith("import time:")]
    return result, errors, imported


def test_a_state_of_another_stream_or_damaged_is_refused(tmp_path):
    run = _run_folder(tmp_path / "run")
    state = str(tmp_path / "stream.npz")
    stream_state.read_state(state, run).save(_memory())
    valid = open(state, "rb").read()
    # The same run copied elsewhere: its state goes on there.
    # (Its tokenizer saved again: another layer name, the same vocabulary.)
    copy = str(tmp_path / "copy")
    shutil.copytree(run, copy)
    artifacts.save_tokenizer(data.make_tokenizer("char", TEXT), copy)
    assert open(os.path.join(copy, path_checks.TOKENIZER_FILE)).read() != (
        open(os.path.join(run, path_checks.TOKENIZER_FILE)).read()
    )
    assert stream_state.read_state(state, copy).memory_length == 8
    # A run of other weights, and this run trained again in its folder.
    other = _run_folder(tmp_path / "other", weights=b"other weights")
    retrained = str(tmp_path / "retrained")
    shutil.copytree(run, retrained)
    retrained_state = str(tmp_path / "retrained.npz")
    stream_state.read_state(retrained_state, retrained).save(_memory())
    _write(os.path.join(retrained, path_checks.WEIGHTS_FILES[0]), b"new")
    # The same weights beside another vocabulary.
    vocabulary = _run_folder(tmp_path / "vocabulary", text="another text")
    with zipfile.ZipFile(io.BytesIO(valid)) as archive:
        identity = np.load(archive.open("identity.npy"))
    whole = "it is not a whole .npz archive"
    damaged = {
        "truncated": (valid[: len(valid) // 2], whole),
        "text": (b"the story so far\n", whole),
        "empty": (b"", f"{whole} (0 bytes)"),
        "no identity": (_npz(**_memory()), "no 'identity' text"),
        "foreign": (
            _npz(**_memory(), identity=np.array('{"format": "another"}')),
            "not a state file ('identity' is not ours)",
        ),
        "NaN": (
            _npz(
                **dict(_memory(), memory=np.full((1, 2, 8, 4), np.nan, "f4")),
                identity=identity,
            ),
            "'memory' holds NaN or Inf",
        ),
        "valid length": (
            _npz(**_memory(valid=9), identity=identity),  # of 8 slots
            "'valid_length' is [9], not one count of valid slots in [0, 8]",
        ),
        "other length": (
            _npz(**_memory(slots=4), identity=identity),
            "its memory has 4 slots where it records memory_length=8",
        ),
    }
    cases = [
        (
            run,
            state,
            ["--memory-length", "16"],
            "holds a memory of 8 tokens;"
            " --memory-length is 16. Pass --memory-length 8",
        ),
        (
            other,
            state,
            [],
            f"is the stream of another run: it was made by "
            f"the run in '{os.path.abspath(run)}', and the run in "
            f"'{os.path.abspath(other)}' has other weights (SHA-256 weights ",
        ),
        (
            retrained,
            retrained_state,
            [],
            "is the stream of another run: it "
            "was made by this run as it was before it was trained or saved "
            "again, and the run in",
        ),
        (vocabulary, state, [], "has other vocabulary (SHA-256 vocabulary"),
    ]
    newer = json.loads(str(identity))
    newer["version"] += 1
    newer_path = str(tmp_path / "newer.npz")
    _write(newer_path, _npz(**_memory(), identity=np.array(json.dumps(newer))))
    cases.append(
        (
            run,
            newer_path,
            [],
            "was written by a newer keras-txl (state "
            "version 2; this one reads 1). Upgrade keras-txl",
        )
    )
    for name, (content, problem) in damaged.items():
        path = str(tmp_path / f"{name}.npz")
        _write(path, content)
        cases.append((run, path, [], f"'{path}' is damaged: ", problem))
    runs = {folder: _digest(folder) for folder in (run, other, vocabulary)}
    for folder, path, extra, *expected in cases:
        before = open(path, "rb").read()
        result, errors, imported = _generate(folder, path, *extra, cwd=tmp_path)
        assert result.returncode == 1, (expected, result.stderr[-2000:])
        assert len(errors) == 1, (expected, errors)
        assert errors[0].startswith(
            f"keras-txl generate: error: --state '{path}' "
        ), errors
        for words in expected:
            assert words in errors[0], (words, errors)
        assert (
            errors[0].endswith("another --state file to start a new stream.")
            or "Restore it" in errors[0]
        )
        assert not imported & HEAVY, sorted(imported & HEAVY)
        assert open(path, "rb").read() == before, path
    assert {folder: _digest(folder) for folder in runs} == runs
    # Both mismatches are named at once.
    both = _run_folder(tmp_path / "both", weights=b"x", text="other")
    _, errors, _ = _generate(both, state, cwd=tmp_path)
    assert "has other weights and vocabulary" in errors[0], errors
