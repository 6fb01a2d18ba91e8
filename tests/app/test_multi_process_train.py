"""The documented several-host commands (docs/distributed.md, "On
several hosts"), in two fresh processes on localhost, one CPU device
each, both given the same `--output`: JAX's `keras-txl train --strategy
jax-data-parallel --num-devices 1` joined by `KERAS_DISTRIBUTION_*`, and
TensorFlow's `keras-txl train --strategy multiworker` joined by
`TF_CONFIG`.

One module fixture runs every scenario once (each process imports JAX
or TensorFlow and Keras, compiles, and at the end of a run validates
and saves: the process starts dominate, so the scenarios share them;
eleven processes per backend): the uninterrupted run on two processes;
then one run folder through every stop and every transition (a
one-device run stopped by SIGTERM; resumed on two processes, 1 device
-> 2 processes, stopped by SIGTERM to one process; resumed, SIGKILL of
one process; then its checkpoint resumed to the end on one process with
2 devices, 2 processes -> 1 process with 2 devices); and, of the
uninterrupted run that two processes finished (and validated in the
strategy), `keras-txl evaluate --strategy` on two processes beside a
one-device evaluation of the same folder, beside the chain's last
phase. The children run the backend
of the fixture's parameter, whatever `KERAS_BACKEND` the tests run
under, so the test is backend-independent (`tests/app/`: run once, on
CI's TensorFlow stage).
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.test_case import free_port_pair
from tests.test_case import xla_flags

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
TEXT = (
    "The quick brown fox jumps over the lazy dog. "
    "Pack my box with five dozen liquor jugs. "
) * 4
# Room for the chain's three stops, each at least one step after the
# last (a step costs little next to a process's start).
STEPS = 12
RUN = [
    "--size", "tiny", "--steps", str(STEPS), "--segment-length", "8",
    "--batch-size", "2", "--memory-length", "8", "--eval-memory-length",
    "8", "--steps-per-epoch", "1", "--seed", "0",
    "--sample-tokens", "0", "--valid-fraction", "0.2",
    "--validation-memory-lengths", "0",
]  # fmt: skip
# (A validation text of 68 tokens: 2 streams of 4 segments, 1 on each
# process, so a finished two-process run validates in the strategy; at
# memory 0 and 8 only, the lengths the tests read: every finished run
# validates, and each length is a pass and a compilation.)
# The one-device references of the evaluations on 2 processes, in one
# process: the run's validation text read as `keras-txl evaluate
# --streams 2 --token-losses` reads it (`score`), and as the run
# validated (`evaluate_bpc`).
REFERENCE = """
import sys
from keras_txl_cli.cli import import_library
import_library()  # the command's start (its collector paused)
from keras_txl_cli.evaluate_command import evaluate
run, losses, metrics, validation = sys.argv[1:]
evaluate(run, batch_size=2, token_losses=losses, metrics_json=metrics)
evaluate(run, metrics_json=validation, verbose=0)
"""
# The flags of a run on 2 processes, and on 1 process with 2 devices.
PROCESSES = {
    "jax": ["--strategy", "jax-data-parallel", "--num-devices", "1"],
    "tensorflow": ["--strategy", "multiworker"],
}
TWO_DEVICES = {
    "jax": ["--strategy", "jax-data-parallel", "--num-devices", "2"],
    "tensorflow": ["--strategy", "mirrored", "--num-devices", "2"],
}
# TensorFlow draws the dropout masks per replica (a replica of 1 row
# draws other masks than one device of 2 rows), so its runs that change
# the number of replicas equal each other only without dropout; JAX
# draws the masks of the global batch.
DROPOUT = {"jax": "0.1", "tensorflow": "0"}
# Every wait on a child is bounded: a hang fails the test, never CI.
TIMEOUT = 600
# How long the processes wait for a lost one (KERAS_TXL_PEER_TIMEOUT,
# JAX's heartbeat timeout): TensorFlow's default for the same
# coordination service (its survivor stops within it too).
PEER_TIMEOUT = 10


def _start(
    backend, corpus, output, *extra, process=None, port=None, devices=None
):
    """`python -m keras_txl_cli train` in a fresh process: process
    `process` of 2 on `port`, or alone (on `devices` CPU devices)."""
    if devices:
        extra = (*extra, *TWO_DEVICES[backend])
    command = ["-m", "keras_txl_cli", "train", "--corpus", corpus]
    command += ["--output", output, *RUN, *extra]
    command += ["--dropout", DROPOUT[backend]]
    return _python(backend, command, process, port, devices)


def _python(backend, arguments, process=None, port=None, devices=None):
    """`python *arguments` in a fresh process of `backend`: process
    `process` of 2 on `port`, or alone (on `devices` CPU devices)."""
    env = dict(
        os.environ,
        PYTHONPATH=REPO,
        KERAS_BACKEND=backend,
        TF_CPP_MIN_LOG_LEVEL="3",
        KERAS_TXL_PEER_TIMEOUT=str(PEER_TIMEOUT),
    )
    for key in list(env):
        if key.startswith("KERAS_DISTRIBUTION_") or key == "TF_CONFIG":
            del env[key]
    if process is not None and backend == "jax":
        env["KERAS_DISTRIBUTION_JOB_ADDRESSES"] = f"localhost:{port}"
        env["KERAS_DISTRIBUTION_NUM_PROCESSES"] = "2"
        env["KERAS_DISTRIBUTION_PROCESS_ID"] = str(process)
    elif process is not None:
        env["TF_CONFIG"] = json.dumps(
            {
                "cluster": {
                    "worker": [f"localhost:{port}", f"localhost:{port + 1}"]
                },
                "task": {"type": "worker", "index": process},
            }
        )
    env["XLA_FLAGS"] = xla_flags(devices if backend == "jax" else None)
    return subprocess.Popen(
        [sys.executable, *arguments],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _pair(backend, corpus, output, *extra):
    port = free_port_pair()
    flags = PROCESSES[backend]
    return [
        _start(backend, corpus, output, *flags, *extra, process=p, port=port)
        for p in (0, 1)
    ]


def _finish(processes, timeout=TIMEOUT):
    """`[(status, stdout, stderr)]` of each process (killed if late)."""
    results = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate(timeout=60)
            err += "\n[killed: no exit within the timeout]"
        results.append((process.returncode, out, err))
    return results


def _step(output):
    path = os.path.join(output, "checkpoint", "state.json")
    try:
        with open(path) as file:
            return json.load(file)["step"]
    except (OSError, ValueError):
        return None  # not there yet, or being replaced


def _when_step(output, step, processes, timeout=TIMEOUT):
    """Polls until `output`'s checkpoint reached `step`; returns it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reached = _step(output)
        if reached is not None and reached >= step:
            return reached
        if any(p.poll() is not None for p in processes):
            break
        time.sleep(0.05)
    for process in processes:
        process.kill()
    raise AssertionError(
        f"{output} never reached step {step}: {_finish(processes, 60)}"
    )


def _terminate(output, step, processes):
    """SIGTERM to the last of `processes` once `output`'s checkpoint
    reached `step`: `(results of _finish, the checkpoint's step)`."""
    _when_step(output, step, processes)
    processes[-1].send_signal(signal.SIGTERM)
    return _finish(processes), _step(output)


def _losses(output):
    with open(os.path.join(output, "metrics.json")) as file:
        return np.array(json.load(file)["train_loss"])


@pytest.fixture(scope="module", params=["jax", "tensorflow"])
def runs(request, tmp_path_factory):
    backend = request.param
    folder = tmp_path_factory.mktemp(f"multi_process_{backend}")
    corpus = str(folder / "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as file:
        file.write(TEXT)
    out = {name: str(folder / name) for name in ("whole", "chain")}
    report = {"out": out}
    times = {}
    clock = [time.monotonic()]

    def lap(name):
        now = time.monotonic()
        times[name] = round(now - clock[0], 1)
        clock[0] = now

    # The uninterrupted run: the documented command on 2 processes (the
    # run the losses of every transition are compared to, and the one
    # that two processes finish and validate in the strategy). (Never
    # beside another pair: with the whole run's JAX pair beside the
    # chain's, the chain's pair once never finished its Orbax save of
    # its first step within TIMEOUT on a loaded host; cause not found.)
    report["whole"] = _finish(_pair(backend, corpus, out["whole"]))
    lap("whole")

    # One run folder through every stop and every transition. On 1
    # device, stopped by SIGTERM (143) ...
    one = [_start(backend, corpus, out["chain"])]
    report["one_term"], report["one_step"] = _terminate(out["chain"], 2, one)
    lap("one_term")

    # ... resumed on 2 processes (1 device -> 2 processes); SIGTERM to
    # process 1 alone: both stop at one step boundary (143) ...
    pair = _pair(backend, corpus, out["chain"], "--resume")
    report["term"], report["term_step"] = _terminate(
        out["chain"], report["one_step"] + 1, pair
    )
    lap("term")

    # ... resumed on 2 processes, then SIGKILL of process 1: process 0
    # stops by itself, within the peer timeout.
    pair = _pair(backend, corpus, out["chain"], "--resume")
    _when_step(out["chain"], report["term_step"] + 1, pair)
    pair[1].kill()
    killed = time.monotonic()
    report["lost"] = _finish(pair)
    report["kill_step"] = _step(out["chain"])
    times["survivor_exit"] = round(time.monotonic() - killed, 1)
    lap("kill")

    # ... and its checkpoint resumed to the end on 1 process with 2
    # devices (2 processes -> 1 process with 2 devices), beside the
    # evaluations of the uninterrupted run (no other pair runs then).
    evaluations = _evaluations(backend, folder, out["whole"])
    report["two_devices"] = _finish(
        [_start(backend, corpus, out["chain"], "--resume", devices=2)]
    )
    lap("two_devices")

    # `keras-txl evaluate --strategy` on 2 processes (`score(strategy=)`)
    # of the finished two-process run, beside the one-device references.
    report.update(_finish_evaluations(evaluations))
    lap("evaluate")
    report["times"] = times
    print(json.dumps(times))
    return report


def _evaluations(backend, folder, run):
    """`(started, files)`: `keras-txl evaluate RUN --streams 2
    --token-losses` started on 2 processes under the strategy, and the
    one-device `REFERENCE` beside them, and the paths of their files."""
    files = {
        name: str(folder / name)
        for name in ("pair.npy", "pair.json", "one.npy", "one.json", "val.json")
    }
    port = free_port_pair()
    evaluate = ["-m", "keras_txl_cli", "evaluate", run, "--streams", "2"]
    evaluate += ["--token-losses", files["pair.npy"], "--metrics-json"]
    evaluate += [files["pair.json"], *PROCESSES[backend]]
    reference = ["-c", REFERENCE, run, files["one.npy"], files["one.json"]]
    started = [_python(backend, evaluate, process=p, port=port) for p in (0, 1)]
    started.append(_python(backend, [*reference, files["val.json"]]))
    return started, files


def _finish_evaluations(evaluations):
    """`{"evaluate", "reference", "files"}`: the results of the
    `_evaluations` started, and their files."""
    started, files = evaluations
    return {
        "evaluate": _finish(started[:2]),
        "reference": _finish(started[2:]),
        "files": files,
    }


def _ok(results):
    for status, _, err in results:
        assert status == 0, err[-3000:]


@pytest.mark.slow
def test_documented_two_process_command_writes_one_run(runs):
    """The documented command runs through `keras-txl train`; the two
    processes write one run folder: its checkpoint one Orbax folder (both
    processes' shards) named by `state.json`, nothing left beside it."""
    output, results = runs["out"]["whole"], runs["whole"]
    _ok(results)
    losses = _losses(output)
    assert losses.shape == (STEPS,) and np.all(np.isfinite(losses))
    assert np.ptp(losses) > 0.1  # no flat line
    checkpoint = os.path.join(output, "checkpoint")
    with open(os.path.join(checkpoint, "state.json")) as file:
        state = json.load(file)
    assert state["step"] == STEPS
    # (JAX: one Orbax folder; TensorFlow: the chief's weights and
    # every row's memory.)
    assert sorted(os.listdir(checkpoint)) == sorted(
        ["state.json", *state["files"].values()]
    )
    parent = os.path.dirname(output)
    assert not [n for n in os.listdir(parent) if ".partial" in n]
    # Both processes printed the same curve (one run, not two).
    last = f"Epoch {STEPS}/{STEPS}"
    assert results[0][1].count(last) == 1 and last in results[1][1]


@pytest.mark.slow
def test_sigterm_to_one_process_stops_both_and_resumes_exactly(runs):
    """SIGTERM to process 1 stops both at the same step (status 143, the
    checkpoint of that step); resumed on both, every step's loss is the
    uninterrupted run's (1e-6) until a SIGKILL of process 1, after which
    process 0 stops within the peer timeout, saying how to resume."""
    stopped = runs["term_step"]
    assert runs["one_step"] < stopped < STEPS
    for status, _, err in runs["term"]:
        assert status == 143, err[-3000:]
        assert f"after step {stopped} of {STEPS}" in err
    status, _, err = runs["lost"][0]
    assert status != 0 and runs["lost"][1][0] == -signal.SIGKILL
    assert "a process of this run was lost" in err, err[-3000:]
    assert "--resume" in err
    assert f"Resuming at step {stopped} of {STEPS}" in runs["lost"][0][1]
    # It stopped by itself (`_finish` kills a process still running after
    # TIMEOUT, and says so): the peer timeout bounds the wait, no clock
    # is asserted on a busy host.
    assert "[killed: no exit within the timeout]" not in err
    killed = runs["kill_step"]
    assert stopped < killed < STEPS
    # Steps 1 to `killed`: one device, stopped by SIGTERM (those steps,
    # on another number of devices, are the next test's: a float32
    # rounding or two, 4.8e-7 measured on JAX), then two processes,
    # resumed, stopped by SIGTERM and resumed: the uninterrupted run's
    # (1e-6). Their checkpoint of step `killed`, resumed on 1 process
    # with 2 devices, gave the rest (the next test).
    _ok(runs["two_devices"])
    grown = runs["one_step"]
    np.testing.assert_allclose(
        _losses(runs["out"]["chain"])[grown:killed],
        _losses(runs["out"]["whole"])[grown:killed],
        atol=1e-6,
        rtol=0,
    )


@pytest.mark.slow
def test_resume_on_another_number_of_processes_and_devices(runs):
    """1 device -> 2 processes (the checkpoint left by a SIGTERM on one
    device), and 2 processes -> 1 process with 2 devices (the checkpoint
    left by the SIGKILL), the same global batch: each row's memory goes
    to the device that holds the row now; the losses are the
    uninterrupted run's (1e-5)."""
    whole = _losses(runs["out"]["whole"])
    chain = _losses(runs["out"]["chain"])
    status, _, err = runs["one_term"][0]
    assert status == 143, err[-3000:]
    grown = runs["one_step"]
    assert f"after step {grown} of {STEPS}" in err
    assert 2 <= grown < STEPS
    assert f"Resuming at step {grown} of {STEPS}" in runs["term"][0][1]
    # The steps that two processes ran from the one device's checkpoint.
    np.testing.assert_allclose(
        chain[grown : runs["term_step"]],
        whole[grown : runs["term_step"]],
        atol=1e-5,
        rtol=0,
    )
    _ok(runs["two_devices"])
    out = runs["two_devices"][0][1]
    assert f"Resuming at step {runs['kill_step']} of {STEPS}" in out
    assert "1 of 2 streams on each of 2 replica(s)" in out
    np.testing.assert_allclose(chain, whole, atol=1e-5, rtol=0)


def _result_line(output, name="builtin valid:"):
    """The first line of `output` that gives an evaluation's result."""
    return next(line for line in output.splitlines() if line.startswith(name))


@pytest.mark.slow
def test_evaluation_and_scoring_on_two_processes_equal_one_device(runs):
    """Evaluation in the strategy on 2 processes, 1 row on each, every
    result whole on both, equals one device: the finished run's
    validation (`evaluate_bpc(strategy=)`) and `keras-txl evaluate
    --strategy ... --token-losses` (`score(strategy=)`), each to the
    one-device evaluation of the same run folder."""
    output, results = runs["out"]["whole"], runs["whole"]
    _ok(runs["reference"])
    reference = runs["reference"][0][1]
    files = runs["files"]
    with open(files["val.json"]) as file:
        one_device = json.load(file)["bits_per_character"]
    with open(os.path.join(output, "metrics.json")) as file:
        validated = json.load(file)["valid_bpc_with_memory"]
    for _, out, _ in results:
        assert "Validation on one device" not in out
        assert "Validation (68 tokens" in out
    # (Measured: equal on JAX and TensorFlow.)
    assert abs(validated - one_device) <= 1e-6
    lines = {_result_line(out, "Validation bits") for _, out, _ in results}
    assert len(lines) == 1  # the same result on both processes
    _ok(runs["evaluate"])
    losses, one = np.load(files["pair.npy"]), np.load(files["one.npy"])
    assert losses.shape == one.shape == (2, 33)
    # (Measured: 0 on JAX; 9.5e-7 on TensorFlow, whose replicas run the
    # step without XLA.)
    np.testing.assert_allclose(losses, one, atol=5e-6, rtol=0)
    with open(files["pair.json"]) as file:
        pair = json.load(file)
    with open(files["one.json"]) as file:
        assert abs(pair["loss"] - json.load(file)["loss"]) <= 1e-6
    line = _result_line(reference)
    for _, out, _ in runs["evaluate"]:
        assert "1 stream(s) on each of 2 replicas" in out
        assert _result_line(out) == line  # every row, on both processes
