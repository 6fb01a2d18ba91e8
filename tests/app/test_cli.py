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
from keras_txl.data.corpora import CORPORA
from keras_txl.data.tokenization import decode
from keras_txl.data.tokenization import encode
from keras_txl.training.training_checkpoint import TrainingCheckpoint
from keras_txl_cli import artifacts
from keras_txl_cli.cli import main

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
TEXT = (
    "The quick brown fox jumps over the lazy dog. "
    "Pack my box with five dozen liquor jugs. "
) * 4
TINY_RUN = [
    "--size",
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
    "--dropout",
    "0",
    "--seed",
    "0",
]
# The strategy of this backend that splits a batch over 2 CPU devices.
TWO_DEVICES = {"tensorflow": "mirrored", "jax": "jax-data-parallel"}


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


def _train(corpus, output, *extra):
    """`python -m keras_txl_cli train` on `corpus` in a subprocess: device
    counts are fixed once the engine starts, so a run with its own devices
    needs its own process. Returns `(completed process, metrics dict or
    None)`."""
    metrics_path = f"{output}-metrics.json"
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, "-m", "keras_txl_cli", "train", "--corpus"]
    command += [corpus, "--output", output, "--metrics-json", metrics_path]
    result = subprocess.run(
        command + TINY_RUN + list(extra),
        env=env,
        capture_output=True,
        text=True,
    )
    if not os.path.exists(metrics_path):
        return result, None
    with open(metrics_path) as file:
        return result, json.load(file)


# The one test that reads the tiny run's sample and its validation at
# every memory length of the default table; without it (CI's JAX pass,
# where it is `one_backend`), the run makes no sample and validates at
# the lengths the other tests compare, 0 and 16: a compiled generation
# and 3 passes fewer.
READS_EVERYTHING = "test_train_evaluate_generate_end_to_end"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, request):
    """The tiny run on one device (strategy "none"), shared by the tests
    of this module: `(corpus, output folder, process, metrics)`."""
    folder = tmp_path_factory.mktemp("tiny_run")
    corpus = str(folder / "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as file:
        file.write(TEXT)
    output = str(folder / "run")
    extra = []
    if not any(item.name == READS_EVERYTHING for item in request.session.items):
        extra = ["--sample-tokens", "0", "--validation-memory-lengths", "0"]
    result, metrics = _train(corpus, output, *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    return corpus, output, result, metrics


@pytest.mark.slow
def test_train_evaluate_generate_end_to_end(tmp_path, tiny_run, capsys):
    corpus, output, result, metrics = tiny_run
    assert "Epoch 2/2" in result.stdout  # Keras progress
    # stdout is a pipe, as a log file: `--progress auto` writes one line
    # per epoch and per validation pass, no bars and no terminal codes.
    assert not set(result.stdout) & {"\x1b", "\r", "\b"}
    assert len(result.stdout.encode()) <= 8192
    lines = result.stdout.splitlines()
    assert len([line for line in lines if line.startswith("2/2 - ")]) == 2
    passes = [line for line in lines if line.startswith("  memory ")]
    assert len(passes) == 5, result.stdout
    assert "with memory (16)" in result.stdout
    assert "Sample (" in result.stdout
    # The sample: its prompt (at most 40 validation characters), a mark,
    # what follows.
    shown = result.stdout.split("the model's 200):\n", 1)[1].splitlines()
    shown = "\n".join(shown[: metrics["sample"].count("\n") + 1])
    prompt = shown[: shown.index("[continued:]")]
    assert 0 < len(prompt) <= 40 and prompt in TEXT, shown
    assert shown.replace("[continued:]", "", 1) == metrics["sample"]
    for name in (
        # A keras-hub preset of the model and its tokenizer ...
        "config.json",
        "model.weights.h5",
        "task.json",
        "task.weights.h5",
        "preprocessor.json",
        "tokenizer.json",
        "assets/tokenizer/vocabulary.json",
        # ... and the run's files beside it.
        "training_curve.png",
        "bpc_vs_memory.png",
        "metrics.json",
    ):
        assert os.path.isfile(os.path.join(output, name)), name
    assert metrics["steps"] == 4 and len(metrics["train_loss"]) == 4
    # keras-hub would name the mixin `CarriedMemory` (`task.__base__`).
    with open(os.path.join(output, "metadata.json")) as file:
        assert json.load(file)["tasks"] == ["TransformerXLCausalLM"]
    assert metrics["tokens_per_second"] > 0
    assert metrics["config"]["segment_length"] == 8
    assert 0 < metrics["valid_bpc_with_memory"] < 10
    assert 0 < metrics["valid_bpc_without_memory"] < 10
    assert metrics["valid_perplexity_with_memory"] == pytest.approx(
        2 ** metrics["valid_bpc_with_memory"]
    )
    table = metrics["bpc_by_memory_length"]
    assert [row["memory_length"] for row in table] == [0, 2, 8, 16, 32]
    assert metrics["config"]["strategy"] == "none"
    assert "on each of 1 replica(s), strategy 'none'" in result.stdout

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
    _check_one_document(output, corpus, tmp_path, capsys)
    # The paper's protocol: explicit memory, from zeros that are attended
    # to, the TensorFlow mask; every token scored, the last segment short.
    protocol = str(tmp_path / "protocol.json")
    status = main(
        ["evaluate", output, "--corpus", corpus, "--memory-length", "8"]
        + ["--memory-start", "zeros", "--same-length", "tensorflow"]
        + ["--clamp-length", "4", "--metrics-json", protocol]
    )
    assert status == 0
    with open(protocol) as file:
        paper = json.load(file)
    assert (paper["start"], paper["same_length"]) == ("zeros", "tensorflow")
    assert paper["clamp_length"] == 4 and paper["memory_length"] == 8
    assert abs(paper["bits_per_character"] - result["bits_per_character"]) < 1
    assert "segment" in capsys.readouterr().out

    # With the run folder alone: the run's own validation text, tokenizer
    # and evaluation memory, so the bpc of the run's table.
    status = main(["evaluate", output, "--metrics-json", evaluation])
    assert status == 0
    with open(evaluation) as file:
        result = json.load(file)
    assert result["memory_length"] == 16
    assert result["text"] == "builtin valid"
    assert result["bits_per_character"] == pytest.approx(
        metrics["valid_bpc_with_memory"], rel=1e-5
    )
    status = main(["evaluate", output, "--split", "test"])
    _one_line_error(capsys, status, 1, "no test part")

    _check_generate(output, capsys)

    # A second run never replaces the model without --overwrite.
    before = os.path.getmtime(os.path.join(output, "model.weights.h5"))
    status = main(["train", "--corpus", corpus, "--output", output])
    _one_line_error(capsys, status, 1, "already holds a model")
    assert os.path.getmtime(os.path.join(output, "model.weights.h5")) == before


def _check_one_document(output, corpus, tmp_path, capsys):
    """`evaluate --corpus FILE` reads the file as one stream with its
    memory: the losses of `TransformerXLCausalLM.score`, written per token
    with --token-losses; --streams N cuts it into N cold-started streams."""
    losses_file = str(tmp_path / "losses.npy")
    metrics_file = str(tmp_path / "document.json")
    argv = ["evaluate", output, "--corpus", corpus, "--memory-length", "16"]
    status = main(
        argv + ["--token-losses", losses_file, "--metrics-json", metrics_file]
    )
    assert status == 0
    assert "1 stream," in capsys.readouterr().out
    with open(metrics_file) as file:
        document = json.load(file)
    lm = artifacts.load_model(output)
    ids = np.asarray(
        data.corpus_ids(
            artifacts.load_tokenizer(output),
            data.load_corpus("builtin", corpus, valid_fraction=0.0).train,
        )
    )[None]
    expected = keras.ops.convert_to_numpy(
        lm.score(
            ids[:, :-1],
            scoring_mode="loss",
            target_ids=ids[:, 1:],
            memory_length=16,
            segment_length=8,
        )
    )
    losses = np.load(losses_file)
    assert losses.shape == expected.shape == (1, ids.shape[1] - 1)
    np.testing.assert_allclose(losses, expected, atol=1e-5)
    assert document["batch_size"] == 1
    assert document["loss"] == pytest.approx(float(expected.mean()), 1e-5)
    status = main(argv + ["--streams", "4", "--metrics-json", metrics_file])
    assert status == 0
    assert "4 cold starts instead of one" in capsys.readouterr().out
    with open(metrics_file) as file:
        streams = json.load(file)
    assert streams["batch_size"] == 4
    assert streams["loss"] != pytest.approx(document["loss"], 1e-6)


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
    ids = encode(tokenizer, prompt)
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
    assert printed[0] == decode(tokenizer, tokens) + "\n"

    for extra, match in (
        (["--max-length", "5"], "shorter than the prompt (9 tokens)"),
        (["--top-p", "0.5"], "applies to the 'top_p' sampler only"),
    ):
        argv = ["generate", output, "--prompt", prompt] + extra
        _one_line_error(capsys, main(argv), 1, match)


# Everything the two-device tests check, in one process on 2 devices
# (device counts are fixed once the engine starts; one process, not three,
# because importing and compiling dominate these tiny runs): `keras-txl
# train --strategy S --num-devices 2` with a global batch the replicas
# cannot share, and the tiny run on 2 devices, stopped by a callback after
# 3 of its 4 steps (a checkpoint every 2 steps, and one when stopped), then
# finished by `keras-txl train --resume`: from its checkpoint, and, as
# a control, from a copy of it whose memory was lost (zeros) on replica 0
# and given replica 0's on replica 1. (One run stopped and resumed, not
# one run whole and another stopped, and one control run, not one per
# fault: each new model costs a compilation, 13 s on TensorFlow's
# `mirrored`. A replica's memory depends on its own rows only.)
_TWO_DEVICES = """
import contextlib, io, json, os, shutil, sys, time
from keras_txl_cli.cli import import_library
import_library()  # the command's start (its collector paused)
import keras
import numpy as np
from keras_txl.distribute import ReplicaStrategy
from keras_txl_cli import train_run
from keras_txl_cli.cli import main
from keras_txl_cli.train_config import TrainConfig
from keras_txl.training.training_checkpoint import TrainingCheckpoint

corpus, folder, strategy, tiny_run = sys.argv[1:]
two = ["--strategy", strategy, "--num-devices", "2"]
report = {}


def cli(name, *extra):
    out, err = io.StringIO(), io.StringIO()
    output = os.path.join(folder, name)
    argv = ["train", "--corpus", corpus, "--output", output]
    argv += ["--metrics-json", output + "-metrics.json"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv + json.loads(tiny_run) + two + list(extra))
    metrics = None
    if os.path.exists(output + "-metrics.json"):
        with open(output + "-metrics.json") as file:
            metrics = json.load(file)
    return dict(status=status, out=out.getvalue(), err=err.getvalue(),
                metrics=metrics, exists=os.path.exists(output))


report["odd"] = cli("odd", "--batch-size", "3")


class StopAfterThree(keras.callbacks.Callback):
    seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        self.model.stop_training = self.seen == 3


# `keras-txl train` calls `train_run.train(config)`: this one stops
# after 3 steps.
train = train_run.train
train_run.train = lambda config: train(config, callbacks=[StopAfterThree()])
report["stopped"] = cli("run", "--sample-tokens", "0")
train_run.train = train
stopped = os.path.join(folder, "run")
checkpoint = os.path.join(stopped, "checkpoint")
report["stopped_at"] = TrainingCheckpoint.read_state(checkpoint)["step"]
control = os.path.join(folder, "control")
shutil.copytree(stopped, control)
checkpoint = os.path.join(control, "checkpoint")
files = TrainingCheckpoint.read_state(checkpoint)["files"]
path = os.path.join(checkpoint, files["memory"])
with np.load(path) as arrays:
    memory = dict(arrays)
for key, value in memory.items():
    # (global batch, ...): replica r holds row r. Replica 0's is lost,
    # replica 1 gets replica 0's.
    memory[key] = np.stack([0 * value[0], value[0]])
np.savez(path, **memory)
# (The validation at the lengths its test compares: 0 and 16.)
report["train"] = cli(
    "run", "--sample-tokens", "0", "--resume",
    "--validation-memory-lengths", "0",
)
quiet = lambda line: None
train_run.fit_language_model(  # its memory: read by the test
    TrainConfig(output=control, resume=True, verbose=0), log=quiet
)


# The replica counts of the strategies that ran a step (spied).
runs = []
replica_run = ReplicaStrategy.run


def counted_run(self, function, args):
    runs.append(self.num_replicas)
    return replica_run(self, function, args)


ReplicaStrategy.run = counted_run


def evaluate(name, *extra):
    runs.clear()
    out, err = io.StringIO(), io.StringIO()
    metrics = os.path.join(folder, name + "-evaluate.json")
    argv = ["evaluate", stopped, "--corpus", corpus, "--progress", "none"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv + ["--metrics-json", metrics] + list(extra))
    result = dict(status=status, out=out.getvalue(), err=err.getvalue())
    result["replicas"] = sorted(set(runs))
    if os.path.exists(metrics):
        with open(metrics) as file:
            result["bpc"] = json.load(file)["bits_per_character"]
    return result


# `keras-txl evaluate` of the run, 2 streams, on one device and on 2;
# 1 stream (the default for a text file) on 2.
start = time.perf_counter()
report["evaluate"] = {
    "one": evaluate("one", "--streams", "2"),
    "two": evaluate("two", "--streams", "2", *two),
    "odd": evaluate("odd", *two),
}
report["evaluate_seconds"] = time.perf_counter() - start
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def two_device_report(tiny_run, tmp_path_factory):
    """The report of `_TWO_DEVICES` on this backend's strategy."""
    folder = tmp_path_factory.mktemp("two_devices")
    strategy = TWO_DEVICES[keras.backend.backend()]
    result = subprocess.run(
        [sys.executable, "-c", _TWO_DEVICES, tiny_run[0], str(folder)]
        + [strategy, json.dumps(TINY_RUN)],
        env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return strategy, dict(report, folder=str(folder))


# Two replicas follow one device to float rounding: the logged losses (of
# about 3) differ by a mean over both replicas' tokens and Keras's running
# mean, summed in another order (tests/distribute/test_two_devices.py
# measured 9.5e-6 on TensorFlow, 1.2e-6 on JAX).
LOSS_ATOL = 5e-5
# The memory two replicas leave follows one device's to float rounding;
# a replica given the wrong memory moves it far more (the controls of
# test_two_device_run_resumes_where_it_stopped).
MEMORY_ATOL = 1e-4


@pytest.mark.slow
@pytest.mark.backend_dependent
def test_train_on_two_devices_follows_one_device(tiny_run, two_device_report):
    """`--strategy S --num-devices 2` (S: `mirrored` on TensorFlow,
    `jax-data-parallel` on JAX) on 2 CPU devices: each replica trains one
    of the 2 streams, and every step's loss is that of one device (steps
    1-3 before the stop, 4 after `--resume`), as is the validation (its
    one stream, which 2 replicas cannot share, read on one device)."""
    strategy, report = two_device_report
    on_two = f"1 of 2 streams on each of 2 replica(s), strategy '{strategy}'"
    stopped = report["stopped"]
    assert stopped["status"] == 0, stopped["err"][-3000:]
    assert on_two in stopped["out"]
    assert "Stopped at step 3 of 4" in stopped["out"]
    assert stopped["metrics"] is None  # no validation, no model yet
    run = report["train"]
    assert run["status"] == 0, run["err"][-3000:]
    assert "Resuming at step 3 of 4." in run["out"]
    assert on_two in run["out"]
    metrics = run["metrics"]
    assert metrics["sample"] is None and "Sample (" not in run["out"]
    assert metrics["config"]["strategy"] == strategy
    assert metrics["config"]["num_devices"] == 2
    single = np.array(tiny_run[3]["train_loss"])
    losses = np.array(metrics["train_loss"])
    assert losses.shape == single.shape == (4,)
    np.testing.assert_allclose(losses, single, atol=LOSS_ATOL, rtol=0)
    assert single[0] - single[-1] > 0.1  # the model learns: not flat lines
    # `--validation-memory-lengths 0` (given to `--resume`, which may
    # change it): the passes without memory and with the evaluation
    # memory only, each that of one device.
    table = metrics["bpc_by_memory_length"]
    assert [row["memory_length"] for row in table] == [0, 16]
    lines = run["out"].splitlines()
    assert len([line for line in lines if line.startswith("  memory ")]) == 2
    for key in ("valid_bpc_with_memory", "valid_bpc_without_memory"):
        assert metrics[key] == pytest.approx(tiny_run[3][key], abs=LOSS_ATOL)
    assert (
        "Validation on one device: its 1 stream(s) do not split over the "
        "2 replicas (a validation text of 65 tokens or more gives 2 "
        "streams)." in run["out"]
    )

    # A global batch the replicas cannot share fails before training.
    odd = report["odd"]
    lines = [
        line for line in odd["err"].splitlines() if line.startswith("keras")
    ]
    assert odd["status"] == 1 and len(lines) == 1, odd["err"]
    assert "Traceback" not in odd["err"]
    assert (
        "global batch size (3) must be a multiple of the number of "
        in (lines[0])
    )
    assert not odd["exists"]


def _final_memory(output):
    """Every row's memory (and valid length) in the checkpoint that the
    run in `output` ended with: `{name: array}`."""
    checkpoint = os.path.join(output, "checkpoint")
    name = TrainingCheckpoint.read_state(checkpoint)["files"]["memory"]
    with np.load(os.path.join(checkpoint, name)) as arrays:
        return dict(arrays)


def _largest_gap(memory, reference):
    assert sorted(memory) == sorted(reference)
    return max(
        float(np.max(np.abs(memory[key] - reference[key]))) for key in reference
    )


@pytest.mark.slow
@pytest.mark.backend_dependent
def test_evaluate_on_two_devices_equals_one_device(two_device_report):
    """`keras-txl evaluate RUN --corpus FILE --streams 2 --strategy S
    --num-devices 2`: each replica scores one stream (the strategy runs
    the step: `ReplicaStrategy.run`, spied), and the bits per
    character are those of one device (`--strategy none`, the same
    process). A text file's default of one stream is refused, naming
    `--streams 2`."""
    strategy, report = two_device_report
    evaluate = report["evaluate"]
    one, two = evaluate["one"], evaluate["two"]
    assert one["status"] == 0 and two["status"] == 0, two["err"][-3000:]
    assert (
        f"1 stream(s) on each of 2 replicas, strategy '{strategy}'."
        in (two["out"])
    )
    assert "replicas" not in one["out"]
    # The 2 replicas ran the scoring step; one device ran no strategy.
    assert two["replicas"] == [2] and one["replicas"] == []
    assert two["bpc"] == pytest.approx(one["bpc"], abs=LOSS_ATOL)
    odd = evaluate["odd"]
    lines = [
        line for line in odd["err"].splitlines() if line.startswith("keras")
    ]
    assert odd["status"] == 1 and len(lines) == 1, odd["err"]
    assert "Traceback" not in odd["err"] and "bpc" not in odd
    assert (
        f"keras-txl evaluate: error: --strategy {strategy} gives each of "
        "its 2 replicas the same number of streams, and the text is cut "
        "into 1. Use --streams 2 (each stream starts without memory)"
    ) in lines[0]


@pytest.mark.slow
@pytest.mark.backend_dependent
def test_two_device_run_resumes_where_it_stopped(tiny_run, two_device_report):
    """The checkpoint of a 2-replica run holds the memory of both
    replicas' streams, and `--resume` gives each replica its own: the
    resumed step has the loss of the uninterrupted run, and leaves its
    memory, which a lost memory, or one given to the other replica,
    would move."""
    _, report = two_device_report
    assert report["stopped_at"] == 3
    single = np.array(tiny_run[3]["train_loss"])
    resumed = np.array(report["train"]["metrics"]["train_loss"])
    assert resumed.shape == (4,)
    # Steps 1-3 are the stopped run's (kept in the checkpoint), step 4 the
    # resumed one's: the one that reads the restored memory.
    np.testing.assert_allclose(resumed, single, atol=LOSS_ATOL, rtol=0)
    # The memory step 4 leaves (each layer's input of step 4, which in
    # every layer above the first attended to the restored memory) is
    # the uninterrupted run's to rounding (measured: 4.8e-7 on
    # TensorFlow, 2.8e-6 on JAX); a lost memory, or one given to the
    # other replica, moves it by 0.12 to 0.25. The control compares that
    # memory, not the loss of step 4: a tiny model 3 steps old predicts
    # about as well without its context, so how far a lost memory moves
    # that loss depends on the initial draws (3.8e-3 on TensorFlow; on
    # JAX 7.5e-3, or 1.4e-4 once each weight draws its own initial
    # values, under the 10 * LOSS_ATOL the control asked of it). The
    # control's replica 0 lost its memory, replica 1 got replica 0's:
    # each row's memory depends on that row's only.
    reference = _final_memory(tiny_run[1])
    gap = _largest_gap(_final_memory(report["folder"] + "/run"), reference)
    assert gap <= MEMORY_ATOL, gap
    control = _final_memory(os.path.join(report["folder"], "control"))
    for row, fault in ((0, "lost"), (1, "given the other replica's")):
        moved = _largest_gap(
            {key: value[row] for key, value in control.items()},
            {key: value[row] for key, value in reference.items()},
        )
        assert moved > 10 * MEMORY_ATOL, (fault, moved)


@pytest.mark.backend_dependent
@pytest.mark.torch_ok
def test_train_strategy_errors_are_one_line(tmp_path, corpus, capsys):
    """Errors found before any device is set up, in this process."""
    other = "jax-data-parallel"
    if keras.backend.backend() == "jax":
        other = "mirrored"
    argv = ["train", "--corpus", corpus, "--output", str(tmp_path / "out")]
    status = main(argv + ["--strategy", other])
    _one_line_error(capsys, status, 1, f"Strategy '{other}' runs on the")
    status = main(argv + ["--num-devices", "2"])
    _one_line_error(capsys, status, 1, "Strategy 'none' trains on one device")
    with pytest.raises(SystemExit) as exit_info:
        main(argv + ["--num-devices", "0"])
    _one_line_error(
        capsys, exit_info.value.code, 2, "--num-devices: must be an integer"
    )
    status = main(argv + ["--tpu", "local"])
    _one_line_error(capsys, status, 1, "--tpu names the TPU of --strategy tpu")
    assert not (tmp_path / "out").exists()


def test_evaluate_strategy_errors_are_one_line(tmp_path, capsys):
    """`keras-txl evaluate`'s device flags are `train`'s, checked before
    the model is read (the folder's `model.keras` here is empty)."""
    other, here = "jax-data-parallel", "mirrored"
    if keras.backend.backend() == "jax":
        other, here = here, other
    (tmp_path / "model.keras").write_bytes(b"")
    argv = ["evaluate", str(tmp_path)]
    status = main(argv + ["--strategy", other])
    _one_line_error(capsys, status, 1, f"Strategy '{other}' runs on the")
    status = main(argv + ["--tpu", "local"])
    _one_line_error(capsys, status, 1, "--tpu names the TPU of --strategy tpu")
    status = main(argv + ["--strategy", here, "--dynamic", "sgd"])
    _one_line_error(capsys, status, 1, f"Drop --strategy {here}.")


@pytest.mark.parametrize(
    "content, extra, match",
    [
        (None, [], "does not exist"),
        (b"", [], "empty"),
        (b"too short", [], "too short"),
        (b"caf\xe9 " * 2000, [], "utf-8"),
        (b"caf\xe9 " * 2000, [], "Or train on its bytes: --tokenizer byte"),
        (TEXT.encode(), ["--batch-size", "64"], "smaller --batch-size or"),
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


@pytest.mark.parametrize(
    "argv, match",
    [
        (["train", "--steps", "0"], "--steps: must be an integer >= 1"),
        (["train", "--size", "huge"], "--size: invalid choice"),
        (["train", "--dropout", "1.5"], "--dropout: must be a number"),
        (["train", "--memory-length", "x"], "--memory-length"),
        (["generate"], "MODEL_DIR"),
        # The old spelling of --progress: one meaning of --verbose now.
        (["train", "--verbose", "2"], "--progress bar, lines or none"),
        (["train", "--verbose"], "before the subcommand"),
        (["train", "--progress", "dots"], "from 'auto', 'bar', 'lines'"),
        (
            ["train", "--validation-memory-lengths", "8,-1"],
            "--validation-memory-lengths: must be integers >= 0 separated",
        ),
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


def test_evaluate_and_generate_need_a_saved_model(tmp_path, corpus, capsys):
    status = main(["evaluate", str(tmp_path), "--corpus", corpus])
    _one_line_error(capsys, status, 1, "No model")
    # The run folder alone (its own corpus): still one line, no traceback.
    status = main(["evaluate", str(tmp_path)])
    _one_line_error(capsys, status, 1, "No model")
    status = main(["generate", str(tmp_path), "--prompt", "a"])
    _one_line_error(capsys, status, 1, "No model")


# Modules that a mistake on the command line must not wait for.
HEAVY = ("keras", "keras_hub", "tensorflow", "jax", "torch")


@pytest.mark.parametrize(
    "argv, match",
    [
        (
            ["train", "--corpus", "missing.txt"],
            "--corpus 'missing.txt' does not exist",
        ),
        (
            ["generate", "NOT_A_RUN", "--prompt", "a"],
            "MODEL_DIR 'NOT_A_RUN' does not exist",
        ),
        (["evaluate", "NOT_A_RUN"], "MODEL_DIR 'NOT_A_RUN' does not exist"),
        # Flags that are each valid but not together (TrainConfig).
        (
            ["train", "--steps", "20", "--warmup-steps", "50"],
            "--warmup-steps (50) must be below --steps (20)",
        ),
        (
            ["train", "--steps", "30", "--steps-per-execution", "4"],
            "--steps (30) must be a multiple of --steps-per-execution (4)",
        ),
        (
            ["train", "--resume", "--overwrite"],
            "--resume and --overwrite exclude each other",
        ),
        (
            ["train", "--tpu", "local"],
            "--tpu names the TPU of --strategy tpu",
        ),
    ],
)
def test_mistakes_come_back_before_keras_is_imported(tmp_path, argv, match):
    # As a user types it: one line, in the user's words, no traceback.
    command = [sys.executable, "-m", "keras_txl_cli"]
    env = dict(os.environ, PYTHONPATH=REPO)
    plain = subprocess.run(
        command + argv, env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert plain.returncode == 1, plain.stderr
    assert plain.stdout == ""
    lines = plain.stderr.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], plain.stderr
    # What was imported (`--verbose` keeps descriptor 2, where
    # `-X importtime` writes): none of Keras and its backends.
    timed = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "keras_txl_cli", "--verbose"]
        + argv,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert timed.returncode == 1, timed.stderr[-2000:]
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in timed.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "keras_txl_cli" in imported and "argparse" in imported
    assert "keras_txl" not in imported  # the library loads Keras
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_the_parser_choices_are_the_librarys():
    from keras_txl.ablation.study import VARIANTS
    from keras_txl.distribute.strategies import STRATEGY_NAMES
    from keras_txl_cli import choices

    assert choices.CORPORA == CORPORA
    assert choices.STRATEGY_NAMES == STRATEGY_NAMES
    assert choices.VARIANTS == VARIANTS


def test_printable_escapes_control_bytes_only():
    from keras_txl_cli.console import printable

    # What a byte-level model may write: bell, escape codes, backspace.
    text = "a\x07b\x1b[1mc\x08\r\x7f\nd\te ß ☕"
    assert printable(text) == "a\\x07b\\x1b[1mc\\x08\\x0d\\x7f\nd\te ß ☕"


# Every character here but "a", "f", "x" and " " is outside the tiny
# run's ASCII vocabulary (TEXT): an accent, an emoji, a backtick, a
# dollar, a digit and a tab.
ANY_PROMPT = "Café ☕ `x` $5\t"
READ = "<unk>af<unk> <unk> <unk>x<unk> <unk><unk><unk>"  # as the run reads it


@pytest.mark.slow
@pytest.mark.backend_dependent
def test_generate_reads_any_prompt_and_writes_utf_8(tiny_run):
    """A character run trained on ASCII continues a prompt of characters
    it never saw: `keras-txl generate` (a fresh process) names them once
    on stderr and writes valid UTF-8; `from_preset(...).generate` on the
    string does the same through the API."""
    output = tiny_run[1]
    result = subprocess.run(
        [sys.executable, "-m", "keras_txl_cli", "generate", output]
        + ["--prompt", ANY_PROMPT, "--max-length", "24"]
        + ["--sampler", "greedy"],
        env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
    )
    err = result.stderr.decode("utf-8")
    assert result.returncode == 0, err[-3000:]
    text = result.stdout.decode("utf-8")  # strict: valid UTF-8
    assert text.startswith(READ)
    lines = [line for line in err.splitlines() if "keras-txl" in line]
    assert lines == [
        "keras-txl generate: 7 character(s) of the prompt not in the run's "
        "vocabulary, read as <unk>: '\\t' '$' '5' 'C' '`' 'é' '☕'"
    ], err
    assert "Traceback" not in err

    from keras_txl.models import TransformerXLCausalLM

    lm = TransformerXLCausalLM.from_preset(output)
    lm.compile(sampler="greedy")
    generated = lm.generate(ANY_PROMPT, max_length=24)
    assert isinstance(generated, str)
    generated.encode("utf-8")  # no lone surrogate
    assert generated.startswith(READ)
    assert len(lm.preprocessor.tokenizer(ANY_PROMPT)) == len(ANY_PROMPT)


def test_generate_on_a_run_saved_without_unk_names_what_it_leaves_out(
    capsys,
):
    """A character run saved before keras-txl reserved <unk>
    (tests/fixtures/saved_by_v0) has no id for an unseen character: the
    CLI leaves them out of the prompt and says so in one line."""
    run = os.path.join(REPO, "tests", "fixtures", "saved_by_v0", "run")
    argv = ["generate", run, "--prompt", "the Café", "--max-length", "12"]
    assert main(argv + ["--sampler", "greedy"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "keras-txl generate: 2 character(s) of the prompt not in the run's "
        "vocabulary, left out (the run was saved without <unk>): 'C' 'é'"
    ]
    assert captured.out.startswith("the af")
    assert len(captured.out) == 13  # 12 characters and the newline


# Three `keras-txl generate` commands in one new process (one import of
# Keras, not three; each command loads the run and reads and writes its
# state file as a process of its own would): "The quick" and " Pack" as
# two calls of one stream, then their whole text as one call, each with
# a state file; prints what each printed, as JSON.
_STREAM = """
import contextlib, io, json, sys
from keras_txl_cli.cli import main

run, folder = sys.argv[1:]
greedy = ["--sampler", "greedy"]


def generate(prompt, max_length, state, *extra):
    out = io.StringIO()
    argv = ["generate", run, "--prompt", prompt, "--max-length"]
    argv += [str(max_length), "--state", f"{folder}/{state}", *greedy]
    with contextlib.redirect_stdout(out):
        status = main(argv + list(extra))
    return status, out.getvalue()


first = generate("The quick", 14, "two.npz", "--memory-length", "32")
second = generate(" Pack", 9, "two.npz")  # the state's memory length
whole = first[1][:-1] + " Pack"
one = generate(whole, len(whole) + 4, "one.npz", "--memory-length", "32")
print("RESULTS " + json.dumps([first, second, one]))
"""


@pytest.mark.slow
def test_generate_state_continues_the_stream_across_commands(
    tiny_run, tmp_path
):
    """`keras-txl generate --state FILE`, greedy: two calls give the text
    and the state of one call on the whole text (the first call's output
    and the second prompt), and the state file holds numbers and one text
    only (read with `allow_pickle=False`)."""
    result = subprocess.run(
        [sys.executable, "-c", _STREAM, tiny_run[1], str(tmp_path)],
        env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (status, first), (status2, second), (status3, one) = json.loads(
        result.stdout.rsplit("RESULTS ", 1)[-1]
    )
    assert (status, status2, status3) == (0, 0, 0)
    assert len(first) == 14 + 1 and first.startswith("The quick")
    assert len(second) == 9 + 1 and second.startswith(" Pack")
    assert one == first[:-1] + second
    states = {}
    for name in ("two", "one"):
        with np.load(tmp_path / f"{name}.npz", allow_pickle=False) as saved:
            states[name] = {key: saved[key] for key in saved.files}
        assert {a.dtype.kind for a in states[name].values()} == {"f", "i", "U"}
        identity = json.loads(str(states[name].pop("identity")))
        assert identity["run"] == os.path.abspath(tiny_run[1])
        assert identity["memory_length"] == 32
    # Every token of the stream: 14 + 9 (as many as `one` prints).
    for state in states.values():
        np.testing.assert_array_equal(state["valid_length"], [14 + 9])
    assert states["two"]["memory"].shape == (1, 2, 32, 128)  # tiny's
    np.testing.assert_allclose(
        states["two"]["memory"], states["one"]["memory"], atol=1e-5
    )
