"""`TransformerXLBackbone`: the paper's model with an explicit memory.

Top to bottom: the graph (`_forward`), the hooks its variants override,
the explicit memory, and what keras-hub backbones offer (`get_layout_map`,
LoRA, `quantize`)."""

import math
import warnings

import keras
import keras_hub
from keras import ops

from keras_txl.layers.adaptive_embedding import AdaptiveEmbedding
from keras_txl.layers.adaptive_embedding import check_cutoffs
from keras_txl.layers.memory_cache import MemoryCache
from keras_txl.layers.packed_dropout import PackedDropout
from keras_txl.layers.relative_multi_head_attention import check_same_length
from keras_txl.layers.relative_position_embedding import (
    RelativePositionEmbedding,
)
from keras_txl.layers.transformer_xl_block import TransformerXLBlock
from keras_txl.models.memory_spec import MemorySpec
from keras_txl.models.memory_spec import check_memory_start
from keras_txl.models.piece_buckets import call_padded
from keras_txl.models.piece_buckets import counted_tokens
from keras_txl.models.piece_buckets import pads_to_bucket
from keras_txl.models.transformer_xl_layout_map import check_vocabulary_layout
from keras_txl.models.transformer_xl_layout_map import transformer_xl_layout_map
from keras_txl.utils.config_variants import drop_variant_arguments
from keras_txl.utils.config_variants import saved_variant
from keras_txl.utils.threefry_lowering import unroll_threefry_on_cpu
from keras_txl.utils.token_data import check_token_ids
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_float_policy
from keras_txl.utils.validation import check_memory_dtype
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_float
from keras_txl.utils.validation import check_positive_int
from keras_txl.utils.validation import check_rate

# The layers LoRA can target, by name, in every block: the attention's
# projections, and the feed-forward's two layers.
LORA_TARGETS = ("query", "key", "value", "position", "attention_output")
LORA_TARGETS += ("intermediate", "output")


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLBackbone(keras_hub.models.Backbone):
    """Transformer-XL decoder (Dai et al., 2019) with an explicit memory.

    A functional Keras model that holds no state. It embeds `token_ids`
    (scaled by `sqrt(hidden_dim)`, as the authors' code; an
    `AdaptiveEmbedding` when `cutoffs`, `div_val > 1` or an `embedding_dim`
    other than `hidden_dim` is given), runs `num_layers`
    `TransformerXLBlock`s with relative positions, each attending to its
    memory, and returns the final hidden states and the new memory.

    Inputs, a dict:
        - `"token_ids"`: int `(batch, T)`.
        - `"memory"`: `(batch, num_layers, M, hidden_dim)` of
          `memory_dtype`. Entry `l` is the INPUT of layer `l` at the last
          `M` positions (entry 0 is the embedding output).
        - `"valid_length"`: int32 `(batch,)`: how many of the `M` slots,
          the last ones, hold states. 0 is an empty memory: the segment
          computes exactly what a model without memory computes.

    Outputs, a dict: `"sequence_output"` `(batch, T, hidden_dim)`, and
    `"memory"` and `"valid_length"` for the next segment, of the shape
    that came in (FIFO, gradients stopped). `M` may change from call to
    call (the constructor's `memory_length` is the default of
    `initial_memory()`): evaluating with a longer memory than in training
    is the paper's setting. `memory_spec` says what a memory holds.

    Args:
        vocabulary_size: int. Number of token ids.
        num_layers: int. Number of `TransformerXLBlock`s.
        num_heads: int. Attention heads per layer.
        hidden_dim: int, even. Width of the hidden states (`d_model`).
        head_dim: int. Size of each head (`d_head`).
        intermediate_dim: int. Width of the feed-forward networks
            (`d_inner`).
        memory_length: int >= 0. Default memory length `M` (`mem_len`).
        clamp_length: int or `None`. Relative distances above it share one
            embedding (`clamp_len`); `None` keeps all distances.
        same_length: False, True (`"pytorch"`) or `"tensorflow"`: every
            query attends to the same number of keys, with the mask of the
            authors' PyTorch code (`M` keys) or of their TensorFlow code
            (`M + 1`), which evaluated the released checkpoints. See
            `RelativeMultiHeadAttention`.
        pre_norm: bool. Pre-layer normalization (`pre_lnorm`).
        dropout: float in [0, 1). Dropout on embeddings, position
            embeddings, sublayer outputs and the final output.
        attention_dropout: float in [0, 1). Dropout on attention
            probabilities (`dropatt`).
        layer_norm_epsilon: float. 1e-5 (default) as the authors' PyTorch
            code and HuggingFace; 1e-12 in their TensorFlow code.
        initializer_range: float. Standard deviation of the normal
            initializer of every weight (`init_std`).
        cutoffs: list of int or `None`. Adaptive input: first token id of
            each tail cluster (ids sorted by frequency).
        div_val: int >= 1. Cluster `i` of the adaptive input has width
            `embedding_dim // div_val**i`.
        embedding_dim: int or `None` (`hidden_dim`). Width of the token
            embedding (`d_embed`), projected to `hidden_dim`.
        tie_relative_biases: bool. True: one `u`, `v` pair (`content_bias`,
            `position_bias`) for all layers, owned by layer 0, as the
            authors' PyTorch code (`r_w_bias`, `r_r_bias`) and their
            TensorFlow code with `untie_r=False`. False (default): a pair
            per layer, as the released checkpoints (their TensorFlow sota
            scripts set `untie_r`) and HuggingFace's, and as every
            keras-txl model saved before this option (a config without it
            loads untied). The converters set it from the source.
        dtype: dtype policy of the layers (e.g. `"mixed_bfloat16"`).
        memory_dtype: `None` (the compute dtype: half the bytes under
            `"mixed_bfloat16"`, losing nothing since the states stored
            are layer outputs computed in it) or a float dtype for the
            memory (inputs, outputs, carried state, checkpoints, serving
            signatures).
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
        cutoffs=None,
        div_val=1,
        embedding_dim=None,
        tie_relative_biases=False,
        dtype=None,
        memory_dtype=None,
        **kwargs,
    ):
        if keras.config.backend() == "jax":
            unroll_threefry_on_cpu()  # dropout's bits, without a CPU loop
        vocabulary_size, num_layers, num_heads, hidden_dim, head_dim = (
            check_positive_int(name, value)
            for name, value in (
                ("vocabulary_size", vocabulary_size),
                ("num_layers", num_layers),
                ("num_heads", num_heads),
                ("hidden_dim", hidden_dim),
                ("head_dim", head_dim),
            )
        )
        intermediate_dim = check_positive_int(
            "intermediate_dim", intermediate_dim
        )
        memory_length = check_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        if hidden_dim % 2:
            raise ValueError(
                "`hidden_dim` must be even (the sinusoidal position "
                f"embeddings are half sine, half cosine). Received: "
                f"hidden_dim={hidden_dim}"
            )
        clamp_length = check_optional_positive_int("clamp_length", clamp_length)
        same_length = check_same_length(same_length)
        pre_norm = check_bool("pre_norm", pre_norm)
        dropout = check_rate("dropout", dropout)
        attention_dropout = check_rate("attention_dropout", attention_dropout)
        layer_norm_epsilon = check_positive_float(
            "layer_norm_epsilon", layer_norm_epsilon
        )
        initializer_range = check_positive_float(
            "initializer_range", initializer_range
        )
        cutoffs = check_cutoffs(cutoffs, vocabulary_size)
        div_val = check_positive_int("div_val", div_val)
        embedding_dim = check_positive_int(
            "embedding_dim",
            hidden_dim if embedding_dim is None else embedding_dim,
        )
        tie_relative_biases = check_bool(
            "tie_relative_biases", tie_relative_biases
        )
        check_float_policy("dtype", dtype)
        # The memory's dtype: `memory_dtype`, else the compute dtype (the
        # layers that write the memory then take the model's policy).
        states_dtype = check_memory_dtype(memory_dtype, dtype)
        memory_layers_dtype = dtype if memory_dtype is None else states_dtype
        initializer = keras.initializers.RandomNormal(stddev=initializer_range)

        # === Layers ===
        if cutoffs or div_val != 1 or embedding_dim != hidden_dim:
            self.token_embedding = AdaptiveEmbedding(
                vocabulary_size,
                embedding_dim,
                hidden_dim,
                cutoffs=cutoffs,
                div_val=div_val,
                embeddings_initializer=initializer,
                projection_initializer=initializer,
                dtype=dtype,
                name="token_embedding",
            )
        else:
            check_vocabulary_layout(
                "token_embedding/embeddings", vocabulary_size, axis=0
            )
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
        self.embedding_dropout, self.position_dropout = (
            PackedDropout(dropout, dtype=dtype, name=f"{part}_dropout")
            for part in ("embedding", "position")
        )
        self.transformer_layers = [
            self._make_block(
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
        for block in self.transformer_layers[1:] if tie_relative_biases else []:
            block.share_relative_biases(self.transformer_layers[0])
        self.output_dropout = PackedDropout(
            dropout, dtype=dtype, name="output_dropout"
        )
        self.memory_cache = self._make_memory_cache(memory_layers_dtype)
        self._build_compressed_memory(memory_layers_dtype)

        # === Functional model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        memory_spec = self._memory_spec(
            num_layers, hidden_dim, memory_length, states_dtype
        )
        inputs = {"token_ids": token_ids, **memory_spec.inputs()}
        outputs = self._forward(inputs)
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

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
        self.cutoffs = cutoffs
        self.div_val = div_val
        self.embedding_dim = embedding_dim
        self.tie_relative_biases = tie_relative_biases
        self.memory_dtype = memory_dtype

    def embed_tokens(self, token_ids):
        """Token embeddings `(batch, T, hidden)` of int `token_ids`,
        scaled by sqrt(hidden_dim), as the authors' (what the first layer
        reads; generation's key/value steps start here)."""
        x = self.token_embedding(token_ids)  # (batch, T, hidden)
        return x * ops.cast(math.sqrt(x.shape[-1]), x.dtype)

    def call_with_intercept(self, inputs, layer_intercept_fn=None):
        """The outputs dict of the inputs dict, computed eagerly layer by
        layer (or traced, inside a compiled function), each output
        replaced by `layer_intercept_fn(x, i)` (`i = -1` for the scaled
        token embeddings, `i` for layer `i`'s output, which goes on and
        into the memory), as keras-hub's `score(layer_intercept_fn=...)`.

        `inputs` may also hold `"token_count"`, int32 `(batch,)`: the
        segment is padded at its end and only each row's first
        `token_count` tokens are text. Their outputs are those of the
        unpadded segment (the attention is causal: a token never sees
        the ones after it) and only their states enter the next memory
        (`MemoryCache`), so the outputs and the memory are those of the
        unpadded rows; the outputs at the padded positions are to be
        dropped. This is how `call_with_memory` and `score` run a piece
        of any length at a few bucket lengths (`bucket_length`,
        `piece_buckets.py`). The functional graph (`call`, the
        SavedModel) takes no count. Only backbones with `counts_tokens`
        (the paper's model) accept it.

        Args:
            inputs: dict `{"token_ids", **memory}`, as `call`'s, and
                optionally `"token_count"`.
            layer_intercept_fn: `fn(x, i)` returning `x`'s replacement,
                or `None` (the identity).

        Returns:
            The outputs dict of `call`.
        """
        return self._forward(inputs, layer_intercept_fn)

    def _forward(self, inputs, layer_intercept_fn=None):
        """The outputs dict of the inputs dict: the functional graph, or
        eagerly through `call_with_intercept`."""
        intercept = layer_intercept_fn or (lambda x, unused_index: x)
        counted = counted_tokens(self, inputs)  # {"token_count"} or {}
        memory = inputs["memory"]  # (batch, L, M, hidden)
        valid_length = inputs["valid_length"]  # (batch,)
        read_memory = self._read_memory(memory)  # (batch, L, M, hidden)
        read_memory, read_valid_length = self._prepend_compressed_memory(
            inputs, read_memory, valid_length
        )  # (batch, L, K - T, hidden), (batch,)
        x = self.embed_tokens(inputs["token_ids"])  # (batch, T, hidden)
        x, position = self._embed_positions(
            x, read_memory[:, 0]
        )  # (batch, T, hidden), (K, hidden) or None
        x = self.embedding_dropout(intercept(x, -1))
        if position is not None:
            position = self.position_dropout(position)
        layer_inputs = [x]
        for i, block in enumerate(self.transformer_layers):
            x = block(
                x,
                position,
                memory=read_memory[:, i],
                memory_valid_length=read_valid_length,
            )  # (batch, T, hidden)
            x = intercept(x, i)
            layer_inputs.append(x)
        new_states = ops.stack(layer_inputs[:-1], axis=1)  # (b, L, T, hidden)
        new_memory, new_valid_length = self.memory_cache(
            memory, valid_length, new_states, **counted
        )  # (batch, L, M, hidden), (batch,)
        return {
            "sequence_output": self.output_dropout(x),
            "memory": new_memory,
            "valid_length": new_valid_length,
            **self._write_compressed_memory(inputs, new_states),
        }

    # === Hooks of the variants ===
    # The ablations override the first four, the Compressive Transformer
    # the last four. `__init__` calls them while it builds the graph: an
    # override reads only what its class set before `super().__init__`.

    def _make_block(self, **kwargs):
        """Layer `i`'s block, from `TransformerXLBlock`'s arguments."""
        return TransformerXLBlock(**kwargs)

    def _make_memory_cache(self, dtype):
        """The layer that writes the memory (`MemoryCache`: the last `M`
        states at every layer's input, first in, first out)."""
        return MemoryCache(dtype=dtype, name="memory_cache")

    def _read_memory(self, memory):
        """The memory as the layers read it: the paper's SG(.)."""
        return ops.stop_gradient(memory)

    def _embed_positions(self, x, memory):
        """`(x, position)`: the token embeddings and the sinusoids of the
        relative distances `(M + T, hidden)` that every layer reads."""
        return x, self.position_embedding(x, memory)

    def _memory_spec(self, num_layers, hidden_dim, memory_length, dtype):
        """The `MemorySpec` of the inputs and outputs."""
        return MemorySpec(num_layers, hidden_dim, memory_length, dtype=dtype)

    def _build_compressed_memory(self, dtype):
        """Builds the layers that write a compressed memory; none here."""

    def _prepend_compressed_memory(self, inputs, memory, valid_length):
        """What every layer attends to besides its segment, `(memory
        (batch, L, K - T, hidden), valid_length (batch,))`: here the
        memory states alone."""
        return memory, valid_length

    def _write_compressed_memory(self, inputs, new_states):
        """The compressed memory's outputs, given the segment's states
        `(batch, L, T, hidden)`; none here."""
        return {}

    # Whether generation may step on the key/value cache of the relative
    # attention (`TransformerXLCausalLM.generate_step` reads it); the
    # variants generate through their graph and set it to False.
    generates_from_key_values = True
    # Whether `call_with_intercept` takes a `"token_count"` (segments
    # padded to a bucket length: `call_with_memory`, `score`); the
    # variants, whose memories are written otherwise, do not.
    counts_tokens = True

    # === The explicit memory ===

    @property
    def memory_spec(self):
        """The `MemorySpec` of this backbone's memory (keys, shapes and
        dtypes at the constructor's lengths)."""
        dtype = self.memory_cache.compute_dtype
        return self._memory_spec(
            self.num_layers, self.hidden_dim, self.memory_length, dtype
        )

    def initial_memory(self, batch_size, memory_length=None, start="empty"):
        """The memory of a first segment: `memory_length` zero slots.

        Two conventions exist, and give different numbers:
        `start="empty"` (default): no slot is valid, the first segment
        attends only to itself, as in the authors' PyTorch code;
        `start="zeros"`: the zero vectors count as states and every layer
        attends to them, as in the authors' TensorFlow code (which trained
        and evaluated the released checkpoints) and HuggingFace's.

        Args:
            batch_size: int. Number of examples (streams).
            memory_length: int >= 0 or `None` (the constructor's).
            start: `"empty"` or `"zeros"`.

        Returns:
            A dict `{"memory": (batch, num_layers, M, hidden_dim),
            "valid_length": (batch,) int32}`.
        """
        return self._zero_memory(batch_size, memory_length, start)

    def _zero_memory(self, batch_size, memory_length, start, **lengths):
        """`initial_memory`, checked; `lengths`: the compressed memory's."""
        batch_size = check_positive_int("batch_size", batch_size)
        if memory_length is None:
            memory_length = self.memory_length
        memory_length = check_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        start = check_memory_start(start)
        return self.memory_spec.zeros(
            batch_size,
            memory_length,
            valid_length=memory_length if start == "zeros" else 0,
            **lengths,
        )

    def check_memory(self, memory, batch_size=None):
        """Raises a `ValueError` if `memory` does not fit this backbone
        (`MemorySpec.check`)."""
        self.memory_spec.check(memory, batch_size)

    def call_with_memory(
        self, token_ids, memory=None, training=False, pad_to_bucket=None
    ):
        """Runs one segment and returns its output and the next memory.

        A piece of a new length `T` costs a compilation of every
        operation on JAX (about 2 s for a tiny model on a shared CPU;
        TensorFlow and torch run eagerly and compile nothing). With
        `pad_to_bucket`, the piece runs padded at its end to
        `bucket_length(T)` (the next power of two, at least 8: pieces of
        1 to `N` tokens compile at most `max(1, ceil(log2(N)) - 2)`
        times), with the same outputs and the same next memory as
        unpadded (only the `T` tokens' states enter it; see
        `call_with_intercept` and `piece_buckets.py`).

        Args:
            token_ids: int tensor `(batch, T)`.
            memory: dict from `initial_memory()` or the previous call;
                `None` starts empty, at the default length.
            training: bool. Dropout is active only when True.
            pad_to_bucket: bool or `None`. Pad the piece to its bucket
                length; `None` (default) pads on JAX when not training
                (for a backbone with `counts_tokens`). True needs
                `training=False`.

        Returns:
            A tuple `(sequence_output, new_memory)`.
        """
        token_ids = check_token_ids(token_ids, self.vocabulary_size)
        batch_size = token_ids.shape[0]
        if memory is None:
            memory = self.initial_memory(batch_size)
        self.check_memory(memory, batch_size)
        inputs = {
            "token_ids": ops.cast(token_ids, "int32"),
            **self.memory_spec.cast(memory),
        }
        if pads_to_bucket(self, pad_to_bucket, training):
            return call_padded(self, inputs)
        outputs = self(inputs, training=training)
        return outputs["sequence_output"], self.memory_spec.select(outputs)

    # === Sharding, LoRA, quantization ===

    @staticmethod
    def get_layout_map(
        device_mesh,
        model_parallel_dim_name="model",
        data_parallel_dim_name="batch",
        vocabulary_size=None,
    ):
        """A `keras.distribution.LayoutMap` that shards the weights over
        `device_mesh`, as keras-hub's backbones' (Gemma, Llama), and lays
        out the memory that `TransformerXLCausalLM.fit` carries.

        Along `model_parallel_dim_name`: the token embedding's rows (and
        an untied output layer's columns), the attention heads of every
        projection (and of `u`, `v`), the feed-forward's inner axis. Along
        `data_parallel_dim_name`: the hidden axis of those kernels and the
        batch axis of the carried memory. An adaptive embedding and
        softmax stay whole. Each split size must be a multiple of its mesh
        axis (JAX refuses an uneven split when the weights are made). A
        vocabulary that does not divide the model axis (the default
        character run's 103) is replicated, not padded: pass
        `vocabulary_size` and the vocabulary axis of the embedding and of
        the output layer stays whole on every device (the hidden axis
        is still split), so a saved run loads unchanged. Without it (or
        with any layout that splits the vocabulary unevenly), making the
        model raises a `ValueError` that names `vocabulary_size=`.

        Example:

        ```python
        mesh = keras.distribution.DeviceMesh(
            (2, 4), ("batch", "model"), keras.distribution.list_devices()
        )
        layout_map = TransformerXLBackbone.get_layout_map(mesh)
        keras.distribution.set_distribution(
            keras.distribution.ModelParallel(layout_map=layout_map)
        )
        lm = TransformerXLCausalLM.from_preset(...)  # sharded as built
        ```

        Args:
            device_mesh: a `keras.distribution.DeviceMesh`.
            model_parallel_dim_name: str. Mesh axis of the model shards.
            data_parallel_dim_name: str. Mesh axis of the batch.
            vocabulary_size: int or None. The model's vocabulary; when
                it is not a multiple of the model axis's size, the
                vocabulary axis is replicated. None shards it.

        Returns:
            A `keras.distribution.LayoutMap`.
        """
        return transformer_xl_layout_map(
            device_mesh,
            model_parallel_dim_name,
            data_parallel_dim_name,
            vocabulary_size,
        )

    def default_lora_layer_names(self):
        """The layers `enable_lora` adapts by default: the attention's
        query and value projections."""
        return ["query", "value"]

    def enable_lora(self, rank, target_layer_names=None):
        """keras-hub's LoRA, with every other weight frozen: only the
        low-rank updates train, so `save_lora_weights` holds all that
        training changes (keras-hub leaves a `Dense` target's bias
        trainable).

        Args:
            rank: int >= 1. Rank of the updates.
            target_layer_names: names among `LORA_TARGETS`, or `None`
                for `default_lora_layer_names()`.
        """
        rank = check_positive_int("rank", rank)
        if target_layer_names is None:
            target_layer_names = self.default_lora_layer_names()
        if isinstance(target_layer_names, str):
            target_layer_names = [target_layer_names]
        names = list(target_layer_names)
        # The projections with a kernel, by layer name (a path's last but
        # one part): "transformer_layer_0/attention/query/kernel".
        present = {
            weight.path.split("/")[-2]
            for weight in self.weights
            if weight.path.endswith("/kernel")
        } & set(LORA_TARGETS)
        if not names or any(name not in present for name in names):
            raise ValueError(
                "`target_layer_names` must name layers that LoRA can adapt: "
                f"{', '.join(sorted(present))}. Received: "
                f"{target_layer_names!r}"
            )
        super().enable_lora(rank, target_layer_names=names)
        freeze_all_but_lora(self)

    def load_lora_weights(self, filepath):
        """Loads `save_lora_weights`'s file; enables LoRA first, on the
        layers the file holds, if it is not enabled."""
        if not lora_enabled(self):
            import h5py

            with h5py.File(filepath, "r") as file:
                group = file["lora"] if "lora" in file else {}
                rank = int(group["vars"]["rank"][()]) if group else 0
                indices = sorted(int(key) for key in group if key.isdigit())
            # keras-hub's file names each layer by its index among the
            # layers with weights, in `_flatten_layers` order (its own
            # `save_lora_weights`): the one private use LoRA needs
            # (CONTRIBUTING.md, "Private APIs").
            layers = [
                layer
                for layer in self._flatten_layers(include_self=False)
                if layer.weights
            ]
            if not indices or indices[-1] >= len(layers):
                raise ValueError(
                    f"{filepath} holds no LoRA weights of this backbone. "
                    "Save them with `save_lora_weights` from a model of the "
                    "same config."
                )
            names = sorted({layers[index].name for index in indices})
            self.enable_lora(rank, names)
        super().load_lora_weights(filepath)

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """`keras.Model.quantize`, checked before anything changes.

        Modes `"int8"`, `"int4"` and `"float8"` quantize the `Dense`,
        `EinsumDense` (and for the integer modes `Embedding`) layers; the
        attention then runs its projections through their calls. `"gptq"`
        and `"awq"` are refused (they calibrate a block without its memory
        and positions). The adaptive embedding, the compressive memory's
        convolution and learned distance embeddings stay float.
        """
        mode = check_quantize(self, mode, config)
        with warnings.catch_warnings():
            # One line per layer left as is (no weights; an `Embedding`
            # under float8): what this docstring says once.
            for message in (
                "Layer .* does not have a `quantize` method",
                "Invalid quantization mode",
            ):
                warnings.filterwarnings("ignore", message, UserWarning)
            super().quantize(mode, config=config, filters=filters, **kwargs)

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
                "cutoffs": list(self.cutoffs),
                "div_val": self.div_val,
                "embedding_dim": self.embedding_dim,
                "tie_relative_biases": self.tie_relative_biases,
                "memory_dtype": self.memory_dtype,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        if cls is TransformerXLBackbone:
            # Configs saved when this class took the arguments of its
            # variants load as the variant they describe
            # (`utils/config_variants.py`); the variants import this
            # module, so they are imported here, where they are needed.
            from keras_txl.ablation.ablation_transformer_xl_backbone import (
                AblationTransformerXLBackbone,
            )
            from keras_txl.models.compressive_transformer_xl_backbone import (
                CompressiveTransformerXLBackbone,
            )

            variants = (
                CompressiveTransformerXLBackbone,
                AblationTransformerXLBackbone,
            )
            variant = saved_variant(config, variants)
            if variant is not None:
                return variant.from_config(config)
            config = drop_variant_arguments(config, variants)
        return super().from_config(config)


def lora_enabled(model):
    """Whether LoRA is enabled on any layer of `model` (its updates are
    the variables named `lora_kernel_a`, `lora_kernel_b`)."""
    return any("lora_kernel" in weight.path for weight in model.weights)


def freeze_all_but_lora(model):
    """Makes every variable of `model` but the LoRA kernels non-trainable
    (keras-hub's `enable_lora` leaves a `Dense` target's bias, and a
    task's output layer, trainable; `save_lora_weights` saves neither)."""
    for variable in model.variables:
        if variable.trainable and "lora_kernel" not in variable.path:
            variable.trainable = False


# Keras's quantization modes that these models compute correctly: the
# `Dense`, `EinsumDense` and `Embedding` layers quantize their own weights
# and every layer here reads them through their calls. GPTQ and AWQ
# calibrate a block on the previous block's outputs alone, and a
# Transformer-XL block also needs its memory and position embeddings.
QUANTIZATION_MODES = ("int8", "int4", "float8")


def check_quantize(model, mode, config):
    """Raises a `ValueError` if `model.quantize(mode, config=config)`
    cannot give correct numbers, before any layer changes (Keras checks a
    layer only when it reaches it, so a refusal half-way would leave some
    layers quantized). Returns the mode (from `config` when `mode` is
    `None`)."""
    if mode is None and config is not None:
        mode = getattr(config, "mode", None)
    if mode in ("gptq", "awq"):
        raise ValueError(
            f"keras-txl models do not support quantize(mode={mode!r}): it "
            "calibrates each block on the previous block's outputs alone, "
            "and a Transformer-XL block also needs its memory and the "
            f"relative position embeddings. Use one of {QUANTIZATION_MODES}."
        )
    if mode not in QUANTIZATION_MODES:
        raise ValueError(
            f"`mode` must be one of {list(QUANTIZATION_MODES)}. Received: "
            f"mode={mode!r}"
        )
    if model.quantization_mode is not None or any(
        weight.path.endswith(("kernel_scale", "embeddings_scale"))
        for weight in model.weights
    ):
        raise ValueError(
            f"{model.name} is already quantized. Quantize a float model "
            f"once. Received: mode={mode!r}"
        )
    return mode
