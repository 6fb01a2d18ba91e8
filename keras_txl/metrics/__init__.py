"""Metrics of language models: bits per character and the loss of the
last batch. Used by `TransformerXLCausalLM.compile` and by training."""

from keras_txl.metrics.batch_cross_entropy import BatchCrossEntropy
from keras_txl.metrics.bits_per_character import BitsPerCharacter

__all__ = ["BatchCrossEntropy", "BitsPerCharacter"]
