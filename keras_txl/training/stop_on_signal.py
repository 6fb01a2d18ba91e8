import signal
import threading

import keras

from keras_txl.utils import processes

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopOnSignal(keras.callbacks.Callback):
    """Stops `fit` at the end of the current step when the process gets
    SIGINT (Ctrl-C) or SIGTERM, instead of at a random point inside it.

    During `fit` the two signals only record themselves; at the end of the
    step (the execution, with `steps_per_execution > 1`) this callback
    sets `model.stop_training`, so that Keras ends the epoch there and the
    callbacks of `on_epoch_end` (`TrainingCheckpoint`) save that step. A
    second signal before the step ends raises `KeyboardInterrupt` at once.
    Of a run on several JAX processes or TensorFlow workers, a signal to
    any one stops them all at the end of the same step (each step, the
    processes share the largest signal number any got, a collective):
    they all write that step's checkpoint.
    The previous handlers are back after `fit`. Outside the main thread
    (where Python cannot set handlers) it does nothing.

    Attributes:
        signal: the number of the signal received, or `None`.
        signal_name: its name (`"SIGINT"`), or `None`.

    Example:

    ```python
    stop = StopOnSignal()
    lm.fit(data, epochs=10, callbacks=[stop, TrainingCheckpoint(...)])
    if stop.signal is not None:
        print(f"stopped by {stop.signal_name}")
    ```
    """

    def __init__(self):
        super().__init__()
        self.signal = None
        self._previous = {}

    @property
    def signal_name(self):
        return None if self.signal is None else signal.Signals(self.signal).name

    def _record(self, number, frame):
        if self.signal is not None:  # a second one: stop now
            self._restore()
            raise KeyboardInterrupt
        self.signal = number

    def _restore(self):
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def on_train_begin(self, logs=None):
        self.signal = None
        if threading.current_thread() is not threading.main_thread():
            return
        for number in SIGNALS:
            self._previous[number] = signal.signal(number, self._record)

    def on_train_batch_end(self, batch, logs=None):
        if processes.process_count() > 1:
            # A signal to any process stops every one at this step.
            self.signal = processes.largest(self.signal or 0) or None
        if self.signal is not None:
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        self._restore()


class TrainingInterrupted(KeyboardInterrupt):
    """A training run stopped by SIGINT (Ctrl-C) or SIGTERM.

    Raised by `keras_txl_cli.train_run.train` (and so `keras-txl
    train`) after `StopOnSignal` stopped `fit` at the end of a step and
    the checkpoint of that step was written: `--resume` continues the run
    exactly. It is a `KeyboardInterrupt`, so code that catches `Exception`
    lets it through, as it does Ctrl-C.

    Attributes:
        signal: the signal's number (`signal.SIGINT`, `signal.SIGTERM`).
        step: the global step of the checkpoint written.
        exit_status: `128 + signal`, the status a shell reports for a
            process the signal stopped (130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, message, signal, step):
        super().__init__(message)
        self.signal = int(signal)
        self.step = step
        self.exit_status = 128 + self.signal
