"""Bits per character, perplexity and the last batch's loss against values
computed by hand, weighted by tokens."""

import math

import keras
import keras_hub
import numpy as np
import pytest

from keras_txl.metrics import BatchCrossEntropy
from keras_txl.metrics import BitsPerCharacter


def _batches():
    # Two batches of different numbers of tokens (2 x 3 and 1 x 1), with
    # probabilities chosen by hand.
    p1 = np.array([[0.5, 0.25, 0.125], [1.0, 0.5, 0.25]])
    p2 = np.array([[0.0625]])
    return [_as_logits(p1), _as_logits(p2)]


def _as_logits(probabilities):
    # Logits over 2 classes whose softmax gives `probabilities` to class 0.
    p = np.clip(probabilities, 1e-7, 1 - 1e-7)
    logits = np.stack([np.log(p), np.log(1 - p)], axis=-1)
    targets = np.zeros(probabilities.shape, "int32")
    return targets, logits.astype("float32"), probabilities


def _nll_sum(probabilities):
    return -np.log(np.clip(probabilities, 1e-7, 1.0)).sum()


@pytest.mark.torch_ok
def test_bits_per_character_weights_tokens_not_batches():
    metric = BitsPerCharacter()
    assert float(metric.result()) == 0.0
    total, count = 0.0, 0
    for targets, logits, probabilities in _batches():
        metric.update_state(targets, logits)
        total += _nll_sum(probabilities)
        count += probabilities.size
    # Hand value: bits of 0.5, 0.25, 0.125, 1, 0.5, 0.25, 0.0625 = 13 / 7.
    assert total / count / math.log(2) == pytest.approx(13 / 7, rel=1e-6)
    assert float(metric.result()) == pytest.approx(13 / 7, rel=1e-5)
    metric.reset_state()
    assert float(metric.result()) == 0.0


@pytest.mark.torch_ok
def test_bits_per_character_sample_weight_and_probabilities():
    targets, logits, probabilities = _batches()[0]
    weight = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 2.0]], "float32")
    metric = BitsPerCharacter()
    metric.update_state(targets, logits, sample_weight=weight)
    # (1 + 3 + 1 + 2 * 2) bits over 5 weighted tokens.
    assert float(metric.result()) == pytest.approx(9 / 5, rel=1e-5)
    probs = BitsPerCharacter(from_logits=False)
    probs.update_state(targets, keras.ops.softmax(logits))
    assert float(probs.result()) == pytest.approx(
        _nll_sum(probabilities) / 6 / math.log(2), rel=1e-5
    )
    config = metric.get_config()
    assert BitsPerCharacter.from_config(config).from_logits is True


@pytest.mark.torch_ok
def test_keras_hub_perplexity_is_weighted_by_tokens():
    # Used by `TransformerXLCausalLM.compile`: its sum-reduced cross-entropy
    # over `size(y_true)` tokens is exp(token-mean NLL), not a mean over
    # batches (which would give exp((3.5 + 4) / 2 * ln 2)).
    metric = keras_hub.metrics.Perplexity(from_logits=True)
    for targets, logits, _ in _batches():
        metric.update_state(targets, logits)
    assert float(metric.result()) == pytest.approx(2 ** (13 / 7), rel=1e-5)


@pytest.mark.torch_ok
def test_batch_cross_entropy_keeps_only_the_last_batch():
    metric = BatchCrossEntropy()
    first, second = _batches()
    metric.update_state(*first[:2])
    assert float(metric.result()) == pytest.approx(
        _nll_sum(first[2]) / 6, rel=1e-5
    )
    metric.update_state(*second[:2])
    assert float(metric.result()) == pytest.approx(4 * math.log(2), rel=1e-5)
    weight = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "float32")
    metric.update_state(*first[:2], sample_weight=weight)
    assert float(metric.result()) == pytest.approx(2 * math.log(2), rel=1e-5)
