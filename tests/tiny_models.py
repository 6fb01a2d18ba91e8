"""A tiny Transformer-XL and ordered data, shared by the reliability tests."""

import keras
import numpy as np

from keras_txl import data
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from tests.test_case import DATA

VOCABULARY_SIZE = 20
BACKBONE_KWARGS = dict(
    vocabulary_size=VOCABULARY_SIZE,
    num_layers=2,
    num_heads=2,
    hidden_dim=8,
    head_dim=4,
    intermediate_dim=16,
    memory_length=4,
)


def tiny_lm(seed=0, **overrides):
    """A compiled `TransformerXLCausalLM` of a few thousand weights."""
    keras.utils.set_random_seed(seed)
    backbone = TransformerXLBackbone(**{**BACKBONE_KWARGS, **overrides})
    return TransformerXLCausalLM(backbone)


def random_ids(shape, seed=0, high=VOCABULARY_SIZE):
    return np.random.default_rng(seed).integers(0, high, shape).astype("int32")


def shakespeare_ids(num_chars):
    """Character ids of the start of tinyshakespeare, and the vocabulary
    size of those characters."""
    text = (DATA / "tinyshakespeare.txt").read_text(encoding="utf-8")
    text = text[:num_chars]
    tokenizer = data.make_tokenizer("char", text)
    return data.encode(tokenizer, text), tokenizer.vocabulary_size()
