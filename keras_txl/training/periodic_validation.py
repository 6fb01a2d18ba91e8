import math
import time

import keras

from keras_txl.utils.validation import check_positive_int


class PeriodicValidation(keras.callbacks.Callback):
    """Validation bits per character every `every` training steps.

    Keras validates at the end of an epoch; a long run wants to see its
    validation loss more often than it checkpoints. This callback
    evaluates a model on the same weights with its own memory
    (`lm.with_memory_length(memory_length)`, built and compiled once), so
    that the training memory is left as it is, and adds `val_loss` and
    `val_bpc` to the step's logs (a `TensorBoard` or `StepCSVLogger`
    after it in the callbacks records them).

    Args:
        dataset: ordered `(inputs, targets)` validation batches.
        every: int >= 1. Steps between validations (a multiple of
            `steps_per_execution`).
        history: the run's `StepHistory`, whose `step` counts the global
            steps (a resumed run included).
        memory_length: int >= 0 or `None` (the model's own).
        steps: int or `None`: validation batches (`None`: all).
        verbose: Keras verbosity of the validation (1: a progress bar).
        log: function that prints a line (`None`: silent).

    Example:

    >>> from keras_txl.training.step_history import StepHistory
    >>> history = StepHistory(tokens_per_step=64)
    >>> validation = PeriodicValidation(None, every=50, history=history)
    >>> validation.results
    []
    """

    def __init__(
        self,
        dataset,
        every,
        history,
        memory_length=None,
        steps=None,
        verbose=0,
        log=None,
    ):
        super().__init__()
        self.dataset = dataset
        self.every = check_positive_int("every", every)
        self.history = history
        self.memory_length = memory_length
        self.steps = steps
        self.verbose = verbose
        self.log = log
        self.results = []
        self._validation_model = None

    def _eval_model(self):
        if self._validation_model is None:
            length = self.memory_length
            if length is None:
                length = self.model.carried_memory_length
            self._validation_model = self.model.with_memory_length(length)
            if not self._validation_model.compiled:
                self._validation_model.compile()
        return self._validation_model

    def on_train_batch_end(self, batch, logs=None):
        step = self.history.step
        if step % self.every:
            return
        # JAX: the trainer holds the live weights; write them back first.
        sync = getattr(self.model, "jax_state_sync", None)
        if sync is not None:
            sync()
        started = time.perf_counter()
        result = self._eval_model().evaluate(
            self.dataset,
            steps=self.steps,
            verbose=self.verbose,
            return_dict=True,
        )
        loss = float(result["loss"])
        row = {
            "step": step,
            "val_loss": loss,
            "val_bpc": loss / math.log(2.0),
            "seconds": time.perf_counter() - started,
        }
        self.results.append(row)
        if logs is not None:
            logs["val_loss"] = row["val_loss"]
            logs["val_bpc"] = row["val_bpc"]
        if self.log is not None:
            self.log(
                f"Step {step}: validation {row['val_bpc']:.4f} bits per "
                f"character ({row['seconds']:.1f} s)"
            )
