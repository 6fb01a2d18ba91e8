"""Loading weights of other Transformer-XL implementations. Importing
this package lets `TransformerXLCausalLM.from_preset` read their folders
(`preset_loader.py`)."""

from keras_txl.convert import preset_loader  # noqa: F401  (registers)
from keras_txl.convert.huggingface import from_huggingface
from keras_txl.convert.official_pytorch import from_official_pytorch
from keras_txl.convert.official_pytorch import normalize_config
from keras_txl.convert.official_tensorflow import from_official_tensorflow
from keras_txl.convert.official_tensorflow import is_official_tensorflow_folder
from keras_txl.convert.safetensors_file import read_safetensors

# One detector of HuggingFace Transformer-XL folders and handles: the
# tokenizer's, which `from_preset` uses too.
from keras_txl.models.transformer_xl_tokenizer import (
    is_huggingface_transformer_xl as is_huggingface_folder,
)

__all__ = [
    "from_huggingface",
    "from_official_pytorch",
    "from_official_tensorflow",
    "is_huggingface_folder",
    "is_official_tensorflow_folder",
    "normalize_config",
    "read_safetensors",
]
