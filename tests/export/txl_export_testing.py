"""Helpers shared by the export tests: a tiny seeded model, the Keras
reference of a segment loop, and a runner for child Python processes."""

import functools
import os
import subprocess
import sys

import keras
import numpy as np

from tests.tiny_models import EXPORT_LM
from tests.tiny_models import tiny_lm as shared_tiny_lm

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
VOCABULARY_SIZE = EXPORT_LM["vocabulary_size"]


# The export tests' model, its weights drawn from `seed`.
tiny_lm = functools.partial(shared_tiny_lm, **EXPORT_LM)


def segments(batch_size=2, segment_length=4, num_segments=4, seed=1):
    """Token ids `(num_segments, batch, T)` of one ordered stream per row."""
    rng = np.random.RandomState(seed)
    shape = (num_segments, batch_size, segment_length)
    return rng.randint(0, VOCABULARY_SIZE, size=shape).astype("int32")


def keras_segment_loop(lm, token_segments, memory_length):
    """Logits `(num_segments, batch, T, vocab)`, valid lengths and the
    final memory of `call_with_memory` threaded over the segments."""
    batch_size = token_segments.shape[1]
    memory = lm.backbone.initial_memory(batch_size, memory_length)
    logits, valid_lengths = [], []
    for segment in token_segments:
        segment_logits, memory = lm.call_with_memory(segment, memory)
        logits.append(keras.ops.convert_to_numpy(segment_logits))
        valid_lengths.append(keras.ops.convert_to_numpy(memory["valid_length"]))
    final_memory = keras.ops.convert_to_numpy(memory["memory"])
    return np.stack(logits), np.stack(valid_lengths), final_memory


def run_python(args, backend=None, timeout=300, extra_env=None):
    """Runs `python ARGS` from the repository root; returns stdout. The
    child gets `KERAS_BACKEND=backend` when given, the variables of
    `extra_env` (a dict) when given, and keras_txl on its path. Raises
    with the child's stderr when it fails. The output is as the child
    wrote it: carriage returns and terminal codes kept."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(extra_env or {}))
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (REPO_ROOT, env.get("PYTHONPATH")) if p
    )
    if backend is not None:
        env["KERAS_BACKEND"] = backend
    result = subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        stderr = result.stderr.decode("utf-8", "replace")
        raise AssertionError(
            f"python {' '.join(args)} failed:\n{stderr[-4000:]}"
        )
    # Decoded as written: a carriage return stays one (text mode would
    # turn it into a line break).
    return result.stdout.decode("utf-8", "replace")
