"""The loss of `TransformerXLCausalLM`: the compiled loss, or with an
adaptive softmax and the default loss the per-cluster negative
log-likelihood of the hidden states, and NaN for token ids out of the
vocabulary."""

import keras
from keras import ops

from keras_txl.utils.validation import check_token_ids
from keras_txl.utils.validation import in_vocabulary
from keras_txl.utils.validation import is_concrete


def trains_on_clusters(loss, y):
    """Whether `loss` (the compiled one) is the default cross-entropy that
    an adaptive softmax computes per cluster from the hidden states: a
    `SparseCategoricalCrossentropy(from_logits=True)` without
    `ignore_class`, with targets."""
    return (
        y is not None
        and isinstance(loss, keras.losses.SparseCategoricalCrossentropy)
        and loss.from_logits
        and loss.ignore_class is None
    )


def cluster_loss(model, hidden_states, y, sample_weight):
    """The compiled loss's reduction (sample weights, masks,
    distribution) of the adaptive softmax's per-cluster NLL of the
    targets `y` from `hidden_states`, plus the model's `add_loss` losses.
    """
    nll = model.adaptive_softmax(hidden_states, y)  # (batch, T)
    total = _PerTokenLoss(reduction=model.loss.reduction, name="nll")(
        y, nll, sample_weight
    )
    for extra in model.losses:
        total = total + model._aggregate_additional_loss(extra)
    return total


def nan_out_of_vocabulary(loss, x, y, vocabulary_size):
    """`loss`, or NaN when traced token ids `x` or targets `y` lie outside
    the vocabulary; concrete ones (eager steps, as on torch) raise a clear
    error instead."""
    ok = None
    for name, ids in (("x", x), ("y", y)):
        if ids is None or isinstance(ids, dict) or len(ids.shape) != 2:
            continue
        if is_concrete(ids):  # eager steps (torch): a clear error now
            check_token_ids(ids, vocabulary_size, name)
            continue
        # Out-of-range targets would score 0 (JAX) or zeros (TF GPU),
        # and out-of-range ids were looked up as id 0 by `call`.
        in_range = ops.all(in_vocabulary(ids, vocabulary_size))
        ok = in_range if ok is None else ops.logical_and(ok, in_range)
    if ok is None:
        return loss
    return ops.where(ok, loss, float("nan"))


class _PerTokenLoss(keras.losses.Loss):
    """Reduces per-token losses given as `y_pred` like a compiled loss."""

    def call(self, y_true, y_pred):
        return y_pred
