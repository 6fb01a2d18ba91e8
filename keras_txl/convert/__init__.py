"""Loading weights of other Transformer-XL implementations."""

from keras_txl.convert.official_pytorch import from_official_pytorch
from keras_txl.convert.official_pytorch import normalize_config

__all__ = ["from_official_pytorch", "normalize_config"]
