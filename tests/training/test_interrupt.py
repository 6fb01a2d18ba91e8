"""`keras-txl train` stopped by SIGINT or SIGKILL at fixed steps, and
by SIGTERM, in a child process as a user's shell runs it, then `--resume`d:
the run ends with the losses of an uninterrupted run, exactly, and the
old run of `--overwrite` stays whole until the new run's first
checkpoint."""

import csv
import hashlib
import os
import signal
import subprocess
import sys

import keras
import pytest

from keras_txl.data.token_cache import token_cache_entries
from keras_txl_cli.train_config import TrainConfig
from keras_txl_cli.train_run import fit_language_model

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
TEXT = (
    "The quick brown fox jumps over the lazy dog. "
    "Pack my box with five dozen liquor jugs. "
) * 3
STEPS, PER_EPOCH = 12, 4
RUN = dict(
    size="tiny",
    steps=STEPS,
    segment_length=8,
    batch_size=2,
    memory_length=8,
    eval_memory_length=8,
    steps_per_epoch=PER_EPOCH,
    dropout=0.1,  # the dropout's random state must resume too
    seed=5,
    valid_tokens=32,
    sample_tokens=0,  # the sample is test_cli's
)

# `keras-txl train ARGS`, which stops at the end of step N (argv[1]) until
# a line comes on its stdin: the test sends a signal in between, so that
# it lands at that step without waiting on a clock.
CHILD = """
import sys

import pytest

import keras

from keras_txl_cli import cli
from keras_txl_cli import train_run

pause_at = int(sys.argv[1])
logging_callbacks = train_run._logging_callbacks


def with_pause(config, folder, history, *args):
    callbacks, validation = logging_callbacks(config, folder, history, *args)

    class Pause(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if history.step == pause_at:
                print(f"PAUSED {history.step}", flush=True)
                sys.stdin.readline()

    return [*callbacks, Pause()], validation


train_run._logging_callbacks = with_pause
sys.exit(cli.main(sys.argv[2:]))
"""


def _argv(corpus, output):
    argv = [
        "train",
        "--corpus",
        corpus,
        "--output",
        output,
        "--progress",
        "none",
    ]
    for name, value in RUN.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv


def _same_threads():
    """The environment that gives a child this process's torch threads.

    torch's CPU kernels split a sum among their intra-op threads, so that
    the number of threads decides the order of the additions: the layer
    norms' gradients of gamma and beta and the full sum of a 512 x 128
    gradient (`global_clipnorm`) differ in their last bits between one
    and two threads (whichever CPU kernels, `ATEN_CPU_CAPABILITY`), and
    the losses of this test's run with them (up to 4.8e-7). The
    uninterrupted run below runs in this process, with the one thread of
    tests/conftest.py; a child left to torch's default takes one per
    core. A run resumes exactly with the threads it ran with: that is
    what this test checks."""
    if keras.backend.backend() != "torch":
        return {}
    import torch

    return {"OMP_NUM_THREADS": str(torch.get_num_threads())}


def _run(argv, cache, pause_at=0, send=None, on_pause=None):
    """Runs the child (token cache `cache`); at step `pause_at` calls
    `on_pause()`, sends signal `send`, and lets it go on. Returns
    `(status, stdout, stderr)`."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(pause_at), *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(
            os.environ,
            PYTHONPATH=REPO,
            TF_CPP_MIN_LOG_LEVEL="3",
            KERAS_TXL_CACHE=cache,
            **_same_threads(),
        ),
    )
    try:
        if pause_at:
            for line in child.stdout:
                if "PAUSED" in line:
                    break
            else:
                raise AssertionError(child.stderr.read()[-3000:])
            if on_pause is not None:
                on_pause()
            child.send_signal(send)
            if send != signal.SIGKILL:
                child.stdin.write("\n")
                child.stdin.flush()
        out, err = child.communicate()
    finally:
        child.kill()
        child.wait()
    return child.returncode, out, err


def _losses(output):
    with open(os.path.join(output, "steps.csv"), newline="") as file:
        rows = list(csv.DictReader(file))
    return [int(row["step"]) for row in rows], [row["loss"] for row in rows]


def _snapshot(folder):
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as file:
                digest = hashlib.sha256(file.read()).hexdigest()
            found[os.path.relpath(path, folder)] = digest
    return found


def _one_line(err, status):
    lines = [line for line in err.splitlines() if line.startswith("keras-txl")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


@pytest.mark.torch_ok
def test_signals_stop_at_a_step_and_resume_exactly(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    corpus, output = str(corpus), str(tmp_path / "run")
    # The uninterrupted run, in this process; its folder is then the old
    # run that `--overwrite` replaces.
    whole = fit_language_model(
        TrainConfig(corpus=corpus, output=output, verbose=0, **RUN),
        log=lambda _: None,
    )
    expected = [repr(loss) for loss in whole["history"].losses]
    assert len(expected) == STEPS
    old = _snapshot(output)
    # Fixed steps, so a failure reproduces: one inside the first epoch
    # (before the first checkpoint), one two steps past it.
    first = PER_EPOCH - 2

    cache = str(tmp_path / "cache")

    def old_run_is_whole():
        assert _snapshot(output) == old  # not a byte changed yet
        assert any(".run.partial-" in name for name in os.listdir(tmp_path))
        # The corpus's token ids are not in the cache before either.
        kinds = {entry["kind"] for entry in token_cache_entries(cache)}
        assert kinds == {"unfinished"}, kinds

    status, _, err = _run(
        _argv(corpus, output) + ["--overwrite"],
        cache,
        first,
        signal.SIGINT,
        old_run_is_whole,
    )
    line = _one_line(err, status)
    assert status == 130, (first, err[-3000:])
    assert f"stopped by SIGINT after step {first + 1} of {STEPS}" in line
    assert "--resume" in line
    steps, losses = _losses(output)
    assert steps == list(range(1, first + 2))
    assert losses == expected[: first + 1], first
    assert sorted(os.listdir(tmp_path)) == ["cache", "corpus.txt", "run"]
    kinds = sorted(entry["kind"] for entry in token_cache_entries(cache))
    assert kinds == ["ids", "ids", "split", "vocabulary"], kinds

    # SIGKILL past the next checkpoint, where steps.csv holds steps its
    # checkpoint does not: the resumed run drops and runs them again.
    resume = _argv(corpus, output)[:7] + ["--resume"]
    third = PER_EPOCH + 2
    status, _, err = _run(resume, cache, third, signal.SIGKILL)
    assert status == -signal.SIGKILL, err[-3000:]
    assert _losses(output)[0][-1] == third

    # SIGTERM, whose path is SIGINT's but for its name and exit status,
    # lands during the next to last step: the run stops after the last
    # one (the validation and the sample after training are another
    # test's), whose row is written, with every loss of the whole run.
    status, _, err = _run(resume, cache, STEPS - 1, signal.SIGTERM)
    line = _one_line(err, status)
    assert status == 143, err[-3000:]
    assert f"stopped by SIGTERM after step {STEPS} of {STEPS}" in line
    assert "--resume" in line
    steps, losses = _losses(output)
    assert steps == list(range(1, STEPS + 1))
    assert losses == expected, (first, third)
