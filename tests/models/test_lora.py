"""LoRA, keras-hub's way: only the LoRA kernels train, and
`save_lora_weights` / `load_lora_weights` give back the trained model
exactly."""

import functools
import os

import keras
import numpy as np
import pytest

from keras_txl.models import TransformerXLCausalLM
from tests.test_case import to_numpy
from tests.tiny_models import PLAIN_LM
from tests.tiny_models import tiny_lm

HF_FOLDER = os.path.join(
    os.path.dirname(__file__), "..", "fixtures", "hf_transfo_xl"
)


# The shared tiny model (seeded, built), with its own output kernel.
_lm = functools.partial(tiny_lm, tie_weights=False, **PLAIN_LM)


def _fit(lm, seed=0):
    ids = np.random.default_rng(seed).integers(0, 20, (8, 7)).astype("int32")
    lm.compile(optimizer=keras.optimizers.Adam(0.05))
    lm.fit(ids[:, :-1], ids[:, 1:], batch_size=2, shuffle=False, verbose=0)


def _logits(lm):
    ids = np.arange(12, dtype="int32").reshape(2, 6) % 20
    logits, _ = lm.call_with_memory(ids, lm.backbone.initial_memory(2))
    return to_numpy(logits)


def _values(lm):
    return {v.path: to_numpy(v) for v in lm.weights}


@pytest.mark.parametrize(
    "targets, names",
    [
        (None, {"query", "value"}),
        (["key", "output", "position"], {"key", "output", "position"}),
    ],
)
def test_lora_round_trip_is_exact_and_only_lora_trains(
    tmp_path, targets, names
):
    lm = _lm()
    base = str(tmp_path / "base.weights.h5")
    lm.save_weights(base)
    # The call: the backbone's, as keras-hub users write it.
    lm.backbone.enable_lora(2, targets)
    before = _values(lm)
    _fit(lm)
    trainable = {v.path for v in lm.trainable_variables}
    assert trainable and all("lora_kernel" in path for path in trainable)
    assert {path.split("/")[-2] for path in trainable} == names
    after = _values(lm)
    changed = {p for p in before if (after[p] != before[p]).any()}
    assert changed and changed <= trainable  # the output layer stayed
    lora_file = str(tmp_path / "adapter.lora.h5")
    lm.save_lora_weights(lora_file)

    fresh = _lm()
    fresh.load_weights(base)
    assert np.abs(_logits(fresh) - _logits(lm)).max() > 0  # trained
    # LoRA is enabled on the layers the file holds, not the defaults.
    fresh.load_lora_weights(lora_file)
    np.testing.assert_array_equal(_logits(fresh), _logits(lm))
    assert {v.path for v in fresh.trainable_variables} == trainable


def test_lora_before_the_first_build_freezes_the_output_layer():
    """`enable_lora` on a model not built yet (as from a constructor): the
    output layer made by the first `fit` is frozen too."""
    keras.utils.set_random_seed(0)
    lm = TransformerXLCausalLM(tiny_lm(**PLAIN_LM).backbone)  # not built
    lm.backbone.enable_lora(2)
    _fit(lm)
    trainable = {v.path for v in lm.trainable_variables}
    assert trainable and all("lora_kernel" in path for path in trainable)


def test_lora_targets_are_checked():
    lm = _lm()
    with pytest.raises(ValueError, match="attention_output"):
        lm.enable_lora(2, ["query_dense"])
    with pytest.raises(ValueError, match="rank"):
        lm.enable_lora(0)


def test_lora_fine_tuning_of_the_huggingface_checkpoint():
    lm = TransformerXLCausalLM.from_preset(HF_FOLDER)
    lm.enable_lora(4)
    before = _values(lm)
    tokenizer = lm.preprocessor.tokenizer
    ids = np.asarray(
        to_numpy(tokenizer("I tell you , friends , most charitably"))
    )
    ids = np.tile(ids, 8)[:50].reshape(2, 25).astype("int32")
    lm.compile(optimizer=keras.optimizers.Adam(1e-2), sampler="greedy")
    history = lm.fit(
        ids[:, :-1],
        ids[:, 1:],
        batch_size=2,
        epochs=3,
        shuffle=False,
        verbose=0,
    )
    losses = history.history["loss"]
    assert losses[-1] < losses[0]
    after = _values(lm)
    changed = {p for p in before if (after[p] != before[p]).any()}
    trainable = {v.path for v in lm.trainable_variables}
    assert trainable and all("lora_kernel" in path for path in trainable)
    # B starts at zero (keras' LoRA): every B moved, nothing but LoRA did.
    assert {p for p in trainable if p.endswith("lora_kernel_b")} <= changed
    assert changed <= trainable
    text = lm.generate("I tell you", max_length=10)
    assert isinstance(text, str) and text.startswith("I tell you")


def test_evaluation_copy_of_a_lora_model_computes_the_same():
    """An evaluation copy with its own backbone (as `keras-txl evaluate`
    makes with the evaluation's `same_length`) carries the LoRA kernels:
    it used to copy the trainable weights only and fail on their count."""
    from keras_txl.models.carried_memory import evaluation_copy

    lm = _lm()
    lm.enable_lora(2, ["query", "key"])
    _fit(lm)
    copy = evaluation_copy(lm, same_length=lm.backbone.same_length)
    assert copy.backbone is not lm.backbone
    trained = [v for v in lm.trainable_variables if "lora_kernel_b" in v.path]
    assert trained and all(np.abs(to_numpy(v)).max() > 0 for v in trained)
    np.testing.assert_array_equal(_logits(copy), _logits(lm))
    assert len(copy.trainable_variables) == len(lm.trainable_variables)
    assert all("lora_kernel" in v.path for v in copy.trainable_variables)


def test_keras_hub_names_lora_layers_by_their_flatten_layers_index(tmp_path):
    """Pins the private behaviour `TransformerXLBackbone.load_lora_weights`
    reads (CONTRIBUTING.md, "Private APIs"): keras-hub's
    `save_lora_weights` stores each adapted layer under its index among
    the backbone's layers with weights, in `_flatten_layers` order."""
    import h5py

    lm = _lm()
    lm.backbone.enable_lora(2, ["key"])
    lora_file = str(tmp_path / "adapter.lora.h5")
    lm.save_lora_weights(lora_file)
    with h5py.File(lora_file, "r") as file:
        indices = sorted(int(key) for key in file["lora"] if key.isdigit())
    layers = [
        layer
        for layer in lm.backbone._flatten_layers(include_self=False)
        if layer.weights
    ]
    adapted = [
        i
        for i, layer in enumerate(layers)
        if getattr(layer, "lora_enabled", False)
    ]
    assert indices == adapted and adapted
    assert {layers[i].name for i in indices} == {"key"}
