"""Transformer-XL models."""

from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM
from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
    TransformerXLCausalLMPreprocessor,
)
from keras_txl.models.transformer_xl_tokenizer import TransformerXLTokenizer

__all__ = [
    "TransformerXLBackbone",
    "TransformerXLCausalLM",
    "TransformerXLCausalLMPreprocessor",
    "TransformerXLTokenizer",
]
