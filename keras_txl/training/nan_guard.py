import keras
import numpy as np

from keras_txl.utils.validation import check_bool

LIKELY_CAUSES = (
    "Likely causes: (1) token ids outside [0, vocabulary_size) in the "
    "inputs or targets (a `TransformerXLCausalLM` makes their loss NaN "
    "inside `fit`, where values cannot raise; build the data with "
    "`keras_txl.data.segment_dataset(..., vocabulary_size=...)`, which "
    "checks them); (2) a learning rate too high, or no gradient clipping "
    "(`clipnorm`); (3) float16 overflow under 'mixed_float16' (use "
    "'mixed_bfloat16', and keep the `LossScaleOptimizer` that `compile` "
    "adds); (4) NaN or Inf in the data or in the carried memory: call "
    "`model.reset_memory()` before going on. The weights may hold this "
    "step's update: go on from the last checkpoint."
)


class NanGuard(keras.callbacks.TerminateOnNaN):
    """Stops training at the first NaN or Inf loss, naming the step.

    `keras.callbacks.TerminateOnNaN` with a message that says where the
    loss went bad (the step counted from the start of `fit`, across
    epochs, and the epoch and batch) and what usually causes it in a
    Transformer-XL run. The loss that `fit` reports is the running mean
    of the epoch, which is finite until the first non-finite batch: the
    step named is that batch (or, with `steps_per_execution > 1`, the
    steps of that call).

    Args:
        raise_error: bool. `False` (default): print the message and stop
            training as `TerminateOnNaN` does (`model.stop_training =
            True`, other callbacks still end). `True`: raise a
            `RuntimeError` with the message at once.
        verbose: bool. Print the message when stopping (default True);
            `False` leaves reporting to the caller (`step`, `message`).

    Attributes:
        step: the step (1-based, counted from the start of `fit`) whose
            loss was not finite, or `None`.
        loss: that loss (NaN or Inf), or `None`.
        message: the message printed or raised, or `None`.

    Example:

    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.compile(loss="mse", optimizer="sgd")
    >>> x = np.array([[1.0], [np.nan], [1.0], [1.0]], "float32")
    >>> guard = NanGuard()
    >>> _ = model.fit(
    ...     x, x, batch_size=1, shuffle=False, callbacks=[guard], verbose=0
    ... )  # doctest: +ELLIPSIS
    NaN or Inf loss (loss=nan) at step 2 ...
    >>> guard.step
    2
    """

    def __init__(self, raise_error=False, verbose=True):
        super().__init__(raise_error=check_bool("raise_error", raise_error))
        self.verbose = check_bool("verbose", verbose)
        self.step = None
        self.loss = None
        self.message = None
        self._steps_before_epoch = 0
        self._last_step = 0
        self._epoch = 0

    def on_train_begin(self, logs=None):
        self.step = None
        self.loss = None
        self.message = None
        self._steps_before_epoch = 0
        self._last_step = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        self._steps_before_epoch = self._last_step

    def on_train_batch_end(self, batch, logs=None):
        step = self._steps_before_epoch + batch + 1
        first = self._last_step + 1
        self._last_step = step
        loss = (logs or {}).get("loss")
        if loss is None or np.isfinite(float(loss)) or self.step is not None:
            return
        where = f"step {step}" if first == step else f"steps {first}-{step}"
        self.step = step
        self.loss = float(loss)
        self.message = (
            f"NaN or Inf loss (loss={float(loss)}) at {where} of this "
            f"`fit` (epoch {self._epoch + 1}, batch {batch + 1}); training "
            f"stopped. {LIKELY_CAUSES}"
        )
        if self.raise_error:
            raise RuntimeError(self.message)
        if self.verbose:
            print(self.message)
        self.model.stop_training = True


class TrainingDiverged(RuntimeError):
    """A training run stopped because its loss was not finite.

    Raised by `keras_txl_cli.train_run.train` (and so `keras-txl train`)
    after `NanGuard` stopped `fit`. The checkpoint of the run is the last
    one with finite weights; the message says at which step the loss went
    bad and how to go on.

    Attributes:
        step: the global step (1-based) whose loss was not finite.
        checkpoint_step: the step of the checkpoint kept, or `None` when
            none was written before the loss went bad.
    """

    def __init__(self, message, step, checkpoint_step):
        super().__init__(message)
        self.step = step
        self.checkpoint_step = checkpoint_step
