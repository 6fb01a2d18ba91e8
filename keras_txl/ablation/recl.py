"""Relative effective context length (RECL), Dai et al. (2019), section 4.3
and appendix C.

RECL compares how far back a GROUP of models profit from context, against a
baseline shared by the group. With `l_i(c, t)` the loss of model `i` on
token `t` given `c` tokens of context:

- baseline: `b(c, t) = min_i l_i(c, t)`, the best model of the group at
  the short context `c`;
- relative loss of model `i` from `c` to a longer `c'`:
  `f_i(c, c') = mean over t in T of min(b(c, t), l_i(c', t))`, where `T`
  holds the top-`r` share of tokens with the largest `b(c, t)` (the tokens
  that the short context serves worst); only losses below the baseline
  count;
- relative gain: `g_i(c, c') = (exp f_i(c, c) - exp f_i(c, c')) /
  exp f_i(c, c)`, the relative perplexity reduction (`f_i(c, c)` is the
  mean baseline over `T`, the same for every model);
- RECL of model `i`: start at the shortest context `c`; while
  `g_i(c, c + delta) >= threshold` (the paper: 0.01) move to `c + delta`;
  the `c` where it stops.

Here the steps go through a sorted list of context lengths (the paper's
`c, c + delta, c + 2 delta, ...` when evenly spaced). A RECL equal to the
longest length measured is a lower bound.
"""

import math

import numpy as np

from keras_txl.training.evaluation import bits_per_token
from keras_txl.training.evaluation import evaluation_model
from keras_txl.training.evaluation import per_token_losses
from keras_txl.training.evaluation import text_streams
from keras_txl.utils.validation import check_positive_int


def _check_losses(losses):
    """The context lengths (sorted) and the token count shared by all."""
    if not isinstance(losses, dict) or not losses:
        raise ValueError(
            "`losses` must be a non-empty dict {model name: {context "
            "length: per-token losses}}. Received: "
            f"{type(losses).__name__}"
        )
    contexts = None
    size = None
    for name, by_context in losses.items():
        if not isinstance(by_context, dict) or not by_context:
            raise ValueError(
                f"`losses[{name!r}]` must be a non-empty dict {{context "
                "length: per-token losses}}."
            )
        keys = sorted(
            check_positive_int("context length", c, allow_zero=True)
            for c in by_context
        )
        if contexts is None:
            contexts = keys
        elif keys != contexts:
            raise ValueError(
                "Every model of the group must be measured at the same "
                f"context lengths. {name!r} has {keys}, another has "
                f"{contexts}."
            )
        for c, values in by_context.items():
            values = np.asarray(values)
            if values.ndim != 1 or values.size == 0:
                raise ValueError(
                    f"`losses[{name!r}][{c}]` must be a non-empty 1-D array "
                    f"of per-token losses. Received shape {values.shape}."
                )
            if size is None:
                size = values.size
            elif values.size != size:
                raise ValueError(
                    "Every loss array must cover the same tokens. "
                    f"`losses[{name!r}][{c}]` has {values.size} tokens, "
                    f"another has {size}."
                )
    return contexts, size


def _check_ratio(ratio):
    if isinstance(ratio, bool) or not 0.0 < float(ratio) <= 1.0:
        raise ValueError(
            f"`ratio` must be a float in (0, 1]. Received: ratio={ratio!r}"
        )
    return float(ratio)


def relative_gain(losses, name, short_context, long_context, ratio):
    """`g_i(c, c')` of model `name` within its group.

    Args:
        losses: dict `{model name: {context length: per-token losses}}`,
            the losses (nats) of every model of the group on the same
            tokens at the same context lengths.
        name: the model `i`.
        short_context: `c`.
        long_context: `c'`.
        ratio: float in (0, 1]. `r`: the share of tokens kept, those with
            the largest baseline loss at `c` (`ceil(r * n)` of `n`).

    Returns:
        The relative gain, a float in [0, 1): losses above the baseline
        are cut to it, so a longer context never counts as a loss.
    """
    _check_losses(losses)
    ratio = _check_ratio(ratio)
    short = np.stack(
        [np.asarray(by_c[short_context], "float64") for by_c in losses.values()]
    )  # (models, tokens)
    baseline = short.min(axis=0)  # (tokens,)
    count = max(1, math.ceil(ratio * baseline.size))
    kept = np.argsort(-baseline, kind="stable")[:count]
    longer = np.asarray(losses[name][long_context], "float64")[kept]
    f_short = baseline[kept].mean()
    f_long = np.minimum(baseline[kept], longer).mean()
    return float((math.exp(f_short) - math.exp(f_long)) / math.exp(f_short))


def relative_gains(losses, ratio):
    """`g_i(c_k, c_{k+1})` for every model and consecutive context pair.

    Returns:
        dict `{model name: [(c_k, c_{k+1}, gain), ...]}`.
    """
    contexts, _ = _check_losses(losses)
    return {
        name: [
            (short, long, relative_gain(losses, name, short, long, ratio))
            for short, long in zip(contexts[:-1], contexts[1:])
        ]
        for name in losses
    }


def relative_effective_context_length(losses, ratio=0.1, threshold=0.01):
    """RECL of every model of a group (Dai et al., 2019, appendix C).

    Args:
        losses: dict `{model name: {context length: per-token losses}}`
            (nats), every model measured on the same tokens at the same
            context lengths (`keras_txl.ablation.recl.context_losses` measures
            them).
        ratio: float in (0, 1]. `r`, the share of hardest tokens (by the
            baseline at the short context) that count. The paper reports
            r = 0.1, 0.5 and 1.0.
        threshold: float. The smallest relative gain that still counts as
            a gain (the paper: 0.01).

    Returns:
        dict `{model name: RECL}`. The longest context length given means
        "at least that".

    Example:

    >>> import numpy as np
    >>> losses = {
    ...     "a": {10: np.array([2.0, 1.0]), 20: np.array([1.0, 1.0]),
    ...           30: np.array([1.0, 1.0])},
    ...     "b": {10: np.array([3.0, 1.0]), 20: np.array([3.0, 1.0]),
    ...           30: np.array([3.0, 1.0])},
    ... }
    >>> relative_effective_context_length(losses, ratio=0.5)
    {'a': 20, 'b': 10}
    """
    contexts, _ = _check_losses(losses)
    ratio = _check_ratio(ratio)
    threshold = float(threshold)
    result = {}
    for name in losses:
        recl = contexts[-1]
        for short, long in zip(contexts[:-1], contexts[1:]):
            if relative_gain(losses, name, short, long, ratio) < threshold:
                recl = short
                break
        result[name] = recl
    return result


def context_losses(lm, token_ids, context_lengths, batch_size, segment_length):
    """Per-token losses of `lm` with exactly `c` tokens of context, for each
    `c` in `context_lengths`: the `l_i(c, t)` of RECL.

    Each `c` reads the text as `batch_size` streams (the authors' layout,
    `keras_txl.training.evaluation.text_streams`) in full segments of
    `segment_length` (the last, shorter one is left out), with memory
    length `c` and `same_length=True`, so that every token sees the `c`
    tokens before it. The first `max(context_lengths)` tokens of each
    stream are left out (they have less context), so every `c` covers the
    same tokens.

    Args:
        lm: a built `TransformerXLCausalLM`.
        token_ids: 1-D int array, the evaluation text.
        context_lengths: ints >= 1.
        batch_size: int. Number of streams.
        segment_length: int. Tokens per segment.

    Returns:
        dict `{c: 1-D float64 array}`, the same tokens in the same order
        for every `c`.
    """
    context_lengths = sorted(
        check_positive_int("context length", c) for c in context_lengths
    )
    if not context_lengths:
        raise ValueError("`context_lengths` must not be empty.")
    batch_size = check_positive_int("batch_size", batch_size)
    segment_length = check_positive_int("segment_length", segment_length)
    streams = text_streams(token_ids, batch_size)  # (B, n)
    scored = (streams.shape[1] - 1) // segment_length * segment_length
    skip = context_lengths[-1]
    if scored <= skip:
        raise ValueError(
            f"Each of the {batch_size} streams holds {scored} evaluated "
            f"tokens, not more than the longest context {skip}: use more "
            "evaluation text or fewer streams."
        )
    streams = streams[:, : scored + 1]  # (B, scored + 1): full segments
    model = evaluation_model(lm, same_length=True)
    result = {}
    for c in context_lengths:
        losses = per_token_losses(
            model, streams, segment_length, memory_length=c
        )  # (B, scored)
        result[c] = losses[:, skip:].reshape(-1).astype("float64")
    return result


def default_contexts(segment_length):
    """The context lengths RECL measures by default: `T/2, T, ..., 3T`
    (steps of `T/2`, at least 1)."""
    step = max(1, segment_length // 2)
    return list(range(step, 3 * segment_length + 1, step))


def compare_contexts(
    models,
    token_ids,
    segment_length,
    contexts=None,
    ratios=(0.1, 0.5, 1.0),
    threshold=0.01,
    batch_size=4,
):
    """RECL of a group of models on one text, and their bits per token at
    each context length: what `keras-txl recl` reports, and the RECL of
    each seed of `keras_txl.ablation.run_ablation`.

    Args:
        models: dict `{name: TransformerXLCausalLM}`, the group.
        token_ids: 1-D int array, the evaluation text.
        segment_length: int. Tokens per segment.
        contexts: context lengths, or `None` (`default_contexts`).
        ratios: the `r` of RECL.
        threshold: float. The smallest relative gain that counts.
        batch_size: int. Streams the text is read as.

    Returns:
        A dict: `contexts`, `threshold`, `recl` (`{str(r): {name: RECL}}`)
        and `bpc_by_context` (`{name: {str(c): bits per token}}`).

    Example:

    >>> import numpy as np
    >>> from keras_txl.models import (
    ...     TransformerXLBackbone, TransformerXLCausalLM)
    >>> lm = TransformerXLCausalLM(TransformerXLBackbone(
    ...     vocabulary_size=8, num_layers=1, num_heads=2, hidden_dim=8,
    ...     head_dim=4, intermediate_dim=16, memory_length=4))
    >>> ids = np.arange(64, dtype="int32") % 8
    >>> found = compare_contexts({"lm": lm}, ids, 4, contexts=[2, 4],
    ...                          ratios=[0.5], batch_size=2)
    >>> found["recl"]["0.5"]["lm"] in (2, 4), sorted(found["bpc_by_context"])
    (True, ['lm'])
    """
    if contexts is None:
        contexts = default_contexts(segment_length)
    losses = {
        name: context_losses(
            lm, token_ids, contexts, batch_size, segment_length
        )
        for name, lm in models.items()
    }
    return {
        "contexts": list(contexts),
        "threshold": threshold,
        "recl": {
            str(ratio): relative_effective_context_length(
                losses, ratio, threshold
            )
            for ratio in ratios
        },
        "bpc_by_context": {
            name: {str(c): bits_per_token(v) for c, v in by_c.items()}
            for name, by_c in losses.items()
        },
    }
