"""Training and evaluation of Transformer-XL language models with
`model.fit` on ordered segments: metrics, the paper's schedule, memory
resets and evaluation with another memory length."""

from keras_txl.models.memory_reset import MemoryReset
from keras_txl.training.dynamic_evaluation import dynamic_evaluation
from keras_txl.training.evaluation import evaluate_bpc
from keras_txl.training.evaluation import evaluate_segments
from keras_txl.training.nan_guard import NanGuard
from keras_txl.training.nan_guard import TrainingDiverged
from keras_txl.training.periodic_validation import PeriodicValidation
from keras_txl.training.schedules import transformer_xl_optimizer
from keras_txl.training.schedules import warmup_cosine_schedule
from keras_txl.training.step_csv_logger import StepCSVLogger
from keras_txl.training.step_history import StepHistory
from keras_txl.training.stop_on_signal import StopOnSignal
from keras_txl.training.stop_on_signal import TrainingInterrupted
from keras_txl.training.training_checkpoint import TrainingCheckpoint

__all__ = [
    "MemoryReset",
    "NanGuard",
    "PeriodicValidation",
    "StepCSVLogger",
    "StepHistory",
    "StopOnSignal",
    "TrainingCheckpoint",
    "TrainingDiverged",
    "TrainingInterrupted",
    "dynamic_evaluation",
    "evaluate_bpc",
    "evaluate_segments",
    "transformer_xl_optimizer",
    "warmup_cosine_schedule",
]
