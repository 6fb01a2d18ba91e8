"""Loading weights of other Transformer-XL implementations."""

from keras_txl.convert.huggingface import from_huggingface
from keras_txl.convert.huggingface import is_huggingface_folder
from keras_txl.convert.official_pytorch import from_official_pytorch
from keras_txl.convert.official_pytorch import normalize_config
from keras_txl.convert.official_tensorflow import from_official_tensorflow
from keras_txl.convert.official_tensorflow import is_official_tensorflow_folder
from keras_txl.convert.safetensors_file import read_safetensors

__all__ = [
    "from_huggingface",
    "from_official_pytorch",
    "from_official_tensorflow",
    "is_huggingface_folder",
    "is_official_tensorflow_folder",
    "normalize_config",
    "read_safetensors",
]
