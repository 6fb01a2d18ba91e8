"""Ablations of Transformer-XL at small scale (Dai et al., 2019, Table 6
and section 4.3): recurrence, position encodings, memory length,
stop-gradient, and the relative effective context length (RECL).

Ablation tooling, not part of the model: `AblationTransformerXLBackbone`,
the paper's backbone with a mechanism taken away (absolute or learned
relative positions, no stop-gradient); `relative_effective_context_length`
computes RECL from per-token losses (`context_losses`);
`UnrolledSegmentsLM` trains several segments per batch in one graph (with
`AblationTransformerXLBackbone(stop_memory_gradient=False)`, backpropagation
through the memory). `run_ablation` is the study: it trains every
variant with the same budget and seeds, sweeps the memory length, measures
RECL (`compare_contexts`) and the cost of a step; `markdown_report` and
`picture_series` are its tables and the lines of its pictures. The
commands `keras-txl ablate` and `keras-txl recl` parse their options,
print and write files around them.
"""

from keras_txl.ablation.ablation_transformer_xl_backbone import (
    AblationTransformerXLBackbone,
)
from keras_txl.ablation.cost import measure_step_cost
from keras_txl.ablation.recl import compare_contexts
from keras_txl.ablation.recl import context_losses
from keras_txl.ablation.recl import relative_effective_context_length
from keras_txl.ablation.recl import relative_gain
from keras_txl.ablation.recl import relative_gains
from keras_txl.ablation.report import markdown_report
from keras_txl.ablation.report import picture_series
from keras_txl.ablation.study import VARIANTS
from keras_txl.ablation.study import run_ablation
from keras_txl.ablation.study import validation_characters
from keras_txl.ablation.study import variant_config
from keras_txl.ablation.unrolled_segments_lm import UnrolledSegmentsLM
from keras_txl.layers.ablation import AblationTransformerXLBlock
from keras_txl.layers.ablation import DifferentiableMemoryCache
from keras_txl.layers.ablation import LearnedRelativeMultiHeadAttention

__all__ = [
    "AblationTransformerXLBackbone",
    "AblationTransformerXLBlock",
    "DifferentiableMemoryCache",
    "LearnedRelativeMultiHeadAttention",
    "UnrolledSegmentsLM",
    "VARIANTS",
    "compare_contexts",
    "context_losses",
    "markdown_report",
    "measure_step_cost",
    "picture_series",
    "relative_effective_context_length",
    "relative_gain",
    "relative_gains",
    "run_ablation",
    "validation_characters",
    "variant_config",
]
