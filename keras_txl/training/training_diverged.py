class TrainingDiverged(RuntimeError):
    """A training run stopped because its loss was not finite.

    Raised by `keras_txl.training.run.train` (and so `keras-txl train`)
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
