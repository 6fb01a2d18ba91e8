"""Training and evaluation of Transformer-XL language models with
`model.fit` on ordered segments: the paper's optimizer and schedule,
callbacks that stop a run safely (`NanGuard`, `StopOnSignal`), and
evaluation with another memory length (`evaluate_bpc`), the paper's
protocol (`evaluate_segments`) and dynamic evaluation. The memory's reset
callback is `keras_txl.models.MemoryReset`; what `keras-txl train` adds
around `fit` (per-step history and CSV, periodic validation, crash-safe
checkpoints) stays in its modules."""

from keras_txl.training.dynamic_evaluation import dynamic_evaluation
from keras_txl.training.evaluation import evaluate_bpc
from keras_txl.training.evaluation import evaluate_segments
from keras_txl.training.nan_guard import NanGuard
from keras_txl.training.schedules import transformer_xl_optimizer
from keras_txl.training.stop_on_signal import StopOnSignal

__all__ = [
    "NanGuard",
    "StopOnSignal",
    "dynamic_evaluation",
    "evaluate_bpc",
    "evaluate_segments",
    "transformer_xl_optimizer",
]
