"""The `keras-txl` command's start-up, in fresh processes as a user runs
it: the mistakes that need a file read come back before Keras is
imported (the output folder that holds a model, an empty corpus, a
`--max-length` shorter than the prompt), the command is a package of its
own that the library never imports, it imports the library with the
garbage collector paused, and `python -m keras_txl` and `keras-txl cache`
(the old spellings) still work."""

import gc
import json
import os
import subprocess
import sys

import keras
import pytest

from keras_txl import data
from keras_txl_cli import artifacts
from keras_txl_cli import cli
from keras_txl_cli import path_checks
from tests.test_case import REPO

# Keras, its backends, and the library (which loads Keras).
HEAVY = ("keras", "keras_hub", "tensorflow", "jax", "torch", "keras_txl")


def _command(argv, cwd, module="keras_txl_cli"):
    """`python -X importtime -m MODULE --verbose ARGV` (`--verbose` keeps
    descriptor 2, where `-X importtime` writes): `(process, the top-level
    packages imported)`."""
    env = dict(os.environ, PYTHONPATH=REPO)
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", module, "--verbose", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    errors = [
        line
        for line in result.stderr.splitlines()
        if not line.startswith("import time:")
    ]
    return result, imported, errors


def _run_folder(folder, kind, text="a small text to read"):
    """A folder that passes for a run before Keras loads it: the run's
    tokenizer as the library saves it, and a `task.json`."""
    os.makedirs(folder)
    artifacts.save_tokenizer(data.make_tokenizer(kind, text), folder)
    with open(os.path.join(folder, path_checks.TASK_FILE), "w") as file:
        file.write("{}")
    return str(folder)


@pytest.mark.parametrize(
    "kind, prompt, tokens",
    [("char", "a text", 6), ("byte", "été", 5)],
)
def test_max_length_shorter_than_the_prompt_is_said_before_keras(
    tmp_path, kind, prompt, tokens
):
    run = _run_folder(tmp_path / "run", kind)
    argv = ["generate", run, "--prompt", prompt, "--max-length", "2"]
    result, imported, errors = _command(argv, tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert len(errors) == 1, errors
    assert errors[0].startswith("keras-txl generate: error: --max-length")
    assert f"({tokens} tokens)" in errors[0], errors
    assert f"Use at least {tokens}." in errors[0], errors
    assert "keras_txl_cli" in imported
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_an_output_folder_that_holds_a_model_is_said_before_keras(tmp_path):
    run = _run_folder(tmp_path / "run", "char")
    result, imported, errors = _command(["train", "--output", run], tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert errors == [
        f"keras-txl train: error: '{run}' already holds a model. Pass "
        "--resume to continue its run, --overwrite to replace it, or "
        "another --output."
    ]
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


@pytest.mark.parametrize("command", ["train", "evaluate", "ablate"])
def test_an_empty_corpus_is_said_before_keras(tmp_path, command):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    argv = [command, "--corpus", str(empty)]
    if command == "evaluate":
        argv.insert(1, _run_folder(tmp_path / "run", "char"))
    result, imported, errors = _command(argv, tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert errors == [
        f"keras-txl {command}: error: --corpus '{empty}' is empty. Pass a "
        "file that contains text."
    ]
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_the_run_file_names_are_the_librarys():
    """`path_checks` reads a run folder before Keras, with copies of
    `keras_txl.utils.run_folder`'s names."""
    from keras_txl.utils import run_folder

    for name in (
        "TASK_FILE",
        "MODEL_FILE",
        "TOKENIZER_FILE",
        "TOKENIZER_DIR",
        "CHECKPOINT_DIR",
        "ASSETS_DIR",
    ):
        assert getattr(path_checks, name) == getattr(run_folder, name), name
    weights = tuple(n for n in run_folder.PRESET_FILES if n.endswith(".h5"))
    assert path_checks.WEIGHTS_FILES == weights
    tokenizers = {
        kind: data.make_tokenizer(kind, "some text")
        for kind in ("byte", "char")
    }
    registered = {
        kind: keras.saving.get_registered_name(type(tokenizer))
        for kind, tokenizer in tokenizers.items()
    }
    assert registered["byte"] in path_checks.BYTE_TOKENIZERS
    assert registered["char"] == path_checks.CHARACTER_TOKENIZER


def test_the_old_spellings_still_run_the_command(tmp_path):
    """`python -m keras_txl` (which loads the library first) and
    `keras-txl cache` (now `token-cache`)."""
    env = dict(os.environ, PYTHONPATH=REPO, KERAS_TXL_CACHE=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-m", "keras_txl", "cache", "--list"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(f"Token cache: {tmp_path} (0 entries")


# A command's start, as `main` makes it: the collections that run while
# `import_library` imports Keras, keras-hub, the backend and the library.
IMPORT_LIBRARY = """
import gc, json, sys
from keras_txl_cli import cli
assert "keras" not in sys.modules
started = []
gc.callbacks.append(lambda phase, info: phase == "start" and started.append(1))
cli.import_library()
gc.callbacks.clear()
print(json.dumps({
    "collections": len(started),
    "frozen": gc.get_freeze_count(),
    "enabled": gc.isenabled(),
    "loaded": "keras_txl" in sys.modules,
}))
"""


def test_the_command_imports_the_library_without_collecting():
    """No collection runs during the imports of a command's start (with
    the collector on, importing TensorFlow alone starts hundreds), their
    objects are then frozen out of the collector's reach, and the
    collector is on again for the command."""
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_LIBRARY],
        env=dict(os.environ, PYTHONPATH=REPO),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["loaded"] and report["enabled"], report
    assert report["collections"] == 0, report
    # Keras's, keras-hub's and the backend's objects (about a million).
    assert report["frozen"] > 100_000, report


def test_a_process_that_imported_keras_keeps_its_collector():
    """Called again in a process (this one) that imported Keras, it
    freezes nothing and leaves the collector on."""
    frozen = gc.get_freeze_count()
    cli.import_library()
    assert gc.get_freeze_count() == frozen
    assert gc.isenabled()
