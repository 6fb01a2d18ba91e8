"""Reading the files of a saved model or run, with one clear error per
damaged file (`DamagedFileError`): a truncated JSON file, a weights file
that HDF5 cannot open, weights of another model."""

import collections
import json
import os

from keras_txl.utils.damaged_file_error import DamagedFileError


def read_json_file(path):
    """The JSON value of the file at `path`.

    Raises:
        DamagedFileError: the file is missing, unreadable or not JSON
            (truncated, or another kind of file).
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        raise DamagedFileError(path, "is missing.") from None
    except OSError as error:
        raise DamagedFileError(
            path, f"cannot be read ({error.strerror})."
        ) from None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise DamagedFileError(
            path,
            f"is not a JSON text file ({len(data):,} bytes that are not "
            "UTF-8): it is damaged or another kind of file.",
        ) from None
    except ValueError as error:
        what = "is empty" if not data.strip() else "is not valid JSON"
        lines = data.count(b"\n") + 1
        raise DamagedFileError(
            path,
            f"{what} ({error.msg}, line {error.lineno} of "
            f"{lines}): it is truncated or damaged. Save "
            "it again, or restore it from a copy.",
        ) from None


def weight_shapes(path):
    """`Counter` of the shapes of the arrays in a Keras `.weights.h5`
    file.

    Raises:
        DamagedFileError: the file is missing, or HDF5 cannot open it
            (truncated, or another kind of file).
    """
    import h5py

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DamagedFileError(path, "is missing.")
    shapes = collections.Counter()

    def visit(_, item):
        if isinstance(item, h5py.Dataset):
            shapes[tuple(item.shape)] += 1

    try:
        with h5py.File(path, "r") as file:
            file.visititems(visit)
    except (OSError, RuntimeError, KeyError, ValueError) as error:
        reason = " ".join(str(error).split())
        size = os.path.getsize(path)
        raise DamagedFileError(
            path,
            f"is not a readable weights file ({size:,} bytes; HDF5: "
            f"{reason}): it is truncated or damaged. Save it again, or "
            "restore it from a copy.",
        ) from None
    return shapes


def check_weights_fit(path, variables, owner, exact=True):
    """Raises `DamagedFileError` unless the weights file at `path` holds
    the shapes of `variables` (the weights of `owner`, a str such as
    "the model of task.json"): exactly, or at least those (`exact=False`).
    """
    expected = collections.Counter(tuple(v.shape) for v in variables)
    found = weight_shapes(path)
    missing = sorted((expected - found).elements())
    extra = sorted((found - expected).elements()) if exact else []
    if not missing and not extra:
        return
    detail = []
    if extra:
        detail.append(f"{len(extra)} it should not, e.g. {list(extra[0])}")
    if missing:
        detail.append(f"{len(missing)} missing, e.g. {list(missing[0])}")
    raise DamagedFileError(
        path,
        f"holds the weights of another configuration than {owner} "
        f"({sum(found.values())} arrays where {sum(expected.values())} are "
        f"expected: {'; '.join(detail)}). Put back the weights saved with "
        "this configuration.",
    )


# The files of a keras-hub preset that `check_preset_files` reads.
PRESET_JSON_FILES = (
    "config.json",
    "task.json",
    "preprocessor.json",
    "tokenizer.json",
    "metadata.json",
)
PRESET_WEIGHTS_FILES = ("model.weights.h5", "task.weights.h5")


def check_preset_files(folder):
    """Reads every JSON file of the keras-hub preset in `folder` (and of
    its `assets/`) and opens its weights files: raises `DamagedFileError`
    for the first that is truncated or not what its name says."""
    folder = os.fspath(folder)
    for name in PRESET_JSON_FILES:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            read_json_file(path)
    for root, _, names in sorted(os.walk(os.path.join(folder, "assets"))):
        for name in sorted(names):
            if name.endswith(".json"):
                read_json_file(os.path.join(root, name))
    for name in PRESET_WEIGHTS_FILES:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            weight_shapes(path)
