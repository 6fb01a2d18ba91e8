"""Transformer-XL models: the backbone (and the Compressive Transformer's),
the causal LM and the memory it carries between the batches of `fit`,
`evaluate` and `predict`."""

from keras_txl.models.byte_tokenizer import ByteTokenizer
from keras_txl.models.character_tokenizer import CharacterTokenizer
from keras_txl.models.compressive_transformer_xl_backbone import (
    CompressiveTransformerXLBackbone,
)
from keras_txl.models.memory_reset import MemoryReset  # noqa: F401
from keras_txl.models.memory_state import MemoryState
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM
from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
    TransformerXLCausalLMPreprocessor,
)
from keras_txl.models.transformer_xl_tokenizer import TransformerXLTokenizer

# `MemoryReset` is public from `keras_txl.training` (a callback of `fit`,
# beside the other callbacks); the import above keeps the old path
# `keras_txl.models.MemoryReset` working.
__all__ = [
    "ByteTokenizer",
    "CharacterTokenizer",
    "CompressiveTransformerXLBackbone",
    "MemoryState",
    "TransformerXLBackbone",
    "TransformerXLCausalLM",
    "TransformerXLCausalLMPreprocessor",
    "TransformerXLTokenizer",
]
