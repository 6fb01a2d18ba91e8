import time

import keras

from keras_txl.utils.validation import check_positive_int


class StepHistory(keras.callbacks.Callback):
    """Records the loss of every training step and the training speed, and
    stops training after `total_steps` steps.

    Keras logs `loss` as the running mean of the epoch; this callback
    records `logs[loss_key]`, the last batch's loss (the `batch_loss`
    metric that `TransformerXLCausalLM.compile` adds), once a step.

    With `steps_per_execution=k` (`Model.compile`), Keras calls the
    callbacks once per `k` steps: the step counter advances by `k` and
    one loss (the last step's) is recorded per call.

    The speed leaves out the first call of each `fit` (where the step
    function compiles): `tokens_per_second` is the tokens of steps
    `2..n` over the time from the end of step 1 to the end of step `n`.

    Args:
        tokens_per_step: int. Tokens in one batch (`batch * T`).
        initial_step: int. Global step of the first batch of this `fit`.
        total_steps: int or `None`. Stop once this global step is done.
        losses: list of floats. Losses of the steps before `initial_step`
            (a resumed run), continued here.
        loss_key: the key of the per-step loss in the logs.

    Example:

    >>> history = StepHistory(tokens_per_step=1024, total_steps=10)
    >>> history.step, history.losses
    (0, [])
    """

    def __init__(
        self,
        tokens_per_step,
        initial_step=0,
        total_steps=None,
        losses=(),
        loss_key="batch_loss",
    ):
        super().__init__()
        self.tokens_per_step = check_positive_int(
            "tokens_per_step", tokens_per_step
        )
        self.step = check_positive_int(
            "initial_step", initial_step, allow_zero=True
        )
        self.total_steps = total_steps
        self.losses = [float(v) for v in losses]
        self.loss_key = loss_key
        self._first_end = None
        self._last_end = None
        self._timed_steps = 0
        self._begin = None

    @property
    def tokens_per_second(self):
        """Training speed of this `fit`, compile excluded (`None` before
        two steps)."""
        if not self._timed_steps or self._last_end <= self._first_end:
            return None
        elapsed = self._last_end - self._first_end
        return self._timed_steps * self.tokens_per_step / elapsed

    def on_train_batch_begin(self, batch, logs=None):
        self._begin = batch

    def on_train_batch_end(self, batch, logs=None):
        # Keras passes the first and the last step of the execution.
        steps = 1 if self._begin is None else batch - self._begin + 1
        logs = logs or {}
        if self.loss_key not in logs:
            raise ValueError(
                f"`StepHistory` needs the per-step loss `{self.loss_key}` in "
                "the logs: compile with the `BatchCrossEntropy` metric "
                "(`TransformerXLCausalLM.compile()` adds it). Logs: "
                f"{sorted(logs)}"
            )
        # Reading the value waits for the step (JAX dispatches async).
        self.losses.append(float(logs[self.loss_key]))
        now = time.perf_counter()
        if self._first_end is None:
            self._first_end = now
        else:
            self._timed_steps += steps
        self._last_end = now
        self.step += steps
        if self.total_steps is not None and self.step >= self.total_steps:
            self.model.stop_training = True
