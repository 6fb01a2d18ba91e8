"""keras-txl: Transformer-XL language models for Keras 3."""

from keras_txl import layers
from keras_txl import models
from keras_txl.version import __version__

__all__ = ["layers", "models", "__version__"]
