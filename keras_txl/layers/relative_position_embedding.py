import keras
from keras import ops

from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_txl")
class RelativePositionEmbedding(keras.layers.Layer):
    """Sinusoidal embeddings of relative distances (Transformer-XL, eq. 3).

    For a query block of length `T` that attends to `M` memory slots and to
    itself, keys span `K = M + T` positions. This layer returns the
    embeddings of the distances `K - 1, K - 2, ..., 0`, in that order, which
    is the layout `RelativeMultiHeadAttention` expects: row `k` holds the
    distance `K - 1 - k`. Each row is `[sin(d * f), cos(d * f)]` with the
    frequencies `f_i = 1 / 10000^(2i / hidden_dim)` of Vaswani et al.

    The layer has no weights. It reads only the shapes of its inputs.

    Args:
        hidden_dim: int. Width of the embeddings. Must be even.
        clamp_length: int or `None`. Distances above `clamp_length` use the
            embedding of `clamp_length` (the authors' `clamp_len`). `None`
            keeps every distance.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`
            (`name`, `dtype`, ...).

    Call arguments:
        inputs: tensor of shape `(batch, T, ...)`: the current segment.
        memory: optional tensor of shape `(batch, M, ...)`: the memory
            that the segment attends to. `None` means `M = 0`.

    Returns:
        A tensor of shape `(M + T, hidden_dim)`.

    Example:

    >>> import numpy as np
    >>> layer = RelativePositionEmbedding(hidden_dim=8, clamp_length=4)
    >>> x = np.zeros((2, 3, 8), "float32")
    >>> memory = np.zeros((2, 5, 8), "float32")
    >>> tuple(layer(x, memory).shape)
    (8, 8)
    """

    def __init__(self, hidden_dim, clamp_length=None, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        if self.hidden_dim % 2:
            raise ValueError(
                "`hidden_dim` must be even (half sine, half cosine). "
                f"Received: hidden_dim={hidden_dim}"
            )
        self.clamp_length = check_optional_positive_int(
            "clamp_length", clamp_length
        )
        self.built = True

    def call(self, inputs, memory=None):
        key_length = ops.shape(inputs)[1]
        if memory is not None:
            key_length = key_length + ops.shape(memory)[1]
        # Distances K-1 ... 0, computed in float32 whatever the policy.
        distance = ops.arange(key_length - 1, -1, -1, dtype="float32")  # (K,)
        if self.clamp_length is not None:
            distance = ops.minimum(distance, float(self.clamp_length))
        exponent = ops.arange(0, self.hidden_dim, 2, dtype="float32")
        inverse_frequency = 1.0 / ops.power(
            10000.0, exponent / float(self.hidden_dim)
        )  # (hidden_dim / 2,)
        angle = ops.einsum("k,f->kf", distance, inverse_frequency)  # (K, D/2)
        embedding = ops.concatenate([ops.sin(angle), ops.cos(angle)], axis=-1)
        return ops.cast(embedding, self.compute_dtype)  # (K, hidden_dim)

    def compute_output_shape(self, inputs_shape, memory_shape=None):
        key_length = inputs_shape[1]
        if memory_shape is not None:
            if key_length is None or memory_shape[1] is None:
                key_length = None
            else:
                key_length = key_length + memory_shape[1]
        return (key_length, self.hidden_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"hidden_dim": self.hidden_dim, "clamp_length": self.clamp_length}
        )
        return config
