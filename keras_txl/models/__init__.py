"""Transformer-XL models: the backbone (and the Compressive
Transformer's), the causal LM with the memory it carries between the
batches of `fit`, `evaluate` and `predict`, its preprocessor and
tokenizers, `MemorySpec`, what a memory holds, `MemoryReset`, where
the carried memory empties, and the text classifier that reads long
documents with its memory."""

from keras_txl.models.character_tokenizer import CharacterTokenizer
from keras_txl.models.compressive_transformer_xl_backbone import (
    CompressiveTransformerXLBackbone,
)
from keras_txl.models.memory_reset import MemoryReset
from keras_txl.models.memory_spec import MemorySpec
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM
from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
    TransformerXLCausalLMPreprocessor,
)
from keras_txl.models.transformer_xl_text_classifier import (
    TransformerXLTextClassifier,
)
from keras_txl.models.transformer_xl_tokenizer import TransformerXLTokenizer
from keras_txl.models.utf8_byte_tokenizer import Utf8ByteTokenizer

__all__ = [
    "CharacterTokenizer",
    "CompressiveTransformerXLBackbone",
    "MemoryReset",
    "MemorySpec",
    "TransformerXLBackbone",
    "TransformerXLCausalLM",
    "TransformerXLCausalLMPreprocessor",
    "TransformerXLTextClassifier",
    "TransformerXLTokenizer",
    "Utf8ByteTokenizer",
]
