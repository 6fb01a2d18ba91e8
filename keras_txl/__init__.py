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

import keras_txl_cli as _command

# `python -m keras_txl` is the `keras-txl` command too: before Keras loads
# TensorFlow, hide the native libraries' start-up lines as the console
# script does (`--verbose` shows them). A library import does nothing here.
if _command.started_as_command():
    _command.quiet_native_logs()

# `ablation` and `convert` are imported for what they register too: the
# variants that old configs of the backbone and block load as, and the
# loaders of HuggingFace and authors' TensorFlow folders that
# `TransformerXLCausalLM.from_preset` finds. The models import neither.
from keras_txl import ablation  # noqa: E402
from keras_txl import convert  # noqa: E402  (registers from_preset's loaders)
from keras_txl import data  # noqa: E402
from keras_txl import distribute  # noqa: E402
from keras_txl import export  # noqa: E402  (registers lm.export's writer)
from keras_txl import layers  # noqa: E402
from keras_txl import metrics  # noqa: E402
from keras_txl import models  # noqa: E402
from keras_txl import training  # noqa: E402
from keras_txl.version import __version__  # noqa: E402

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
