"""A vocabulary (103) that does not divide the model axis of a (1, 2)
mesh: `get_layout_map(..., vocabulary_size=103)` replicates the
vocabulary axis, and a fresh model and a saved one loaded under
`ModelParallel` give the unsharded model's output. Runs in one JAX
subprocess with 2 host CPU devices."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# The subprocess is JAX whatever KERAS_BACKEND is: one CI stage runs it.
pytestmark = pytest.mark.one_backend

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import keras
    from keras_txl.models import TransformerXLBackbone, TransformerXLCausalLM

    folder = sys.argv[1]
    kwargs = dict(vocabulary_size=103, num_layers=1, num_heads=2,
                  hidden_dim=8, head_dim=4, intermediate_dim=16,
                  memory_length=4)
    keras.utils.set_random_seed(0)
    lm = TransformerXLCausalLM(backbone=TransformerXLBackbone(**kwargs))
    x = np.arange(12, dtype="int32").reshape(2, 6) % 103
    want = np.asarray(lm.predict(x, verbose=0))
    lm.save_to_preset(folder)
    mesh = keras.distribution.DeviceMesh(
        (1, 2), ("batch", "model"), keras.distribution.list_devices())
    layout = TransformerXLBackbone.get_layout_map(mesh, vocabulary_size=103)
    keras.distribution.set_distribution(
        keras.distribution.ModelParallel(layout_map=layout))
    fresh = TransformerXLCausalLM(backbone=TransformerXLBackbone(**kwargs))
    fresh.predict(x, verbose=0)
    fresh.set_weights(lm.get_weights())
    loaded = TransformerXLCausalLM.from_preset(folder)
    # A layout that splits 103 in 2 is the user's layout, not damage:
    # the backend's own error comes through, whole.
    keras.distribution.set_distribution(keras.distribution.ModelParallel(
        layout_map=TransformerXLBackbone.get_layout_map(mesh)))
    try:
        TransformerXLCausalLM.from_preset(folder)
        uneven = None
    except Exception as error:
        uneven = [type(error).__name__, str(error)]
    print(json.dumps({
        "uneven": uneven,
        "fresh": float(np.abs(np.asarray(fresh.predict(x, verbose=0))
                              - want).max()),
        "loaded": float(np.abs(np.asarray(loaded.predict(x, verbose=0))
                               - want).max()),
        "devices": len(keras.distribution.list_devices()),
    }))
    """
)


def test_prime_vocabulary_shards_and_equals_one_device(tmp_path):
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
        JAX_PLATFORMS="cpu",
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "run")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["devices"] == 2
    name, message = report["uneven"]
    assert name != "DamagedFileError", message
    assert "103" in message and "another configuration" not in message
    assert report["fresh"] < 1e-5 and report["loaded"] < 1e-5
