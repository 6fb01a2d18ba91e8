import keras
from keras import ops

from keras_txl.metrics.bits_per_character import token_nll_sum
from keras_txl.utils.validation import check_bool


@keras.saving.register_keras_serializable(package="keras_txl")
class BatchCrossEntropy(keras.metrics.Metric):
    """Cross-entropy of the most recent batch only, in nats per token.

    Keras logs `loss` as the running mean over the epoch so far; a training
    curve needs the loss of each step. This metric forgets everything but
    the last batch: `result()` is the mean negative log-likelihood of the
    tokens of the last `update_state` call, the same number as the loss of
    that step when the loss is `SparseCategoricalCrossentropy`.

    Args:
        from_logits: bool. Whether `y_pred` holds logits.
        name: string. Name of the metric (the key in the logs).
        dtype: dtype of the state. Defaults to `"float32"`.

    Call arguments (of `update_state`):
        y_true: int tensor `(batch, T)`.
        y_pred: float tensor `(batch, T, vocabulary_size)`.
        sample_weight: optional float tensor `(batch, T)`.

    Returns:
        `result()`: a float32 scalar.

    Example:

    >>> import numpy as np
    >>> metric = BatchCrossEntropy()
    >>> metric.update_state(np.array([[0]]), np.zeros((1, 1, 2), "float32"))
    >>> metric.update_state(np.array([[0]]), np.array([[[9.0, -9.0]]]))
    >>> round(float(metric.result()), 6)  # only the last batch counts
    0.0
    """

    def __init__(
        self, from_logits=True, name="batch_loss", dtype=None, **kwargs
    ):
        super().__init__(name=name, dtype=dtype or "float32", **kwargs)
        self.from_logits = check_bool("from_logits", from_logits)
        self.last_value = self.add_variable(
            shape=(),
            initializer="zeros",
            dtype=self.dtype,
            aggregation="mean",
            name="last_value",
        )

    def update_state(self, y_true, y_pred, sample_weight=None):
        total, count = token_nll_sum(
            y_true, y_pred, sample_weight, self.from_logits, self.dtype
        )
        self.last_value.assign(total / ops.maximum(count, 1e-12))

    def result(self):
        return ops.convert_to_tensor(self.last_value)

    def reset_state(self):
        self.last_value.assign(0.0)

    def get_config(self):
        config = super().get_config()
        config.update({"from_logits": self.from_logits})
        return config
