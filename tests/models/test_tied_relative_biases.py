"""`tie_relative_biases=True`: one `u`, `v` pair for all layers, as the
authors' PyTorch `MemTransformerLM` has it (`r_w_bias`, `r_r_bias`).

The pair is layer 0's; the other layers read it. It must stay one pair
through `get_config`, a `.keras` file, `quantize`, and training: its
gradient is the sum of what per-layer copies of it would get.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.models import TransformerXLBackbone
from tests.test_case import to_numpy
from tests.test_case import variable_gradients
from tests.tiny_models import random_ids
from tests.tiny_models import tiny_lm

SIZES = dict(num_layers=3, initializer_range=0.3, build=True)


def _bias_weights(model):
    """The `content_bias`/`position_bias` variables, each counted once."""
    return [
        w
        for w in model.weights
        if w.path.endswith(("content_bias", "position_bias"))
    ]


def _distinct_pairs(backbone):
    return {
        (id(b.attention.content_bias), id(b.attention.position_bias))
        for b in backbone.transformer_layers
    }


def test_one_pair_for_all_layers_and_config_round_trip():
    lm = tiny_lm(tie_relative_biases=True, **SIZES)
    backbone = lm.backbone
    assert len(_bias_weights(lm)) == 2  # untied: 2 * num_layers
    assert len(_distinct_pairs(backbone)) == 1
    untied = tiny_lm(**SIZES)
    assert len(_bias_weights(untied)) == 6
    assert lm.count_params() == untied.count_params() - 2 * 2 * 2 * 4
    config = backbone.get_config()
    assert config["tie_relative_biases"] is True
    rebuilt = TransformerXLBackbone.from_config(config)
    rebuilt.build(None)
    assert len(_distinct_pairs(rebuilt)) == 1
    # A config saved before the option existed loads untied.
    del config["tie_relative_biases"]
    old = TransformerXLBackbone.from_config(config)
    old.build(None)
    assert len(_distinct_pairs(old)) == 3


def test_tie_relative_biases_must_be_a_bool():
    with pytest.raises(ValueError, match="tie_relative_biases"):
        tiny_lm(tie_relative_biases="yes")


def test_keras_file_keeps_one_pair(tmp_path):
    lm = tiny_lm(tie_relative_biases=True, **SIZES)
    first = lm.backbone.transformer_layers[0].attention
    first.content_bias.assign(np.full((2, 4), 0.7, "float32"))
    tokens = random_ids((2, 5), 0)
    expected, _ = lm.call_with_memory(tokens)
    path = tmp_path / "tied.keras"
    lm.save(path)
    restored = keras.saving.load_model(path)
    assert restored.backbone.tie_relative_biases is True
    assert len(_bias_weights(restored)) == 2
    assert len(_distinct_pairs(restored.backbone)) == 1
    last = restored.backbone.transformer_layers[-1].attention
    np.testing.assert_array_equal(to_numpy(last.content_bias), np.float32(0.7))
    got, _ = restored.call_with_memory(tokens)
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), atol=1e-6)


def test_quantize_keeps_one_pair():
    lm = tiny_lm(tie_relative_biases=True, **SIZES)
    lm.quantize("int8")
    assert len(_bias_weights(lm)) == 2
    assert len(_distinct_pairs(lm.backbone)) == 1
    tokens = random_ids((2, 5), 1)
    before, _ = lm.call_with_memory(tokens)
    # One assignment moves every layer's u: the layers still share it.
    u = lm.backbone.transformer_layers[0].attention.content_bias
    u.assign(u + 1.0)
    after, _ = lm.call_with_memory(tokens)
    assert np.abs(to_numpy(after) - to_numpy(before)).max() > 1e-3


def _loss_fn(lm, tokens):
    def loss():
        memory = None
        total = 0.0
        for s in range(2):  # memory carried: the second segment sees it
            segment = tokens[:, s * 4 : (s + 1) * 4]
            logits, memory = lm.call_with_memory(segment, memory)
            targets = tokens[:, s * 4 + 1 : (s + 1) * 4 + 1]
            total = total + ops.mean(
                keras.losses.sparse_categorical_crossentropy(
                    targets, logits, from_logits=True
                )
            )
        return total

    return loss


@pytest.mark.torch_ok
def test_shared_gradient_is_the_sum_of_per_layer_gradients():
    tied = tiny_lm(tie_relative_biases=True, **SIZES)
    untied = tiny_lm(**SIZES)
    # The untied model gets the tied one's weights: layer 0's pair in
    # every layer, so both compute the same function.
    u0 = to_numpy(tied.backbone.transformer_layers[0].attention.content_bias)
    v0 = to_numpy(tied.backbone.transformer_layers[0].attention.position_bias)
    shared = {id(w) for w in _bias_weights(tied)}
    values = [to_numpy(w) for w in tied.weights if id(w) not in shared]
    rest = [
        w
        for w in untied.weights
        if id(w) not in set(id(b) for b in _bias_weights(untied))
    ]
    assert [w.shape for w in rest] == [v.shape for v in values]
    for w, value in zip(rest, values):
        w.assign(value)
    for block in untied.backbone.transformer_layers:
        block.attention.content_bias.assign(u0)
        block.attention.position_bias.assign(v0)
    tokens = random_ids((2, 9), 2)

    tied_u = tied.backbone.transformer_layers[0].attention
    grads = variable_gradients(
        _loss_fn(tied, tokens), [tied_u.content_bias, tied_u.position_bias]
    )
    per_layer = [
        (b.attention.content_bias, b.attention.position_bias)
        for b in untied.backbone.transformer_layers
    ]
    untied_grads = variable_gradients(
        _loss_fn(untied, tokens), [w for pair in per_layer for w in pair]
    )
    sum_u = sum(untied_grads[0::2])
    sum_v = sum(untied_grads[1::2])
    # Each layer's own gradient is far from the sum: the check bites.
    assert np.abs(untied_grads[0] - sum_u).max() > 1e-4
    np.testing.assert_allclose(grads[0], sum_u, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(grads[1], sum_v, rtol=1e-5, atol=1e-7)
