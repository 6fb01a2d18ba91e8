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
from keras_txl.models import layout_map
from keras_txl.models import lora
from keras_txl.models.backbone_memory import BackboneMemory
from keras_txl.models.memory_spec import MemorySpec
from keras_txl.models.quantization import check_quantize
from keras_txl.models.quantization import quiet_layer_skips
from keras_txl.utils.config_variants import ConfigVariants
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_float_policy
from keras_txl.utils.validation import check_memory_dtype
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_float
from keras_txl.utils.validation import check_positive_int
from keras_txl.utils.validation import check_rate
from keras_txl.utils.validation import renamed_argument


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLBackbone(
    ConfigVariants, BackboneMemory, keras_hub.models.Backbone
):
    """Transformer-XL decoder (Dai et al., 2019) with an explicit memory.

    A functional Keras model that holds no state. It embeds `token_ids`
    (scaled by `sqrt(hidden_dim)`, as the authors' code; with an
    `AdaptiveEmbedding` when `cutoffs`, `div_val > 1` or an `embedding_dim`
    other than `hidden_dim` is given, else a `keras.layers.Embedding`),
    runs `num_layers` `TransformerXLBlock`s with relative positions, each
    attending to its memory, and returns the final hidden states and the
    new memory.

    Inputs, a dict:
        - `"token_ids"`: int tensor `(batch, T)`.
        - `"memory"`: float tensor `(batch, num_layers, M, hidden_dim)` of
          `memory_dtype` (the compute dtype: float32, or bfloat16 under
          `"mixed_bfloat16"`; other floats are cast). Entry `l` is the
          INPUT of layer `l` for the last `M` positions (entry 0 is the
          embedding output).
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

    The Compressive Transformer (Rae et al., 2019) is this model with a
    second, compressed memory: `CompressiveTransformerXLBackbone`.

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
        same_length: False, True or `"tensorflow"`. Every query attends to
            the same number of keys (`same_length`): True (or
            `"pytorch"`) with the mask of the authors' PyTorch code (`M`
            keys), `"tensorflow"` with the mask of their TensorFlow code
            (`M + 1` keys), which evaluated the released checkpoints. See
            `RelativeMultiHeadAttention`.
        pre_norm: bool. Pre-layer normalization (`pre_lnorm`).
        dropout: float in [0, 1). Dropout on embeddings, position
            embeddings, sublayer outputs and the final output.
        attention_dropout: float in [0, 1). Dropout on attention
            probabilities (`dropatt`).
        layer_norm_epsilon: float. Epsilon of the layer normalizations:
            1e-5 (default) as PyTorch's `nn.LayerNorm` in the authors'
            PyTorch code and HuggingFace's; 1e-12 in their TensorFlow code
            (`tf.contrib.layers.layer_norm`), which trained the released
            checkpoints.
        initializer_range: float. Standard deviation of the normal
            initializer of every weight (the authors' `init_std`, 0.02).
        cutoffs: list of int or `None`. Adaptive input (the authors'
            `cutoffs`): first token id of each tail cluster of
            `AdaptiveEmbedding`. Token ids must be sorted by frequency.
        div_val: int >= 1. Cluster `i` of the adaptive input has width
            `embedding_dim // div_val**i` (the authors' `div_val`).
        embedding_dim: int or `None`. Width of the token embedding
            (`d_embed`), projected to `hidden_dim`; `None` means
            `hidden_dim`.
        dtype: dtype policy of the layers (e.g. `"mixed_bfloat16"`).
        memory_dtype: `None` (default) or a float dtype. The dtype of the
            memory (inputs, outputs, the state carried by `fit`,
            checkpoints, SavedModel signatures). `None`: the compute dtype
            of `dtype`, so under `"mixed_bfloat16"` the memory takes half
            the bytes; that loses nothing, since the states stored are
            layer outputs already computed in that dtype. `"float32"`
            keeps the layer inputs of a mixed model's memory in float32
            (attention masks and softmax are float32 either way).
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
        dtype=None,
        memory_dtype=None,
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
        same_length = check_same_length(same_length)
        pre_norm = check_bool("pre_norm", pre_norm)
        dropout = check_rate("dropout", dropout)
        attention_dropout = check_rate("attention_dropout", attention_dropout)
        if hidden_dim % 2:
            raise ValueError(
                "`hidden_dim` must be even (the sinusoidal position "
                f"embeddings are half sine, half cosine). Received: "
                f"hidden_dim={hidden_dim}"
            )
        cutoffs = check_cutoffs(cutoffs, vocabulary_size)
        div_val = check_positive_int("div_val", div_val)
        if embedding_dim is None:
            embedding_dim = hidden_dim
        embedding_dim = check_positive_int("embedding_dim", embedding_dim)
        initializer_range = check_positive_float(
            "initializer_range", initializer_range
        )
        layer_norm_epsilon = check_positive_float(
            "layer_norm_epsilon", layer_norm_epsilon
        )
        check_float_policy("dtype", dtype)
        # The memory's dtype: `memory_dtype`, else the compute dtype (the
        # layers that write the memory then take the model's policy, as
        # every sublayer does).
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
        self.embedding_dropout = PackedDropout(
            dropout, dtype=dtype, name="embedding_dropout"
        )
        self.position_dropout = PackedDropout(
            dropout, dtype=dtype, name="position_dropout"
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
        self.cutoffs = cutoffs
        self.div_val = div_val
        self.embedding_dim = embedding_dim
        self.memory_dtype = memory_dtype

    def _embed_tokens(self, token_ids):
        """The token embeddings `(batch, T, hidden)`, scaled by
        sqrt(hidden_dim) as in the authors' code: the graph's and
        `call_with_key_value_cache`'s first step."""
        x = self.token_embedding(token_ids)  # (batch, T, hidden)
        return x * ops.cast(math.sqrt(x.shape[-1]), x.dtype)

    def _forward(self, inputs, layer_intercept_fn=None):
        """The model: the outputs dict of the inputs dict. Builds the
        functional graph in `__init__`, and runs eagerly for
        `TransformerXLCausalLM.score(layer_intercept_fn=...)`, which
        gets each layer's input: `layer_intercept_fn(x, -1)` the
        embeddings, `layer_intercept_fn(x, i)` layer `i`'s output (what
        it returns goes on, and into the memory)."""
        intercept = layer_intercept_fn or (lambda x, unused_index: x)
        memory = inputs["memory"]  # (batch, L, M, hidden)
        valid_length = inputs["valid_length"]  # (batch,)
        read_memory = self._read_memory(memory)  # (batch, L, M, hidden)
        read_memory, read_valid_length = self._prepend_compressed_memory(
            inputs, read_memory, valid_length
        )  # (batch, L, K - T, hidden), (batch,)
        x = self._embed_tokens(inputs["token_ids"])  # (batch, T, hidden)
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
            memory, valid_length, new_states
        )  # (batch, L, M, hidden), (batch,)
        return {
            "sequence_output": self.output_dropout(x),
            "memory": new_memory,
            "valid_length": new_valid_length,
            **self._write_compressed_memory(inputs, new_states),
        }

    # === Hooks of the variants ===
    # `keras_txl.ablation.AblationTransformerXLBackbone` overrides the first
    # four (the ablations' positions and gradients), and
    # `CompressiveTransformerXLBackbone` the last four (its compressed
    # memory). `__init__` calls them while it builds the graph: an
    # override reads only what the subclass set before calling
    # `super().__init__`. The compressed memory's three hooks were once
    # named after "other" memories; a subclass that overrides an old name
    # still works (`__init_subclass__`, below).

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for old, new in RENAMED_HOOKS.items():
            if old in cls.__dict__ and new not in cls.__dict__:
                warnings.warn(
                    f"`{cls.__name__}.{old}` overrides a hook of "
                    f"`TransformerXLBackbone` renamed `{new}`: rename the "
                    "method (the old name will stop working).",
                    DeprecationWarning,
                    stacklevel=2,
                )
                setattr(cls, new, cls.__dict__[old])

    def _make_block(self, **kwargs):
        """Layer `i`'s block, from `TransformerXLBlock`'s arguments."""
        return TransformerXLBlock(**kwargs)

    def _make_memory_cache(self, dtype):
        """The layer that writes the memory: the last `M` states at every
        layer's input, first in, first out (`MemoryCache`)."""
        return MemoryCache(dtype=dtype, name="memory_cache")

    def _read_memory(self, memory):
        """The memory as the layers read it: the paper's SG(.), no gradient
        flows into the previous segment."""
        return ops.stop_gradient(memory)

    def _embed_positions(self, x, memory):
        """`(x, position)`: the token embeddings `(batch, T, hidden)` and
        the sinusoidal embeddings of the relative distances `(M + T,
        hidden)` that every layer's attention reads (`memory`, `(batch, M,
        hidden)`, gives `M`)."""
        return x, self.position_embedding(x, memory)

    def _memory_spec(self, num_layers, hidden_dim, memory_length, dtype):
        """The `MemorySpec` of the inputs and outputs."""
        return MemorySpec(num_layers, hidden_dim, memory_length, dtype=dtype)

    def _build_compressed_memory(self, dtype):
        """Builds the layers that write a compressed memory (after the
        blocks); the paper's model has none."""

    def _prepend_compressed_memory(self, inputs, memory, valid_length):
        """What every layer attends to besides its segment: the memory
        states `(batch, L, M, hidden)` with their `valid_length`
        `(batch,)`, after the compressed memory of `inputs` if any."""
        return memory, valid_length

    def _write_compressed_memory(self, inputs, new_states):
        """The compressed memory's outputs (`"compressed_memory"`,
        `"compressed_valid_length"`, ...), given the states of the segment
        `(batch, L, T, hidden)` (the memory of `inputs` is the one read);
        none for the paper's model."""
        return {}

    # Whether `call_with_key_value_cache` computes what the graph computes.
    # The variants (other positions, a compressed memory) generate through
    # their graph.
    _generates_from_key_values = True

    def key_value_cache(self, memory):
        """The memory's keys and values, as `call_with_key_value_cache`
        reads them: every layer's attention projects its memory once here
        instead of again for every new token.

        Args:
            memory: dict `{"memory", "valid_length"}` (from
                `initial_memory()` or a call).

        Returns:
            A dict `{"key_values": [(batch, M, 2 * num_heads * head_dim)]
            * num_layers, "valid_length": (batch,)}`: a tensor per layer,
            so that a step copies each layer's once (a stacked tensor would
            be copied again whole).
        """
        states = memory["memory"]  # (batch, L, M, hidden)
        key_values = [
            block.key_values(states[:, i])  # (batch, M, 2 * heads * hd)
            for i, block in enumerate(self.transformer_layers)
        ]
        return {
            "key_values": key_values,
            "valid_length": ops.cast(memory["valid_length"], "int32"),
        }

    def position_keys(self, segment_length, memory_length):
        """Every layer's projected relative position embeddings for a
        segment of `segment_length` tokens after `memory_length` memory
        slots: a list of `num_layers` tensors `(num_heads, head_dim, M + T +
        1)`. They depend on the lengths alone, so generation computes them
        once for all its one-token steps (`call_with_key_value_cache`)."""
        position = self.position_embedding(
            ops.zeros((1, segment_length, 1)), ops.zeros((1, memory_length, 1))
        )  # (M + T, hidden)
        return [
            block.position_keys(position) for block in self.transformer_layers
        ]

    def call_with_key_value_cache(
        self, token_ids, key_value_cache=None, position_keys=None, **kwargs
    ):
        """Runs one segment in inference mode from a key/value cache.

        The same outputs as `call_with_memory` on the memory the key/value
        cache was made from (to float rounding), at the cost of the segment
        alone: generation's one-token steps then do not project the `M`
        memory states of every layer again.

        Args:
            token_ids: int tensor `(batch, T)`.
            key_value_cache: dict from `key_value_cache()` or the previous
                call (the old keyword `cache=` is accepted too).
            position_keys: optional list from `position_keys(T, M)`, for
                calls that share them; `None` computes them.

        Returns:
            A tuple `(sequence_output, new_key_value_cache)`: `(batch, T,
            hidden)` and the key/value cache of the next segment (the last
            `M` keys and values of each layer).
        """
        key_value_cache = renamed_argument(
            "key_value_cache", key_value_cache, "cache", kwargs
        )
        valid_length = ops.cast(
            key_value_cache["valid_length"], "int32"
        )  # (batch,)
        memory_length = ops.shape(key_value_cache["key_values"][0])[1]
        segment_length = ops.shape(token_ids)[1]
        x = self._embed_tokens(token_ids)  # (batch, T, hidden)
        if position_keys is None:
            position_keys = self.position_keys(segment_length, memory_length)
        new_key_values = []
        for i, block in enumerate(self.transformer_layers):
            memory = key_value_cache["key_values"][i]  # (b, M, 2 * h * hd)
            key_values = ops.concatenate(
                [ops.cast(memory, x.dtype), block.key_values(x)], axis=1
            )  # (batch, M + T, 2 * heads * head_dim)
            x = block(
                x,
                None,
                memory_valid_length=valid_length,
                key_values=key_values,
                position_keys=position_keys[i],
            )  # (batch, T, hidden)
            new_key_values.append(
                ops.slice(
                    key_values,
                    [0, segment_length, 0],
                    ops.shape(memory),
                )
            )  # (batch, M, 2 * heads * head_dim): the last M
        valid_length = ops.minimum(
            valid_length + segment_length, memory_length
        )  # (batch,)
        return x, {"key_values": new_key_values, "valid_length": valid_length}

    @staticmethod
    def get_layout_map(
        device_mesh,
        model_parallel_dim_name="model",
        data_parallel_dim_name="batch",
    ):
        """A `keras.distribution.LayoutMap` that shards the weights over
        `device_mesh`, as keras-hub's backbones' (Gemma, Llama), and lays
        out the memory carried by `TransformerXLCausalLM.fit`.

        Along `model_parallel_dim_name`: the token embedding's rows (and
        an untied output layer's columns), the attention heads of the
        query, key, value, position and output projections (and their
        `u`, `v` biases), the feed-forward's inner axis. Along
        `data_parallel_dim_name`: the hidden axis of those kernels, and
        the batch axis of the carried memory. An adaptive embedding and
        softmax stay whole.

        Each split size must be a multiple of its mesh axis's size: the
        vocabulary, `num_heads` and `intermediate_dim` of the model axis,
        `hidden_dim` of the data axis (JAX refuses an uneven split with
        an `IndivisibleError` when the weights are made). Pad the
        vocabulary to a multiple, as `examples/distributed_training.py`
        does.

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

        Returns:
            A `keras.distribution.LayoutMap`.
        """
        return layout_map.transformer_xl_layout_map(
            device_mesh, model_parallel_dim_name, data_parallel_dim_name
        )

    def default_lora_layer_names(self):
        """The layers `enable_lora` adapts by default: the attention's
        query and value projections (`["query", "value"]`)."""
        return list(lora.DEFAULT_LORA_TARGETS)

    def enable_lora(self, rank, target_layer_names=None):
        """keras-hub's LoRA: freezes every weight and adds trainable
        low-rank updates of rank `rank` to the target projections.

        Only the LoRA kernels train, so `save_lora_weights` holds all that
        training changes (keras-hub leaves the bias of a `Dense` target
        trainable). Targets, by layer name, in every block: `"query"`,
        `"value"` (the default), `"key"`, `"position"` (the relative
        positions' projection), `"attention_output"`, and the
        feed-forward's `"intermediate"` and `"output"`.

        Args:
            rank: int >= 1. Rank of the updates.
            target_layer_names: list of layer names, or `None` for
                `default_lora_layer_names()`.
        """
        rank = check_positive_int("rank", rank)
        if target_layer_names is None:
            target_layer_names = self.default_lora_layer_names()
        names = lora.check_lora_targets(self, target_layer_names)
        super().enable_lora(rank, target_layer_names=names)
        lora.freeze_all_but_lora(self)

    def load_lora_weights(self, filepath):
        """Loads `save_lora_weights`'s file; enables LoRA first, on the
        layers the file holds, if it is not enabled."""
        if not getattr(self, "_lora_enabled_layers", []):
            import h5py

            with h5py.File(filepath, "r") as file:
                rank = int(file["lora"]["vars"]["rank"][()])
            self.enable_lora(rank, lora.lora_targets_in_file(self, filepath))
        super().load_lora_weights(filepath)

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """`keras.Model.quantize`, checked before anything changes.

        Modes `"int8"`, `"int4"` and `"float8"` quantize the `Dense`,
        `EinsumDense` (and, for the integer modes, `Embedding`) layers;
        the attention then runs its projections through the quantized
        layers' calls. `"gptq"` and `"awq"` are refused: their
        block-by-block calibration calls a block without its memory and
        position embeddings. The adaptive embedding, the compressive
        memory's convolution and the learned distance embeddings stay
        float. See `Model.quantize` for the arguments.
        """
        mode = check_quantize(self, mode, config)
        with quiet_layer_skips():  # the layers left float, as said above
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
                "memory_dtype": self.memory_dtype,
            }
        )
        return config

    # Subclasses that load configs this class once took (the Compressive
    # Transformer's and the ablations' arguments), each listed when its
    # module is imported (`import keras_txl` imports them all).
    _config_variants = []

    @classmethod
    def from_config(cls, config):
        # This class once took the compressive memory's and the ablations'
        # arguments: such configs (presets, `.keras` files) load as the
        # variant they describe, or as this class when they are the
        # paper's setting.
        config = dict(config)
        if cls is not TransformerXLBackbone:
            return super().from_config(config)
        variant = cls._config_variant(config)
        if variant is not None:
            return variant.from_config(config)
        unknown = {
            key: config[key]
            for key, value in ABLATION_ARGUMENTS.items()
            if key in config and config[key] != value
        }
        if config.get("compressed_memory_length"):
            unknown["compressed_memory_length"] = config[
                "compressed_memory_length"
            ]
        if unknown:
            raise ValueError(
                f"This config describes a variant of the backbone ({unknown})"
                " that is not registered: load it after `import keras_txl`."
            )
        for key in COMPRESSIVE_ARGUMENTS + tuple(ABLATION_ARGUMENTS):
            config.pop(key, None)
        return super().from_config(config)


# The paper's setting of the ablations' arguments.
ABLATION_ARGUMENTS = {
    "position_encoding": "relative",
    "max_relative_distance": None,
    "stop_memory_gradient": True,
}
# Old names of the compressed memory's hooks: new names.
RENAMED_HOOKS = {
    "_build_other_memory": "_build_compressed_memory",
    "_extend_read_memory": "_prepend_compressed_memory",
    "_write_other_memory": "_write_compressed_memory",
}
COMPRESSIVE_ARGUMENTS = (
    "compressed_memory_length",
    "compression_rate",
    "compression",
    "reconstruction_loss_weight",
)
