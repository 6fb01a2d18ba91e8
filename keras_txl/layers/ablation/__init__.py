"""Layers of the ablations only (Dai et al., 2019, Table 6), not of the
paper's model: what `keras_txl.ablation.AblationTransformerXLBackbone`
builds for its `position_encoding` and `stop_memory_gradient=False`.
A user builds the backbone, which makes them: they are not exported by
`keras_txl.ablation` (they load by their registered names); `keras_txl.layers`
holds the paper's building blocks.
"""

from keras_txl.layers.ablation.ablation_transformer_xl_block import (
    AblationTransformerXLBlock,
)
from keras_txl.layers.ablation.differentiable_memory_cache import (
    DifferentiableMemoryCache,
)
from keras_txl.layers.ablation.learned_relative_multi_head_attention import (
    LearnedRelativeMultiHeadAttention,
)

__all__ = [
    "AblationTransformerXLBlock",
    "DifferentiableMemoryCache",
    "LearnedRelativeMultiHeadAttention",
]
