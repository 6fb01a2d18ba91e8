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


def check_task_weights(folder, lm=None, error=None):
    """Checks the weights files of the keras-hub preset in `folder`
    against the task loaded from it: `DamagedFileError` naming the file
    that holds another configuration's weights.

    Args:
        folder: the preset's folder.
        lm: the task loaded from it (its backbone's weights must be those
            of `model.weights.h5`, its own at least those of
            `task.weights.h5`), or `None` when the load failed.
        error: the `ValueError` keras-hub raised loading the weights, when
            it failed: re-raised as the damage of `model.weights.h5`.
    """
    weights = os.path.join(os.fspath(folder), PRESET_WEIGHTS_FILES[0])
    owner = "the model of task.json"
    if error is not None:
        reason = " ".join(str(error).split())
        raise DamagedFileError(
            weights,
            f"holds the weights of another configuration than {owner} "
            f"({reason}). Put back the weights saved with it.",
        ) from None
    check_weights_fit(weights, lm.backbone.weights, owner)
    task = os.path.join(os.fspath(folder), PRESET_WEIGHTS_FILES[1])
    if os.path.exists(task):
        backbone = {id(v) for v in lm.backbone.weights}
        own = [v for v in lm.weights if id(v) not in backbone]
        check_weights_fit(task, own, owner, exact=False)


def saved_mixed_policy(preset):
    """The mixed dtype policy a local keras-hub preset was saved under,
    else `None`: keras-hub 0.32 loads a preset in the current global
    policy and fails on a mixed one (it reads the policy's name as a
    dtype). keras-hub has no public reader of a remote preset's files:
    for a remote mixed preset, pass `dtype=`."""
    if not isinstance(preset, (str, os.PathLike)):
        return None
    path = os.path.join(os.fspath(preset), "config.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        policy = json.load(file).get("config", {}).get("dtype")
    if isinstance(policy, dict):
        policy = policy.get("config", {}).get("name")
    if isinstance(policy, str) and policy.startswith("mixed_"):
        return policy
    return None
