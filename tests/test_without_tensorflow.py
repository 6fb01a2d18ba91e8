"""TensorFlow is an optional extra: with it refused by an import hook
(as if not installed), `import keras_txl` works, a model built from the
layers trains a step on JAX, and keras_txl never tries to import it, in a
fresh process as a user without TensorFlow runs it."""

import json
import os
import subprocess
import sys

import pytest

from tests.test_case import REPO

# The child always runs on JAX, whatever backend runs the suite.
pytestmark = pytest.mark.one_backend

CHILD = """
import importlib.abc
import json
import sys
import traceback


class RefuseTensorFlow(importlib.abc.MetaPathFinder):
    # Every attempt to import TensorFlow (or tensorflow-text), recorded
    # with the file that asked, and refused as if it were not installed.
    attempts = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in ("tensorflow", "tensorflow_text"):
            return None
        # The file that imports: the last frame but this one outside
        # importlib (`import_module`, the frozen bootstrap).
        callers = [
            frame.filename
            for frame in traceback.extract_stack()[:-1]
            if not frame.filename.startswith("<frozen")
            and not frame.filename.endswith("importlib/__init__.py")
        ]
        self.attempts.append([name, callers[-1]])
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, RefuseTensorFlow())
try:  # the hook sees and refuses an import
    import tensorflow  # noqa: F401
except ModuleNotFoundError:
    pass
assert RefuseTensorFlow.attempts == [["tensorflow", "<string>"]]

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
assert "tensorflow" not in sys.modules
print("trained", round(float(loss), 4))
print(json.dumps(RefuseTensorFlow.attempts))
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
    trained, attempts = completed.stdout.strip().splitlines()[-2:]
    assert trained.startswith("trained"), completed.stdout
    # keras_txl never tries to import TensorFlow (not even in a `try`
    # that would survive its absence); Keras and keras-hub may.
    package = str(REPO / "keras_txl")
    ours = [a for a in json.loads(attempts) if a[1].startswith(package)]
    assert ours == [], ours
