import functools

import numpy as np
from keras import ops

from keras_txl.ablation import context_losses
from keras_txl.ablation import token_losses
from tests.test_case import to_numpy
from tests.tiny_models import PLAIN_LM
from tests.tiny_models import tiny_lm

_lm = functools.partial(tiny_lm, **PLAIN_LM)


def _nll(logits, targets):
    logprobs = to_numpy(ops.log_softmax(logits, axis=-1))
    return -np.take_along_axis(logprobs, targets[..., None], -1)[..., 0]


def test_token_losses_follow_the_streams_with_memory():
    lm = _lm()
    ids = np.random.default_rng(0).integers(0, 20, 41).astype("int32")
    got = token_losses(lm, ids, batch_size=2, segment_length=5, memory_length=3)
    # By hand: 2 streams of 20 ids, 3 segments of 5 (the authors' layout).
    streams = ids[:40].reshape(2, 20)
    memory = lm.backbone.initial_memory(2, memory_length=3)
    expected = []
    for start in range(0, 15, 5):
        logits, memory = lm.call_with_memory(
            streams[:, start : start + 5], memory
        )
        expected.append(_nll(logits, streams[:, start + 1 : start + 6]))
    np.testing.assert_allclose(got, np.concatenate(expected, 1), atol=1e-5)


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
