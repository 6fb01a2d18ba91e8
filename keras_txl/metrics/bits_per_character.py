import math

import keras
from keras import ops

from keras_txl.utils.validation import check_bool


def token_nll_sum(y_true, y_pred, sample_weight, from_logits, dtype):
    """`(sum of w * nll, sum of w)` over the tokens of a batch, `w = 1`
    without `sample_weight`: the two numbers token-weighted metrics add."""
    nll = keras.losses.sparse_categorical_crossentropy(
        y_true, ops.cast(y_pred, "float32"), from_logits=from_logits
    )  # (batch, T)
    nll = ops.cast(nll, dtype)
    if sample_weight is None:
        return ops.sum(nll), ops.cast(ops.size(nll), dtype)
    weight = ops.broadcast_to(
        ops.cast(sample_weight, dtype), ops.shape(nll)
    )  # (batch, T)
    return ops.sum(nll * weight), ops.sum(weight)


@keras.saving.register_keras_serializable(package="keras_txl")
class BitsPerCharacter(keras.metrics.Metric):
    """Bits per character: the mean negative log-likelihood per token, in
    bits, weighted by tokens.

    The metric of character-level language modeling (enwik8, text8). Every
    token counts once: the result is `sum(nll) / (number_of_tokens *
    ln(2))` over all the batches seen since the last reset, so a batch with
    more (unmasked) tokens weighs more. With a byte or character tokenizer a
    token is a character (a byte for enwik8); with a word tokenizer the
    result is bits per word.

    `sample_weight` (e.g. a padding mask) multiplies each token's weight:
    the result is then `sum(w * nll) / (sum(w) * ln(2))`.

    Args:
        from_logits: bool. Whether `y_pred` holds logits (True, the output
            of `TransformerXLCausalLM`) or probabilities.
        name: string. Name of the metric.
        dtype: dtype of the accumulators. Defaults to `"float32"`.

    Call arguments (of `update_state`):
        y_true: int tensor `(batch, T)`: the target token ids.
        y_pred: float tensor `(batch, T, vocabulary_size)`.
        sample_weight: optional float tensor `(batch, T)`.

    Returns:
        `result()`: a float32 scalar, 0 before any token is seen.

    Example:

    >>> import numpy as np
    >>> metric = BitsPerCharacter()
    >>> logits = np.zeros((1, 2, 4), "float32")  # uniform over 4 tokens
    >>> metric.update_state(np.array([[1, 3]]), logits)
    >>> round(float(metric.result()), 4)  # log2(4) bits per token
    2.0
    """

    def __init__(
        self, from_logits=True, name="bits_per_character", dtype=None, **kwargs
    ):
        super().__init__(name=name, dtype=dtype or "float32", **kwargs)
        self.from_logits = check_bool("from_logits", from_logits)
        self.total_nll = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="total_nll"
        )
        self.token_count = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="token_count"
        )

    def update_state(self, y_true, y_pred, sample_weight=None):
        total, count = token_nll_sum(
            y_true, y_pred, sample_weight, self.from_logits, self.dtype
        )
        self.total_nll.assign_add(total)
        self.token_count.assign_add(count)

    def result(self):
        count = ops.convert_to_tensor(self.token_count)
        return ops.where(
            count > 0,
            self.total_nll / ops.maximum(count, 1e-12) / math.log(2.0),
            ops.zeros_like(count),
        )

    def reset_state(self):
        self.total_nll.assign(0.0)
        self.token_count.assign(0.0)

    def get_config(self):
        config = super().get_config()
        config.update({"from_logits": self.from_logits})
        return config
