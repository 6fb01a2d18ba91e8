"""Transformer-XL models: the backbone (and the Compressive
Transformer's), the causal LM with the memory it carries between the
batches of `fit`, `evaluate` and `predict`, its preprocessor and
tokenizers, the text classifier that reads long documents with its
memory, and `MemorySpec`, what a memory holds."""

from keras_txl.models.byte_tokenizer import ByteTokenizer
from keras_txl.models.character_tokenizer import CharacterTokenizer
from keras_txl.models.compressive_transformer_xl_backbone import (
    CompressiveTransformerXLBackbone,
)
from keras_txl.models.memory_spec import MemorySpec
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM
from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
    TransformerXLCausalLMPreprocessor,
)
from keras_txl.models.transformer_xl_text_classifier import (
    TransformerXLTextClassifier,
)
from keras_txl.models.transformer_xl_text_classifier_preprocessor import (
    TransformerXLTextClassifierPreprocessor,
)
from keras_txl.models.transformer_xl_tokenizer import TransformerXLTokenizer

__all__ = [
    "ByteTokenizer",
    "CharacterTokenizer",
    "CompressiveTransformerXLBackbone",
    "MemorySpec",
    "TransformerXLBackbone",
    "TransformerXLCausalLM",
    "TransformerXLCausalLMPreprocessor",
    "TransformerXLTextClassifier",
    "TransformerXLTextClassifierPreprocessor",
    "TransformerXLTokenizer",
]
