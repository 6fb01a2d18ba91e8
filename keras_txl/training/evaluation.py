"""Evaluation in bits per character and perplexity, with any memory."""

import contextlib
import math

from keras_txl.utils.validation import check_optional_positive_int


def evaluate_bpc(
    lm, dataset, memory_length=None, steps=None, verbose=0, strategy=None
):
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
        strategy: optional `keras_txl.distribute.ReplicaStrategy` (the
            one `lm` was trained in): its replicas share the streams as
            in training, each carrying the memory of its rows, and the
            result is that of one device. The dataset's batch must be a
            multiple of the replicas (else a `ValueError` names the
            batches that split).

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
        memory_length = lm.carried_memory_length
    scope = contextlib.nullcontext()
    if strategy is not None:
        # The training path's placement: replica `r` gets rows
        # `[r * b, (r + 1) * b)` of every batch and, the copy being made
        # in the scope, carries their memory (`CarriedMemory.evaluate`
        # builds it for the replica's rows).
        dataset = strategy.distribute_dataset(dataset)
        scope = strategy.scope()
    with scope:
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


def bits_per_token(losses):
    """Mean of per-token losses (nats) in bits: bits per character for a
    character model.

    >>> round(bits_per_token([math.log(2.0), math.log(8.0)]), 6)
    2.0
    """
    import numpy as np

    return float(np.mean(losses) / math.log(2.0))


def evaluation_model(lm, clamp_length=None, same_length=None):
    """`lm`, or a copy with its weights and other evaluation settings of
    its backbone (which are fixed when it is built).

    Args:
        lm: a built `TransformerXLCausalLM`.
        clamp_length: `None` keeps the model's; an int >= 1 clamps relative
            distances there; 0 or -1 (the authors' `clamp_len=-1`) keeps
            all distances.
        same_length: `None` keeps the model's; else the backbone argument
            (False, True/`"pytorch"` or `"tensorflow"`).

    Returns:
        A `TransformerXLCausalLM` (`lm` itself if nothing changes).
    """
    from keras_txl.layers.relative_multi_head_attention import check_same_length
    from keras_txl.models.carried_memory import evaluation_copy

    backbone = lm.backbone
    changes = {}
    if clamp_length is not None:
        clamp = None if clamp_length in (0, -1) else clamp_length
        if clamp != backbone.clamp_length:
            changes["clamp_length"] = clamp
    if same_length is not None:
        same_length = check_same_length(same_length)
        if same_length != backbone.same_length:
            changes["same_length"] = same_length
    if not changes:
        return lm
    return evaluation_copy(lm, name=lm.name, **changes)


def evaluate_segments(
    lm,
    token_ids,
    batch_size,
    segment_length,
    memory_length=None,
    clamp_length=None,
    same_length=None,
    start="empty",
    log=None,
    return_token_losses=False,
    strategy=None,
):
    """The mean loss per token of a text under the evaluation protocol of
    the paper's code, with an explicit memory.

    As the authors' evaluation: the ids are cut into `batch_size`
    contiguous streams (`ids[:B * n]` as `(B, n)`), read in segments of
    `segment_length` (the last one shorter), each predicting the next
    token, with a memory of `memory_length` carried from segment to
    segment from the `start` memory. The released TensorFlow checkpoints
    (and HuggingFace) need `start="zeros"`; `clamp_length` and
    `same_length` override the model's (see `evaluation_model`). The
    paper's settings of each released model are in docs/pretrained.md.

    Args:
        lm: a built `TransformerXLCausalLM`.
        token_ids: 1-D int array: the text.
        batch_size: int. Number of streams.
        segment_length: int. Tokens per segment (`tgt_len`).
        memory_length: int >= 0 or `None` (the backbone's `mem_len`).
        clamp_length: see `evaluation_model`.
        same_length: see `evaluation_model`.
        start: `"empty"` or `"zeros"`: see
            `TransformerXLBackbone.initial_memory`.
        log: optional function that prints a progress line per tenth.
        return_token_losses: bool. Also return the loss of every token.
        strategy: optional `keras_txl.distribute.ReplicaStrategy` of this
            host: its replicas score the streams (`score(strategy=)`),
            each carrying the memory of its own, with the result of one
            device. `batch_size` must be a multiple of its replicas.

    The text is scored by `TransformerXLCausalLM.score`: one stream
    (`batch_size=1`) is the text read once, left to right, with its
    memory; `B` streams start `B` times from the `start` memory, so their
    first tokens have less context (a higher loss), in exchange for `B`
    segments per step.

    Returns:
        A dict: `loss` (mean negative log-likelihood per token, nats),
        `bits_per_character` (`loss / ln 2`), `perplexity`, `tokens`
        (scored), and the settings used; with `return_token_losses`,
        `token_losses`: float32 `(B, n - 1)`, the loss of token `t + 1`
        of stream `b`, which is token `b * n + t + 1` of the text.
    """
    import numpy as np

    from keras_txl.utils.validation import check_positive_int

    batch_size = check_positive_int("batch_size", batch_size)
    segment_length = check_positive_int("segment_length", segment_length)
    with contextlib.nullcontext() if strategy is None else strategy.scope():
        # A copy with other settings is built in the strategy, as `lm`.
        model = evaluation_model(lm, clamp_length, same_length)
    if memory_length is None:
        memory_length = model.backbone.memory_length
    streams = text_streams(token_ids, batch_size)
    losses = per_token_losses(
        model,
        streams,
        segment_length,
        memory_length=memory_length,
        start=start,
        log=log,
        strategy=strategy,
    )  # (B, steps - 1)
    result = segments_result(
        float(np.sum(losses, dtype="float64")) / losses.size,
        losses.size,
        model,
        batch_size,
        segment_length,
        memory_length,
        start,
    )
    if return_token_losses:
        result["token_losses"] = losses
    return result


def segments_result(
    loss, tokens, model, batch_size, segment_length, memory_length, start
):
    """The result dict of `evaluate_segments` (and `dynamic_evaluation`):
    the mean `loss` of `tokens` scored and the settings."""
    return {
        "loss": loss,
        "bits_per_character": loss / math.log(2.0),
        "perplexity": perplexity(loss),
        "tokens": tokens,
        "batch_size": batch_size,
        "segment_length": segment_length,
        "memory_length": memory_length,
        "clamp_length": model.backbone.clamp_length,
        "same_length": model.backbone.same_length,
        "start": start,
    }


def text_streams(token_ids, batch_size):
    """The authors' evaluation layout: `ids[:B * n]` as `B` contiguous
    streams, an int array `(B, n)`; a `ValueError` if a stream would
    hold fewer than 2 tokens (nothing to predict)."""
    import numpy as np

    ids = np.asarray(token_ids).reshape(-1)
    steps = len(ids) // batch_size
    if steps < 2:
        raise ValueError(
            f"{len(ids)} tokens are too few for {batch_size} streams: each "
            "needs at least 2 tokens. Lower `batch_size`."
        )
    return ids[: batch_size * steps].reshape(batch_size, steps)


def segment_bounds(streams, segment_length):
    """`[(start, end)]` of the segments of `streams` `(B, n)`: inputs
    `streams[:, start:end]` predict `streams[:, start + 1:end + 1]`, the
    last segment shorter."""
    steps = streams.shape[1]
    return [
        (t, min(t + segment_length, steps - 1))
        for t in range(0, steps - 1, segment_length)
    ]


def per_token_losses(
    lm,
    streams,
    segment_length,
    memory_length=None,
    start="empty",
    log=None,
    strategy=None,
):
    """The loss of every token of `streams` after the first, by
    `TransformerXLCausalLM.score` (segments, memory carried): the one
    per-token evaluation, under `evaluate_segments`, `--token-losses` and
    RECL's `keras_txl.ablation.recl.context_losses`.

    Args:
        lm: a `TransformerXLCausalLM`.
        streams: int array `(B, n)`: `B` texts (or parts of one), read
            left to right.
        segment_length: int. Tokens per segment.
        memory_length: int >= 0 or `None` (the model's).
        start: `"empty"` or `"zeros"`, the memory before the first token.
        log: optional function that prints a progress line per tenth.
        strategy: optional `keras_txl.distribute.ReplicaStrategy`: the
            replicas share the streams (`score(strategy=)`).

    Returns:
        A float32 NumPy array `(B, n - 1)`: the negative log-likelihood
        (nats) of token `t + 1` of each stream given the tokens before it.
    """
    import numpy as np
    from keras import ops

    from keras_txl.models.transformer_xl_scoring import score

    streams = np.asarray(streams)
    tenth = max(1, (streams.shape[1] - 1) // 10)
    reported = [0]

    def progress(done, total):
        if log is not None and done // tenth > reported[0]:
            reported[0] = done // tenth
            log(f"{done:,}/{total:,} tokens scored per stream")

    losses = score(
        lm,
        streams[:, :-1],
        scoring_mode="loss",
        target_ids=streams[:, 1:],
        memory_length=memory_length,
        segment_length=segment_length,
        memory_start=start,
        progress=progress,
        strategy=strategy,
    )
    return np.asarray(ops.convert_to_numpy(losses), dtype="float32")
