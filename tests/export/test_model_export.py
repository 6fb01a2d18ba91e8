"""Keras's `Model.export` on a `TransformerXLCausalLM`: a SavedModel that
serves the explicit memory, from TensorFlow and from JAX, with no
argument."""

import numpy as np
import pytest
import tensorflow as tf
from txl_export_testing import keras_segment_loop
from txl_export_testing import run_python
from txl_export_testing import segments
from txl_export_testing import tiny_lm

JAX_EXPORT = """
import sys
sys.path.insert(0, "tests/export")
from txl_export_testing import tiny_lm
lm = tiny_lm()
lm.load_weights(sys.argv[1])  # the TensorFlow process's weights
lm.export(sys.argv[2])
"""


def _serve_twice(path, token_segments):
    """Logits of threading the memory through `serving_default`, and the
    first segment served again from the start memory."""
    loaded = tf.saved_model.load(path)
    serve = loaded.signatures["serving_default"]
    start = loaded.signatures["initial_memory"](
        batch_size=tf.constant(token_segments.shape[1])
    )
    memory = dict(start)
    logits = []
    for segment in token_segments:
        out = serve(token_ids=tf.constant(segment), **memory)
        logits.append(out["logits"].numpy())
        memory = {key: out[key] for key in start}
    again = [
        serve(token_ids=tf.constant(segment), **start)["logits"].numpy()
        for segment in token_segments[:2]
    ]
    return np.stack(logits), again


@pytest.mark.slow
def test_model_export_serves_the_explicit_memory(tmp_path):
    token_segments = segments()
    lm = tiny_lm()
    expected, _, _ = keras_segment_loop(lm, token_segments, memory_length=6)
    exported = {"tensorflow": str(tmp_path / "tf")}
    lm.export(exported["tensorflow"])
    # Under JAX: the same call (the export runs in a TensorFlow child).
    exported["jax"] = str(tmp_path / "jax")
    script = tmp_path / "export_on_jax.py"
    script.write_text(JAX_EXPORT)
    weights = str(tmp_path / "tiny.weights.h5")
    lm.save_weights(weights)
    run_python(
        [str(script), weights, exported["jax"]], backend="jax", timeout=900
    )
    for backend, path in exported.items():
        logits, again = _serve_twice(path, token_segments)
        np.testing.assert_allclose(logits, expected, atol=1e-5, err_msg=backend)
        # Nothing carried between calls: the first segment again, from
        # the start memory, gives the first logits again.
        np.testing.assert_array_equal(again[0], logits[0])
        # ... and the second segment after it used the first's memory.
        assert np.abs(again[1] - logits[1]).max() > 1e-3


@pytest.mark.parametrize(
    "kwargs", [{"format": "tflite"}, {"input_signature": [object()]}]
)
def test_model_export_refuses_what_it_cannot_serve(tmp_path, kwargs):
    with pytest.raises(ValueError, match="takes no input_signature"):
        tiny_lm().export(str(tmp_path / "out"), **kwargs)
    assert not (tmp_path / "out").exists()  # no export written
