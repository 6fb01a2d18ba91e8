import json
import os
import shutil
import tempfile
import uuid
import zipfile

import keras
import numpy as np

from keras_txl.utils import processes
from keras_txl.utils.damaged_file_error import DamagedFileError
from keras_txl.utils.saved_files import check_weights_fit
from keras_txl.utils.saved_files import read_json_file

WEIGHTS_FILE = "state.weights.h5"
MEMORY_FILE = "memory.npz"
STATE_FILE = "state.json"


class TrainingCheckpoint(keras.callbacks.Callback):
    """Saves what a run needs to continue exactly where it stopped, at the
    end of every epoch: the weights and the optimizer's state (one
    `.weights.h5`), the memory carried between batches (`memory.npz`:
    `MemoryState` is never saved with the weights), the global step, the
    per-step losses so far, the run's configuration and the dropout's
    random states (`state.json`).

    Each save writes new files under new names (the step and a random
    tag), then replaces `state.json`, which names them, in one atomic
    rename, then deletes the files of the previous save: at every moment
    `state.json` names complete files, so a run killed while saving keeps
    the previous checkpoint, and the folder is never missing. A damaged
    file (truncated, or the weights of another model) is refused by
    `restore` with a `DamagedFileError` naming it. A model whose
    weights or optimizer state hold a NaN or Inf (a diverged run) is
    never saved: the previous checkpoint stays, and `skipped_step` records
    the step that was not saved. `restore` loads it
    into a model built and compiled as before, and returns the step to
    continue from: the data resumes at that batch
    (`dataset.repeat().skip(step)`).

    Args:
        directory: the checkpoint folder.
        history: the run's `StepHistory` (step counter and losses).
        config: a JSON-serializable dict saved with the state.
        strategy: the `keras_txl.distribute.ReplicaStrategy` the model
            trains under, or `None` (one device): the checkpoint holds
            the memory of every replica's rows. Of TensorFlow workers
            (`multiworker`), every worker gathers every row's memory
            (`strategy.gather`) and saves, the chief into `directory`,
            the others into a temporary folder they delete (TensorFlow's
            multi-worker convention: saving may run collectives), and
            they wait until the chief has written; give every worker the
            same `directory`. Of several JAX processes, one Orbax folder
            holds every process's shards.
        on_save: optional function called with this callback after each
            save (`keras-txl train` puts its run folder in place then).

    Example:

    ```python
    history = StepHistory(tokens_per_step=1024, total_steps=1000)
    checkpoint = TrainingCheckpoint("run/checkpoint", history, config)
    lm.fit(data.repeat(), steps_per_epoch=100, epochs=10,
           callbacks=[history, checkpoint])
    ```
    """

    def __init__(
        self, directory, history, config=None, strategy=None, on_save=None
    ):
        super().__init__()
        self.on_save = on_save
        self.directory = os.fspath(directory)
        self.history = history
        self.config = dict(config or {})
        self.strategy = strategy
        self.saved_step = None
        self.skipped_step = None

    def on_epoch_end(self, epoch, logs=None):
        # On JAX, `fit` has written its state back into the variables
        # before `on_epoch_end`.
        self.save()

    def save(self):
        """Writes the checkpoint of the model's current state, unless a
        weight or optimizer variable is not finite. Returns whether it
        wrote it."""
        if not _all_finite(self.model):
            self.skipped_step = self.history.step
            return False
        # New files under new names; `state.json`, which names them, is
        # replaced last: at every moment it names complete files.
        tag = f"{self.history.step:08d}-{uuid.uuid4().hex[:8]}"
        model = self.model
        optimizer = getattr(model, "optimizer", None)
        if optimizer is not None and not optimizer.built:
            # Before the first step: its fresh state, so that the file
            # holds what `restore` checks it against (weights + optimizer).
            optimizer.build(model.trainable_variables)
        if processes.process_count() > 1 and keras.backend.backend() == "jax":
            # Every process writes its share into the primary's folder.
            self.directory, tag = processes.broadcast_text(
                f"{self.directory}\n{tag}"
            ).split("\n")
            names = {"arrays": f"state-{tag}.orbax"}
            os.makedirs(self.directory, exist_ok=True)
            processes.save_arrays(
                os.path.join(self.directory, names["arrays"]),
                _shared_arrays(model),
            )
            if processes.is_primary():
                self._write_state(names)
            # No process goes on (or exits) before `state.json` names it.
            processes.barrier(f"keras_txl_checkpoint_{tag}")
            return self._saved()
        # One process, or TensorFlow's workers: every process gathers the
        # memory of every row (a collective on several) and saves
        # (Keras's saving may read variables through collectives), the
        # chief into the checkpoint, the others into a temporary folder
        # they delete (TensorFlow's multi-worker convention); then the
        # others wait until the chief has written.
        arrays = self._memory_arrays()
        if processes.is_primary():
            self._write_files(self.directory, tag, arrays)
        else:
            scratch = tempfile.mkdtemp(prefix="keras-txl-worker-")
            try:
                self._write_files(scratch, tag, arrays)
            finally:
                _remove(scratch)
        processes.barrier(f"keras_txl_checkpoint_{tag}")
        return self._saved()

    def _memory_arrays(self):
        """Every row's memory, as numpy (`None` before the first call)."""
        state = self.model.memory_state
        if not state.has_state:
            return None
        if self.strategy is not None:
            return self.strategy.global_memory(self.model)
        return state.memory_spec.flatten(state.read())

    def _write_files(self, directory, tag, arrays):
        """Writes a checkpoint of one file per part into `directory`."""
        os.makedirs(directory, exist_ok=True)
        names = {"weights": f"state-{tag}.weights.h5"}
        # (Names no `state.json` holds yet: written in place.)
        model = self.model
        model.save_weights(os.path.join(directory, names["weights"]))
        if arrays is not None:
            names["memory"] = f"memory-{tag}.npz"
            _save_npz(os.path.join(directory, names["memory"]), arrays)
        self._write_state(
            names,
            directory,
            # The dropout's random states (not in the weights file): a
            # resumed run draws the masks it would have drawn.
            random_states=[
                keras.ops.convert_to_numpy(v.value).tolist()
                for v in _random_states(model)
            ],
        )

    def _write_state(self, names, directory=None, **extra):
        """Replaces `state.json` (naming the files `names`) of `directory`
        (default: the checkpoint's) in one rename, then deletes the files
        of the previous save."""
        directory = self.directory if directory is None else directory
        text = json.dumps(
            {
                "step": self.history.step,
                "train_loss": self.history.losses,
                "config": self.config,
                "files": names,
                **extra,
            }
        )
        _write_atomically(
            os.path.join(directory, STATE_FILE),
            lambda path: _write_text(path, text),
        )
        for name in os.listdir(directory):
            if name != STATE_FILE and name not in names.values():
                _remove(os.path.join(directory, name))

    def _saved(self):
        self.saved_step = self.history.step
        if self.on_save is not None:
            self.on_save(self)
        return True

    @staticmethod
    def read_state(directory):
        """The `state.json` dict of a checkpoint (`step`, `train_loss`,
        `config`, and `files`: the names of its weights and memory).

        Raises:
            DamagedFileError: `state.json` is missing, not JSON, or lacks
                a key.
        """
        path = os.path.join(os.fspath(directory), STATE_FILE)
        state = read_json_file(path)
        if not isinstance(state, dict) or not isinstance(
            state.get("step"), int
        ):
            raise DamagedFileError(
                path, "is not a checkpoint's state (no integer 'step')."
            )
        state.setdefault("train_loss", [])
        state.setdefault("config", {})
        files = {"weights": WEIGHTS_FILE, "memory": MEMORY_FILE}
        files.update(state.get("files") or {})
        if "files" in state and "memory" not in state["files"]:
            files.pop("memory")
        if "arrays" in files:  # several processes: one Orbax folder
            files.pop("weights")
        state["files"] = files
        return state

    @staticmethod
    def restore(model, directory, batch_size, strategy=None):
        """Loads a checkpoint into `model` (built and compiled as when it
        was saved) and returns its `state.json` dict.

        Args:
            model: a compiled `TransformerXLCausalLM`.
            directory: the checkpoint folder.
            batch_size: int. Batch size of the training data (the global
                batch under a strategy).
            strategy: the `ReplicaStrategy` the model trains under (call
                `restore` in its scope), or `None`: each replica gets the
                memory of its rows.

        Raises:
            DamagedFileError: a file of the checkpoint is missing,
                truncated, or holds the weights of another model.
        """
        directory = os.fspath(directory)
        state = TrainingCheckpoint.read_state(directory)
        if not model.built:
            model.build()
        if strategy is None:
            model.build_memory(batch_size)
        else:
            strategy.build_memory(model, batch_size)
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        if "arrays" in state["files"]:
            _restore_shared_arrays(
                model, os.path.join(directory, state["files"]["arrays"])
            )
            return state
        weights = os.path.join(directory, state["files"]["weights"])
        variables = list(model.weights) + list(model.optimizer.variables)
        check_weights_fit(
            weights,
            [v for v in variables if not _is_memory(model, v)],
            "the run's model and optimizer (its train_config.json)",
        )
        try:
            model.load_weights(weights)
        except ValueError as error:
            reason = " ".join(str(error).split())[:200]
            raise DamagedFileError(
                weights, f"does not fit the run's model ({reason})."
            ) from None
        saved = state.get("random_states")
        variables = _random_states(model)
        if saved is not None and len(saved) == len(variables):
            for variable, value in zip(variables, saved):
                variable.assign(np.asarray(value, variable.dtype))
        memory_path = os.path.join(
            directory, state["files"].get("memory", MEMORY_FILE)
        )
        if "memory" in state["files"]:
            memory = _read_memory(model, memory_path)
            if strategy is None:
                model.memory_state.write(memory)
            else:
                strategy.write_memory(model, memory)
        return state


def _shared_arrays(model):
    """What a run of several processes saves, as the nest of `jax.Array`s
    that Orbax writes: the weights and the optimizer's variables, the
    dropout's random states and the carried memory of every row (sharded
    along the batch: each process writes its replicas' rows)."""
    state = model.memory_state
    memory = state.memory_spec.keys if state.has_state else ()
    return {
        "variables": [v.value for v in _saved_variables(model)],
        "random_states": [v.value for v in _random_states(model)],
        "memory": {key: getattr(state, key).value for key in memory},
    }


def _saved_variables(model):
    """The weights and optimizer variables of a checkpoint, in order."""
    variables = list(model.weights) + list(model.optimizer.variables)
    random_states = {id(v) for v in _random_states(model)}
    return [
        v
        for v in variables
        if not _is_memory(model, v) and id(v) not in random_states
    ]


def _restore_shared_arrays(model, path):
    """Loads `_shared_arrays`'s Orbax folder `path` into `model`, each
    array laid out as the model's variable is now (on any number of
    processes and devices: each row of the memory goes to the device
    that holds the row now)."""
    if keras.backend.backend() != "jax":
        raise ValueError(
            f"The checkpoint '{path}' was written by several JAX processes "
            f"(Orbax); this process runs KERAS_BACKEND="
            f"{keras.backend.backend()}. Resume it with KERAS_BACKEND=jax."
        )
    if not os.path.isdir(path):
        raise DamagedFileError(path, "is missing.")
    like = _shared_arrays(model)
    try:
        arrays = processes.restore_arrays(path, like)
    except (ValueError, KeyError, FileNotFoundError) as error:
        reason = " ".join(str(error).split())[:200]
        raise DamagedFileError(
            path, f"does not fit the run's model ({reason})."
        ) from None
    state = model.memory_state
    pairs = list(zip(_saved_variables(model), arrays["variables"]))
    pairs += zip(_random_states(model), arrays["random_states"])
    pairs += [(getattr(state, k), v) for k, v in arrays["memory"].items()]
    for variable, value in pairs:
        variable.assign(value)


def _random_states(model):
    """The states of the model's `SeedGenerator`s (its dropout layers'),
    which `save_weights` leaves out."""
    return [
        v for v in model.variables if v.path.endswith("seed_generator_state")
    ]


def _is_memory(model, variable):
    """Whether `variable` is one of the carried memory's (never saved)."""
    state = getattr(model, "memory_state", None)
    held = getattr(state, "variables", None) or []
    return any(variable is v for v in held)


def _read_memory(model, path):
    if not os.path.isfile(path):
        raise DamagedFileError(path, "is missing.")
    try:
        with np.load(path, allow_pickle=False) as arrays:
            return model.memory_state.memory_spec.unflatten(arrays)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        reason = " ".join(str(error).split())[:200]
        raise DamagedFileError(
            path,
            f"is not the checkpoint's memory ({reason}): it is truncated "
            "or damaged. Remove the checkpoint folder to start again.",
        ) from None


def _write_atomically(path, write):
    """`write(temporary)`, then the temporary file renamed to `path`."""
    temporary = f"{path}.partial"
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        _remove(temporary)
        raise


def _save_npz(path, arrays):
    with open(path, "wb") as file:  # `np.savez` would add ".npz"
        np.savez(file, **arrays)


def _write_text(path, text):
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


def _remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)


def _all_finite(model):
    """Whether every float weight and optimizer variable of `model` is
    finite (no NaN, no Inf)."""
    variables = list(model.weights)
    if getattr(model, "optimizer", None) is not None:
        variables += list(model.optimizer.variables)
    for variable in variables:
        if "float" not in keras.backend.standardize_dtype(variable.dtype):
            continue
        value = variable.value
        if not getattr(value, "is_fully_addressable", True):
            # Held by several processes (JAX): reduced where it is, the
            # answer (on every process) fetched.
            finite = keras.ops.all(keras.ops.isfinite(value))
            if not bool(keras.ops.convert_to_numpy(finite)):
                return False
        elif not np.isfinite(keras.ops.convert_to_numpy(value)).all():
            return False
    return True
