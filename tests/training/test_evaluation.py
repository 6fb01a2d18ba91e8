"""Evaluation with another memory length than in training."""

import functools

import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.models import TransformerXLCausalLM
from keras_txl.training import evaluate_bpc
from keras_txl.training.evaluation import bits_per_token
from keras_txl.training.evaluation import per_token_losses
from keras_txl.training.evaluation import text_streams
from keras_txl_cli import artifacts
from tests.test_case import to_numpy
from tests.tiny_models import PLAIN_LM
from tests.tiny_models import tiny_lm
from tests.tiny_models import training_lm

from .helpers import explicit_loop
from .helpers import nll
from .helpers import ordered_arrays
from .helpers import ordered_dataset
from .helpers import periodic_ids

_lm = functools.partial(tiny_lm, **PLAIN_LM)

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
    lm.output_projection.output_bias.assign(
        lm.output_projection.output_bias.value + 1.0
    )
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


def _token_nll(logits, targets):
    logprobs = to_numpy(ops.log_softmax(logits, axis=-1))
    return -np.take_along_axis(logprobs, targets[..., None], -1)[..., 0]


def test_per_token_losses_follow_the_streams_with_memory():
    lm = _lm()
    ids = np.random.default_rng(0).integers(0, 20, 41).astype("int32")
    streams = text_streams(ids, 2)
    # The authors' layout: 2 streams of 20 ids.
    np.testing.assert_array_equal(streams, ids[:40].reshape(2, 20))
    got = per_token_losses(lm, streams[:, :16], 5, memory_length=3)
    # By hand: 3 segments of 5.
    memory = lm.backbone.initial_memory(2, memory_length=3)
    expected = []
    for start in range(0, 15, 5):
        logits, memory = lm.call_with_memory(
            streams[:, start : start + 5], memory
        )
        expected.append(_token_nll(logits, streams[:, start + 1 : start + 6]))
    np.testing.assert_allclose(got, np.concatenate(expected, 1), atol=1e-5)
    assert bits_per_token(got) == pytest.approx(np.mean(got) / np.log(2.0))
