"""The choices of the `keras-txl` options, in a module that imports
nothing heavy.

`keras-txl` checks its arguments before it imports Keras (and so
TensorFlow or JAX), so that a mistake on the command line comes back in
a second: the parser takes its choices from here, not from the library
modules that own them (those load Keras). `tests/app/test_cli.py` pins
the copies of `CORPORA`, `STRATEGY_NAMES` and `VARIANTS` to the
library's own; `TOKENIZERS` and `SAMPLERS` are defined here only. The argparse
types of the numeric options are here too, and `ConfigError`, the error of an
option value (or of options together) that the checks after parsing find.
"""

import argparse

# `keras_txl.data.corpora.CORPORA`: the corpora of `load_corpus` and the
# tokenizer each is modeled with (`keras-txl train`'s default `--tokenizer`).
CORPORA = {
    "builtin": "char",
    "enwik8": "byte",
    "text8": "char",
    "wikitext103": "word",
    "one_billion_word": "word",
}
DATASETS = tuple(CORPORA)
# The tokenizers of `keras-txl train --tokenizer`.
TOKENIZERS = ("byte", "char", "word")
# `keras_txl.distribute.strategies.STRATEGY_NAMES`.
STRATEGY_NAMES = ("none", "mirrored", "multiworker", "tpu", "jax-data-parallel")
# The keras-hub samplers that `TransformerXLCausalLM.generate` runs (the
# contrastive sampler reads hidden states this model does not keep, the
# speculative one needs a draft model): `keras-txl generate --sampler`.
SAMPLERS = ("greedy", "top_k", "top_p", "random", "beam")
# `keras_txl.ablation.study.VARIANTS`: the variants of `keras-txl ablate`.
VARIANTS = (
    "recurrence_relative",
    "no_recurrence",
    "recurrence_absolute",
    "recurrence_learned_relative",
    "no_stop_gradient",
)


def integer(lowest):
    """An argparse type: an int >= `lowest`."""

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < lowest:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {lowest}, got {text!r}"
            )
        return value

    return parse


def number(low, high, high_included):
    """An argparse type: a float in `[low, high]` (or `[low, high)`)."""

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = None
        ok = value is not None and low <= value
        ok = ok and (value <= high if high_included else value < high)
        if not ok:
            bracket = "]" if high_included else ")"
            raise argparse.ArgumentTypeError(
                f"must be a number in [{low}, {high}{bracket}, got {text!r}"
            )
        return value

    return parse


def jit_compile_flag(text):
    """An argparse type: `--jit-compile auto, true or false`."""
    values = {"auto": "auto", "true": True, "false": False}
    if text.lower() not in values:
        raise argparse.ArgumentTypeError(
            f"must be auto, true or false, got {text!r}"
        )
    return values[text.lower()]


def list_of(convert, allowed, what):
    """An argparse type: comma-separated values, each `allowed`."""

    def parse(text):
        try:
            values = [convert(v.strip()) for v in text.split(",") if v.strip()]
        except ValueError:
            values = []
        if not values or not all(allowed(v) for v in values):
            raise argparse.ArgumentTypeError(
                f"must be {what} separated by commas, got {text!r}"
            )
        return values

    return parse


def integer_list_from(lowest):
    """An argparse type: comma-separated ints >= `lowest`."""
    return list_of(int, lambda v: v >= lowest, f"integers >= {lowest}")


# `--contexts 16,32,48` of `recl`, `--recl-contexts` of `ablate`.
integer_list = integer_list_from(1)


class ConfigError(ValueError):
    """A bad option value, or options that do not go together: the
    message names the option and the fix. The command prints it as one
    line (`keras-txl SUBCOMMAND: error: ...`) with exit status 1."""
