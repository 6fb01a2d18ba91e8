"""Files of a run: the model, its tokenizer (JSON and text, no pickle) and
atomic writes."""

import json
import os
import shutil

import keras

MODEL_FILE = "model.keras"
TOKENIZER_DIR = "tokenizer"
TOKENIZER_FILE = "tokenizer.json"
ASSETS_DIR = "assets"
CONFIG_FILE = "train_config.json"
CHECKPOINT_DIR = "checkpoint"


def write_json(path, value):
    """Writes `value` as JSON to a temporary file, then renames it."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(value, file, indent=2)
        file.write("\n")
    os.replace(temporary, path)


def read_json(path):
    with open(os.fspath(path), encoding="utf-8") as file:
        return json.load(file)


def save_model(lm, directory):
    """Saves `lm` for inference as `directory/model.keras` (written under a
    temporary name, then renamed).

    The file holds the weights and the trained optimizer (its variables
    and schedule): `keras.saving.load_model(path)` restores both, with no
    warning, on every backend. The memory carried between batches is
    never saved (see `MemoryState`): the loaded model takes any batch
    size.
    """
    path = os.path.join(os.fspath(directory), MODEL_FILE)
    temporary = os.path.join(
        os.fspath(directory), f".model-{os.getpid()}.tmp.keras"
    )
    lm.save(temporary)
    os.replace(temporary, path)
    return path


def load_model(directory):
    """The `TransformerXLCausalLM` of `directory/model.keras`, compiled as
    it was trained, with the trained optimizer's state."""
    import keras_txl.models  # noqa: F401 (registers the classes)

    path = os.path.join(os.fspath(directory), MODEL_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"No model in '{os.fspath(directory)}': {MODEL_FILE} is missing. "
            "Pass the --output folder of a finished `keras-txl train` run."
        )
    # `compile=True` restores the trained optimizer; with `compile=False`
    # the constructor's fresh one meets the saved state and Keras warns
    # that it skips it.
    return keras.saving.load_model(path)


def save_tokenizer(tokenizer, directory):
    """Saves a keras-hub tokenizer in `directory/tokenizer/`: its config
    (with a character vocabulary) as JSON, and its assets (a word
    vocabulary as text) beside it."""
    folder = os.path.join(os.fspath(directory), TOKENIZER_DIR)
    temporary = f"{folder}.tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(os.path.join(temporary, ASSETS_DIR))
    write_json(
        os.path.join(temporary, TOKENIZER_FILE),
        keras.saving.serialize_keras_object(tokenizer),
    )
    if hasattr(tokenizer, "save_assets"):
        tokenizer.save_assets(os.path.join(temporary, ASSETS_DIR))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(temporary, folder)


def load_tokenizer(directory):
    """The tokenizer saved by `save_tokenizer` in `directory`."""
    import keras_txl.data  # noqa: F401 (registers CharacterTokenizer)

    folder = os.path.join(os.fspath(directory), TOKENIZER_DIR)
    path = os.path.join(folder, TOKENIZER_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"No tokenizer in '{os.fspath(directory)}': "
            f"{TOKENIZER_DIR}/{TOKENIZER_FILE} is missing."
        )
    tokenizer = keras.saving.deserialize_keras_object(read_json(path))
    assets = os.path.join(folder, ASSETS_DIR)
    if hasattr(tokenizer, "load_assets") and os.listdir(assets):
        tokenizer.load_assets(assets)
    return tokenizer
