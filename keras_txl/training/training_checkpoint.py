import json
import os
import shutil

import keras
import numpy as np

WEIGHTS_FILE = "state.weights.h5"
MEMORY_FILE = "memory.npz"
STATE_FILE = "state.json"


class TrainingCheckpoint(keras.callbacks.Callback):
    """Saves what a run needs to continue exactly where it stopped, at the
    end of every epoch: the weights and the optimizer's state (one
    `.weights.h5`), the memory carried between batches (`memory.npz`:
    `MemoryState` is never saved with the weights), the global step, the
    per-step losses so far and the run's configuration (`state.json`).

    The folder is written under a temporary name and renamed, so a run
    killed while saving keeps the previous checkpoint. `restore` loads it
    into a model built and compiled as before, and returns the step to
    continue from: the data resumes at that batch
    (`dataset.repeat().skip(step)`).

    Args:
        directory: the checkpoint folder.
        history: the run's `StepHistory` (step counter and losses).
        config: a JSON-serializable dict saved with the state.
        strategy: the `keras_txl.distribute.ReplicaStrategy` the model
            trains under, or `None` (one device): the checkpoint then holds
            the memory of every replica's rows (one host).

    Example:

    ```python
    history = StepHistory(tokens_per_step=1024, total_steps=1000)
    checkpoint = TrainingCheckpoint("run/checkpoint", history, config)
    lm.fit(data.repeat(), steps_per_epoch=100, epochs=10,
           callbacks=[history, checkpoint])
    ```
    """

    def __init__(self, directory, history, config=None, strategy=None):
        super().__init__()
        self.directory = os.fspath(directory)
        self.history = history
        self.config = dict(config or {})
        self.strategy = strategy

    def on_epoch_end(self, epoch, logs=None):
        # On JAX, `fit` has written its state back into the variables
        # before `on_epoch_end`.
        self.save()

    def save(self):
        """Writes the checkpoint of the model's current state."""
        temporary = self.directory + ".tmp"
        old = self.directory + ".old"
        shutil.rmtree(temporary, ignore_errors=True)
        os.makedirs(temporary)
        model = self.model
        model.save_weights(os.path.join(temporary, WEIGHTS_FILE))
        state = model.memory_state
        spec = state.memory_spec  # every tensor of the memory, by name
        if state.has_state and self.strategy is not None:
            replicas = self.strategy.replica_memory(model)
            np.savez(
                os.path.join(temporary, MEMORY_FILE),
                **{
                    key: np.concatenate([r[key] for r in replicas])
                    for key in spec.keys
                },
            )
        elif state.has_state:
            np.savez(
                os.path.join(temporary, MEMORY_FILE),
                **spec.flatten(state.read()),
            )
        with open(os.path.join(temporary, STATE_FILE), "w") as file:
            json.dump(
                {
                    "step": self.history.step,
                    "train_loss": self.history.losses,
                    "config": self.config,
                },
                file,
            )
        shutil.rmtree(old, ignore_errors=True)
        if os.path.exists(self.directory):
            os.replace(self.directory, old)
        os.replace(temporary, self.directory)
        shutil.rmtree(old, ignore_errors=True)

    @staticmethod
    def read_state(directory):
        """The `state.json` dict of a checkpoint (`step`, `train_loss`,
        `config`)."""
        with open(os.path.join(os.fspath(directory), STATE_FILE)) as file:
            return json.load(file)

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
        """
        directory = os.fspath(directory)
        if not model.built:
            model.build()
        if strategy is None:
            model.build_memory(batch_size)
        else:
            strategy.build_memory(model, batch_size)
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        model.load_weights(os.path.join(directory, WEIGHTS_FILE))
        memory_path = os.path.join(directory, MEMORY_FILE)
        if os.path.exists(memory_path):
            with np.load(memory_path, allow_pickle=False) as arrays:
                memory = model.memory_state.memory_spec.unflatten(arrays)
            if strategy is None:
                model.memory_state.write(memory)
            else:
                strategy.write_memory(model, memory)
        return TrainingCheckpoint.read_state(directory)
