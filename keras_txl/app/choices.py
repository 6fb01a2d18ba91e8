"""The choices of the `keras-txl` options, in a module that imports
nothing heavy.

`keras-txl` checks its arguments before it imports Keras (and so
TensorFlow or JAX), so that a mistake on the command line comes back in
a second: the parser takes its choices from here, not from the library
modules that own them (those load Keras). `tests/app/test_cli.py` pins
the copies of `DATASETS`, `STRATEGY_NAMES` and `VARIANTS` to the
library's own; `TOKENIZERS` and `SAMPLERS` are defined here only.
"""

# `keras_txl.data.CORPORA`: the corpora of `load_corpus`.
DATASETS = ("builtin", "enwik8", "text8", "wikitext103", "one_billion_word")
# The tokenizers of `keras-txl train --tokenizer`.
TOKENIZERS = ("byte", "char", "word")
# `keras_txl.distribute.STRATEGY_NAMES`.
STRATEGY_NAMES = ("none", "mirrored", "multiworker", "tpu", "jax-data-parallel")
# The keras-hub samplers that `TransformerXLCausalLM.generate` runs (the
# contrastive sampler reads hidden states this model does not keep, the
# speculative one needs a draft model): `keras-txl generate --sampler`.
SAMPLERS = ("greedy", "top_k", "top_p", "random", "beam")
# `keras_txl.ablation.VARIANTS`: the variants of `keras-txl ablate`.
VARIANTS = (
    "recurrence_relative",
    "no_recurrence",
    "recurrence_absolute",
    "recurrence_learned_relative",
    "no_stop_gradient",
)
