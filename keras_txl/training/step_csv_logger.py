import csv
import os
import time

import keras

COLUMNS = ("step", "loss", "seconds", "val_loss", "val_bpc")


class StepCSVLogger(keras.callbacks.Callback):
    """Writes one CSV row per training call: the global step, its loss,
    the seconds since the start of this `fit`, and the validation loss
    and bits per character where a `PeriodicValidation` ran at that step.

    Keras's `CSVLogger` writes one row per epoch; this one writes every
    step (every execution with `steps_per_execution > 1`), flushed as it
    goes so that `tail -f` follows the run. A resumed run appends to the
    file, after dropping the rows past its checkpoint's step (`from_step`:
    steps run after the last checkpoint of a killed run, which the
    resumed run runs again).

    Args:
        path: the CSV file.
        history: the run's `StepHistory` (place this callback after it).
        append: bool. Append to an existing file (a resumed run) instead
            of starting a new one.
        from_step: optional int. With `append`, the rows of later steps
            are dropped first (the file is rewritten, then renamed).

    Example:

    >>> from keras_txl.training.step_history import StepHistory
    >>> logger = StepCSVLogger("steps.csv", StepHistory(64))
    >>> logger.path
    'steps.csv'
    """

    def __init__(self, path, history, append=False, from_step=None):
        super().__init__()
        self.path = os.fspath(path)
        self.history = history
        self.append = bool(append)
        self.from_step = from_step
        self._file = None
        self._writer = None
        self._started = None

    def on_train_begin(self, logs=None):
        exists = os.path.exists(self.path) and os.path.getsize(self.path)
        append = self.append and exists
        if append and self.from_step is not None:
            self._drop_rows_after(self.from_step)
        self._file = open(self.path, "a" if append else "w", newline="")
        self._writer = csv.writer(self._file)
        if not append:
            self._writer.writerow(COLUMNS)
        self._started = time.perf_counter()

    def _drop_rows_after(self, step):
        with open(self.path, newline="") as file:
            rows = list(csv.reader(file))
        kept = [
            row
            for row in rows[1:]
            if row and row[0].isdigit() and int(row[0]) <= step
        ]
        if len(kept) == len(rows) - 1:
            return
        temporary = f"{self.path}.partial"
        with open(temporary, "w", newline="") as file:
            csv.writer(file).writerows(rows[:1] + kept)
        os.replace(temporary, self.path)

    def on_train_batch_end(self, batch, logs=None):
        logs = logs or {}
        row = [
            self.history.step,
            self.history.losses[-1] if self.history.losses else "",
            f"{time.perf_counter() - self._started:.3f}",
            logs.get("val_loss", ""),
            logs.get("val_bpc", ""),
        ]
        self._writer.writerow(row)
        self._file.flush()

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = None
