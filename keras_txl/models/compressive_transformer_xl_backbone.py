import keras
from keras import ops

from keras_txl.layers.compressive_memory import CompressiveMemory
from keras_txl.layers.compressive_memory import check_compression
from keras_txl.layers.compressive_memory import check_loss_weight
from keras_txl.models.memory_spec import MemorySpec
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.utils.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_txl")
class CompressiveTransformerXLBackbone(TransformerXLBackbone):
    """The Compressive Transformer (Rae et al., 2019): Transformer-XL whose
    evicted memory states are compressed into a second memory, not dropped.

    `TransformerXLBackbone` plus a `CompressiveMemory`: the states that
    fall out of the `M`-slot memory are compressed at rate
    `compression_rate` into a memory of `compressed_memory_length = Mc`
    slots, and every layer attends to `[compressed memory; memory;
    segment]` (see docs/compressive.md). Until something is compressed it
    computes exactly what the paper's model computes.

    Inputs and outputs are those of `TransformerXLBackbone`, plus
    `"compressed_memory"` (`(batch, num_layers, Mc, hidden_dim)`, of
    `memory_dtype`) and `"compressed_valid_length"` (int32 `(batch,)`,
    valid slots last) in both, and the output `"reconstruction_loss"`
    (float32 scalar, the attention-reconstruction loss of the segment).
    For `compression="conv"` that loss, times `reconstruction_loss_weight`,
    is added with `add_loss` in training. The compressed memory is always
    read and stored under stop-gradient.

    Args:
        compressed_memory_length: int >= 1. Default compressed memory
            length `Mc`.
        compression_rate: int >= 1. Evicted states per compressed slot
            (`c`); segments must be a multiple of it.
        compression: `"mean"`, `"max"` or `"conv"`: how `c` states become
            one slot.
        reconstruction_loss_weight: float >= 0. Weight of the
            attention-reconstruction loss (`"conv"` only).
        **kwargs: the arguments of `TransformerXLBackbone`.

    Example:

    >>> import numpy as np
    >>> backbone = CompressiveTransformerXLBackbone(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
    ...     head_dim=8, intermediate_dim=32, memory_length=4,
    ...     compressed_memory_length=3, compression_rate=2,
    ... )
    >>> memory = backbone.initial_memory(batch_size=2)
    >>> for segment in np.split(np.arange(24).reshape(2, 12) % 50, 3, 1):
    ...     output, memory = backbone.call_with_memory(segment, memory)
    >>> tuple(memory["compressed_memory"].shape)
    (2, 2, 3, 16)
    >>> [int(v) for v in memory["compressed_valid_length"]]
    [3, 3]
    """

    # Generation runs the graph (a second memory), and segments run
    # unpadded (the compressed memory is written from whole segments).
    generates_from_key_values = False
    counts_tokens = False
    # Configs of `TransformerXLBackbone` with a compressed memory load here
    # (`utils/config_variants.py`).
    base_arguments = {
        "compressed_memory_length": 0,
        "compression_rate": None,
        "compression": None,
        "reconstruction_loss_weight": None,
    }

    def __init__(
        self,
        compressed_memory_length,
        compression_rate=1,
        compression="mean",
        reconstruction_loss_weight=1.0,
        **kwargs,
    ):
        # Set before the model is built: `TransformerXLBackbone.__init__`
        # builds the functional graph through the hooks below.
        self.compressed_memory_length = check_positive_int(
            "compressed_memory_length", compressed_memory_length
        )
        self.compression_rate = check_positive_int(
            "compression_rate", compression_rate
        )
        self.compression = check_compression(compression)
        self.reconstruction_loss_weight = check_loss_weight(
            "reconstruction_loss_weight", reconstruction_loss_weight
        )
        super().__init__(**kwargs)

    # === The hooks of `TransformerXLBackbone` ===

    def _memory_spec(self, num_layers, hidden_dim, memory_length, dtype):
        return MemorySpec(
            num_layers,
            hidden_dim,
            memory_length,
            self.compressed_memory_length,
            dtype=dtype,
        )

    def _build_compressed_memory(self, dtype):
        self.compressive_memory = CompressiveMemory(
            compression_rate=self.compression_rate,
            compression=self.compression,
            reconstruction_loss_weight=self.reconstruction_loss_weight,
            dtype=dtype,
            name="compressive_memory",
        )
        self.compressive_memory.use_attention_of(self.transformer_layers)

    def _prepend_compressed_memory(self, inputs, memory, valid_length):
        # Both memories keep their valid slots last and the compressed one
        # fills only once the memory is full: the concatenation is again
        # "valid slots last".
        memory = ops.concatenate(
            [ops.stop_gradient(inputs["compressed_memory"]), memory], axis=2
        )  # (batch, L, Mc + M, hidden)
        valid_length = ops.add(
            valid_length, inputs["compressed_valid_length"]
        )  # (batch,)
        return memory, valid_length

    def _write_compressed_memory(self, inputs, new_states):
        compressed, compressed_valid, loss = self.compressive_memory(
            inputs["memory"],
            inputs["valid_length"],
            new_states,
            inputs["compressed_memory"],
            inputs["compressed_valid_length"],
        )  # (batch, L, Mc, hidden), (batch,), ()
        return {
            "compressed_memory": compressed,
            "compressed_valid_length": compressed_valid,
            "reconstruction_loss": loss,
        }

    # === Memory ===

    def initial_memory(
        self,
        batch_size,
        memory_length=None,
        compressed_memory_length=None,
        start="empty",
    ):
        """The memory of a first segment; the compressed memory starts
        empty.

        Args:
            batch_size: int. Number of examples (streams).
            memory_length: int >= 0 or `None` (the constructor's).
            compressed_memory_length: int >= 0 or `None` (the
                constructor's).
            start: `"empty"` or `"zeros"`: whether the memory's zero slots
                count as states (see `TransformerXLBackbone.initial_memory`).

        Returns:
            A dict `{"memory": (batch, num_layers, M, hidden_dim),
            "valid_length": (batch,), "compressed_memory": (batch,
            num_layers, Mc, hidden_dim), "compressed_valid_length":
            (batch,)}` (states of `memory_spec.dtype`, int32 lengths).
        """
        if compressed_memory_length is not None:
            compressed_memory_length = check_positive_int(
                "compressed_memory_length",
                compressed_memory_length,
                allow_zero=True,
            )
        return self._zero_memory(
            batch_size,
            memory_length,
            start,
            compressed_memory_length=compressed_memory_length,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "compressed_memory_length": self.compressed_memory_length,
                "compression_rate": self.compression_rate,
                "compression": self.compression,
                "reconstruction_loss_weight": self.reconstruction_loss_weight,
            }
        )
        return config
