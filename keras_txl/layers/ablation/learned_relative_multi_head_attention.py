import math

import keras
from keras import ops

from keras_txl.layers.relative_multi_head_attention import (
    RelativeMultiHeadAttention,
)
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int


@keras.saving.register_keras_serializable(package="keras_txl")
class LearnedRelativeMultiHeadAttention(RelativeMultiHeadAttention):
    """Multi-head attention over a memory with learned, clipped relative
    positions (Shaw et al., 2018), or with no position terms at all.

    An ablation baseline of Transformer-XL (Dai et al., 2019, Table 6): the
    attention that `AblationTransformerXLBackbone(position_encoding=
    "learned_relative")` and `position_encoding="absolute"` use instead of
    `RelativeMultiHeadAttention`. Queries come from the current segment;
    keys and values from `concat(memory, segment)`. With `max_distance=D`
    the score of query `i` and key `j` is

        q_i . (k_j + a^K_{min(i - j, D)}),   scaled by 1/sqrt(head_dim)

    and the output adds `sum_j p_ij a^V_{min(i - j, D)}` to the attended
    values (`value_embeddings=True`, as Shaw et al.). `a^K` and `a^V` are
    learned tables of `D + 1` rows of size `head_dim`, shared by the heads
    (as Shaw et al.): every distance beyond `D` uses row `D`, so a model
    cannot tell keys apart by a distance it never saw beyond `D`.

    With `max_distance=None` there are no position terms: plain scaled
    dot-product attention (Vaswani et al., 2017), for a model that adds
    absolute position encodings to its embeddings.

    A `RelativeMultiHeadAttention` with other position terms: it overrides
    that layer's one extension point, `_compute_attention` (and the
    weights it reads, `_build_position_weights`), and shares its
    projections, masks (causal, empty memory slots, `same_length`, an
    optional `attention_mask`), float32 softmax and dropout.

    Args:
        num_heads: int. Number of attention heads.
        head_dim: int. Size of each head's queries, keys and values.
        max_distance: int >= 0 or `None`. Largest distance with its own
            learned embedding (Shaw et al.'s clipping distance `k`); `None`
            for no position terms.
        value_embeddings: bool. Also add the learned distance embeddings to
            the values (only with `max_distance`).
        output_dim: int or `None`. Width of the output; `None` uses the
            width of the query.
        dropout: float in [0, 1). Dropout on the attention probabilities.
        same_length: False, True or `"tensorflow"`. Every query attends to
            the same number of keys (see `RelativeMultiHeadAttention`).
        kernel_initializer: initializer of the projections.
        embeddings_initializer: initializer of the distance embeddings.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        query: tensor of shape `(batch, T, dim)`: the current segment.
        position_embedding: ignored (`None` is fine); here so that the
            layer is called like `RelativeMultiHeadAttention`.
        memory: optional tensor of shape `(batch, M, dim)`.
        memory_valid_length: optional int tensor of shape `(batch,)`: the
            number of valid memory slots, the last ones. `None`: all valid.
        attention_mask: optional boolean tensor of shape `(batch, T, M + T)`;
            False entries are masked.
        use_causal_mask: bool, default True.
        return_attention_scores: bool. Also return the probabilities.
        training: bool. Dropout is active only when True.

    Returns:
        A tensor of shape `(batch, T, output_dim)`, and the probabilities of
        shape `(batch, heads, T, M + T)` when `return_attention_scores`.

    Example:

    >>> import numpy as np
    >>> x = np.random.rand(2, 4, 16).astype("float32")
    >>> memory = np.random.rand(2, 6, 16).astype("float32")
    >>> attention = LearnedRelativeMultiHeadAttention(
    ...     num_heads=2, head_dim=8, max_distance=5
    ... )
    >>> tuple(attention(x, None, memory=memory).shape)
    (2, 4, 16)
    """

    def __init__(
        self,
        num_heads,
        head_dim,
        max_distance,
        value_embeddings=True,
        output_dim=None,
        dropout=0.0,
        same_length=False,
        kernel_initializer="glorot_uniform",
        embeddings_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(
            num_heads=num_heads,
            head_dim=head_dim,
            output_dim=output_dim,
            dropout=dropout,
            same_length=same_length,
            kernel_initializer=kernel_initializer,
            **kwargs,
        )
        self.max_distance = check_optional_positive_int(
            "max_distance", max_distance, allow_zero=True
        )
        self.value_embeddings = check_bool("value_embeddings", value_embeddings)
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
        )

    def _build_position_weights(self, position_dim):
        """The learned distance tables `a^K`, `a^V` (no `W_r`, `u`, `v`)."""
        if self.max_distance is None:
            return
        rows = (self.max_distance + 1, self.head_dim)
        self.key_distance_embeddings = self.add_weight(
            name="key_distance_embeddings",
            shape=rows,
            initializer=self.embeddings_initializer,
        )
        if self.value_embeddings:
            self.value_distance_embeddings = self.add_weight(
                name="value_distance_embeddings",
                shape=rows,
                initializer=self.embeddings_initializer,
            )

    def _distance_one_hot(self, query_length, key_length):
        """(T, K, D + 1) one-hot of the clipped distance of each pair."""
        memory_length = key_length - query_length
        i = ops.arange(query_length, dtype="int32")[:, None]  # (T, 1)
        j = ops.arange(key_length, dtype="int32")[None, :]  # (1, K)
        distance = ops.clip(i + memory_length - j, 0, self.max_distance)
        return ops.one_hot(
            distance, self.max_distance + 1, dtype=self.compute_dtype
        )  # (T, K, D + 1)

    def _compute_attention(
        self,
        query,
        key,
        value,
        allowed,
        position_embedding=None,
        position_keys=None,
        training=None,
    ):
        """Shaw et al.'s scores and values (see
        `RelativeMultiHeadAttention._compute_attention`); the position
        arguments are not read."""
        scores = ops.cast(
            ops.matmul(query, ops.swapaxes(key, -1, -2)), "float32"
        )  # (heads, batch, T, K)
        if self.max_distance is not None:
            one_hot = self._distance_one_hot(
                ops.shape(query)[2], ops.shape(key)[2]
            )  # (T, K, D + 1)
            table = ops.cast(self.key_distance_embeddings, query.dtype)
            by_distance = ops.einsum(
                "nbqh,dh->nbqd", query, table
            )  # (heads, batch, T, D + 1)
            position_scores = ops.einsum(
                "nbqd,qkd->nbqk", by_distance, one_hot
            )  # (heads, batch, T, K)
            scores = scores + ops.cast(position_scores, "float32")
        scores = scores * (1.0 / math.sqrt(self.head_dim))
        probs, dropped = self._probabilities(scores, allowed, training)
        attended = ops.matmul(dropped, value)  # (heads, batch, T, head_dim)
        if self.max_distance is not None and self.value_embeddings:
            weight_by_distance = ops.einsum(
                "nbqk,qkd->nbqd", dropped, one_hot
            )  # (heads, batch, T, D + 1)
            table = ops.cast(self.value_distance_embeddings, query.dtype)
            attended = attended + ops.einsum(
                "nbqd,dh->nbqh", weight_by_distance, table
            )  # (heads, batch, T, head_dim)
        return attended, probs

    def get_config(self):
        config = super().get_config()
        del config["bias_initializer"]  # no `u`, `v` here
        config.update(
            {
                "max_distance": self.max_distance,
                "value_embeddings": self.value_embeddings,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
