class TrainingInterrupted(KeyboardInterrupt):
    """A training run stopped by SIGINT (Ctrl-C) or SIGTERM.

    Raised by `keras_txl.app.run.train` (and so `keras-txl train`) after
    `StopOnSignal` stopped `fit` at the end of a step and the checkpoint
    of that step was written: `--resume` continues the run exactly. It is
    a `KeyboardInterrupt`, so code that catches `Exception` lets it
    through, as it does Ctrl-C.

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
