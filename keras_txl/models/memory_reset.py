"""The callback that resets the carried memory (`MemoryState`) where the
ordered text restarts."""

import keras

from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int


class MemoryReset(keras.callbacks.Callback):
    """Resets the memory that a `TransformerXLCausalLM` carries between
    batches, where the ordered text restarts.

    `TransformerXLCausalLM.fit`, `evaluate` and `predict` add one with the
    defaults when the callbacks hold none, so that each pass over an
    ordered-segment dataset starts with an empty memory:

    - at the start of each training epoch (one epoch = one pass over the
      data), or every `reset_every` training steps when an epoch is not a
      pass (a repeated dataset);
    - before every evaluation and prediction. An evaluation during `fit`
      (`validation_data`) gets its own fresh memory, and the training
      memory is put back afterwards.

    On JAX, `fit` keeps the variables outside the model between epochs; a
    reset in the middle of an epoch first writes them back
    (`model.jax_state_sync()`), then the next step reads the reset memory.

    Args:
        reset_every: int or `None`. `None` resets at each epoch start. An
            int `N` resets before training steps `0, N, 2N, ...` (counted
            from `initial_step`) instead: pass the number of batches of one
            pass over the data.
        initial_step: int >= 0. Global step of the first batch of this
            `fit` (a resumed run starts past 0).

    With `steps_per_execution=k` (`Model.compile`) the memory can only be
    reset between executions: it is reset before the execution that
    holds a pass's first step, so up to `k - 1` segments at the end of a
    pass run with an empty memory.

    Example:

    >>> reset = MemoryReset(reset_every=100, initial_step=250)
    >>> reset.step
    250
    """

    def __init__(self, reset_every=None, initial_step=0):
        super().__init__()
        self.reset_every = check_optional_positive_int(
            "reset_every", reset_every
        )
        self.initial_step = check_positive_int(
            "initial_step", initial_step, allow_zero=True
        )
        self.step = self.initial_step
        self._in_fit = False
        self._stashed = None
        self._begin = None

    def _reset(self):
        reset_memory = getattr(self.model, "reset_memory", None)
        if reset_memory is None:
            raise ValueError(
                "`MemoryReset` needs a model with `reset_memory()` (a "
                "`TransformerXLCausalLM`). Received: "
                f"{type(self.model).__name__}"
            )
        reset_memory()

    def _sync(self):
        # JAX: mid-epoch, the live values are held by the trainer; write
        # them back before touching a variable. A no-op elsewhere.
        sync = getattr(self.model, "jax_state_sync", None)
        if sync is not None:
            sync()

    def on_train_begin(self, logs=None):
        self._in_fit = True
        self.step = self.initial_step

    def on_train_end(self, logs=None):
        self._in_fit = False

    def on_epoch_begin(self, epoch, logs=None):
        if self.reset_every is None:
            self._reset()

    def on_train_batch_begin(self, batch, logs=None):
        self._begin = batch
        if self.reset_every is None:
            return
        # With `steps_per_execution=k` a call runs k steps: reset before
        # the execution that holds the pass's first step.
        steps = getattr(self.model, "steps_per_execution", 1) or 1
        last = self.step + steps - 1
        if self.step % self.reset_every == 0 or (
            last // self.reset_every > self.step // self.reset_every
        ):
            self._sync()
            self._reset()

    def on_train_batch_end(self, batch, logs=None):
        begin = batch if self._begin is None else self._begin
        self.step += batch - begin + 1

    def on_test_begin(self, logs=None):
        state = getattr(self.model, "memory_state", None)
        if self._in_fit and state is not None and state.has_state:
            self._sync()
            self._stashed = state.read()
        self._reset()

    def on_test_end(self, logs=None):
        if self._stashed is not None:
            self.model.memory_state.write(self._stashed)
            self._stashed = None

    def on_predict_begin(self, logs=None):
        self._reset()
