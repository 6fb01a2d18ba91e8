"""keras-txl: Transformer-XL language models for Keras 3.

`import keras_txl` (and so `from keras_txl.models import ...`, which runs
this file first) registers with Keras every class that a saved run,
preset or `.keras` file of this library can name: the layers, the
backbones (the Compressive Transformer's and the ablations' too), the
causal LM and its preprocessor, the metrics and the tokenizers of every
kind (`keras_txl>CharacterTokenizer`, `keras_txl>ByteTokenizer`, the
WikiText-103 `TransformerXLTokenizer`), so that
`keras_hub.models.CausalLM.from_preset(run)` works in a new process.

The `keras-txl` command is a package of its own, `keras_txl_cli`, which
imports this one; nothing here knows of it.
"""

# The submodules: `ablation` and `convert` are imported for what they
# register too (the variants that old configs of the backbone and block
# load as, and the loaders of HuggingFace and authors' TensorFlow folders
# that `TransformerXLCausalLM.from_preset` finds; the models import
# neither), `export` for `lm.export`'s writer.
from keras_txl import ablation
from keras_txl import convert
from keras_txl import data
from keras_txl import distribute
from keras_txl import export
from keras_txl import layers
from keras_txl import metrics
from keras_txl import models
from keras_txl import training
from keras_txl.version import __version__

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
