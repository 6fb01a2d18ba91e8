"""Ablations of Transformer-XL at small scale (Dai et al., 2019, Table 6
and section 4.3): recurrence, position encodings, memory length,
stop-gradient, and the relative effective context length (RECL).

Ablation tooling, not part of the model: `AblationTransformerXLBackbone`,
the paper's backbone with a mechanism taken away (absolute or learned
relative positions, no stop-gradient; its layers are in
`keras_txl.layers.ablation`); `UnrolledSegmentsLM` trains several
segments per batch in one graph (with
`AblationTransformerXLBackbone(stop_memory_gradient=False)`,
backpropagation through the memory). `compare_contexts` measures the RECL
of a group of models on a text, and `relative_effective_context_length`
computes it from per-token losses measured elsewhere. `run_ablation` is
the study: it trains every variant with the same budget and seeds, sweeps
the memory length, measures RECL and the cost of a step. The commands
`keras-txl ablate` and `keras-txl recl` parse their options, print and
write files around them (the study's variants, report and pictures:
`study.py`, `report.py`).
"""

from keras_txl.ablation.ablation_transformer_xl_backbone import (
    AblationTransformerXLBackbone,
)
from keras_txl.ablation.recl import compare_contexts
from keras_txl.ablation.recl import relative_effective_context_length
from keras_txl.ablation.study import run_ablation
from keras_txl.ablation.unrolled_segments_lm import UnrolledSegmentsLM

__all__ = [
    "AblationTransformerXLBackbone",
    "UnrolledSegmentsLM",
    "compare_contexts",
    "relative_effective_context_length",
    "run_ablation",
]
