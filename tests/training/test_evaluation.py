"""Evaluation with another memory length than in training."""

import keras
import numpy as np
import pytest

from keras_txl.app import artifacts
from keras_txl.models import TransformerXLCausalLM
from keras_txl.training import evaluate_bpc
from tests.tiny_models import training_lm

from .helpers import explicit_loop
from .helpers import nll
from .helpers import ordered_arrays
from .helpers import ordered_dataset
from .helpers import periodic_ids

V, T = 16, 8


@pytest.mark.torch_ok
def test_with_memory_length_shares_the_weights_not_the_memory():
    lm = training_lm(V, T)
    lm.compile()
    other = lm.with_memory_length(3 * T)
    assert other.memory_state.memory_length == 3 * T
    assert other.backbone is lm.backbone and other.compiled
    assert {id(v) for v in other.trainable_variables} == {
        id(v) for v in lm.trainable_variables
    }
    tokens = np.arange(2 * T, dtype="int32").reshape(2, T) % V
    before = keras.ops.convert_to_numpy(other.call_with_memory(tokens)[0])
    lm.output_bias.assign(lm.output_bias.value + 1.0)
    after = keras.ops.convert_to_numpy(other.call_with_memory(tokens)[0])
    np.testing.assert_allclose(after, before + 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="memory_length"):
        lm.with_memory_length(-1)


@pytest.mark.torch_ok
def test_evaluate_bpc_with_no_memory_and_a_longer_memory():
    # Batch size 3 here, the model never trained: any batch size works.
    lm = training_lm(V, T, initializer_range=0.5)
    ids = periodic_ids(2, 6, T, 4, V)
    inputs, targets = ordered_arrays(ids, 3, T)
    dataset = ordered_dataset(ids, 3, T)
    results = {}
    for memory_length in (0, 2 * T):
        result = evaluate_bpc(lm, dataset, memory_length)
        logits, _ = explicit_loop(lm, inputs, memory_length)
        expected = nll(logits, targets)
        assert result["memory_length"] == memory_length
        assert result["loss"] == pytest.approx(expected, abs=1e-5)
        assert result["bits_per_character"] == pytest.approx(
            expected / np.log(2), abs=1e-5
        )
        assert result["perplexity"] == pytest.approx(np.exp(expected))
        results[memory_length] = result["loss"]
    assert abs(results[0] - results[2 * T]) > 1e-3


@pytest.mark.torch_ok
def test_with_memory_length_of_an_adaptive_model_saves_and_loads(tmp_path):
    backbone = training_lm(40, T, cutoffs=[10, 25], div_val=2).backbone
    lm = TransformerXLCausalLM(
        backbone, tie_projections=False, tail_capacity=0.5
    )
    other = lm.with_memory_length(2 * T)
    assert other.adaptive_softmax is lm.adaptive_softmax
    assert (other.tie_projections, other.tail_capacity) == ([False] * 3, 0.5)
    # One output layer, the shared one: no unbuilt copy left behind.
    assert [layer.name for layer in other.layers].count("adaptive_softmax") == 1
    tokens = np.arange(2 * T, dtype="int32").reshape(2, T) % 40
    expected = keras.ops.convert_to_numpy(other.call_with_memory(tokens)[0])
    artifacts.save_model(lm, tmp_path)
    loaded = artifacts.load_model(tmp_path)
    got = keras.ops.convert_to_numpy(
        loaded.call_with_memory(tokens, lm.backbone.initial_memory(2, 2 * T))[0]
    )
    np.testing.assert_allclose(got, expected, atol=1e-5)
