"""keras-txl as users reach it: a new interpreter, the `keras-txl`
command, on JAX and on TensorFlow (each child process gets its
`KERAS_BACKEND`, whatever this session's backend is).

The tiny runs of every tokenizer kind are trained once, on JAX; then,
per backend (on JAX in the process that trained them,
`fresh_process_child.py train_and_use`; on TensorFlow in a new process
where `import keras_txl` alone loads them): `from_preset` loads them all
and generates text, and `keras.models.clone_model` keeps their ties; every
subcommand runs on its success path and on its documented errors (one
line on stderr, a non-zero status, never a traceback; `ablate` and
`recl`, whose success is tested in process on each backend, succeed in
JAX children only); and the real `keras-txl` command prints only its
own output, valid UTF-8 for any prompt of a byte-level run. On torch, a
run is trained, evaluated, sampled and exported.
"""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CHILD = os.path.join(HERE, "fresh_process_child.py")
# What the native libraries and absl print when not silenced.
NOISE = ("absl", "oneDNN", "cuda", "cuInit", "W0000", "I0000", "E0000")


def _env(backend):
    """The environment of a user's shell: this repository's keras_txl,
    and none of the test session's settings that quiet TensorFlow."""
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=REPO)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    return env


def _child(backend, mode, folder):
    result = subprocess.run(
        [sys.executable, CHILD, mode, str(folder)],
        env=_env(backend),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = result.stdout.rsplit("RESULTS ", 1)[-1]
    return json.loads(line)


def _command(backend, folder, *argv):
    """The real `keras-txl` console script, stdout as bytes."""
    script = os.path.join(os.path.dirname(sys.executable), "keras-txl")
    return subprocess.run(
        [script, *argv], env=_env(backend), cwd=folder, capture_output=True
    )


def _is_one_line_error(case):
    lines = case["err"].strip().splitlines()
    return (
        case["status"] not in (0, "exception")
        and len(lines) == 1
        and lines[0].startswith("keras-txl")
        and "Traceback" not in case["err"] + case["out"]
    )


@pytest.mark.slow
def test_a_user_in_a_fresh_process(tmp_path):
    # The runs, one per tokenizer kind, trained once, on JAX (TensorFlow's
    # `keras-txl train` in a fresh process is test_cli.py's tiny run):
    # each backend then loads and uses them, as a user a preset trained
    # elsewhere.
    # On JAX the runs are used in the process that trained them (a
    # process start and the imports fewer): `import keras_txl` alone is
    # the TensorFlow child's start, and registration is Python's, the
    # same whatever the backend.
    results = _child("jax", "train_and_use", tmp_path)
    trained = results["train"]
    for case in trained:
        assert case["status"] == 0, case
        assert case["err"] == "", case  # no library warnings
    assert "bits per byte" in trained[1]["out"]  # the byte run
    assert "bits per character" in trained[0]["out"]
    # The word run speaks of words, never of characters.
    assert "bits per word" in trained[2]["out"]
    assert "character" not in trained[2]["out"], trained[2]["out"]
    assert "Sample (" not in trained[0]["out"]  # --sample-tokens 0
    _use_the_runs("jax", tmp_path, results["use"])
    # `import keras_txl` alone registers what every run names.
    used = _child("tensorflow", "use", tmp_path)
    _use_the_runs("tensorflow", tmp_path, used)


def _use_the_runs(backend, tmp_path, used):
    """What the child on `backend` reported (`used`): it loaded and
    generated from every run, then ran every subcommand; then the real
    `keras-txl` command."""
    loaded = used["load"]
    tokenizers = {
        "char": "CharacterTokenizer",
        "byte": "Utf8ByteTokenizer",
        "word": "WordPieceTokenizer",
        "wikitext103": "TransformerXLTokenizer",
    }
    for kind, tokenizer in tokenizers.items():
        result = loaded[kind]
        assert result["classes"] == ["TransformerXLCausalLM"] * 2, kind
        assert result["tokenizer"] == tokenizer
        assert result["same_weights"], kind
        # The "word" run too: its preprocessor cuts text into words.
        prompt = {
            "char": "the",
            "byte": "the",
            "word": "the",
            "wikitext103": "The",
        }[kind]
        for text in result["texts"]:
            # The prompt and what follows (the fixture's random WikiText-103
            # model may end its line, `<eos>`, at once).
            assert isinstance(text, str) and text.startswith(prompt), text
    for text in loaded["byte"]["texts"]:
        text.encode("utf-8", "strict")  # whole characters
    # `clone_model` keeps an adaptive softmax tied to its embedding.
    for name, (original, clone) in loaded["clones"].items():
        assert clone == original, (name, original, clone)

    # Each subcommand: success, and each documented error in one line.
    cases = used["cli"]
    for case in cases["success"]:
        assert case["status"] == 0, case
        assert case["err"] == "", case
        # Text out is text: no lone surrogates of split characters.
        case["out"].encode("utf-8", "strict")
    assert "bits per byte" in cases["success"][1]["out"]
    byte_level = [
        case
        for case in cases["success"]
        if case["argv"][:2] == ["generate", os.path.join("runs", "byte")]
    ]
    assert len(byte_level) == (3 if backend == "jax" else 1)
    for case in byte_level:
        prompt = case["argv"][case["argv"].index("--prompt") + 1]
        assert case["out"].startswith(prompt), case
    if backend == "jax":  # `ablate` and `recl` run on JAX children only
        commands = {case["argv"][0] for case in cases["success"]}
        assert {"ablate", "recl"} <= commands, commands
    for case in cases["error"]:
        assert _is_one_line_error(case), case
        # The argument at fault and the fix.
        for words in case["expected"]:
            assert words in case["err"], (words, case)

    # The real command prints only its own output, as UTF-8.
    prompt = "नमस्ते "
    result = _command(
        backend,
        tmp_path,
        "generate",
        os.path.join("runs", "byte"),
        "--prompt",
        prompt,
        "--max-length",
        "40",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr == b"", result.stderr.decode(errors="replace")
    assert result.stdout.decode("utf-8", "strict").startswith(prompt)
    if backend == "jax":
        result = _command(backend, tmp_path, "--help")
        assert result.returncode == 0
        assert result.stderr == b"", result.stderr.decode(errors="replace")
        assert b"usage: keras-txl" in result.stdout
        # What was hidden: `--verbose` shows it (`--help` returns before
        # the libraries load: a command that loads them).
        noisy = _command(backend, tmp_path, "--verbose", "cache", "--list")
        assert any(word.encode() in noisy.stderr for word in NOISE)


@pytest.mark.slow
def test_a_torch_user_trains_evaluates_generates_and_exports(tmp_path):
    """The commands on torch, in a fresh process: a run trained with
    dropout, evaluated to the bpc it logged, sampled, and exported to a
    SavedModel (by a TensorFlow child) that serves the torch model's
    logits, the memory threaded from one segment to the next."""
    import numpy as np
    import tensorflow as tf

    results = _child("torch", "torch", tmp_path)
    assert results["backend"] == "torch"
    for name in ("train", "evaluate", "generate", "export"):
        case = results[name]
        assert case["status"] == 0, case
        assert "Traceback" not in case["err"], case
    assert "bits per character" in results["train"]["out"]
    trained = json.loads((tmp_path / "train.json").read_text())
    evaluated = json.loads((tmp_path / "evaluate.json").read_text())
    assert trained["config"]["dropout"] == 0.1
    assert len(trained["train_loss"]) == 2
    # --validation-memory-lengths 0,8: validated at those lengths only.
    table = trained["bpc_by_memory_length"]
    assert [row["memory_length"] for row in table] == [0, 8]
    assert evaluated["bits_per_character"] == pytest.approx(
        trained["valid_bpc_with_memory"], rel=1e-5
    )
    assert results["generate"]["out"].startswith("the ")

    expected = np.load(tmp_path / "torch_logits.npz")
    served = tf.saved_model.load(str(tmp_path / "exported"))
    serve = served.signatures["serving_default"]
    memory = dict(served.signatures["initial_memory"]())  # --batch-size 1
    for segment, logits in zip(expected["segments"], expected["logits"]):
        out = serve(token_ids=tf.constant(segment), **memory)
        np.testing.assert_allclose(out["logits"].numpy(), logits, atol=1e-5)
        memory = {key: out[key] for key in memory}
