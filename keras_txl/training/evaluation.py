"""Evaluation in bits per character and perplexity, with any memory."""

import math

from keras_txl.utils.validation import check_optional_positive_int


def evaluate_bpc(lm, dataset, memory_length=None, steps=None, verbose=0):
    """Bits per character and perplexity of `lm` on ordered segments,
    carrying a memory of `memory_length` from batch to batch.

    The paper evaluates with a longer memory than in training; `0` scores
    each segment alone (no memory). The model evaluated is
    `lm.with_memory_length(memory_length)`: the same weights, its own
    memory, empty at the start, so `dataset` may have another batch size
    than the training data.

    Args:
        lm: a `TransformerXLCausalLM`.
        dataset: ordered `(inputs, targets)` batches of one batch size
            (`keras_txl.data.segment_dataset`).
        memory_length: int >= 0, or `None` for the model's own memory
            length.
        steps: optional number of batches.
        verbose: Keras verbosity of `evaluate`.

    Returns:
        A dict: `memory_length`, `loss` (mean negative log-likelihood per
        token, nats), `bits_per_character` (`loss / ln 2`: bits per token,
        i.e. per character for byte and character tokenizers) and
        `perplexity` (`exp(loss)`; infinite for a diverged model).

    Example:

    >>> import numpy as np, tensorflow as tf
    >>> from keras_txl.models import (
    ...     TransformerXLBackbone, TransformerXLCausalLM)
    >>> lm = TransformerXLCausalLM(TransformerXLBackbone(
    ...     vocabulary_size=8, num_layers=1, num_heads=2, hidden_dim=8,
    ...     head_dim=4, intermediate_dim=16, memory_length=4))
    >>> ids = np.arange(64, dtype="int32").reshape(2, 4, 8) % 8
    >>> dataset = tf.data.Dataset.from_tensor_slices((ids, ids))
    >>> result = evaluate_bpc(lm, dataset, memory_length=0)
    >>> round(result["bits_per_character"]) == 3  # log2(8): untrained
    True
    """
    memory_length = check_optional_positive_int(
        "memory_length", memory_length, allow_zero=True
    )
    if memory_length is None:
        memory_length = lm._state_memory_length
    model = lm.with_memory_length(memory_length)
    if not model.compiled:
        model.compile()
    logs = model.evaluate(
        dataset, steps=steps, verbose=verbose, return_dict=True
    )
    loss = float(logs["loss"])
    return {
        "memory_length": memory_length,
        "loss": loss,
        "bits_per_character": loss / math.log(2.0),
        "perplexity": perplexity(loss),
    }


def perplexity(loss):
    """`exp(loss)`, infinite (not an `OverflowError`) for a loss above
    ~709 nats, the largest that a float64 exponential holds; NaN stays
    NaN.

    >>> perplexity(0.0), perplexity(1e6)
    (1.0, inf)
    """
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf
