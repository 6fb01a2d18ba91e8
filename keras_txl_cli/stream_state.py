"""The state file of `keras-txl generate --state FILE`: the memory of a
stream of text that goes on from one command to the next, and what that
memory belongs to.

The file is a NumPy `.npz` archive (a zip of `.npy` arrays, read with
`allow_pickle=False`: it holds numbers and one text, never code):

- the memory, as `MemorySpec.flatten` saves it: `"memory"`, float32
  `(1, num_layers, memory_length, hidden_dim)`, the states of the last
  `memory_length` tokens of the stream at the input of every layer, and
  `"valid_length"`, int32 `(1,)`, how many of those slots hold states;
- `"identity"`, a JSON text (a 0-d unicode array): `format` and
  `version` (this file's kind), `run` (the run folder's absolute path, for
  the messages), `run_sha256` (of the run's weights files: a run trained
  or saved again since has other weights), `vocabulary_sha256` (of its
  tokenizer's config, names aside, and assets) and `memory_length`.

A state is read before Keras is imported (numpy, hashlib and json only),
so a damaged file, or the state of another run, vocabulary or memory
length, comes back at once in one line, and nothing is loaded; the file
is written back whole or not at all (`artifacts.write_atomically`).
"""

import hashlib
import json
import os
import zipfile

from keras_txl_cli.choices import ConfigError
from keras_txl_cli.path_checks import ASSETS_DIR
from keras_txl_cli.path_checks import MODEL_FILE
from keras_txl_cli.path_checks import TOKENIZER_DIR
from keras_txl_cli.path_checks import TOKENIZER_FILE
from keras_txl_cli.path_checks import WEIGHTS_FILES

FORMAT = "keras-txl generate --state"
VERSION = 1
IDENTITY = "identity"
# The arrays of a memory (`keras_txl.models.memory_spec.MEMORY_KEYS` and
# `COMPRESSED_KEYS`): states, then the count of valid slots.
MEMORY_ARRAYS = (
    ("memory", "valid_length"),
    ("compressed_memory", "compressed_valid_length"),
)
# The fields of the identity that must match the run's, and the words
# the messages name them with.
_RUN_FIELDS = {"run_sha256": "weights", "vocabulary_sha256": "vocabulary"}
_TOKENIZER_NAME_FIELDS = ("name", "trainable", "dtype")


class StreamState:
    """A `--state FILE` as read: where it is, what it belongs to, and the
    memory it holds (`None` when the file does not exist yet: the stream
    starts with this call).

    Attributes:
        path: the state file.
        identity: dict. What a state of this run holds under `"identity"`
            (without `memory_length`, which the memory written sets).
        memory: dict of numpy arrays (`MEMORY_ARRAYS`' keys), or `None`.
        memory_length: int, the memory's slots, or `None` (no memory yet).
    """

    def __init__(self, path, identity, memory=None):
        self.path = os.fspath(path)
        self.identity = identity
        self.memory = memory
        self.memory_length = (
            None if memory is None else int(memory["memory"].shape[2])
        )

    def save(self, memory):
        """Writes `memory` (a dict of numpy arrays of one row: the memory
        `generate` returned) to `path`, with this run's identity: a
        temporary file beside it, then renamed over it."""
        import numpy as np

        from keras_txl_cli.artifacts import write_atomically

        identity = dict(
            self.identity, memory_length=int(memory["memory"].shape[2])
        )
        arrays = dict(memory, **{IDENTITY: np.array(json.dumps(identity))})

        def write(temporary):
            with open(temporary, "wb") as file:  # `savez` would add ".npz"
                np.savez(file, **arrays)

        write_atomically(self.path, write)


def read_state(path, model_dir, memory_length=None):
    """The state file `path` of a stream of the run in `model_dir`.

    Args:
        path: the `--state` file; it need not exist.
        model_dir: the run folder (`MODEL_DIR`).
        memory_length: the `--memory-length` asked for, or `None`.

    Returns:
        A `StreamState` (its `memory` `None` if `path` does not exist).

    Raises:
        ConfigError: the file is damaged (not a state file, truncated, a
            state of a newer keras-txl), or it is the state of another
            run, vocabulary or memory length: one line that names what
            differs and the fix.
    """
    path = os.fspath(path)
    identity = run_identity(model_dir)
    if os.path.isdir(path):
        raise ConfigError(f"--state '{path}' is a folder. Pass a file.")
    if not os.path.exists(path):
        return StreamState(path, identity)
    saved, memory = _read_file(path)
    _check_belongs(path, saved, identity, memory_length)
    return StreamState(path, identity, memory)


def run_identity(model_dir):
    """What a state of the run in `model_dir` records as its owner: the
    run's folder and the SHA-256 of its weights and of its vocabulary."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "run": os.path.abspath(model_dir),
        "run_sha256": _weights_sha256(model_dir),
        "vocabulary_sha256": _vocabulary_sha256(model_dir),
    }


def _weights_sha256(model_dir):
    """SHA-256 of the run's weights files (a keras-hub preset's, or the
    `model.keras` of runs saved before presets), name and bytes."""
    digest = hashlib.sha256()
    for name in WEIGHTS_FILES + (MODEL_FILE,):
        path = os.path.join(model_dir, name)
        if os.path.isfile(path):
            digest.update(name.encode() + b"\0")
            _hash_file(digest, path)
    return digest.hexdigest()


def _vocabulary_sha256(model_dir):
    """SHA-256 of the run's tokenizer: its config without the layer's
    name (which changes from one save to the next), and its assets."""
    folder = model_dir
    if not os.path.isfile(os.path.join(model_dir, TOKENIZER_FILE)):
        folder = os.path.join(model_dir, TOKENIZER_DIR)  # older runs
    digest = hashlib.sha256()
    config_path = os.path.join(folder, TOKENIZER_FILE)
    try:
        with open(config_path, encoding="utf-8") as file:
            config = json.load(file)
    except (OSError, ValueError):
        config = None  # the run's loading names the damage
    if isinstance(config, dict) and isinstance(config.get("config"), dict):
        fields = config["config"]
        config = dict(
            config,
            config={
                key: value
                for key, value in fields.items()
                if key not in _TOKENIZER_NAME_FIELDS
            },
        )
    digest.update(json.dumps(config, sort_keys=True).encode())
    assets = os.path.join(folder, ASSETS_DIR)
    if folder == model_dir:
        assets = os.path.join(assets, TOKENIZER_DIR)
    for root, folders, names in os.walk(assets):
        folders.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, assets).encode() + b"\0")
            _hash_file(digest, path)
    return digest.hexdigest()


def _hash_file(digest, path):
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)


def _damaged(path, problem):
    return ConfigError(
        f"--state '{path}' is damaged: {problem}. Restore it from a copy, "
        "or pass another --state file (a new one starts a new stream)."
    )


def _read_file(path):
    """`(identity, memory)` of the state file `path`; `ConfigError` when
    it is not a whole state file."""
    import numpy as np

    if not zipfile.is_zipfile(path):
        size = os.path.getsize(path)
        raise _damaged(
            path,
            f"it is not a whole .npz archive ({size:,} bytes): truncated, "
            "or another kind of file",
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
        reason = " ".join(str(e).split())[:160] or type(e).__name__
        raise _damaged(path, f"not a state file ({reason})") from None
    identity = _read_identity(path, arrays.pop(IDENTITY, None))
    memory = {}
    for states_key, length_key in MEMORY_ARRAYS:
        if states_key not in arrays and states_key != "memory":
            continue
        states, valid = arrays.get(states_key), arrays.get(length_key)
        if states is None or valid is None:
            missing = length_key if states is not None else states_key
            raise _damaged(path, f"it lacks the array '{missing}'")
        if states.ndim != 4 or states.shape[0] != 1 or states.dtype.kind != "f":
            raise _damaged(
                path,
                f"'{states_key}' is {states.dtype} {list(states.shape)}, "
                "not float (1, layers, slots, width)",
            )
        slots = states.shape[2]
        if (
            valid.shape != (1,)
            or valid.dtype.kind not in "iu"
            or not 0 <= int(valid[0]) <= slots
        ):
            raise _damaged(
                path,
                f"'{length_key}' is {valid.tolist()}, not one count of "
                f"valid slots in [0, {slots}]",
            )
        if not np.isfinite(states).all():
            raise _damaged(path, f"'{states_key}' holds NaN or Inf")
        memory[states_key] = states.astype("float32")
        memory[length_key] = valid.astype("int32")
    if identity.get("memory_length") != memory["memory"].shape[2]:
        raise _damaged(
            path,
            f"its memory has {memory['memory'].shape[2]} slots where it "
            f"records memory_length={identity.get('memory_length')!r}",
        )
    return identity, memory


def _read_identity(path, array):
    """The identity dict saved under `"identity"`; `ConfigError` if it is
    missing, not ours, or of a newer version of the file."""
    if array is None or array.shape != () or array.dtype.kind != "U":
        raise _damaged(path, f"not a state file (no '{IDENTITY}' text)")
    try:
        identity = json.loads(str(array))
    except ValueError:
        identity = None
    if not isinstance(identity, dict) or identity.get("format") != FORMAT:
        raise _damaged(path, f"not a state file ('{IDENTITY}' is not ours)")
    version = identity.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise ConfigError(
            f"--state '{path}' was written by a newer keras-txl (state "
            f"version {version!r}; this one reads {VERSION}). Upgrade "
            "keras-txl, or pass another --state file to start a new stream."
        )
    return identity


def _check_belongs(path, saved, identity, memory_length):
    """`ConfigError` unless the state `saved` was made by the run of
    `identity` (its weights and vocabulary) with `memory_length` (`None`:
    any, the state's is used)."""
    differ = [key for key in _RUN_FIELDS if saved.get(key) != identity[key]]
    if differ:
        what = _RUN_FIELDS
        names = " and ".join(what[key] for key in differ)
        same_folder = saved.get("run") == identity["run"]
        origin = (
            "this run as it was before it was trained or saved again"
            if same_folder
            else f"the run in '{saved.get('run')}'"
        )
        raise ConfigError(
            f"--state '{path}' is the stream of another run: it was made "
            f"by {origin}, and the run in '{identity['run']}' has other "
            f"{names} (SHA-256 "
            + ", ".join(
                f"{what[key]} {str(saved.get(key))[:12]} in the state, "
                f"{identity[key][:12]} here"
                for key in differ
            )
            + "). Pass the run it was made with, or another --state file "
            "to start a new stream."
        )
    if memory_length is not None and memory_length != saved["memory_length"]:
        raise ConfigError(
            f"--state '{path}' holds a memory of {saved['memory_length']} "
            f"tokens; --memory-length is {memory_length}. Pass "
            f"--memory-length {saved['memory_length']} (or leave it out: a "
            "state's own is the default), or another --state file to "
            "start a new stream."
        )
