"""Files of a run: the model and its tokenizer as a keras-hub preset (JSON,
weights and text assets, no pickle), and atomic writes. The names of the
files are `keras_txl.utils.run_folder`'s."""

import json
import os
import shutil

import keras

from keras_txl.utils.run_folder import ASSETS_DIR
from keras_txl.utils.run_folder import METRICS_FILE
from keras_txl.utils.run_folder import MODEL_FILE
from keras_txl.utils.run_folder import TASK_FILE
from keras_txl.utils.run_folder import TOKENIZER_DIR
from keras_txl.utils.run_folder import TOKENIZER_FILE
from keras_txl.utils.run_folder import is_preset
from keras_txl.utils.saved_files import read_json_file


def write_atomically(path, write):
    """Writes the file `path` whole or not at all: `write(temporary)`
    writes a temporary file beside it (its folder made if missing), which
    is then renamed to `path` in one step. An error (or a kill) before the
    rename leaves `path` as it was; the temporary file of an error is
    removed."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def write_json(path, value):
    """Writes `value` as JSON to `path` (`write_atomically`)."""

    def write(temporary):
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(value, file, indent=2)
            file.write("\n")

    write_atomically(path, write)


def write_metrics(metrics, output, metrics_json):
    """Writes `metrics` to `output/metrics.json` (`output` not `None`) and
    to the file `metrics_json` (if given)."""
    if output is not None:
        path = os.path.join(output, METRICS_FILE)
        write_json(path, metrics)
    if metrics_json:
        write_json(metrics_json, metrics)


def read_json(path):
    """The JSON value of a file; a damaged one raises `DamagedFileError`
    naming it."""
    return read_json_file(path)


def save_model(lm, directory, tokenizer=None, sequence_length=None):
    """Saves `lm` (and `tokenizer`, as its preprocessor) as a keras-hub
    preset in `directory`: `config.json`, `model.weights.h5`,
    `task.json`, `task.weights.h5`, `preprocessor.json`,
    `tokenizer.json`, `assets/tokenizer/` and `metadata.json`, beside the
    run's other files. `TransformerXLCausalLM.from_preset(directory)` and
    `keras_hub.models.CausalLM.from_preset(directory)` load it.

    The preset is written in a temporary folder, then its files are moved
    in one by one (each move atomic): a process killed while writing
    leaves the previous preset whole. The files hold the weights, not the
    optimizer's state (the training checkpoint keeps that for
    `--resume`).

    Args:
        lm: the `TransformerXLCausalLM`.
        directory: the run folder.
        tokenizer: optional keras-hub tokenizer, saved as the preprocessor's
            (`None` keeps `lm.preprocessor`).
        sequence_length: length of the preprocessor's packed strings
            (`None`: keras-hub's default).
    """
    from keras_txl.models import TransformerXLCausalLMPreprocessor

    directory = os.fspath(directory)
    # Same weights, a fresh (unbuilt) optimizer.
    copy = lm.with_memory_length(lm.carried_memory_length)
    if tokenizer is not None:
        options = (
            {}
            if sequence_length is None
            else {"sequence_length": int(sequence_length)}
        )
        copy.preprocessor = TransformerXLCausalLMPreprocessor(
            tokenizer, **options
        )
    temporary = os.path.join(directory, f".preset-{os.getpid()}.tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    copy.save_to_preset(temporary)
    _name_the_task(temporary, type(copy).__name__)
    # Configs first, weights last.
    names = sorted(os.listdir(temporary), key=lambda n: (n.endswith(".h5"), n))
    for name in names:
        target = os.path.join(directory, name)
        if os.path.isdir(target):
            shutil.rmtree(target)
        os.replace(os.path.join(temporary, name), target)
    os.rmdir(temporary)
    return directory


def _name_the_task(preset, name):
    """Writes the task class `name` in the preset's `metadata.json`.

    keras-hub lists there the first base class of each task of the
    backbone (`task.__base__`), which for `TransformerXLCausalLM` is its
    mixin `CarriedMemory`, a name that tells a reader nothing.
    """
    path = os.path.join(preset, "metadata.json")
    if not os.path.isfile(path):
        return
    metadata = read_json_file(path)
    metadata["tasks"] = [name]
    with open(path, "w", encoding="utf-8") as file:
        json.dump(metadata, file, indent=4)


def load_model(directory):
    """The `TransformerXLCausalLM` saved in `directory`: a keras-hub preset
    (`save_model`), or the `model.keras` of runs saved before presets;
    compiled with the default loss, metrics and optimizer. Its
    `preprocessor` is the run's tokenizer (`None` for old runs)."""
    from keras_txl.models import TransformerXLCausalLM

    directory = os.fspath(directory)
    if is_preset(directory):
        return TransformerXLCausalLM.from_preset(directory)
    path = os.path.join(directory, MODEL_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"No model in '{directory}': neither a keras-hub preset "
            f"({TASK_FILE}) nor {MODEL_FILE}. Pass the --output folder of a "
            "finished `keras-txl train` run or a `keras-txl convert` folder."
        )
    # `compile=True` restores the trained optimizer; with `compile=False`
    # the constructor's fresh one meets the saved state and Keras warns
    # that it skips it.
    return keras.saving.load_model(path)


def save_tokenizer(tokenizer, directory):
    """Saves a keras-hub tokenizer as a preset's tokenizer does:
    `directory/tokenizer.json` (its config, with a character vocabulary)
    and its assets (a word vocabulary as text) in
    `directory/assets/tokenizer/`."""
    directory = os.fspath(directory)
    folder = os.path.join(directory, ASSETS_DIR, TOKENIZER_DIR)
    temporary = f"{folder}.tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    if hasattr(tokenizer, "save_assets"):
        tokenizer.save_assets(temporary)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(temporary, folder)
    config = keras.saving.serialize_keras_object(tokenizer)
    config.get("config", {}).pop("build_config", None)
    write_json(os.path.join(directory, TOKENIZER_FILE), config)


def load_tokenizer(directory):
    """The tokenizer of a preset or run folder (`save_tokenizer`,
    `save_model`), or of the `tokenizer/` folder of older runs."""
    import keras_txl.models  # noqa: F401 (registers the tokenizers)

    directory = os.fspath(directory)
    path = os.path.join(directory, TOKENIZER_FILE)
    assets = os.path.join(directory, ASSETS_DIR, TOKENIZER_DIR)
    if not os.path.isfile(path):  # runs saved before presets
        path = os.path.join(directory, TOKENIZER_DIR, TOKENIZER_FILE)
        assets = os.path.join(directory, TOKENIZER_DIR, ASSETS_DIR)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"No tokenizer in '{directory}': {TOKENIZER_FILE} is missing."
        )
    tokenizer = keras.saving.deserialize_keras_object(read_json(path))
    if (
        getattr(tokenizer, "file_assets", None)
        and os.path.isdir(assets)
        and os.listdir(assets)
    ):
        tokenizer.load_assets(assets)
    return tokenizer
