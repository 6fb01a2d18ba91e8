"""keras-txl: Transformer-XL language models for Keras 3."""

# `ablation` and `convert` are imported for what they register: the
# variants that old configs of the backbone and block load as, and the
# loaders of HuggingFace and authors' TensorFlow folders that
# `TransformerXLCausalLM.from_preset` finds. The models import neither.
from keras_txl import ablation  # noqa: F401
from keras_txl import convert  # noqa: F401
from keras_txl import layers
from keras_txl import models
from keras_txl.version import __version__

__all__ = ["layers", "models", "__version__"]
