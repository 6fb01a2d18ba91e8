"""Weights of other Transformer-XL implementations: the authors' PyTorch
and TensorFlow checkpoints and HuggingFace's
(`TransformerXLCausalLM.from_preset` reads their folders through
`preset_loader.py`)."""

from keras_txl.convert.huggingface import from_huggingface
from keras_txl.convert.official_pytorch import from_official_pytorch
from keras_txl.convert.official_tensorflow import from_official_tensorflow

__all__ = [
    "from_huggingface",
    "from_official_pytorch",
    "from_official_tensorflow",
]
