"""The files and folders that `keras-txl`'s arguments name, checked
before Keras is imported: a missing or empty corpus, a MODEL_DIR without
a model, an output folder that already holds one, a prompt longer than
`--max-length` come back in a fraction of a second, in the words of the
command line.

Imports `os` and `json` only: importing anything of `keras_txl` loads
Keras (`import keras_txl` registers every class a run can name). The
names of a run's files are copies of `keras_txl.utils.run_folder`'s,
which `tests/app/test_cli.py` pins to the originals, as
`keras_txl_cli.choices` does for the library's choices.
"""

import json
import os

# `keras_txl.utils.run_folder`'s names: a keras-hub preset of a task, the
# `model.keras` of runs saved before presets, the tokenizer's config (in
# `tokenizer/` in those older runs) and the checkpoint of `--resume`.
TASK_FILE = "task.json"
MODEL_FILE = "model.keras"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_DIR = "tokenizer"
ASSETS_DIR = "assets"
# The weights files of a keras-hub preset of a task (`PRESET_FILES`).
WEIGHTS_FILES = ("model.weights.h5", "task.weights.h5")
CHECKPOINT_DIR = "checkpoint"
# The registered names of the byte-level tokenizers (a token per UTF-8
# byte) and of the character tokenizer, in a run's `tokenizer.json`.
BYTE_TOKENIZERS = ("keras_txl>ByteTokenizer", "keras_txl>Utf8ByteTokenizer")
CHARACTER_TOKENIZER = "keras_txl>CharacterTokenizer"


def has_model(directory):
    """Whether `directory` holds a model: `run_folder.has_model`."""
    return any(
        os.path.isfile(os.path.join(directory, name))
        for name in (TASK_FILE, MODEL_FILE)
    )


def _missing_file(path, option, text=True):
    """The error of a file option whose file is not there (or, for a
    `text` file, is empty), or `None`."""
    if path is None:
        return None
    if os.path.isdir(path):
        return f"{option} '{path}' is a folder, not a file. Pass a file."
    if not os.path.isfile(path):
        return (
            f"{option} '{path}' does not exist. Check the path (relative "
            f"paths start at {os.getcwd()})."
        )
    if text and os.path.getsize(path) == 0:
        return f"{option} '{path}' is empty. Pass a file that contains text."
    return None


def _missing_source(source):
    """The error of a `convert` SOURCE that looks like a local path (not
    an `hf://`-style handle or a preset name) and is not there, or
    `None`."""
    local = os.sep in source or source.startswith(".")
    if "://" in source or not local or os.path.exists(source):
        return None
    return (
        f"SOURCE '{source}' does not exist. Pass a HuggingFace "
        "Transformer-XL folder or hf:// handle, a folder of the authors' "
        "TensorFlow checkpoint with its config.json, or a keras-hub preset "
        f"(relative paths start at {os.getcwd()})."
    )


def _missing_model(path):
    """The error of a MODEL_DIR with no model in it, or `None`."""
    if has_model(path):
        return None
    if not os.path.isdir(path):
        where = "does not exist" if not os.path.exists(path) else "is a file"
        return (
            f"MODEL_DIR '{path}' {where}. Pass the --output folder of a "
            "`keras-txl train` run or a `keras-txl convert` folder "
            f"(relative paths start at {os.getcwd()})."
        )
    return (
        f"No model in '{path}': neither a keras-hub preset "
        f"({TASK_FILE}) nor {MODEL_FILE}. Pass the "
        "--output folder of a finished `keras-txl train` run or a "
        "`keras-txl convert` folder."
    )


def output_error(output, resume, overwrite):
    """The error of a `keras-txl train --output` folder that already holds
    a model or a checkpoint when neither `resume` nor `overwrite` is set,
    or `None`. (`train_run` checks the folder again, and its other
    rules, when the run starts.)"""
    if resume or overwrite or not os.path.isdir(output):
        return None
    checkpoint = os.path.join(output, CHECKPOINT_DIR)
    if has_model(output) or os.path.exists(checkpoint):
        return (
            f"'{output}' already holds a model. Pass --resume to "
            "continue its run, --overwrite to replace it, or another "
            "--output."
        )
    return None


def _tokenizer_config(model_dir):
    """The serialized tokenizer of a run (`{}` if none can be read)."""
    for path in (
        os.path.join(model_dir, TOKENIZER_FILE),
        os.path.join(model_dir, TOKENIZER_DIR, TOKENIZER_FILE),
    ):
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as file:
                    config = json.load(file)
            except (OSError, ValueError):
                return {}  # the run's loading names the damage
            return config if isinstance(config, dict) else {}
    return {}


def prompt_tokens_at_least(model_dir, prompt):
    """How many tokens `prompt` is at least, read from the run's
    tokenizer file without Keras: exact for byte and character
    tokenizers; 1 for a non-empty prompt of any other (a word tokenizer's
    count needs its rules, checked once the run is loaded)."""
    if not prompt:
        return 0
    config = _tokenizer_config(model_dir)
    name = config.get("registered_name")
    fields = config.get("config")
    fields = fields if isinstance(fields, dict) else {}
    if name in BYTE_TOKENIZERS:
        return len(prompt.encode("utf-8"))
    if name == CHARACTER_TOKENIZER:
        if fields.get("oov_token") is not None:
            return len(prompt)  # unknown characters are read as <unk>
        vocabulary = fields.get("vocabulary")
        if isinstance(vocabulary, list):  # unknown ones are left out
            known = set(vocabulary)
            return sum(char in known for char in prompt)
    return 1


def check_paths(args):
    """The first error of the files and folders that `args` names (a
    missing or empty corpus, a MODEL_DIR without a model, a missing
    `recl` MODEL or `convert` SOURCE), or `None`: checked before Keras is
    imported, so that the mistake comes back at once."""
    if getattr(args, "model_dir", None) is not None:
        error = _missing_model(args.model_dir)
        if error:
            return error
    if args.command == "recl":
        for model in args.models:
            error = _missing_file(model, "MODEL", text=False)
            if error:
                return error + " Pass a .keras file that `ablate` saved."
    if args.command == "convert":
        error = _missing_source(args.source)
        if error:
            return error
    corpus = getattr(args, "corpus", None)
    if corpus is None:
        return None
    if getattr(args, "dataset", None) in (None, "builtin"):
        return _missing_file(corpus, "--corpus")
    if not os.path.exists(corpus):  # a benchmark's copy: file or folder
        return (
            f"--corpus '{corpus}' does not exist. Check the path (relative "
            f"paths start at {os.getcwd()})."
        )
    return None
