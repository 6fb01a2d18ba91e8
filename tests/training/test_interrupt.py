"""`keras-txl train` stopped by SIGINT or SIGKILL at fixed steps, and
by SIGTERM, in a child process as a user's shell runs it, then `--resume`d:
the run ends with the losses of an uninterrupted run, exactly, and the
old run of `--overwrite` stays whole until the new run's first
checkpoint."""

import csv
import hashlib
import json
import os
import signal
import subprocess
import sys

import pytest

from keras_txl.data.token_cache import token_cache_entries
from keras_txl_cli.train_config import TrainConfig
from keras_txl_cli.train_run import fit_language_model
from tests.test_case import torch_threads

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

# `keras-txl train` commands run one after the other in one process
# (argv[1]: a JSON list of `[N, ARGS]`), as a user's shell runs them but
# for the import of Keras, once: each command stops at the end of step N
# until a line comes on its stdin (the test sends a signal in between,
# so that it lands at that step without waiting on a clock), then prints
# `STATUS S` (its exit status) and waits for a line before the next.
NEXT = "--- next command"  # on stderr, between two commands' output
CHILD = """
import json
import sys

from keras_txl_cli import cli

cli.import_library()  # the command's start (its collector paused)

import keras

from keras_txl_cli import train_run

commands = json.loads(sys.argv[1])
pause_at = None
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
for number, (pause_at, argv) in enumerate(commands):
    if number:
        sys.stdin.readline()
        print(NEXT, file=sys.stderr, flush=True)
    status = cli.main(argv)
    print(f"STATUS {status}", flush=True)
sys.exit(status)
""".replace("NEXT", repr(NEXT))


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


class _Child:
    """The child running `commands` (`[(N, argv)]`, see CHILD) with the
    token cache `cache`, driven step by step by the test."""

    def __init__(self, cache, *commands):
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, json.dumps(commands)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(
                os.environ,
                PYTHONPATH=REPO,
                TF_CPP_MIN_LOG_LEVEL="3",
                KERAS_TXL_CACHE=cache,
                # The uninterrupted run runs in this process, with its
                # threads: a run resumes exactly with the threads it ran
                # with (the losses, up to 4.8e-7 apart with 1 and 2).
                **torch_threads(),
            ),
        )

    def until(self, word):
        """The next line of stdout that starts with `word`."""
        for line in self.process.stdout:
            if line.startswith(word):
                return line
        raise AssertionError(self.process.stderr.read()[-3000:])

    def stop(self, send):
        """At the pause: sends signal `send` and lets the command go on;
        returns its exit status (None for SIGKILL)."""
        self.process.send_signal(send)
        if send == signal.SIGKILL:
            return None
        self.next()
        return int(self.until("STATUS ").split()[1])

    def next(self):
        self.process.stdin.write("\n")
        self.process.stdin.flush()

    def finish(self):
        """`(exit status, [each command's stderr])`."""
        _, err = self.process.communicate()
        return self.process.returncode, err.split(NEXT + "\n")

    def __enter__(self):
        return self

    def __exit__(self, *error):
        self.process.kill()
        self.process.wait()


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

    # SIGINT, then SIGKILL past the next checkpoint, where steps.csv
    # holds steps its checkpoint does not: the resumed run drops and runs
    # them again: two commands of one child process, as a shell runs
    # them but for one import of Keras (the SIGTERM below resumes in a
    # fresh process).
    resume = _argv(corpus, output)[:7] + ["--resume"]
    third = PER_EPOCH + 2
    with _Child(
        cache,
        (first, _argv(corpus, output) + ["--overwrite"]),
        (third, resume),
    ) as child:
        child.until("PAUSED")
        old_run_is_whole()
        status = child.stop(signal.SIGINT)
        assert status == 130, (first, status)
        steps, losses = _losses(output)
        assert steps == list(range(1, first + 2))
        assert losses == expected[: first + 1], first
        assert sorted(os.listdir(tmp_path)) == ["cache", "corpus.txt", "run"]
        kinds = sorted(entry["kind"] for entry in token_cache_entries(cache))
        assert kinds == ["ids", "ids", "split", "vocabulary"], kinds
        child.next()  # the second command
        child.until("PAUSED")
        child.stop(signal.SIGKILL)
        status, (err, _) = child.finish()
    line = _one_line(err, 130)
    assert f"stopped by SIGINT after step {first + 1} of {STEPS}" in line
    assert "--resume" in line
    assert status == -signal.SIGKILL, err[-3000:]
    assert _losses(output)[0][-1] == third

    # SIGTERM, whose path is SIGINT's but for its name and exit status,
    # lands during the next to last step: the run stops after the last
    # one (the validation and the sample after training are another
    # test's), whose row is written, with every loss of the whole run.
    with _Child(cache, (STEPS - 1, resume)) as child:
        child.until("PAUSED")
        assert child.stop(signal.SIGTERM) == 143
        status, (err,) = child.finish()
    line = _one_line(err, status)
    assert status == 143, err[-3000:]
    assert f"stopped by SIGTERM after step {STEPS} of {STEPS}" in line
    assert "--resume" in line
    steps, losses = _losses(output)
    assert steps == list(range(1, STEPS + 1))
    assert losses == expected, (first, third)
