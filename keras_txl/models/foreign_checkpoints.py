"""Checkpoints that are not keras-hub presets, as
`TransformerXLCausalLM.from_preset` loads them: HuggingFace's
Transformer-XL folders and the authors' TensorFlow checkpoint folders.
The converters (`keras_txl.convert`) are imported only when one is
loaded."""

import os

from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
    TransformerXLCausalLMPreprocessor,
)
from keras_txl.models.transformer_xl_tokenizer import TransformerXLTokenizer
from keras_txl.models.transformer_xl_tokenizer import (
    is_huggingface_transformer_xl,
)


def foreign_checkpoint_kind(preset):
    """`"HuggingFace"`, `"TensorFlow"` (the authors' checkpoint folder) or
    `None` (a keras-hub preset)."""
    if is_huggingface_transformer_xl(preset):
        return "HuggingFace"
    if _official_checkpoint_path(preset) is not None:
        return "TensorFlow"
    return None


def load_foreign_checkpoint(preset, kind, load_weights=True, **kwargs):
    """The `TransformerXLCausalLM` of a checkpoint of `kind` (see
    `foreign_checkpoint_kind`), converted with its weights, and the
    preprocessor of its tokenizer (HuggingFace's) unless `preprocessor` is
    given."""
    if not load_weights:
        raise ValueError(
            f"`load_weights=False` applies to keras-hub presets; "
            f"{preset!r} is a {kind} checkpoint, converted with its "
            "weights."
        )
    import keras_txl.convert as convert

    if kind == "HuggingFace":
        lm = convert.from_huggingface(preset)
        tokenizer = TransformerXLTokenizer.from_huggingface(preset)
        preprocessor = kwargs.pop(
            "preprocessor", TransformerXLCausalLMPreprocessor(tokenizer)
        )
    else:
        # Its config: `config.json` or the `.sh` script beside it.
        lm = convert.from_official_tensorflow(_official_checkpoint_path(preset))
        preprocessor = kwargs.pop("preprocessor", None)
    if kwargs:
        raise ValueError(
            f"Options {sorted(kwargs)} apply to keras-hub presets, not "
            f"to a {kind} checkpoint."
        )
    # The converter returns a built model, whose layer tracking is locked;
    # the preprocessor has no weights.
    locked = lm._tracker.locked
    lm._tracker.unlock()
    lm.preprocessor = preprocessor
    if locked:
        lm._tracker.lock()
    return lm


def saved_mixed_policy(preset):
    """The name of the mixed dtype policy a keras-hub preset was saved
    under (`"mixed_bfloat16"`), else `None`.

    keras-hub 0.32 loads a preset saved under a float policy in the current
    global policy, and fails on a mixed one (it reads the policy's name as
    a dtype); a mixed preset is loaded under the policy it was trained in.
    """
    from keras_hub.src.utils.preset_utils import load_json

    config = load_json(preset)
    policy = config.get("config", {}).get("dtype")
    name = (
        policy.get("config", {}).get("name")
        if isinstance(policy, dict)
        else policy
    )
    if isinstance(name, str) and name.startswith("mixed_"):
        return name
    return None


def _official_checkpoint_path(preset):
    """The checkpoint prefix (`FOLDER/model.ckpt-N`) of a folder of the
    authors' TensorFlow checkpoint whose config (`config.json` of their
    `transformer()` arguments, or their one tf/sota `.sh` script) the
    converter finds; `None` for anything else."""
    folder = os.fspath(preset) if isinstance(preset, (str, os.PathLike)) else ""
    if not folder or not os.path.isdir(folder):
        return None
    from keras_txl.convert import official_tensorflow

    if not official_tensorflow.is_official_tensorflow_folder(folder):
        return None
    if official_tensorflow.find_config(os.path.abspath(folder)) is None:
        return None
    return official_tensorflow.find_checkpoint(folder)
