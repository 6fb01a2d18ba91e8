import math

import keras
import keras_hub
from keras import ops

from keras_txl.layers.compressive_memory import CompressiveMemory
from keras_txl.layers.compressive_memory import check_compression
from keras_txl.layers.compressive_memory import check_loss_weight
from keras_txl.layers.memory_cache import MemoryCache
from keras_txl.layers.relative_position_embedding import (
    RelativePositionEmbedding,
)
from keras_txl.layers.transformer_xl_block import TransformerXLBlock
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int
from keras_txl.utils.validation import check_rate
from keras_txl.utils.validation import check_token_ids
from keras_txl.utils.validation import is_concrete

_MEMORY_KEYS = ("memory", "valid_length")
_COMPRESSED_KEYS = ("compressed_memory", "compressed_valid_length")


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLBackbone(keras_hub.models.Backbone):
    """Transformer-XL decoder (Dai et al., 2019) with an explicit memory.

    A functional Keras model that holds no state. It embeds `token_ids`
    (scaled by `sqrt(hidden_dim)`, as the authors' code), runs `num_layers`
    `TransformerXLBlock`s with relative positions, each attending to its
    memory, and returns the final hidden states and the new memory.

    Inputs, a dict:
        - `"token_ids"`: int tensor `(batch, T)`.
        - `"memory"`: float32 tensor `(batch, num_layers, M, hidden_dim)`.
          Entry `l` is the INPUT of layer `l` for the last `M` positions
          (entry 0 is the embedding output).
        - `"valid_length"`: int32 tensor `(batch,)`: how many of the `M`
          slots hold states, the last ones, the most recent last. 0 means
          an empty memory: the segment then computes exactly what a model
          without memory computes.

    Outputs, a dict:
        - `"sequence_output"`: `(batch, T, hidden_dim)`.
        - `"memory"` and `"valid_length"`: the memory for the next segment,
          of the same shape as the memory that came in (FIFO, gradients
          stopped).

    `M` may differ from call to call: the constructor's `memory_length` is
    only the default of `initial_memory()`. Evaluating with a longer memory
    than in training is the paper's setting.

    Compressive memory (Rae et al., 2019; off by default): with
    `compressed_memory_length = Mc > 0`, the states that fall out of the
    memory are compressed at rate `compression_rate` into a second memory
    of `Mc` slots (see `keras_txl.layers.CompressiveMemory`), and every
    layer attends to `[compressed memory; memory; segment]`. The inputs and
    outputs then also hold `"compressed_memory"` (float32
    `(batch, num_layers, Mc, hidden_dim)`) and `"compressed_valid_length"`
    (int32 `(batch,)`), and the outputs `"reconstruction_loss"` (float32
    scalar, the attention-reconstruction loss of the segment). For
    `compression="conv"` that loss, times `reconstruction_loss_weight`, is
    added with `add_loss` in training.

    Args:
        vocabulary_size: int. Number of token ids.
        num_layers: int. Number of `TransformerXLBlock`s.
        num_heads: int. Attention heads per layer.
        hidden_dim: int. Width of the hidden states (`d_model`). Even.
        head_dim: int. Size of each head (`d_head`).
        intermediate_dim: int. Width of the feed-forward networks
            (`d_inner`).
        memory_length: int >= 0. Default memory length `M` (`mem_len`).
        clamp_length: int or `None`. Relative distances above it share one
            embedding (`clamp_len`); `None` keeps all distances.
        same_length: bool. Every query attends to the same number of keys
            (`same_length`).
        pre_norm: bool. Pre-layer normalization (`pre_lnorm`).
        dropout: float in [0, 1). Dropout on embeddings, position
            embeddings, sublayer outputs and the final output.
        attention_dropout: float in [0, 1). Dropout on attention
            probabilities (`dropatt`).
        layer_norm_epsilon: float. Epsilon of the layer normalizations.
        initializer_range: float. Standard deviation of the normal
            initializer of every weight (the authors' `init_std`, 0.02).
        compressed_memory_length: int >= 0. Default compressed memory
            length `Mc`; 0 (default) turns the compressive memory off.
        compression_rate: int >= 1. Evicted states per compressed slot
            (`c`); segments must be a multiple of it.
        compression: `"mean"`, `"max"` or `"conv"`: how `c` states become
            one slot.
        reconstruction_loss_weight: float >= 0. Weight of the
            attention-reconstruction loss (`"conv"` only).
        dtype: dtype policy of the layers (e.g. `"mixed_bfloat16"`). The
            memory stays float32.
        **kwargs: other keyword arguments passed to `keras.Model`.

    Example:

    >>> import numpy as np
    >>> backbone = TransformerXLBackbone(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
    ...     head_dim=8, intermediate_dim=32, memory_length=6,
    ... )
    >>> memory = backbone.initial_memory(batch_size=2)
    >>> for segment in np.split(np.arange(24).reshape(2, 12) % 50, 3, 1):
    ...     output, memory = backbone.call_with_memory(segment, memory)
    >>> tuple(output.shape), tuple(memory["memory"].shape)
    ((2, 4, 16), (2, 2, 6, 16))
    >>> [int(v) for v in memory["valid_length"]]
    [6, 6]
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        head_dim,
        intermediate_dim,
        memory_length,
        clamp_length=None,
        same_length=False,
        pre_norm=False,
        dropout=0.0,
        attention_dropout=0.0,
        layer_norm_epsilon=1e-5,
        initializer_range=0.02,
        compressed_memory_length=0,
        compression_rate=1,
        compression="mean",
        reconstruction_loss_weight=1.0,
        dtype=None,
        **kwargs,
    ):
        vocabulary_size = check_positive_int("vocabulary_size", vocabulary_size)
        num_layers = check_positive_int("num_layers", num_layers)
        num_heads = check_positive_int("num_heads", num_heads)
        hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        head_dim = check_positive_int("head_dim", head_dim)
        intermediate_dim = check_positive_int(
            "intermediate_dim", intermediate_dim
        )
        memory_length = check_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        clamp_length = check_optional_positive_int("clamp_length", clamp_length)
        same_length = check_bool("same_length", same_length)
        pre_norm = check_bool("pre_norm", pre_norm)
        dropout = check_rate("dropout", dropout)
        attention_dropout = check_rate("attention_dropout", attention_dropout)
        compressed_memory_length = check_positive_int(
            "compressed_memory_length",
            compressed_memory_length,
            allow_zero=True,
        )
        compression_rate = check_positive_int(
            "compression_rate", compression_rate
        )
        compression = check_compression(compression)
        reconstruction_loss_weight = check_loss_weight(
            "reconstruction_loss_weight", reconstruction_loss_weight
        )
        if hidden_dim % 2:
            raise ValueError(
                "`hidden_dim` must be even (the sinusoidal position "
                f"embeddings are half sine, half cosine). Received: "
                f"hidden_dim={hidden_dim}"
            )
        if not initializer_range > 0:
            raise ValueError(
                "`initializer_range` must be > 0. Received: "
                f"initializer_range={initializer_range!r}"
            )
        initializer = keras.initializers.RandomNormal(stddev=initializer_range)

        # === Layers ===
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size,
            hidden_dim,
            embeddings_initializer=initializer,
            dtype=dtype,
            name="token_embedding",
        )
        self.position_embedding = RelativePositionEmbedding(
            hidden_dim,
            clamp_length=clamp_length,
            dtype=dtype,
            name="relative_position_embedding",
        )
        self.embedding_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embedding_dropout"
        )
        self.position_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="position_dropout"
        )
        self.transformer_layers = [
            TransformerXLBlock(
                num_heads=num_heads,
                head_dim=head_dim,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                attention_dropout=attention_dropout,
                pre_norm=pre_norm,
                same_length=same_length,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=initializer,
                bias_initializer=initializer,
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="output_dropout"
        )
        self.memory_cache = MemoryCache(name="memory_cache")
        compressive = compressed_memory_length > 0
        if compressive:
            self.compressive_memory = CompressiveMemory(
                compression_rate=compression_rate,
                compression=compression,
                reconstruction_loss_weight=reconstruction_loss_weight,
                name="compressive_memory",
            )
            self.compressive_memory.use_attention_of(self.transformer_layers)

        # === Functional model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        memory = keras.Input(
            shape=(num_layers, None, hidden_dim), dtype="float32", name="memory"
        )
        valid_length = keras.Input(shape=(), dtype="int32", name="valid_length")
        inputs = {
            "token_ids": token_ids,
            "memory": memory,
            "valid_length": valid_length,
        }

        # The paper's SG(.): no gradient flows into the previous segment.
        read_memory = ops.stop_gradient(memory)  # (batch, L, M, hidden)
        read_valid_length = valid_length
        if compressive:
            inputs["compressed_memory"] = keras.Input(
                shape=(num_layers, None, hidden_dim),
                dtype="float32",
                name="compressed_memory",
            )
            inputs["compressed_valid_length"] = keras.Input(
                shape=(), dtype="int32", name="compressed_valid_length"
            )
            # Both memories keep their valid slots last and the compressed
            # one fills only once the memory is full: the concatenation is
            # again "valid slots last".
            read_memory = ops.concatenate(
                [ops.stop_gradient(inputs["compressed_memory"]), read_memory],
                axis=2,
            )  # (batch, L, Mc + M, hidden)
            read_valid_length = ops.add(
                valid_length, inputs["compressed_valid_length"]
            )  # (batch,)
        x = self.token_embedding(token_ids)  # (batch, T, hidden)
        x = x * ops.cast(math.sqrt(hidden_dim), x.dtype)
        position = self.position_embedding(
            x, read_memory[:, 0]
        )  # (Mc + M + T, hidden)
        x = self.embedding_dropout(x)
        position = self.position_dropout(position)
        layer_inputs = [x]
        for i, block in enumerate(self.transformer_layers):
            x = block(
                x,
                position,
                memory=read_memory[:, i],
                memory_valid_length=read_valid_length,
            )  # (batch, T, hidden)
            layer_inputs.append(x)
        new_states = ops.stack(layer_inputs[:-1], axis=1)  # (b, L, T, hidden)
        new_memory, new_valid_length = self.memory_cache(
            memory, valid_length, new_states
        )  # (batch, L, M, hidden), (batch,)
        sequence_output = self.output_dropout(x)
        outputs = {
            "sequence_output": sequence_output,
            "memory": new_memory,
            "valid_length": new_valid_length,
        }
        if compressive:
            (
                outputs["compressed_memory"],
                outputs["compressed_valid_length"],
                outputs["reconstruction_loss"],
            ) = self.compressive_memory(
                memory,
                valid_length,
                new_states,
                inputs["compressed_memory"],
                inputs["compressed_valid_length"],
            )  # (batch, L, Mc, hidden), (batch,), ()
        super().__init__(
            inputs=inputs,
            outputs=outputs,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.head_dim = head_dim
        self.intermediate_dim = intermediate_dim
        self.memory_length = memory_length
        self.clamp_length = clamp_length
        self.same_length = same_length
        self.pre_norm = pre_norm
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.compressed_memory_length = compressed_memory_length
        self.compression_rate = compression_rate
        self.compression = compression
        self.reconstruction_loss_weight = reconstruction_loss_weight

    @property
    def memory_keys(self):
        """The keys of a memory dict of this backbone."""
        if self.compressed_memory_length:
            return _MEMORY_KEYS + _COMPRESSED_KEYS
        return _MEMORY_KEYS

    def initial_memory(
        self, batch_size, memory_length=None, compressed_memory_length=None
    ):
        """An empty memory: `memory_length` zero slots, none of them valid.

        Args:
            batch_size: int. Number of examples (streams).
            memory_length: int >= 0 or `None` (the constructor's
                `memory_length`).
            compressed_memory_length: int >= 0 or `None` (the
                constructor's). Used only when the compressive memory is on.

        Returns:
            A dict `{"memory": (batch, num_layers, M, hidden_dim) float32,
            "valid_length": (batch,) int32}`, plus `"compressed_memory"`
            `(batch, num_layers, Mc, hidden_dim)` and
            `"compressed_valid_length"` `(batch,)` when the compressive
            memory is on.
        """
        batch_size = check_positive_int("batch_size", batch_size)
        if memory_length is None:
            memory_length = self.memory_length
        memory_length = check_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        shape = (batch_size, self.num_layers, memory_length, self.hidden_dim)
        memory = {
            "memory": ops.zeros(shape, dtype="float32"),
            "valid_length": ops.zeros((batch_size,), dtype="int32"),
        }
        if self.compressed_memory_length:
            if compressed_memory_length is None:
                compressed_memory_length = self.compressed_memory_length
            compressed_memory_length = check_positive_int(
                "compressed_memory_length",
                compressed_memory_length,
                allow_zero=True,
            )
            shape = shape[:2] + (compressed_memory_length, self.hidden_dim)
            memory["compressed_memory"] = ops.zeros(shape, dtype="float32")
            memory["compressed_valid_length"] = ops.zeros(
                (batch_size,), dtype="int32"
            )
        return memory

    def check_memory(self, memory, batch_size=None):
        """Raises a `ValueError` if `memory` does not fit this backbone."""
        if not isinstance(memory, dict) or set(memory) != set(self.memory_keys):
            got = sorted(memory) if isinstance(memory, dict) else type(memory)
            raise ValueError(
                f"`memory` must be a dict with keys {list(self.memory_keys)} "
                f"(see `initial_memory()`). Received: {got}"
            )
        if self.compressed_memory_length:
            self._check_compressed_memory(memory, batch_size)
        shape = self._check_states_shape(memory, "memory", "M", batch_size)
        dtype = str(memory["memory"].dtype)
        if "float" not in dtype:
            raise ValueError(
                "`memory['memory']` must be a float tensor (float32). "
                f"Received dtype {dtype}."
            )
        valid_shape = tuple(memory["valid_length"].shape)
        if len(valid_shape) != 1 or (
            shape[0] is not None
            and valid_shape[0] is not None
            and valid_shape[0] != shape[0]
        ):
            raise ValueError(
                "`memory['valid_length']` must have shape (batch,) = "
                f"({shape[0]},). Received shape {valid_shape}."
            )

    def call_with_memory(self, token_ids, memory=None, training=False):
        """Runs one segment and returns its output and the next memory.

        Args:
            token_ids: int tensor `(batch, T)`.
            memory: dict from `initial_memory()` or from the previous call;
                `None` starts with an empty memory of the default length.
            training: bool. Dropout is active only when True.

        Returns:
            A tuple `(sequence_output, new_memory)`.
        """
        check_token_ids(token_ids, self.vocabulary_size)
        batch_size = token_ids.shape[0]
        if memory is None:
            memory = self.initial_memory(batch_size)
        self.check_memory(memory, batch_size)
        outputs = self(
            {"token_ids": ops.cast(token_ids, "int32"), **cast_memory(memory)},
            training=training,
        )
        new_memory = {key: outputs[key] for key in self.memory_keys}
        return outputs["sequence_output"], new_memory

    def _check_states_shape(self, memory, key, length_name, batch_size):
        shape = tuple(memory[key].shape)
        expected = (batch_size, self.num_layers, length_name, self.hidden_dim)
        ok = len(shape) == 4
        ok = ok and shape[1] == self.num_layers and shape[3] == self.hidden_dim
        if ok and batch_size is not None and shape[0] is not None:
            ok = shape[0] == batch_size
        if not ok:
            raise ValueError(
                f"`memory['{key}']` must have shape (batch, num_layers, "
                f"{length_name}, hidden_dim) = {expected}. Received shape "
                f"{shape}. Build it with `backbone.initial_memory(batch_size)`."
            )
        return shape

    def _check_compressed_memory(self, memory, batch_size):
        shape = self._check_states_shape(
            memory, "compressed_memory", "Mc", batch_size
        )
        valid = memory["compressed_valid_length"]
        if tuple(valid.shape) != tuple(memory["valid_length"].shape):
            raise ValueError(
                "`memory['compressed_valid_length']` must have shape (batch,)"
                f". Received shape {tuple(valid.shape)}."
            )
        if is_concrete(valid) and is_concrete(memory["valid_length"]):
            held = ops.convert_to_numpy(valid)
            filled = (
                ops.convert_to_numpy(memory["valid_length"])
                == (memory["memory"].shape[2])
            )
            if (held > shape[2]).any() or ((held > 0) & ~filled).any():
                raise ValueError(
                    "`memory['compressed_valid_length']` must be at most Mc "
                    f"= {shape[2]}, and 0 wherever the memory is not full "
                    "(the compressed memory fills only with states evicted "
                    "from a full memory). Received compressed_valid_length="
                    f"{held.tolist()}, valid_length="
                    f"{ops.convert_to_numpy(memory['valid_length']).tolist()}"
                    ". Pass the memory dict returned by the previous call."
                )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "head_dim": self.head_dim,
                "intermediate_dim": self.intermediate_dim,
                "memory_length": self.memory_length,
                "clamp_length": self.clamp_length,
                "same_length": self.same_length,
                "pre_norm": self.pre_norm,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer_range": self.initializer_range,
                "compressed_memory_length": self.compressed_memory_length,
                "compression_rate": self.compression_rate,
                "compression": self.compression,
                "reconstruction_loss_weight": self.reconstruction_loss_weight,
            }
        )
        return config


def cast_memory(memory):
    """A memory dict with float32 states and int32 valid lengths."""
    return {
        key: ops.cast(value, "int32" if "valid" in key else "float32")
        for key, value in memory.items()
    }
