import math

import keras
from keras import ops

from keras_txl.layers.relative_multi_head_attention import _MASK_VALUE
from keras_txl.layers.relative_multi_head_attention import attention_allowed
from keras_txl.layers.relative_multi_head_attention import check_same_length
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int
from keras_txl.utils.validation import check_rate


@keras.saving.register_keras_serializable(package="keras_txl")
class LearnedRelativeMultiHeadAttention(keras.layers.Layer):
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

    Masks are those of `RelativeMultiHeadAttention`: causal (query `i` sits
    at key position `M + i`), empty memory slots (`memory_valid_length`,
    valid slots last), `same_length` and an optional `attention_mask`.
    Masking and softmax run in float32.

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
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.max_distance = check_optional_positive_int(
            "max_distance", max_distance, allow_zero=True
        )
        self.value_embeddings = check_bool("value_embeddings", value_embeddings)
        self.output_dim = check_optional_positive_int("output_dim", output_dim)
        self.dropout = check_rate("dropout", dropout)
        self.same_length = check_same_length(same_length)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
        )

    def build(self, query_shape, position_embedding_shape=None, *args, **kw):
        query_dim = query_shape[-1]
        output_dim = self.output_dim or query_dim
        heads, head_dim = self.num_heads, self.head_dim

        def dense(name, equation, output_shape, input_shape):
            layer = keras.layers.EinsumDense(
                equation,
                output_shape=output_shape,
                kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build(input_shape)
            return layer

        projection = ("btd,dnh->btnh", (None, heads, head_dim))
        self.query_dense = dense("query", *projection, (None, None, query_dim))
        self.key_dense = dense("key", *projection, (None, None, query_dim))
        self.value_dense = dense("value", *projection, (None, None, query_dim))
        self.output_dense = dense(
            "attention_output",
            "btnh,nhd->btd",
            (None, output_dim),
            (None, None, heads, head_dim),
        )
        if self.max_distance is not None:
            rows = (self.max_distance + 1, head_dim)
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
        self.dropout_layer = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy
        )
        self.built = True

    def _mask(self, query_length, key_length, valid_length, user_mask, causal):
        """Boolean mask (batch or 1, 1, T, K); True = attend."""
        return attention_allowed(
            query_length,
            key_length,
            valid_length,
            user_mask,
            causal,
            self.same_length,
        )[:, None]  # (batch or 1, 1, T, K)

    def _distance_one_hot(self, query_length, key_length):
        """(T, K, D + 1) one-hot of the clipped distance of each pair."""
        memory_length = key_length - query_length
        i = ops.arange(query_length, dtype="int32")[:, None]  # (T, 1)
        j = ops.arange(key_length, dtype="int32")[None, :]  # (1, K)
        distance = ops.clip(i + memory_length - j, 0, self.max_distance)
        return ops.one_hot(
            distance, self.max_distance + 1, dtype=self.compute_dtype
        )  # (T, K, D + 1)

    def call(
        self,
        query,
        position_embedding=None,
        memory=None,
        memory_valid_length=None,
        attention_mask=None,
        use_causal_mask=True,
        return_attention_scores=False,
        training=None,
    ):
        query = ops.cast(query, self.compute_dtype)
        if memory is None:
            context = query
        else:
            memory = ops.cast(memory, self.compute_dtype)
            context = ops.concatenate([memory, query], axis=1)  # (b, K, d)
        query_length = ops.shape(query)[1]
        key_length = ops.shape(context)[1]

        q = self.query_dense(query)  # (batch, T, heads, head_dim)
        k = self.key_dense(context)  # (batch, K, heads, head_dim)
        v = self.value_dense(context)  # (batch, K, heads, head_dim)
        scores = ops.cast(
            ops.einsum("bqnh,bknh->bnqk", q, k), "float32"
        )  # (batch, heads, T, K)
        if self.max_distance is not None:
            one_hot = self._distance_one_hot(query_length, key_length)
            table = ops.cast(self.key_distance_embeddings, q.dtype)
            by_distance = ops.einsum(
                "bqnh,dh->bnqd", q, table
            )  # (batch, heads, T, D + 1)
            position_scores = ops.einsum(
                "bnqd,qkd->bnqk", by_distance, one_hot
            )  # (batch, heads, T, K)
            scores = scores + ops.cast(position_scores, "float32")
        scores = scores * (1.0 / math.sqrt(self.head_dim))
        allowed = self._mask(
            query_length,
            key_length,
            memory_valid_length,
            attention_mask,
            use_causal_mask,
        )  # (batch or 1, 1, T, K)
        scores = ops.where(allowed, scores, _MASK_VALUE)
        probs = ops.softmax(scores, axis=-1)  # (batch, heads, T, K), float32
        probs = ops.cast(probs, self.compute_dtype)
        dropped = self.dropout_layer(probs, training=training)

        attended = ops.einsum(
            "bnqk,bknh->bqnh", dropped, v
        )  # (batch, T, heads, head_dim)
        if self.max_distance is not None and self.value_embeddings:
            weight_by_distance = ops.einsum(
                "bnqk,qkd->bnqd", dropped, one_hot
            )  # (batch, heads, T, D + 1)
            table = ops.cast(self.value_distance_embeddings, q.dtype)
            attended = attended + ops.einsum(
                "bnqd,dh->bqnh", weight_by_distance, table
            )  # (batch, T, heads, head_dim)
        output = self.output_dense(attended)  # (batch, T, output_dim)
        if return_attention_scores:
            return output, probs
        return output

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "head_dim": self.head_dim,
                "max_distance": self.max_distance,
                "value_embeddings": self.value_embeddings,
                "output_dim": self.output_dim,
                "dropout": self.dropout,
                "same_length": self.same_length,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
