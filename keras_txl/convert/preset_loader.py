"""The checkpoints of other Transformer-XL implementations that
`TransformerXLCausalLM.from_preset` reads (it imports `get_preset_loader`
where it needs it, as keras-hub's `get_preset_loader`):

- a HuggingFace Transformer-XL folder or handle (`config.json` with
  `model_type` `"transfo-xl"`): weights by `from_huggingface`, its
  tokenizer by `TransformerXLTokenizer.from_huggingface`;
- a folder of the authors' TensorFlow checkpoint whose config the
  converter finds: `from_official_tensorflow`, no tokenizer.
"""

import os

from keras_txl.convert import official_tensorflow
from keras_txl.convert.huggingface import from_huggingface
from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
    TransformerXLCausalLMPreprocessor,
)
from keras_txl.models.transformer_xl_tokenizer import TransformerXLTokenizer
from keras_txl.models.transformer_xl_tokenizer import (
    is_huggingface_transformer_xl,
)


def official_checkpoint_path(preset):
    """The checkpoint prefix (`FOLDER/model.ckpt-N`) of a folder of the
    authors' TensorFlow checkpoint whose config (`config.json` of their
    `transformer()` arguments, or their one tf/sota `.sh` script) the
    converter finds; `None` for anything else."""
    folder = os.fspath(preset) if isinstance(preset, (str, os.PathLike)) else ""
    if not folder or not os.path.isdir(folder):
        return None
    if not official_tensorflow.is_official_tensorflow_folder(folder):
        return None
    if official_tensorflow.find_config(os.path.abspath(folder)) is None:
        return None
    return official_tensorflow.find_checkpoint(folder)


def _load_huggingface(preset, **kwargs):
    if "preprocessor" in kwargs:
        preprocessor = kwargs["preprocessor"]
    else:
        tokenizer = TransformerXLTokenizer.from_huggingface(preset)
        preprocessor = TransformerXLCausalLMPreprocessor(tokenizer)
    return from_huggingface(preset, preprocessor=preprocessor)


def _load_official_tensorflow(preset, preprocessor=None):
    # Its config: `config.json` or the `.sh` script beside it. The
    # authors' checkpoints come with no tokenizer.
    return official_tensorflow.from_official_tensorflow(
        official_checkpoint_path(preset), preprocessor=preprocessor
    )


def get_preset_loader(preset):
    """`(kind, load)` for a checkpoint of another implementation:
    `load(preset, preprocessor=...)` returns a `TransformerXLCausalLM`
    (`preprocessor` if given, else the checkpoint's own tokenizer, if
    any). `None` for anything else (a keras-hub preset).

    Args:
        preset: the folder or handle given to `from_preset`.
    """
    if is_huggingface_transformer_xl(preset):
        return "HuggingFace", _load_huggingface
    if official_checkpoint_path(preset) is not None:
        return "TensorFlow", _load_official_tensorflow
    return None
