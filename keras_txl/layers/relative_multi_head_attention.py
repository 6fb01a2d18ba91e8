import math
import weakref

import keras
import numpy as np
from keras import ops

from keras_txl.layers.packed_dropout import PackedDropout
from keras_txl.utils.initializers import fresh_initializer
from keras_txl.utils.validation import check_positive_int
from keras_txl.utils.validation import check_rate
from keras_txl.utils.validation import dtype_name
from keras_txl.utils.validation import is_concrete

# Added to the scores of masked keys. Finite (not -inf) so that a row whose
# keys are all masked gives a uniform row, never NaN; applied in float32.
MASK_VALUE = -1e9


def relative_shift(scores):
    """Aligns position scores so that entry `(i, j)` uses distance `i - j`.

    `scores[..., i, k]` is the score of query `i` with the position
    embedding of row `k`, i.e. of distance `K - 1 - k` (the layout of
    `RelativePositionEmbedding`). With `T` queries placed at the end of `K`
    keys, query `i` sits at key position `K - T + i`; its distance to key
    `j` is `K - T + i - j`, found at row `k = T - 1 - i + j`. This returns
    `out[..., i, j] = scores[..., i, T - 1 - i + j]` wherever
    `j <= K - T + i` (the causal region). Entries above it hold other
    values and must be masked.

    The pad-and-reshape of Dai et al. (2019, appendix B): one zero column,
    two reshapes, one slice, and no gather. (`RelativeMultiHeadAttention`
    skips the pad: its matmul writes the zero column, see `_shift_padded`.)

    Args:
        scores: tensor of shape `(batch, heads, T, K)`.

    Returns:
        A tensor of the same shape.
    """
    key_length = ops.shape(scores)[-1]
    padded = ops.pad(scores, [[0, 0], [0, 0], [0, 0], [1, 0]])  # (b,h,T,K+1)
    return _shift_padded(padded, key_length)  # (b, h, T, K)


def _shift_padded(padded, key_length):
    """`relative_shift` of scores whose zero column is already in front.

    `padded[..., i, 0]` must be 0 and `padded[..., i, 1:]` the scores of
    `relative_shift`'s input, as a matmul with a zero row in front of the
    position embeddings produces them. This skips the pad of
    `relative_shift` (a copy of the whole score tensor): what is left is
    one slice of the flat scores. Any number of leading axes.

    Args:
        padded: tensor of shape `(..., T, K + 1)`.
        key_length: int `K`.

    Returns:
        A tensor of shape `(..., T, K)`.
    """
    shape = ops.shape(padded)
    leading, query_length = tuple(shape[:-2]), shape[-2]
    flat = ops.reshape(
        padded, (-1, query_length * (key_length + 1))
    )  # (rows, T * (K + 1)): the (K + 1, T) view of Dai et al., flat
    # Without its first row. `ops.slice`, not `flat[:, T:]`: TensorFlow's
    # gradient of a strided slice is several times slower than that of a
    # slice (a pad).
    flat = ops.slice(
        flat, (0, query_length), (ops.shape(flat)[0], query_length * key_length)
    )  # (rows, T * K)
    return ops.reshape(
        flat, leading + (query_length, key_length)
    )  # (..., T, K)


SAME_LENGTH_VALUES = (False, True, "tensorflow")


def check_same_length(same_length):
    """Checks `same_length`: False, True (the authors' PyTorch mask, also
    spelled `"pytorch"`) or `"tensorflow"` (their TensorFlow mask)."""
    if same_length == "pytorch":
        return True
    if isinstance(same_length, (bool, np.bool_)):
        return bool(same_length)
    if same_length == "tensorflow":
        return same_length
    raise ValueError(
        "`same_length` must be False, True (the mask of the authors' "
        'PyTorch code; also `"pytorch"`) or `"tensorflow"` (the mask '
        "of their TensorFlow code, one key more). Received: "
        f"same_length={same_length!r}"
    )


def attention_allowed(
    query_length, key_length, valid_length, user_mask, causal, same_length
):
    """Which keys each query may attend to, with the last `query_length`
    of the `key_length` keys being the segment and the first ones the
    memory (whose valid slots are its last `valid_length`).

    Returns a boolean tensor of shape (batch or 1, T, K); True = attend.
    Shared by the attention layers of this package.
    """
    memory_length = key_length - query_length
    i = ops.expand_dims(ops.arange(query_length, dtype="int32"), 1)  # (T, 1)
    j = ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)  # (1, K)
    allowed = ops.ones((query_length, key_length), dtype="bool")  # (T, K)
    if causal:
        allowed = ops.logical_and(allowed, j <= i + memory_length)
    if same_length == "tensorflow":
        # The query at key position M + i sees keys [i, M + i]: M + 1
        # keys (`_create_mask` of the authors' TensorFlow code).
        allowed = ops.logical_and(allowed, j >= i)
    elif same_length:
        # The query at key position M + i sees keys (i, M + i]: the M
        # keys that end at itself (the authors' PyTorch mask).
        allowed = ops.logical_and(allowed, j > i)
    allowed = allowed[None, :, :]  # (1, T, K)
    if valid_length is not None:
        valid = ops.cast(valid_length, "int32")[:, None]  # (b, 1)
        key_ok = j >= memory_length - valid  # (b, K)
        allowed = ops.logical_and(allowed, key_ok[:, None, :])  # (b, T, K)
    if user_mask is not None:
        user = ops.cast(user_mask, "bool")  # (b, T, K)
        allowed = ops.logical_and(allowed, user)
    return allowed


def check_attention_memory(query, memory, memory_valid_length, key_values=None):
    """Checks `memory` (or `key_values`) and `memory_valid_length`
    before they are used, as the backbone's `MemorySpec` checks a memory
    dict. Raises a `ValueError` that names the argument, what was
    received, what is expected and how to fix it.

    Shapes and dtypes are static: they are checked at trace time too.
    The values of `memory_valid_length` (within `[0, M]`) are checked
    only where they are concrete (NumPy, a Python list, an eager
    tensor): under `jit` or `tf.function` a traced value cannot be read
    without a host sync, and is not checked."""
    query_shape = tuple(query.shape)
    memory_length = 0
    if memory is not None:
        shape = tuple(memory.shape)
        if len(shape) != 3:
            raise ValueError(
                "`memory` must have shape `(batch, M, dim)`, the states of "
                "the layer below for `M` earlier positions. Received: "
                f"memory.shape={shape}. Pass `memory=None` for no memory."
            )
        dtype = dtype_name(memory)
        if "float" not in dtype:
            raise ValueError(
                "`memory` must hold hidden states, a floating-point tensor "
                f"(the states of the layer below). Received: dtype={dtype}. "
                "Pass the states themselves (token ids go through the "
                "embedding first)."
            )
        for axis, name in ((-1, "width"), (0, "batch size")):
            got, want = shape[axis], query_shape[axis]
            if got is not None and want is not None and got != want:
                raise ValueError(
                    f"`memory` must have the {name} of the query, {want}: "
                    "shape `(batch, M, dim)` with the query's batch and "
                    f"dim. Received: memory.shape={shape}, query.shape="
                    f"{query_shape}. Pass the states of this layer's input "
                    "for the same batch."
                )
        memory_length = shape[1]
    elif key_values is not None:
        keys = key_values.shape[1]
        memory_length = None if keys is None else keys - query_shape[1]
    if memory_valid_length is None:
        return
    valid_dtype = dtype_name(memory_valid_length)
    if "int" not in valid_dtype:
        raise ValueError(
            "`memory_valid_length` must be integers: the number of valid "
            f"slots of each row. Received: dtype={valid_dtype}. Cast it to "
            "int32."
        )
    valid_shape = tuple(np.shape(memory_valid_length))
    if (
        len(valid_shape) != 1
        or None not in (valid_shape[0], query_shape[0])
        and valid_shape[0] != query_shape[0]
    ):
        raise ValueError(
            "`memory_valid_length` must have shape `(batch,)`, one length "
            f"per row of the query, ({query_shape[0]},). Received: "
            f"memory_valid_length.shape={valid_shape}."
        )
    if memory_length is None or not is_concrete(memory_valid_length):
        return
    values = np.asarray(ops.convert_to_numpy(memory_valid_length))
    if values.size and (values.min() < 0 or values.max() > memory_length):
        raise ValueError(
            f"`memory_valid_length` must lie in [0, M] = [0, {memory_length}]"
            f" for a memory of M={memory_length} slots. Received: "
            f"memory_valid_length={values.tolist()}. Pass the lengths "
            "returned with the memory (`MemoryCache`), or `None` when "
            "every slot is valid."
        )


@keras.saving.register_keras_serializable(package="keras_txl")
class RelativeMultiHeadAttention(keras.layers.Layer):
    """Multi-head attention with relative positions and a memory.

    The attention of Transformer-XL (Dai et al., 2019, eq. 4). Queries come
    from the current segment; keys and values from `concat(memory,
    segment)`. The score of query `i` and key `j` is

        (q_i + u) . k_j  +  (q_i + v) . (W_r R_{i-j}),   scaled by 1/sqrt(d)

    where `R` holds sinusoidal embeddings of the distance (from
    `RelativePositionEmbedding`), `W_r` is this layer's position projection
    and `u`, `v` are learned per head. Keys are masked when they lie in the
    future of the query (causal), when their memory slot holds nothing yet
    (`memory_valid_length`), optionally to give every query the same number
    of keys (`same_length`, as the authors' PyTorch or TensorFlow code
    defines it), and
    where an optional `attention_mask` is False.

    Masking and softmax run in float32 under any dtype policy: the large
    negative mask value and the exponentials overflow in float16.

    Every projection (queries, keys and values, position keys, output) is
    an `EinsumDense` layer, float or quantized (`Model.quantize`); the
    float ones of the queries, keys, values and output are computed as
    2-D matmuls of their kernels (`_project`). A variant with other
    position terms overrides one method, `_compute_attention` (the
    scores, softmax and attended values of the projected heads; as
    Keras's `MultiHeadAttention._compute_attention`), and the weights it
    reads, `_build_position_weights`: see
    `LearnedRelativeMultiHeadAttention`.

    Args:
        num_heads: int. Number of attention heads.
        head_dim: int. Size of each head's queries, keys and values.
        output_dim: int or `None`. Width of the output. `None` uses the
            width of the query.
        dropout: float in [0, 1). Dropout on the attention probabilities
            (the authors' `dropatt`).
        same_length: False, True or `"tensorflow"`. If set, every query
            attends to the same number of keys (the paper's evaluation).
            True (or `"pytorch"`): query `i` of a segment of length `T`
            after `M` memory slots sees the `M` keys ending at itself (the
            mask of the authors' PyTorch code). `"tensorflow"`: it sees
            `M + 1` keys, from key `i` to itself (the mask of their
            TensorFlow code, which evaluated the released checkpoints).
        kernel_initializer: initializer of the projections.
        bias_initializer: initializer of `u` and `v`. Each weight draws
            its own values from an initializer without a seed or seeded
            by a `keras.random.SeedGenerator`; an integer seed repeats
            its values in every weight, as in Keras
            (`keras_txl/utils/initializers.py`).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        query: tensor of shape `(batch, T, dim)`: the current segment.
        position_embedding: tensor of shape `(M + T, position_dim)`, rows
            for distances `M + T - 1 ... 0` (see `RelativePositionEmbedding`).
        memory: optional tensor of shape `(batch, M, dim)`. `None` means no
            memory.
        memory_valid_length: optional int tensor of shape `(batch,)`: the
            number of valid memory slots of each example, the last ones.
            `None` means all `M` are valid. Its dtype and shape are
            checked always, its values (within `[0, M]`) where they are
            concrete (an eager call); under `jit` or `tf.function` they
            are traced and not checked (reading them would need a host
            sync).
        key_values: optional tensor of shape `(batch, M + T, 2 *
            num_heads * head_dim)`: the keys and values of `concat(memory,
            query)` as `key_values()` computes them, in place of `memory`
            (which must then be `None`). Generation keeps the memory's, so
            that a new token does not project the whole memory again.
        position_keys: optional tensor of shape `(num_heads, head_dim,
            M + T + 1)`: `position_keys(position_embedding)`, computed
            once where many calls share them (generation's steps);
            `position_embedding` is then not read and may be `None`.
        attention_mask: optional boolean tensor of shape `(batch, T, M + T)`;
            False entries are masked (on top of the masks above).
        use_causal_mask: bool, default True. Whether queries are kept from
            seeing keys after them.
        return_attention_scores: bool. Also return the probabilities.
        training: bool. Dropout is active only when True.

    Returns:
        A tensor of shape `(batch, T, output_dim)`, and the attention
        probabilities of shape `(batch, heads, T, M + T)` when
        `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> from keras_txl.layers import RelativePositionEmbedding
    >>> x = np.random.rand(2, 4, 16).astype("float32")
    >>> memory = np.random.rand(2, 6, 16).astype("float32")
    >>> position = RelativePositionEmbedding(hidden_dim=16)(x, memory)
    >>> attention = RelativeMultiHeadAttention(num_heads=2, head_dim=8)
    >>> y = attention(x, position, memory=memory)
    >>> tuple(y.shape)
    (2, 4, 16)
    """

    def __init__(
        self,
        num_heads,
        head_dim,
        output_dim=None,
        dropout=0.0,
        same_length=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.output_dim = (
            None
            if output_dim is None
            else check_positive_int("output_dim", output_dim)
        )
        self.dropout = check_rate("dropout", dropout)
        self.same_length = check_same_length(same_length)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = False
        self._bias_owner = None  # see `share_biases`

    def share_biases(self, owner):
        """Reads `u` and `v` from `owner` instead of weights of its own.

        One pair for many layers, as the authors' PyTorch code has them
        (`r_w_bias`, `r_r_bias` of `MemTransformerLM`; `untie_r=False` in
        their TensorFlow code): they train on the sum of the layers'
        gradients, and are saved, loaded and counted once, with `owner`'s
        weights. Call it before this layer is built.

        Args:
            owner: a `RelativeMultiHeadAttention` of the same `num_heads`
                and `head_dim`, built first (its `u` and `v` exist when
                this layer is built).
        """
        if self.built:
            raise ValueError(
                f"{self.name} is already built with weights of its own: "
                "call `share_biases` before the layer is built."
            )
        if not isinstance(owner, RelativeMultiHeadAttention) or (
            owner.num_heads,
            owner.head_dim,
        ) != (self.num_heads, self.head_dim):
            raise ValueError(
                "`owner` must be a `RelativeMultiHeadAttention` with "
                f"num_heads={self.num_heads} and head_dim={self.head_dim}. "
                f"Received: {owner!r}"
            )
        # A weak reference: the variables stay `owner`'s alone (a tracked
        # attribute would make them this layer's too, saved twice).
        self._bias_owner = weakref.ref(owner)

    @property
    def content_bias(self):
        """`u` `(num_heads, head_dim)`: this layer's, or its owner's
        (`share_biases`)."""
        return self._biases()[0]

    @property
    def position_bias(self):
        """`v` `(num_heads, head_dim)`: this layer's, or its owner's."""
        return self._biases()[1]

    def _biases(self):
        owner = self if self._bias_owner is None else self._bias_owner()
        biases = getattr(owner, "_relative_biases", None)
        if biases is None:
            raise ValueError(
                f"{owner.name} has no `u`, `v` "
                + ("yet: build it first." if owner.built else "(not built).")
            )
        return biases

    def build(self, query_shape, position_embedding_shape=None, *args, **kw):
        query_dim = query_shape[-1]
        position_dim = (
            query_dim
            if position_embedding_shape is None
            else position_embedding_shape[-1]
        )
        output_dim = self.output_dim or query_dim
        heads, head_dim = self.num_heads, self.head_dim
        projection = ("btd,dnh->btnh", (None, heads, head_dim))
        self.query_dense = self._dense("query", *projection, query_dim)
        self.key_dense = self._dense("key", *projection, query_dim)
        self.value_dense = self._dense("value", *projection, query_dim)
        self._build_position_weights(position_dim)
        if self._bias_owner is not None:
            self._biases()  # raises if the owner has none
        self.output_dense = self._dense(
            "attention_output",
            "btnh,nhd->btd",
            (None, output_dim),
            (heads, head_dim),
        )
        self.dropout_layer = PackedDropout(
            self.dropout, dtype=self.dtype_policy
        )
        self.built = True

    def _dense(self, name, equation, output_shape, input_dims):
        """A built `EinsumDense` projection of this layer's inputs of
        trailing dimensions `input_dims` (an int or a tuple)."""
        if isinstance(input_dims, int):
            input_dims = (input_dims,)
        layer = keras.layers.EinsumDense(
            equation,
            output_shape=output_shape,
            kernel_initializer=fresh_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build((None, None) + tuple(input_dims))
        return layer

    def _build_position_weights(self, position_dim):
        """The weights of the position terms, built between the value and
        the output projections: `W_r` (`position_dense`) and `u`, `v`.
        A variant with other position terms overrides it with
        `_compute_attention`."""
        heads, head_dim = self.num_heads, self.head_dim
        self.position_dense = keras.layers.EinsumDense(
            "kd,dnh->knh",
            output_shape=(heads, head_dim),
            kernel_initializer=fresh_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="position",
        )
        self.position_dense.build((None, position_dim))
        if self._bias_owner is not None:
            return  # the owner's (`share_biases`)
        # u and v of the paper (the authors' r_w_bias and r_r_bias).
        self._relative_biases = tuple(
            self.add_weight(
                name=name,
                shape=(heads, head_dim),
                initializer=fresh_initializer(self.bias_initializer),
            )
            for name in ("content_bias", "position_bias")
        )

    def _mask(
        self,
        query_length,
        key_length,
        memory_valid_length,
        attention_mask,
        use_causal_mask,
    ):
        """Boolean mask of shape (batch or 1, T, K); True = attend."""
        return attention_allowed(
            query_length,
            key_length,
            memory_valid_length,
            attention_mask,
            use_causal_mask,
            self.same_length,
        )

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
        key_values=None,
        position_keys=None,
    ):
        dtype = self.compute_dtype
        query = ops.cast(query, dtype)
        if key_values is not None and memory is not None:
            raise ValueError(
                "Pass the memory as `memory` (its states) or within "
                "`key_values` (the keys and values of the memory and "
                "the segment, from `key_values()`), not both."
            )
        self._check_memory(query, memory, memory_valid_length, key_values)
        if key_values is not None:
            key_values = ops.cast(key_values, dtype)  # (batch, K, 2 * nh)
            context = query
        elif memory is None:
            context = query
        else:
            memory = ops.cast(memory, dtype)
            context = ops.concatenate([memory, query], axis=1)  # (b, K, d)
        query_length = ops.shape(query)[1]
        key_length = ops.shape(context if key_values is None else key_values)[1]

        # Queries, keys and values are laid out heads-first, (heads,
        # batch, length, head_dim), and so are the scores, (heads, batch,
        # T, K): every product is then a plain batched matmul whose
        # result needs no transpose. Only the small (.., head_dim)
        # tensors are transposed, never the (T, K) scores.
        q = self._queries(query)  # (heads, batch, T, head_dim)
        if key_values is None:
            key_values = self.key_values(context)  # (batch, K, 2 * nh)
        k, v = self._split_key_values(key_values)  # (heads, b, K, hd) each
        allowed = self._mask(
            query_length,
            key_length,
            memory_valid_length,
            attention_mask,
            use_causal_mask,
        )  # (batch or 1, T, K)
        attended, probs = self._compute_attention(
            q,
            k,
            v,
            allowed,
            position_embedding=position_embedding,
            position_keys=position_keys,
            training=training,
        )  # (heads, batch, T, head_dim), (heads, batch, T, K)
        output = self._output(attended)  # (batch, T, output_dim)
        if return_attention_scores:
            return output, ops.transpose(
                probs, (1, 0, 2, 3)
            )  # (batch, heads, T, K)
        return output

    def _check_memory(self, query, memory, memory_valid_length, key_values):
        """`check_attention_memory` of the call's memory arguments, and of the
        width and batch of `key_values`."""
        if key_values is not None:
            shape, width = tuple(key_values.shape), 2 * self.num_heads
            width *= self.head_dim
            expected = (query.shape[0], None, width)
            if len(shape) != 3 or any(
                None not in (got, want) and got != want
                for got, want in zip(shape, expected)
            ):
                raise ValueError(
                    "`key_values` must have shape `(batch, M + T, 2 * "
                    f"num_heads * head_dim)` = {expected}. Received: "
                    f"key_values.shape={shape}. Build it with this layer's "
                    "`key_values(concat(memory, query))`."
                )
        check_attention_memory(query, memory, memory_valid_length, key_values)

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
        """The attention of the projected heads: the one method a variant
        with other position terms overrides (as Keras's
        `MultiHeadAttention._compute_attention`; see
        `LearnedRelativeMultiHeadAttention`).

        Args:
            query: `(heads, batch, T, head_dim)`, the projected queries.
            key, value: `(heads, batch, K, head_dim)` each, of
                `concat(memory, segment)`.
            allowed: boolean `(batch or 1, T, K)`; True = attend.
            position_embedding, position_keys, training: the call's.

        Returns:
            `(attended, probabilities)`: `(heads, batch, T, head_dim)` and
            the float32 `(heads, batch, T, K)` before dropout.
        """
        dtype = self.compute_dtype
        heads, batch = self.num_heads, ops.shape(query)[1]
        query_length, key_length = ops.shape(query)[2], ops.shape(key)[2]
        r = self._checked_position_keys(
            position_embedding, position_keys, key_length
        )  # (heads, head_dim, K + 1)
        scale = 1.0 / math.sqrt(self.head_dim)
        # u and v of eq. 4, and the 1 / sqrt(head_dim) of the scores, on
        # the queries (T x head_dim numbers, not T x K).
        content_bias = ops.cast(self.content_bias, dtype)[:, None, None, :]
        position_bias = ops.cast(self.position_bias, dtype)[:, None, None, :]
        content_query = (query + content_bias) * ops.cast(scale, dtype)
        position_query = (query + position_bias) * ops.cast(scale, dtype)
        # Terms (a) + (c) of eq. 4, then (b) + (d): the position product,
        # whose right side is the same for all examples, is one (batch *
        # T, head_dim) x (head_dim, K + 1) matmul per head.
        content_scores = ops.matmul(
            content_query, ops.swapaxes(key, -1, -2)
        )  # (heads, batch, T, K)
        position_scores = ops.matmul(
            ops.reshape(
                position_query, (heads, batch * query_length, self.head_dim)
            ),
            r,
        )  # (heads, batch * T, K + 1)
        position_scores = _shift_padded(
            ops.reshape(
                position_scores, (heads, batch, query_length, key_length + 1)
            ),
            key_length,
        )  # (heads, batch, T, K)
        scores = ops.cast(content_scores, "float32") + ops.cast(
            position_scores, "float32"
        )  # (heads, batch, T, K), float32
        probs, dropped = self._probabilities(scores, allowed, training)
        return ops.matmul(dropped, value), probs  # (heads, b, T, hd), ..

    def _probabilities(self, scores, allowed, training):
        """Masked softmax of float32 `scores` `(heads, batch, T, K)`:
        `(probabilities in float32, probabilities in the compute dtype
        after dropout)`."""
        scores = ops.where(allowed[None], scores, MASK_VALUE)
        probs = ops.softmax(scores, axis=-1)  # (heads, batch, T, K), float32
        dropped = self.dropout_layer(
            ops.cast(probs, self.compute_dtype), training=training
        )
        return probs, dropped

    def _checked_position_keys(
        self, position_embedding, position_keys, key_length
    ):
        """`position_keys`, or those of `position_embedding`, after a check
        that they have one row per key."""
        if position_keys is None and position_embedding is None:
            raise ValueError(
                "`RelativeMultiHeadAttention` needs `position_embedding` "
                "(from `RelativePositionEmbedding`) or `position_keys` "
                "(from `position_keys()`). Received neither."
            )
        if position_keys is None:
            rows = position_embedding.shape[0]
            name = "`position_embedding` must have one row"
        else:
            rows = position_keys.shape[-1] - 1
            name = "`position_keys` must have one column (after the first)"
        if (
            isinstance(rows, int)
            and isinstance(key_length, int)
            and rows != key_length
        ):
            raise ValueError(
                f"{name} per key, M + T = {key_length} (memory length + "
                f"segment length). Received {rows}. Build it with "
                "`RelativePositionEmbedding` from the same segment and "
                "memory."
            )
        if position_keys is None:
            return self.position_keys(position_embedding)
        return ops.cast(position_keys, self.compute_dtype)

    def _output(self, attended):
        """The output projection of `attended` `(heads, batch, T,
        head_dim)`: `(batch, T, output_dim)`."""
        return self._project(
            self.output_dense, ops.transpose(attended, (1, 2, 0, 3)), 2
        )  # (batch, T, output_dim)

    def _project(self, dense, inputs, input_rank=1):
        """`dense(inputs)` for one of the `EinsumDense` projections, whose
        kernel's first `input_rank` axes contract the last ones of
        `inputs` (`"btd,dnh->btnh"`, `"btnh,nhd->btd"`).

        A float layer's projection is computed as one 2-D matmul of the
        rows of `inputs` with the kernel as a matrix (LoRA's update
        included: the layer's `kernel`). It is the same product, but in
        a JAX training step XLA:CPU takes the weight gradient of a 2-D
        matmul without the copies it makes for the einsum's 3-D and 4-D
        operands: with the feed-forward network's rows
        (`TransformerXLBlock`), a step at 0.89x the time
        (docs/benchmarks.md, "Round five"). A quantized layer
        (`Model.quantize`) is called as it is: its call dequantizes.
        """
        if dense.quantization_mode is not None:
            return dense(inputs)
        kernel = ops.cast(dense.kernel, self.compute_dtype)
        inner_shape = tuple(kernel.shape[:input_rank])
        outer_shape = tuple(kernel.shape[input_rank:])
        leading = [
            ops.shape(inputs)[i] for i in range(len(inputs.shape) - input_rank)
        ]
        rows = ops.reshape(inputs, (-1, math.prod(inner_shape)))  # (N, in)
        matrix = ops.reshape(
            kernel, (math.prod(inner_shape), math.prod(outer_shape))
        )  # (in, out)
        return ops.reshape(
            ops.matmul(rows, matrix), (*leading, *outer_shape)
        )  # (..., *outer_shape)

    def key_values(self, context):
        """The keys and values of `context` (batch, L, dim), as one tensor
        `(batch, L, 2 * num_heads * head_dim)`: what `call` attends to,
        and what its `key_values` takes."""
        context = ops.cast(context, self.compute_dtype)
        batch, length = ops.shape(context)[0], ops.shape(context)[1]
        kv = ops.concatenate(
            [
                self._project(self.key_dense, context),
                self._project(self.value_dense, context),
            ],
            axis=2,
        )  # (batch, L, 2 * heads, head_dim)
        return ops.reshape(
            kv, (batch, length, 2 * self.num_heads * self.head_dim)
        )

    def _split_key_values(self, key_values):
        """Keys and values (heads, batch, K, head_dim) of `key_values`."""
        batch, length = ops.shape(key_values)[0], ops.shape(key_values)[1]
        kv = ops.reshape(
            key_values, (batch, length, 2 * self.num_heads, self.head_dim)
        )
        kv = ops.transpose(kv, (2, 0, 1, 3))  # (2 * heads, batch, K, hd)
        # A split, not `kv[:heads]`: see `_shift_padded`.
        return ops.split(kv, 2, axis=0)  # (heads, batch, K, head_dim) each

    def _queries(self, query):
        """The queries (heads, batch, T, head_dim)."""
        return ops.transpose(
            self._project(self.query_dense, query), (2, 0, 1, 3)
        )

    def position_keys(self, position_embedding):
        """The projected position embeddings `(num_heads, head_dim, K +
        1)` of `position_embedding` `(K, position_dim)`, with a zero
        column in front: the zero column of the relative shift, for free
        (see `_shift_padded`). What the call's `position_keys` takes."""
        position_embedding = ops.cast(position_embedding, self.compute_dtype)
        r = ops.transpose(
            self.position_dense(position_embedding), (1, 2, 0)
        )  # (heads, head_dim, K)
        return ops.pad(r, [[0, 0], [0, 0], [1, 0]])  # (heads, hd, K + 1)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "head_dim": self.head_dim,
                "output_dim": self.output_dim,
                "dropout": self.dropout,
                "same_length": self.same_length,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config
