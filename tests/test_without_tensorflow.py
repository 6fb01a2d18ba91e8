"""TensorFlow is an optional extra: with it blocked, `import keras_txl`
works, and a model built from the layers trains a step on JAX, in a fresh
process as a user without TensorFlow runs it."""

import os
import subprocess
import sys

import pytest

from tests.test_case import REPO

# The child always runs on JAX, whatever backend runs the suite.
pytestmark = pytest.mark.one_backend

CHILD = """
import sys

# `import tensorflow` (and tensorflow-text) now raises ImportError.
sys.modules["tensorflow"] = None
sys.modules["tensorflow_text"] = None

import keras
import numpy as np

import keras_txl
from keras_txl.layers import RelativeMultiHeadAttention
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM

assert keras.backend.backend() == "jax", keras.backend.backend()
assert RelativeMultiHeadAttention(num_heads=2, head_dim=4).num_heads == 2
lm = TransformerXLCausalLM(
    TransformerXLBackbone(
        vocabulary_size=11, num_layers=1, num_heads=2, hidden_dim=8,
        head_dim=4, intermediate_dim=16, memory_length=4,
    )
)
ids = np.random.default_rng(0).integers(0, 11, (2, 9)).astype("int32")
before = [np.array(w) for w in lm.trainable_weights]
history = lm.fit(ids[:, :-1], ids[:, 1:], batch_size=2, epochs=1, verbose=0)
loss = history.history["loss"][0]
assert np.isfinite(loss), loss
after = [np.array(w) for w in lm.trainable_weights]
assert any(not np.allclose(a, b) for a, b in zip(before, after)), "no step"
assert int(lm.memory_state.valid_length.value[0]) == 4  # memory carried
assert sys.modules["tensorflow"] is None  # never imported
print("trained", round(float(loss), 4))
"""


def test_import_and_train_a_step_without_tensorflow():
    completed = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=REPO,
        env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip().startswith("trained"), completed.stdout
