"""Training and evaluation of Transformer-XL language models with
`model.fit` on ordered segments: metrics, the paper's schedule, memory
resets and evaluation with another memory length."""

from keras_txl.metrics.batch_cross_entropy import BatchCrossEntropy
from keras_txl.metrics.bits_per_character import BitsPerCharacter
from keras_txl.models.memory_carry import guard_batch_size
from keras_txl.models.memory_carry import prepare_memory_carry
from keras_txl.models.memory_reset import MemoryReset
from keras_txl.training.dynamic_evaluation import dynamic_evaluation
from keras_txl.training.evaluation import evaluate_bpc
from keras_txl.training.evaluation import evaluate_segments
from keras_txl.training.evaluation import perplexity
from keras_txl.training.nan_guard import NanGuard
from keras_txl.training.periodic_validation import PeriodicValidation
from keras_txl.training.schedules import transformer_xl_optimizer
from keras_txl.training.schedules import warmup_cosine_schedule
from keras_txl.training.step_csv_logger import StepCSVLogger
from keras_txl.training.step_history import StepHistory
from keras_txl.training.stop_on_signal import StopOnSignal
from keras_txl.training.training_checkpoint import TrainingCheckpoint
from keras_txl.training.training_diverged import TrainingDiverged
from keras_txl.training.training_interrupted import TrainingInterrupted

__all__ = [
    "BatchCrossEntropy",
    "BitsPerCharacter",
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
    "guard_batch_size",
    "perplexity",
    "prepare_memory_carry",
    "transformer_xl_optimizer",
    "warmup_cosine_schedule",
]
