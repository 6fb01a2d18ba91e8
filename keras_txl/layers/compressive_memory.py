import math
import weakref

import keras
import numpy as np
from keras import ops

from keras_txl.layers.memory_cache import MemoryCache
from keras_txl.layers.relative_multi_head_attention import MASK_VALUE
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int

COMPRESSIONS = ("mean", "max", "conv")


def check_compression(compression):
    """Checks the compression function's name: "mean", "max" or "conv"."""
    if compression not in COMPRESSIONS:
        raise ValueError(
            f"`compression` must be one of {COMPRESSIONS}. Received: "
            f"compression={compression!r}"
        )
    return compression


def check_loss_weight(name, value):
    """Checks a loss weight: a float >= 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not float(value) >= 0.0
    ):
        raise ValueError(
            f"`{name}` must be a float >= 0. Received: {name}={value!r}"
        )
    return float(value)


def _evicted_valid_length(valid_length, memory_length, segment_length):
    """How many of the `T` evicted slots held states (the last ones).

    `concat(memory, new_states)` has `M + T` slots whose last
    `valid_length + T` are valid; the first `T` fall out of the memory, and
    slot `s < T` is valid when `s >= M - valid_length`.
    """
    evicted = ops.cast(valid_length, "int32") + segment_length - memory_length
    return ops.clip(evicted, 0, segment_length)  # (batch,)


def _frozen(layer):
    """A scope in which `layer` computes with its weights under
    stop-gradient: it reads them, but no gradient reaches them."""
    mapping = [(v, ops.stop_gradient(v.value)) for v in layer.weights]
    return keras.StatelessScope(state_mapping=mapping)


@keras.saving.register_keras_serializable(package="keras_txl")
class CompressiveMemory(keras.layers.Layer):
    """The compressed memory of the Compressive Transformer (Rae et al.,
    2019): states that fall out of the memory are compressed, not dropped.

    A Transformer-XL memory keeps the last `M` states of each layer. After a
    segment of `T` states, the oldest `T` slots of `concat(memory,
    new_states)` are evicted. This layer compresses them at rate
    `c = compression_rate` (every `c` consecutive evicted states become one
    slot) into a second first-in first-out memory of `Mc` slots, kept under
    stop-gradient like the memory. Attention then reads
    `[compressed memory; memory; segment]`: `M + c * Mc` states of context
    for `M + Mc` slots.

    Both memories keep their valid slots last. A group of `c` evicted slots
    counts as valid only when all its slots are valid; while the memory is
    still filling the first evicted block may hold a partial group, which
    is dropped. The compressed memory only fills once the memory is full,
    and the new valid length is `min(new_groups + (old if every new group is
    valid else 0), Mc)`, so the compressed valid slots always form one run
    at the end and `concat(compressed, memory)` with `compressed_valid +
    valid` valid slots is again "valid slots last"
    (`RelativeMultiHeadAttention` reads it unchanged).

    Compression functions (`compression`):
        - `"mean"`: mean pooling over each group; no weights.
        - `"max"`: max pooling over each group; no weights.
        - `"conv"`: a 1-D convolution of kernel size and stride `c` per
          layer (the paper's best function on enwik8), with weights
          `kernel (layers, c, dim, dim)` and `bias (layers, dim)`,
          initialized to mean pooling. It gets its training signal only from
          the attention-reconstruction loss: the stored compressed memory
          carries no gradient.

    Attention-reconstruction loss (the paper's eq. 1): for each layer `l`,
    `mean || attn(h_l, old_l) - attn(h_l, compressed(old_l)) ||^2`, where
    `h_l` are the layer's inputs for the segment (queries), `old_l` the
    evicted states of the fully valid groups and `attn` the content-based
    attention of the layer (its query, key and value projections and
    content bias `u`, per head, after its input normalization when the
    block is pre-norm; no positions). Inputs and attention weights are under
    stop-gradient, so only the compression function learns from it. It is
    summed over layers and averaged over the examples that evicted a valid
    group (0 when none did). The attention comes from the blocks given to
    `use_attention_of(blocks)` (the backbone does this); without them it is
    single-head dot-product attention without projections.
    For `"conv"` with `reconstruction_loss_weight > 0`, the layer adds
    `reconstruction_loss_weight * loss` with `add_loss` when `training` is
    True. For `"mean"` and `"max"` it is a diagnostic only.

    Args:
        compression_rate: int >= 1. States per compressed slot (`c`). The
            segment length must be a multiple of it.
        compressed_memory_length: int >= 0 or `None`. Length `Mc` of the new
            compressed memory; `None` (default) keeps the incoming length.
        compression: `"mean"`, `"max"` or `"conv"`.
        reconstruction_loss_weight: float >= 0. Weight of the
            attention-reconstruction loss added with `add_loss` (`"conv"`
            only).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.
            Like any layer, it computes in its dtype policy's compute
            dtype (bfloat16 under `"mixed_bfloat16"`); pass
            `dtype="float32"` to keep a mixed model's memory in float32.

    Call arguments:
        memory: float tensor `(batch, layers, M, dim)`: the memory BEFORE
            the segment.
        valid_length: int tensor `(batch,)`: valid slots of `memory`.
        new_states: float tensor `(batch, layers, T, dim)`: the segment's
            states (for layer `l`, the inputs of layer `l`).
        compressed_memory: float tensor `(batch, layers, Mc_in, dim)`.
        compressed_valid_length: int tensor `(batch,)`.
        training: bool. The loss is added only when True.

    Returns:
        A tuple `(new_compressed_memory, new_compressed_valid_length,
        reconstruction_loss)` of shapes `(batch, layers, Mc, dim)`,
        `(batch,)` and `()` (float32).

    Example:

    >>> import numpy as np
    >>> layer = CompressiveMemory(compression_rate=2)
    >>> memory = np.ones((1, 1, 4, 3), "float32")    # a full memory
    >>> valid = np.array([4], "int32")
    >>> states = np.zeros((1, 1, 4, 3), "float32")  # evicts 4 slots
    >>> compressed = np.zeros((1, 1, 3, 3), "float32")
    >>> compressed_valid = np.array([0], "int32")
    >>> new, new_valid, loss = layer(
    ...     memory, valid, states, compressed, compressed_valid
    ... )
    >>> tuple(new.shape), [int(v) for v in new_valid]
    ((1, 1, 3, 3), [2])
    """

    def __init__(
        self,
        compression_rate=1,
        compressed_memory_length=None,
        compression="mean",
        reconstruction_loss_weight=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.compression_rate = check_positive_int(
            "compression_rate", compression_rate
        )
        self.compressed_memory_length = check_optional_positive_int(
            "compressed_memory_length",
            compressed_memory_length,
            allow_zero=True,
        )
        self.compression = check_compression(compression)
        self.reconstruction_loss_weight = check_loss_weight(
            "reconstruction_loss_weight", reconstruction_loss_weight
        )
        self.compressed_cache = MemoryCache(
            self.compressed_memory_length,
            dtype=self.dtype_policy,
            name="compressed_cache",
        )
        self._attention_blocks = ()

    def use_attention_of(self, blocks):
        """Uses the attention of `blocks` (one `TransformerXLBlock` per
        layer, in order) for the reconstruction loss. They are not tracked:
        their weights stay the model's."""
        # Weak references: the blocks belong to the model. Keras's tracker
        # (and TensorFlow's) see no layer in them, so the blocks' weights
        # are neither saved twice nor owned by this layer; a tracked
        # block would move its weights here and change the saved files.
        self._attention_blocks = tuple(weakref.ref(block) for block in blocks)

    def build(self, memory_shape):
        if len(memory_shape) != 4:
            raise ValueError(
                "`memory` must have shape (batch, layers, M, dim). "
                f"Received shape {tuple(memory_shape)}."
            )
        num_layers, dim = memory_shape[1], memory_shape[3]
        if self.compression == "conv":
            rate = self.compression_rate

            def mean_pooling(shape, dtype=None):
                eye = ops.eye(dim, dtype=dtype or "float32") / rate
                return ops.tile(eye[None, None], shape[:2] + (1, 1))

            self.kernel = self.add_weight(
                name="kernel",
                shape=(num_layers, rate, dim, dim),
                initializer=mean_pooling,
            )
            self.bias = self.add_weight(
                name="bias", shape=(num_layers, dim), initializer="zeros"
            )
        self.built = True

    def compress(self, states):
        """Compresses `(batch, layers, T, dim)` states into
        `(batch, layers, T / c, dim)`: group `g` is states
        `[g * c, (g + 1) * c)`."""
        rate = self.compression_rate
        shape = ops.shape(states)
        groups = ops.reshape(
            states, (shape[0], shape[1], shape[2] // rate, rate, shape[3])
        )  # (batch, layers, G, c, dim)
        if self.compression == "mean":
            return ops.mean(groups, axis=3)  # (batch, layers, G, dim)
        if self.compression == "max":
            return ops.max(groups, axis=3)  # (batch, layers, G, dim)
        compressed = ops.einsum(
            "blgcd,lcde->blge", groups, ops.cast(self.kernel, groups.dtype)
        )  # (batch, layers, G, dim)
        return compressed + ops.cast(self.bias, groups.dtype)[None, :, None]

    def _segment_length(self, new_states):
        segment_length = new_states.shape[-2]
        if segment_length is not None and (
            segment_length % self.compression_rate
        ):
            raise ValueError(
                "The segment length must be a multiple of "
                f"`compression_rate`: the {segment_length} states that a "
                f"segment evicts are compressed {self.compression_rate} to "
                f"a slot. Received: compression_rate={self.compression_rate}"
                f", segment length {segment_length}. Use segments of a "
                "multiple of the rate."
            )
        if segment_length is None:
            segment_length = ops.shape(new_states)[-2]
        return segment_length

    def call(
        self,
        memory,
        valid_length,
        new_states,
        compressed_memory,
        compressed_valid_length,
        training=None,
    ):
        segment_length = self._segment_length(new_states)
        memory = ops.cast(memory, self.compute_dtype)
        new_states = ops.stop_gradient(
            ops.cast(new_states, self.compute_dtype)
        )  # (batch, layers, T, dim)
        memory_length = ops.shape(memory)[2]
        joined = ops.concatenate([memory, new_states], axis=2)
        evicted = ops.stop_gradient(
            joined[:, :, :segment_length]
        )  # (batch, layers, T, dim)
        evicted_valid = _evicted_valid_length(
            valid_length, memory_length, segment_length
        )  # (batch,)
        num_groups = segment_length // self.compression_rate
        valid_groups = evicted_valid // self.compression_rate  # (batch,)

        compressed = self.compress(evicted)  # (batch, layers, G, dim)
        new_memory, _ = self.compressed_cache(
            compressed_memory, compressed_valid_length, compressed
        )  # (batch, layers, Mc, dim), stop-gradient
        kept = ops.where(
            valid_groups == num_groups,
            ops.cast(compressed_valid_length, "int32"),
            0,
        )  # (batch,): a partial block comes only while nothing is held
        new_valid = ops.minimum(
            valid_groups + kept, ops.shape(new_memory)[2]
        )  # (batch,)

        loss = self._reconstruction_loss(
            new_states, evicted, compressed, valid_groups, num_groups
        )
        if (
            training
            and self.compression == "conv"
            and self.reconstruction_loss_weight > 0
        ):
            self.add_loss(self.reconstruction_loss_weight * loss)
        return new_memory, ops.stop_gradient(new_valid), loss

    def _reconstruction_loss(
        self, queries, evicted, compressed, valid_groups, num_groups
    ):
        """The attention-reconstruction loss, float32 scalar."""
        rate = self.compression_rate
        segment_length = num_groups * rate
        old_ok = (
            ops.arange(segment_length)[None, :]
            >= (segment_length - valid_groups * rate)[:, None]
        )  # (batch, T): slots of fully valid groups
        new_ok = (
            ops.arange(num_groups)[None, :]
            >= (num_groups - valid_groups)[:, None]
        )  # (batch, G)
        blocks = [block() for block in self._attention_blocks]
        if any(block is None for block in blocks):
            raise ValueError(
                "The blocks given to `use_attention_of` were deleted with "
                "their model: call it again with the blocks of a model."
            )
        num_layers = queries.shape[1]
        if blocks and len(blocks) != num_layers:
            raise ValueError(
                f"`use_attention_of` got {len(blocks)} blocks for "
                f"{num_layers} layers of memory."
            )
        per_example = 0.0
        for layer in range(num_layers):
            block = blocks[layer] if blocks else None
            query = queries[:, layer]  # (batch, T, dim)
            reference = _content_attention(
                block, query, evicted[:, layer], old_ok
            )  # (batch, T, heads, head_dim)
            approximation = _content_attention(
                block, query, compressed[:, layer], new_ok
            )  # (batch, T, heads, head_dim)
            error = ops.square(
                ops.cast(reference, "float32")
                - ops.cast(approximation, "float32")
            )
            per_example = per_example + ops.mean(error, axis=(1, 2, 3))
        counted = ops.cast(valid_groups > 0, "float32")  # (batch,)
        return ops.sum(per_example * counted) / ops.maximum(
            ops.sum(counted), 1.0
        )

    def compute_output_spec(
        self,
        memory,
        valid_length,
        new_states,
        compressed_memory,
        compressed_valid_length,
        training=None,
    ):
        self._segment_length(new_states)
        shape = list(compressed_memory.shape)
        if self.compressed_memory_length is not None:
            shape[2] = self.compressed_memory_length
        return (
            keras.KerasTensor(tuple(shape), dtype=self.compute_dtype),
            keras.KerasTensor(tuple(valid_length.shape), dtype="int32"),
            keras.KerasTensor((), dtype="float32"),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "compression_rate": self.compression_rate,
                "compressed_memory_length": self.compressed_memory_length,
                "compression": self.compression,
                "reconstruction_loss_weight": self.reconstruction_loss_weight,
            }
        )
        return config


def _content_attention(block, queries, keys, key_ok):
    """Content-based attention of `block` (a `TransformerXLBlock`, or
    `None` for plain dot-product attention), its weights frozen.

    Returns the attended values per head, `(batch, T, heads, head_dim)`.
    """
    if block is None:
        q = queries[:, :, None, :]  # (batch, T, 1, dim)
        k = v = keys[:, :, None, :]  # (batch, K, 1, dim)
        head_dim = keys.shape[-1]
    else:
        attention = block.attention
        head_dim = attention.head_dim
        with _frozen(block):
            if block.pre_norm:
                queries = block.attention_norm(queries)
                keys = block.attention_norm(keys)
            q = attention.query_dense(queries)  # (batch, T, heads, head_dim)
            q = q + ops.cast(attention.content_bias, q.dtype)
            k = attention.key_dense(keys)  # (batch, K, heads, head_dim)
            v = attention.value_dense(keys)  # (batch, K, heads, head_dim)
    scores = ops.einsum(
        "bqnh,bknh->bnqk", ops.cast(q, "float32"), ops.cast(k, "float32")
    ) * (1.0 / math.sqrt(head_dim))  # (batch, heads, T, K), float32
    scores = ops.where(key_ok[:, None, None, :], scores, MASK_VALUE)
    # Written out: `ops.softmax` warns when K = 1 (a single group).
    scores = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))
    probs = scores / ops.sum(scores, axis=-1, keepdims=True)  # (b,n,T,K)
    return ops.einsum(
        "bnqk,bknh->bqnh", probs, ops.cast(v, "float32")
    )  # (batch, T, heads, head_dim)
