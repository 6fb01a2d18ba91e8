"""What a failed `keras-txl` command leaves behind: nothing. A run that
fails before its first checkpoint leaves the file system as it found it
(the old run of `--overwrite` byte for byte, no folder, no token cache);
a damaged file is named in one line and nothing is written; the token
cache holds only corpora a run trained on, and `keras-txl cache` lists
and clears it. One child process runs every command, as a user's shell
would, one after the other (see `CHILD`)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np

from keras_txl import data
from keras_txl_cli import artifacts
from keras_txl_cli.train_config import TrainConfig
from tests.tiny_models import tiny_lm

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
TEXT = "the quick brown fox jumps over the lazy dog. " * 12

# Runs `keras-txl ARGV` for each ARGV of argv[1] (a JSON list) in this one
# process, and `TransformerXLCausalLM.from_preset` of each folder of
# argv[2]; prints `[[status, stderr], ...]` and `[[type, message,
# chained], ...]` as one JSON line.
CHILD = """
import contextlib, io, json, sys

from keras_txl_cli import cli

results = []
for argv in json.loads(sys.argv[1]):
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            status = cli.main(argv)
        except SystemExit as error:
            status = error.code
    results.append([status, err.getvalue(), out.getvalue()])

from keras_txl.models import TransformerXLCausalLM

loads = []
for folder in json.loads(sys.argv[2]):
    try:
        TransformerXLCausalLM.from_preset(folder)
        loads.append(["loaded", "", False])
    except Exception as error:
        chained = error.__cause__ is not None or (
            error.__context__ is not None and not error.__suppress_context__
        )
        loads.append([type(error).__name__, str(error), chained])
print(json.dumps([results, loads]))
"""


def _snapshot(folder):
    found = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = os.path.join(root, name)
            digest = "folder"
            if os.path.isfile(path):
                with open(path, "rb") as file:
                    digest = hashlib.sha256(file.read()).hexdigest()
            found[os.path.relpath(path, folder)] = digest
    return found


def _truncate(path):
    with open(path, "rb") as file:
        content = file.read()
    with open(path, "wb") as file:
        file.write(content[: len(content) // 2])


def _make_run(folder, corpus):
    """A run folder as `keras-txl train` leaves it: a preset of a tiny
    model and its tokenizer, its configuration, a checkpoint, steps and
    pictures (the checkpoint's weights are any bytes: only a resumed run
    reads them, and it is refused first)."""
    tokenizer = data.make_tokenizer("char", TEXT)
    lm = tiny_lm(vocabulary_size=int(tokenizer.vocabulary_size()))
    lm(np.zeros((1, 3), "int32"))
    os.makedirs(folder)
    artifacts.save_model(lm, folder, tokenizer, sequence_length=8)
    config = TrainConfig(
        corpus=corpus, steps=2, segment_length=8, batch_size=2, output=folder
    ).resolved()
    artifacts.write_json(
        os.path.join(folder, "train_config.json"), config.to_dict()
    )
    state = {"step": 1, "train_loss": [3.0], "config": config.to_dict()}
    state["files"] = {"weights": "state-1.weights.h5"}
    os.makedirs(os.path.join(folder, "checkpoint"))
    artifacts.write_json(os.path.join(folder, "checkpoint/state.json"), state)
    with open(os.path.join(folder, "checkpoint/state-1.weights.h5"), "wb") as f:
        f.write(b"\x89HDF not really")
    for name, content in (("steps.csv", b"step,loss\n1,3.0\n"),):
        with open(os.path.join(folder, name), "wb") as file:
            file.write(content)
    return lm


def test_failed_commands_leave_nothing_and_name_damaged_files(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # relative paths, as a user types them
    with open("corpus.txt", "w", encoding="utf-8") as file:
        file.write(TEXT)
    corpus = os.path.abspath("corpus.txt")
    _make_run("runs/keras-txl", corpus)
    # The reproduction: a copy of a run, an empty corpus.
    shutil.copytree("runs/keras-txl", "runs/copy")
    open("empty.txt", "w").close()
    with open("binary.bin", "wb") as file:
        file.write(bytes(range(256)) * 8)

    damaged = {}  # folder: (what is damaged, the file the message names)
    for name, path in (
        ("weights", "model.weights.h5"),
        ("config", "config.json"),
        ("task", "task.json"),
        ("tokenizer", "tokenizer.json"),
        ("vocabulary", "assets/tokenizer/vocabulary.json"),
        ("checkpoint_state", "checkpoint/state.json"),
    ):
        folder = f"runs/{name}"
        shutil.copytree("runs/keras-txl", folder)
        _truncate(os.path.join(folder, path))
        damaged[folder] = path
    # Weights of another configuration: 3 layers in a 2-layer run.
    vocabulary = int(data.make_tokenizer("char", TEXT).vocabulary_size())
    other = tiny_lm(vocabulary_size=vocabulary, num_layers=3)
    other(np.zeros((1, 3), "int32"))
    other.save_to_preset("three_layers")
    shutil.copytree("runs/keras-txl", "runs/other")
    for name in ("model.weights.h5", "task.weights.h5"):
        shutil.copy(f"three_layers/{name}", f"runs/other/{name}")
    shutil.rmtree("three_layers")
    before = _snapshot(".")
    cache = str(tmp_path / "cache")  # not there: no command may make it

    failing = [
        # (argv, exit status, in the one line, file named)
        (["train", "--corpus", "empty.txt", "--output", "runs/copy"]
         + ["--overwrite"], 1, "is empty", None),
        (["train", "--corpus", "binary.bin", "--output", "new/deep/run"],
         1, "utf-8", None),
        # Fails after tokenizing: the cache is not kept either.
        (["train", "--corpus", "corpus.txt", "--output", "runs/copy"]
         + ["--overwrite", "--segment-length", "400"], 1, "too short", None),
        (["evaluate", "runs/weights"], 1, "not a readable weights file",
         "model.weights.h5"),
        (["generate", "runs/config", "--prompt", "the"], 1,
         "not valid JSON", "config.json"),
        (["evaluate", "runs/tokenizer"], 1, "not valid JSON",
         "tokenizer.json"),
        (["evaluate", "runs/vocabulary"], 1, "not valid JSON",
         "vocabulary.json"),
        (["evaluate", "runs/other"], 1, "another configuration",
         "model.weights.h5"),
        (["convert", "runs/weights", "converted"], 1,
         "not a readable weights file", "model.weights.h5"),
        (["train", "--output", "runs/checkpoint_state", "--resume"], 1,
         "not valid JSON", "checkpoint/state.json"),
        (["train", "--output", "runs/keras-txl", "--resume"], 1,
         "not a readable weights file", "state-1.weights.h5"),
    ]  # fmt: skip
    working = [
        ["evaluate", "runs/copy", "--corpus", "binary.bin"],  # one line
        ["evaluate", "runs/copy", "--corpus", "corpus.txt"],  # one-off
        ["cache", "--list"],
        ["evaluate", "runs/copy"],  # the run's own corpus: cached
        ["cache", "--list"],
        ["cache", "--clear"],
        ["cache"],
    ]
    presets = ["runs/keras-txl", *damaged, "runs/other"]
    result = subprocess.run(
        [sys.executable, "-c", CHILD]
        + [json.dumps([a for a, *_ in failing] + working), json.dumps(presets)],
        env=dict(
            os.environ,
            PYTHONPATH=REPO,
            TF_CPP_MIN_LOG_LEVEL="3",
            KERAS_TXL_CACHE=cache,
        ),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results, loads = json.loads(result.stdout.strip().splitlines()[-1])

    for (argv, status, words, named), (got, err, _) in zip(failing, results):
        lines = err.strip().splitlines()
        assert got == status and len(lines) == 1, (argv, err)
        assert "Traceback" not in err and words in lines[0], (argv, err)
        if named is not None:
            assert f"{named}'" in lines[0], (argv, lines[0])
    # Nothing written by any failure: every folder byte for byte, no new
    # folder (no `new/`, no `converted/`), no token cache.
    after = _snapshot(".")
    assert after == before, sorted(set(after) ^ set(before))
    binary, one_off, empty_list, own, listed, cleared, gone = results[
        len(failing) :
    ]
    assert binary[0] == 1 and "utf-8" in binary[1], binary
    assert one_off[0] == 0, one_off
    assert empty_list[0] == 0 and "(0 entries" in empty_list[2], empty_list
    assert own[0] == 0 and "bits per character" in own[2], own
    assert listed[0] == 0 and "corpus.txt' bytes [" in listed[2], listed
    assert "Token cache: " in own[2] and "(new;" in own[2], own[2]
    assert cleared[0] == 0 and "Removed" in cleared[2], cleared
    assert "(0 entries" in gone[2] and not os.path.exists(cache), gone

    assert loads[0][0] == "loaded"
    for folder, (kind, message, chained) in zip(
        [*damaged, "runs/other"], loads[1:]
    ):
        path = damaged.get(folder, "model.weights.h5")
        if path.startswith("checkpoint"):  # not part of the preset
            assert kind == "loaded", (folder, message)
            continue
        assert kind == "DamagedFileError", (folder, kind, message)
        assert f"'{folder}/{path}'" in message and "\n" not in message
        assert not chained, folder  # one exception, no chain
