"""Transformer-XL models."""

from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM

__all__ = ["TransformerXLBackbone", "TransformerXLCausalLM"]
