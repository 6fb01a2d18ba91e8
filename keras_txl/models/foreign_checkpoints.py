"""Checkpoints that are not keras-hub presets, as
`TransformerXLCausalLM.from_preset` loads them: HuggingFace's
Transformer-XL folders and the authors' TensorFlow checkpoint folders.

The loaders live with the converters (`keras_txl/convert/preset_loader.py`)
and register here when `keras_txl.convert` is imported (`import keras_txl`
does): the models import no converter, as keras-hub's models import none
of its `utils/transformers` converters."""

# Kind ("HuggingFace", "TensorFlow") -> (detect(preset) -> bool,
# load(preset) -> (TransformerXLCausalLM, default preprocessor or None)).
_LOADERS = {}


def register_foreign_checkpoint(kind, detect, load):
    """Lets `from_preset` read checkpoints of `kind`: folders (or handles)
    for which `detect(preset)` is true load as `load(preset)`, which
    returns the converted `TransformerXLCausalLM` and the preprocessor it
    gets unless the caller passes one (or `None`)."""
    _LOADERS[kind] = (detect, load)


def foreign_checkpoint_kind(preset):
    """The registered kind of checkpoint `preset` is (`"HuggingFace"`,
    `"TensorFlow"`), or `None` (a keras-hub preset)."""
    for kind, (detect, _) in _LOADERS.items():
        if detect(preset):
            return kind
    return None


def load_foreign_checkpoint(preset, kind, load_weights=True, **kwargs):
    """The `TransformerXLCausalLM` of a checkpoint of `kind` (see
    `foreign_checkpoint_kind`), converted with its weights, with the
    `preprocessor` of `kwargs` or else its loader's."""
    if not load_weights:
        raise ValueError(
            f"`load_weights=False` applies to keras-hub presets; "
            f"{preset!r} is a {kind} checkpoint, converted with its "
            "weights."
        )
    preprocessor = kwargs.pop("preprocessor", _DEFAULT)
    if kwargs:
        raise ValueError(
            f"Options {sorted(kwargs)} apply to keras-hub presets, not "
            f"to a {kind} checkpoint."
        )
    lm, default_preprocessor = _LOADERS[kind][1](preset)
    # The converter returns a built model, whose layer tracking is locked;
    # the preprocessor has no weights.
    locked = lm._tracker.locked
    lm._tracker.unlock()
    lm.preprocessor = (
        default_preprocessor if preprocessor is _DEFAULT else preprocessor
    )
    if locked:
        lm._tracker.lock()
    return lm


_DEFAULT = object()


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
