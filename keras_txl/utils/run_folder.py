"""The layout of a run folder: the names of the files that `keras-txl
train` writes in its `--output` folder, and that `keras-txl evaluate`,
`generate`, `export` (`keras_txl.export.export_saved_model`) and
`--resume` read. Every module that names a file of a run takes the name
from here.

    OUTPUT/
      config.json, task.json, preprocessor.json, tokenizer.json,
      metadata.json, model.weights.h5, task.weights.h5, assets/
                            the keras-hub preset of the model and its
                            tokenizer (`TransformerXLCausalLM.from_preset`)
      train_config.json     the run's configuration (`CONFIG_FILE`)
      metrics.json          the results after training
      steps.csv             one row per training step (or execution)
      training_curve.png, bpc_vs_memory.png
      checkpoint/           weights, optimizer and memory for `--resume`

Runs saved before keras-hub presets hold `model.keras` and
`tokenizer/tokenizer.json` (+ `tokenizer/assets/`) instead of the preset.
"""

import os

from keras_txl.utils.saved_files import read_json_file

MODEL_FILE = "model.keras"  # runs saved before keras-hub presets
TASK_FILE = "task.json"
BACKBONE_FILE = "config.json"  # the preset's backbone config
# The files of a keras-hub preset of a task.
PRESET_FILES = (
    BACKBONE_FILE,
    "model.weights.h5",
    TASK_FILE,
    "task.weights.h5",
    "preprocessor.json",
    "tokenizer.json",
    "metadata.json",
)
TOKENIZER_DIR = "tokenizer"
TOKENIZER_FILE = "tokenizer.json"
ASSETS_DIR = "assets"
CONFIG_FILE = "train_config.json"
CHECKPOINT_DIR = "checkpoint"
METRICS_FILE = "metrics.json"
STEPS_CSV = "steps.csv"  # one row per training step (or execution)
CURVE_PNG = "training_curve.png"
MEMORY_PNG = "bpc_vs_memory.png"

# What a run folder may hold: `--overwrite` replaces such a folder whole.
RUN_ENTRIES = frozenset(
    (
        CHECKPOINT_DIR,
        TOKENIZER_DIR,
        ASSETS_DIR,
        MODEL_FILE,
        CONFIG_FILE,
        METRICS_FILE,
        STEPS_CSV,
        CURVE_PNG,
        MEMORY_PNG,
    )
    + PRESET_FILES
)


def is_preset(directory):
    """Whether `directory` holds a keras-hub preset of a task."""
    return os.path.isfile(os.path.join(os.fspath(directory), TASK_FILE))


def has_model(directory):
    """Whether `directory` holds a model: a keras-hub preset of a task or
    the `model.keras` of a run saved before presets."""
    return is_preset(directory) or os.path.isfile(
        os.path.join(os.fspath(directory), MODEL_FILE)
    )


def read_run_config(directory):
    """The `train_config.json` of a `keras-txl train` run folder, or `{}`
    for a folder without one (a converted preset). A damaged file raises
    `DamagedFileError` naming it."""
    path = os.path.join(os.fspath(directory), CONFIG_FILE)
    return read_json_file(path) if os.path.isfile(path) else {}
