"""Layers of Transformer-XL, each usable in any Keras model.

The paper's building blocks; the layers of the ablations only are in
`keras_txl.layers.ablation` (public through `keras_txl.ablation`)."""

from keras_txl.layers.adaptive_embedding import AdaptiveEmbedding
from keras_txl.layers.adaptive_softmax import AdaptiveSoftmax
from keras_txl.layers.compressive_memory import CompressiveMemory
from keras_txl.layers.memory_cache import MemoryCache
from keras_txl.layers.relative_multi_head_attention import (
    RelativeMultiHeadAttention,
)
from keras_txl.layers.relative_position_embedding import (
    RelativePositionEmbedding,
)
from keras_txl.layers.transformer_xl_block import TransformerXLBlock

__all__ = [
    "CompressiveMemory",
    "AdaptiveEmbedding",
    "AdaptiveSoftmax",
    "MemoryCache",
    "RelativeMultiHeadAttention",
    "RelativePositionEmbedding",
    "TransformerXLBlock",
]
