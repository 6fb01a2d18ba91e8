"""Per-token losses of a trained language model, with a chosen memory.

The ablations need more than the mean loss that `evaluate` gives: RECL
compares models token by token, and a memory sweep evaluates one trained
model with several memory lengths. These functions run `predict` on an
evaluation copy of the model (same weights, another memory length or
`same_length`) over ordered segments, and return the loss of every token.
"""

import math

import numpy as np

from keras_txl.data import segment_dataset
from keras_txl.models.evaluation_copy import (
    evaluation_copy as models_evaluation_copy,
)
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_positive_int


def evaluation_copy(lm, memory_length, same_length=False):
    """A `TransformerXLCausalLM` with the weights of `lm` (copied), a memory
    of `memory_length` and the given `same_length`.

    Args:
        lm: a built `TransformerXLCausalLM`.
        memory_length: int >= 0.
        same_length: bool. With `same_length=True` and memory length `c`,
            every token is predicted from exactly `c` tokens of context
            once the memory is full.

    Returns:
        A new `TransformerXLCausalLM`.
    """
    memory_length = check_positive_int(
        "memory_length", memory_length, allow_zero=True
    )
    return models_evaluation_copy(
        lm,
        memory_length,
        name=f"{lm.name}_eval",
        same_length=check_bool("same_length", same_length),
    )


def token_losses(
    lm, token_ids, batch_size, segment_length, memory_length, same_length=False
):
    """The loss (nats) of every token of `token_ids` under `lm`, read as
    `batch_size` ordered streams of segments, with a memory of
    `memory_length` carried from segment to segment (from empty).

    Args:
        lm: a built `TransformerXLCausalLM`.
        token_ids: 1-D int array, the evaluation text.
        batch_size: int. Number of streams.
        segment_length: int. Tokens per segment.
        memory_length: int >= 0.
        same_length: bool. See `evaluation_copy`.

    Returns:
        float64 array `(batch_size, num_segments * segment_length)`: row
        `b` holds the losses of stream `b` in text order (see
        `keras_txl.data.segment_dataset`).
    """
    batch_size = check_positive_int("batch_size", batch_size)
    segment_length = check_positive_int("segment_length", segment_length)
    model = evaluation_copy(lm, memory_length, same_length)
    dataset = segment_dataset(
        token_ids,
        batch_size,
        segment_length,
        vocabulary_size=lm.backbone.vocabulary_size,
    )
    targets = np.concatenate(
        [y for _, y in dataset.as_numpy_iterator()]
    )  # (segments * batch, T)
    # `predict` starts from an empty memory built for `batch_size`.
    logits = model.predict(dataset.map(lambda x, y: x), verbose=0)
    logits = np.asarray(logits, "float64")  # (segments * batch, T, V)
    top = logits.max(axis=-1, keepdims=True)
    log_norm = top[..., 0] + np.log(np.exp(logits - top).sum(axis=-1))
    picked = np.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    losses = log_norm - picked  # (segments * batch, T)
    segments = losses.shape[0] // batch_size
    losses = losses.reshape(segments, batch_size, segment_length)
    return losses.transpose(1, 0, 2).reshape(batch_size, -1)


def bits_per_token(losses):
    """Mean loss in bits (bits per character for a character model)."""
    return float(np.mean(losses) / math.log(2.0))


def context_losses(lm, token_ids, context_lengths, batch_size, segment_length):
    """Per-token losses of `lm` with exactly `c` tokens of context, for each
    `c` in `context_lengths`: the `l_i(c, t)` of RECL.

    Each `c` runs the text with memory length `c` and `same_length=True`,
    so that every token sees the `c` tokens before it. The first
    `max(context_lengths)` tokens of each stream are left out (they have
    less context), so every `c` covers the same tokens.

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
    skip = context_lengths[-1]
    result = {}
    for c in context_lengths:
        losses = token_losses(
            lm, token_ids, batch_size, segment_length, c, same_length=True
        )
        if losses.shape[1] <= skip:
            raise ValueError(
                f"Each of the {batch_size} streams holds {losses.shape[1]} "
                f"evaluated tokens, not more than the longest context "
                f"{skip}: use more evaluation text or fewer streams."
            )
        result[c] = losses[:, skip:].reshape(-1)
    return result
