import keras
from keras import ops

from keras_txl.layers.ablation.ablation_transformer_xl_block import (
    AblationTransformerXLBlock,
)
from keras_txl.layers.ablation.ablation_transformer_xl_block import (
    check_position_encoding,
)
from keras_txl.layers.ablation.differentiable_memory_cache import (
    DifferentiableMemoryCache,
)
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.utils.validation import check_bool


@keras.saving.register_keras_serializable(package="keras_txl")
class AblationTransformerXLBackbone(TransformerXLBackbone):
    """`TransformerXLBackbone` with one of the paper's mechanisms taken
    away (Dai et al., 2019, Table 6), for the ablations: not a model to
    train for use.

    With the defaults it is the paper's model, weight for weight.

    Args:
        position_encoding: `"relative"` (default): the paper's model.
            `"absolute"`: sinusoidal encodings of the positions `0 ... T-1`
            of the current segment added to the embeddings, and attention
            without position terms: the setting that recurrence confuses
            (every segment restarts at position 0, its memory too).
            `"learned_relative"`: Shaw et al. (2018), learned embeddings of
            distances clipped at `max_relative_distance`, added to keys and
            values (see `LearnedRelativeMultiHeadAttention`).
        max_relative_distance: int >= 0, only with `"learned_relative"`:
            the largest distance with its own embedding.
        stop_memory_gradient: bool. True (default): the paper's SG(.), no
            gradient flows into the memory. False: the memory is read and
            updated without stop-gradient (`DifferentiableMemoryCache`),
            so that segments chained in one graph backpropagate through
            each other (see `UnrolledSegmentsLM`).
        **kwargs: the arguments of `TransformerXLBackbone`.

    Example:

    >>> import numpy as np
    >>> backbone = AblationTransformerXLBackbone(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
    ...     head_dim=8, intermediate_dim=32, memory_length=6,
    ...     position_encoding="absolute",
    ... )
    >>> memory = backbone.initial_memory(batch_size=2)
    >>> output, memory = backbone.call_with_memory(
    ...     np.zeros((2, 4), "int32"), memory
    ... )
    >>> tuple(output.shape)
    (2, 4, 16)
    """

    # Generation runs the graph (the ablations' positions and memories),
    # and segments run unpadded (their memories are written otherwise).
    generates_from_key_values = False
    counts_tokens = False
    # Configs of `TransformerXLBackbone` with a mechanism taken away load
    # here (`utils/config_variants.py`).
    base_arguments = {
        "position_encoding": "relative",
        "max_relative_distance": None,
        "stop_memory_gradient": True,
    }

    def __init__(
        self,
        position_encoding="relative",
        max_relative_distance=None,
        stop_memory_gradient=True,
        **kwargs,
    ):
        # Set before the model is built: `TransformerXLBackbone.__init__`
        # builds the graph through the hooks below.
        self.position_encoding, self.max_relative_distance = (
            check_position_encoding(position_encoding, max_relative_distance)
        )
        self.stop_memory_gradient = check_bool(
            "stop_memory_gradient", stop_memory_gradient
        )
        super().__init__(**kwargs)

    # === The hooks of `TransformerXLBackbone` ===

    def _make_block(self, **kwargs):
        if self.position_encoding == "relative":
            return super()._make_block(**kwargs)
        return AblationTransformerXLBlock(
            position_encoding=self.position_encoding,
            max_relative_distance=self.max_relative_distance,
            **kwargs,
        )

    def _make_memory_cache(self, dtype):
        if self.stop_memory_gradient:
            return super()._make_memory_cache(dtype)
        return DifferentiableMemoryCache(dtype=dtype, name="memory_cache")

    def _read_memory(self, memory):
        if self.stop_memory_gradient:
            return super()._read_memory(memory)
        return memory

    def _embed_positions(self, x, memory):
        if self.position_encoding == "relative":
            return super()._embed_positions(x, memory)
        if self.position_encoding == "absolute":
            # Rows hold distances T-1 ... 0: flipped, positions 0 ... T-1.
            absolute = ops.flip(self.position_embedding(x), axis=0)  # (T, h)
            x = x + ops.expand_dims(ops.cast(absolute, x.dtype), 0)
        return x, None  # The ablations' attention reads no position input.

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "position_encoding": self.position_encoding,
                "max_relative_distance": self.max_relative_distance,
                "stop_memory_gradient": self.stop_memory_gradient,
            }
        )
        return config
