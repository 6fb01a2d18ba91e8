"""Ablations of Transformer-XL at small scale (Dai et al., 2019, Table 6
and section 4.3): recurrence, position encodings, memory length,
stop-gradient, and the relative effective context length (RECL).

Ablation tooling, not part of the model: `AblationTransformerXLBackbone`,
the paper's backbone with a mechanism taken away (absolute or learned
relative positions, no stop-gradient); `relative_effective_context_length`
computes RECL from per-token losses (`context_losses`);
`UnrolledSegmentsLM` trains several segments per batch in one graph (with
`AblationTransformerXLBackbone(stop_memory_gradient=False)`, backpropagation
through the memory). The runs that train every variant with the same
budget and seed are the application's (`keras_txl.app.ablation_run.
run_ablation`, the commands `keras-txl ablate` and `keras-txl recl`).
"""

from keras_txl.ablation.ablation_transformer_xl_backbone import (
    AblationTransformerXLBackbone,
)
from keras_txl.ablation.cost import measure_step_cost
from keras_txl.ablation.recl import context_losses
from keras_txl.ablation.recl import relative_effective_context_length
from keras_txl.ablation.recl import relative_gain
from keras_txl.ablation.recl import relative_gains
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
    "context_losses",
    "measure_step_cost",
    "relative_effective_context_length",
    "relative_gain",
    "relative_gains",
]
