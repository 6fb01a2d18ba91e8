"""RECL on synthetic loss curves, checked against hand-computed answers
(Dai et al., 2019, appendix C)."""

import functools
import math

import numpy as np
import pytest
from keras import ops

from keras_txl.ablation import relative_effective_context_length
from keras_txl.ablation.recl import context_losses
from keras_txl.ablation.recl import relative_gain
from keras_txl.ablation.recl import relative_gains
from tests.test_case import to_numpy
from tests.tiny_models import PLAIN_LM
from tests.tiny_models import tiny_lm

_lm = functools.partial(tiny_lm, **PLAIN_LM)


def _curves(**models):
    return {
        name: {c: np.array(v, "float64") for c, v in curves.items()}
        for name, curves in models.items()
    }


# Four tokens, contexts 10, 20, 30, 40. "long" keeps improving until 30;
# "short" never improves; "bad" is worse everywhere.
GROUP = _curves(
    long={
        10: [3.0, 2.0, 1.0, 1.0],
        20: [2.0, 1.0, 1.0, 1.0],
        30: [1.5, 1.0, 1.0, 1.0],
        40: [1.5, 1.0, 1.0, 1.0],
    },
    short={c: [2.5, 3.0, 1.0, 1.0] for c in (10, 20, 30, 40)},
    bad={c: [4.0, 4.0, 4.0, 4.0] for c in (10, 20, 30, 40)},
)


def test_relative_gain_by_hand():
    # Baseline at c = 10: min over models = [2.5, 2, 1, 1]. With r = 0.5
    # the 2 hardest tokens (0 and 1) count: f(10, 10) = (2.5 + 2) / 2.
    # "long" at 20: min([2.5, 2], [2, 1]) = [2, 1], f = 1.5.
    assert relative_gain(GROUP, "long", 10, 20, 0.5) == pytest.approx(
        1 - math.exp(1.5 - 2.25)
    )
    # "short" at 20 is no better than the baseline on those tokens.
    assert relative_gain(GROUP, "short", 10, 20, 0.5) == 0.0
    # r = 1: all tokens; f(10, 10) = 1.625, "long" at 20 gives 1.25.
    assert relative_gain(GROUP, "long", 10, 20, 1.0) == pytest.approx(
        1 - math.exp(1.25 - 1.625)
    )


def test_recl_by_hand():
    # "long": gains 0.528 (10 -> 20), 0.221 (20 -> 30, baseline [2, 1]
    # on tokens 0 and 1), 0 (30 -> 40): RECL 30. The others gain nothing.
    assert relative_effective_context_length(GROUP, ratio=0.5) == {
        "long": 30,
        "short": 10,
        "bad": 10,
    }


def test_the_ratio_picks_the_hard_tokens():
    # 20 -> 30 gains 1 - exp(-0.25) = 0.221 on the hardest half but only
    # 1 - exp(-0.125) = 0.118 on all tokens: a threshold of 0.15 keeps
    # the step for r = 0.5 and stops it for r = 1.
    gains = relative_gains(GROUP, 1.0)["long"]
    assert gains[1][:2] == (20, 30)
    assert gains[1][2] == pytest.approx(1 - math.exp(-0.125))
    assert relative_effective_context_length(GROUP, 0.5, 0.15)["long"] == 30
    assert relative_effective_context_length(GROUP, 1.0, 0.15)["long"] == 20


def test_the_baseline_is_shared_by_the_group():
    # A model that reaches at context 10 what "long" reaches at 30 moves
    # the baseline: "long" then gains nothing over it.
    better = _curves(best={c: [1.5, 1.0, 1.0, 1.0] for c in (10, 20, 30, 40)})
    group = dict(GROUP, **better)
    assert relative_effective_context_length(group, 0.5)["long"] == 10


def test_still_gaining_at_the_longest_context_gives_the_longest():
    steady = _curves(only={10: [4.0], 20: [3.0], 30: [2.0], 40: [1.0]})
    assert relative_effective_context_length(steady, 1.0) == {"only": 40}


@pytest.mark.parametrize(
    "losses, ratio, match",
    [
        ({}, 0.1, "non-empty"),
        (_curves(a={10: [1.0]}, b={20: [1.0]}), 0.1, "same context"),
        (_curves(a={10: [1.0]}, b={10: [1.0, 2.0]}), 0.1, "same tokens"),
        (_curves(a={10: [1.0]}), 0.0, "ratio"),
        (_curves(a={10: [1.0]}), 1.5, "ratio"),
    ],
)
def test_invalid_inputs(losses, ratio, match):
    with pytest.raises(ValueError, match=match):
        relative_effective_context_length(losses, ratio)


def _nll(logits, targets):
    logprobs = to_numpy(ops.log_softmax(logits, axis=-1))
    return -np.take_along_axis(logprobs, targets[..., None], -1)[..., 0]


def test_context_losses_see_exactly_c_tokens():
    """With one layer, the loss at context c of a token equals the loss of
    the last position of a pass over just the c tokens before it."""
    lm = _lm(num_layers=1)
    ids = np.random.default_rng(1).integers(0, 20, 31).astype("int32")
    losses = context_losses(
        lm, ids, context_lengths=[2, 5], batch_size=1, segment_length=3
    )
    # One stream of 30 inputs; the first 5 (the longest context) are left
    # out, so entry n is the prediction of ids[n + 6] from ids[..n + 5].
    for c in (2, 5):
        assert losses[c].shape == (25,)
        for n in (0, 11, 24):
            window = ids[None, n + 6 - c : n + 6]
            logits, _ = lm.call_with_memory(
                window, lm.backbone.initial_memory(1, memory_length=0)
            )
            expected = _nll(logits[:, -1:], ids[None, n + 6 : n + 7])[0, 0]
            np.testing.assert_allclose(losses[c][n], expected, atol=1e-5)


def test_compare_contexts_is_recl_of_the_context_losses():
    from keras_txl.ablation import compare_contexts
    from keras_txl.training.evaluation import bits_per_token

    models = {"one": _lm(num_layers=1), "two": _lm(num_layers=1, seed=3)}
    ids = np.random.default_rng(2).integers(0, 20, 41).astype("int32")
    found = compare_contexts(
        models, ids, 4, contexts=[2, 4], ratios=[0.5, 1.0], batch_size=2
    )
    losses = {
        name: context_losses(lm, ids, [2, 4], 2, 4)
        for name, lm in models.items()
    }
    assert found["contexts"] == [2, 4]
    assert found["threshold"] == 0.01
    assert found["recl"] == {
        "0.5": relative_effective_context_length(losses, 0.5),
        "1.0": relative_effective_context_length(losses, 1.0),
    }
    for name in models:
        for c in (2, 4):
            assert found["bpc_by_context"][name][str(c)] == pytest.approx(
                bits_per_token(losses[name][c])
            )
