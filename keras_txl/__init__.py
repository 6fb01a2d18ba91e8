"""keras-txl: Transformer-XL language models for Keras 3.

`import keras_txl` (and so `from keras_txl.models import ...`, which runs
this file first) registers with Keras every class that a saved run,
preset or `.keras` file of this library can name: the layers, the
backbones (the Compressive Transformer's and the ablations' too), the
causal LM and its preprocessor, the metrics and the tokenizers of every
kind (`keras_txl>CharacterTokenizer`, `keras_txl>ByteTokenizer`, the
WikiText-103 `TransformerXLTokenizer`), so that
`keras_hub.models.CausalLM.from_preset(run)` works in a new process.
"""

import importlib

import keras_txl_cli as _command
from keras_txl.version import __version__

# The submodules: `ablation` and `convert` are imported for what they
# register too (the variants that old configs of the backbone and block
# load as, and the loaders of HuggingFace and authors' TensorFlow folders
# that `TransformerXLCausalLM.from_preset` finds; the models import
# neither), `export` for `lm.export`'s writer.
__all__ = [
    "__version__",
    "ablation",
    "convert",
    "data",
    "distribute",
    "export",
    "layers",
    "metrics",
    "models",
    "training",
]


def _import_submodules():
    """Imports every submodule (and so Keras and its backend). A second
    call does nothing."""
    for name in __all__[1:]:
        importlib.import_module(f"{__name__}.{name}")


if _command.started_as_command():
    # `python -m keras_txl` is the `keras-txl` command too: before Keras
    # loads TensorFlow, hide the native libraries' start-up lines as the
    # console script does (`--verbose` shows them). The command checks
    # its arguments before it loads Keras (`keras_txl.app.cli.main` calls
    # `_import_submodules` then), so that a mistake comes back at once.
    _command.quiet_native_logs()
else:
    _import_submodules()
