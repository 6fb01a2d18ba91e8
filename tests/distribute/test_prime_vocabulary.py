"""A vocabulary (103) that does not divide the model axis of a (1, 2)
mesh: `get_layout_map(..., vocabulary_size=103)` keeps the vocabulary
axis whole and still splits the attention heads and the feed-forward
over both devices, and a fresh model and a saved one loaded under
`ModelParallel` give the unsharded model's output. A layout that splits
the 103 tokens is refused by keras-txl, naming `vocabulary_size=`. Runs
in one JAX subprocess with 2 host CPU devices."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.test_case import xla_flags

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

    def layouts(model):
        # Each weight's partition spec and how many distinct pieces its
        # devices hold (1: every device holds all of it).
        return {w.path: [[a if a is None else str(a)
                          for a in w.value.sharding.spec],
                         len({str(s.index) for s in w.value.global_shards})]
                for w in model.weights}

    def error(make):
        try:
            make()
        except Exception as error:
            return [type(error).__name__, str(error)]

    layout = TransformerXLBackbone.get_layout_map(mesh, vocabulary_size=103)
    keras.distribution.set_distribution(
        keras.distribution.ModelParallel(layout_map=layout))
    fresh = TransformerXLCausalLM(backbone=TransformerXLBackbone(**kwargs))
    fresh.predict(x, verbose=0)
    fresh.set_weights(lm.get_weights())
    loaded = TransformerXLCausalLM.from_preset(folder)
    report = {
        "fresh": float(np.abs(np.asarray(fresh.predict(x, verbose=0))
                              - want).max()),
        "loaded": float(np.abs(np.asarray(loaded.predict(x, verbose=0))
                               - want).max()),
        "devices": len(keras.distribution.list_devices()),
        "layouts": {"fresh": layouts(fresh), "loaded": layouts(loaded)},
    }
    # A layout that splits 103 in 2: keras-txl's error, before JAX's.
    keras.distribution.set_distribution(keras.distribution.ModelParallel(
        layout_map=TransformerXLBackbone.get_layout_map(mesh)))
    report["uneven_load"] = error(
        lambda: TransformerXLCausalLM.from_preset(folder))
    report["uneven_new"] = error(lambda: TransformerXLBackbone(**kwargs))
    # The same for an untied output layer, whose embedding is whole.
    untied = keras.distribution.LayoutMap(mesh)
    untied[".*output_kernel"] = (None, "model")
    keras.distribution.set_distribution(
        keras.distribution.ModelParallel(layout_map=untied))
    report["uneven_output"] = error(lambda: TransformerXLCausalLM(
        TransformerXLBackbone(**kwargs), tie_weights=False))
    print(json.dumps(report))
    """
)

# Each sharded kernel's spec on the (batch, model) mesh: the heads and
# the feed-forward's inner axis split in 2 along "model", the embedding's
# vocabulary axis whole.
SHARDED = {
    "token_embedding/embeddings": [None, "batch"],
    "transformer_layer_0/attention/query/kernel": ["batch", "model", None],
    "transformer_layer_0/attention/key/kernel": ["batch", "model", None],
    "transformer_layer_0/attention/value/kernel": ["batch", "model", None],
    "transformer_layer_0/attention/position/kernel": ["batch", "model", None],
    "transformer_layer_0/attention/attention_output/kernel": [
        "model",
        None,
        "batch",
    ],
    "transformer_layer_0/attention/content_bias": ["model", None],
    "transformer_layer_0/attention/position_bias": ["model", None],
    "transformer_layer_0/intermediate/kernel": ["batch", "model"],
    "transformer_layer_0/intermediate/bias": ["model"],
    "transformer_layer_0/output/kernel": ["model", "batch"],
}


def test_prime_vocabulary_shards_and_equals_one_device(tmp_path):
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        XLA_FLAGS=xla_flags(devices=2),
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
    for model, layouts in report["layouts"].items():
        got = {path: layouts[path][0] for path in SHARDED}
        assert got == SHARDED, model
        # The heads and the inner axis are in 2 pieces, one per device;
        # the embedding (split along "batch", of size 1) is whole.
        pieces = {path: layouts[path][1] for path in SHARDED}
        assert pieces == {
            path: 1 if path.startswith("token") else 2 for path in SHARDED
        }, model
    assert report["fresh"] < 1e-5 and report["loaded"] < 1e-5
    for case, weight in [
        ("uneven_load", "token_embedding/embeddings"),
        ("uneven_new", "token_embedding/embeddings"),
        ("uneven_output", "output_kernel"),
    ]:
        name, message = report[case]
        assert name == "ValueError", (case, message)
        assert f"{weight}` splits" in message, (case, message)
        assert "get_layout_map(mesh, vocabulary_size=103)" in message, case
