"""The files and folders that `keras-txl`'s arguments name, checked
before Keras is imported: a missing corpus or a MODEL_DIR without a model
comes back in a fraction of a second, in the words of the command line.
Imports nothing heavy (`keras_txl.utils.run_folder` is `os` and `json`).
"""

import os


def _missing_file(path, option):
    """The error of a file option whose file is not there, or `None`."""
    if path is None or os.path.isfile(path):
        return None
    if os.path.isdir(path):
        return f"{option} '{path}' is a folder, not a file. Pass a file."
    return (
        f"{option} '{path}' does not exist. Check the path (relative paths "
        f"start at {os.getcwd()})."
    )


def _missing_model(path):
    """The error of a MODEL_DIR with no model in it, or `None`."""
    from keras_txl.utils import run_folder

    if run_folder.has_model(path):
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
        f"({run_folder.TASK_FILE}) nor {run_folder.MODEL_FILE}. Pass the "
        "--output folder of a finished `keras-txl train` run or a "
        "`keras-txl convert` folder."
    )


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


def check_paths(args):
    """The first error of the files and folders that `args` names (a
    missing corpus, a MODEL_DIR without a model, a missing `recl` MODEL or
    `convert` SOURCE), or `None`: checked
    before Keras is imported, so that the mistake comes back at once."""
    if args.command in ("evaluate", "generate", "export"):
        error = _missing_model(args.model_dir)
        if error:
            return error
    if args.command == "recl":
        for model in args.models:
            error = _missing_file(model, "MODEL")
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
