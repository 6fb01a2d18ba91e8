"""`TransformerXLCausalLM.score`: keras-hub's per-token scores of a text
of any length, read in segments with the memory carried.

keras-hub's causal LMs score a sequence in one pass. A Transformer-XL
reads a text longer than one segment as it was trained to: segment after
segment, each attending to the memory of the ones before it. The memory
has a fixed size, so the bytes held and the time per token stay the same
whatever the length of the text; the scores are those of a hand loop over
`call_with_memory`.
"""

import weakref

import numpy as np
from keras import ops

from keras_txl.models.piece_buckets import bucket_length
from keras_txl.utils.token_data import check_right_padded
from keras_txl.utils.token_data import check_token_ids
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int

SCORING_MODES = ("logits", "loss")
# Tokens per segment when `segment_length` is None (as `generate`'s
# prompt segments).
DEFAULT_SEGMENT_LENGTH = 64


def score(
    lm,
    token_ids,
    padding_mask=None,
    scoring_mode="logits",
    layer_intercept_fn=None,
    target_ids=None,
    memory_length=None,
    segment_length=None,
    memory_start="empty",
    memory=None,
    return_memory=False,
    progress=None,
    pad_to_bucket=True,
    strategy=None,
):
    """Per-token scores of `token_ids`: `TransformerXLCausalLM.score`.

    Args:
        lm: a `TransformerXLCausalLM`.
        progress: optional function called after each segment with the
            number of tokens scored so far and the total (per row).
        Others: see `TransformerXLCausalLM.score`.

    Returns:
        Float32 logits `(batch, N, vocab)` or losses `(batch, N)`; with
        `return_memory=True`, `(scores, memory)`.
    """
    from keras_txl.models.memory_spec import check_memory_start

    if scoring_mode not in SCORING_MODES:
        raise ValueError(
            f"`scoring_mode` must be one of {SCORING_MODES}. Received: "
            f"scoring_mode={scoring_mode!r}"
        )
    if scoring_mode == "loss" and target_ids is None:
        raise ValueError(
            "`scoring_mode='loss'` needs `target_ids`, the token that each "
            "position predicts: for a text `ids`, score `ids[:, :-1]` with "
            "`target_ids=ids[:, 1:]`."
        )
    backbone = lm.backbone
    vocabulary_size = backbone.vocabulary_size
    eager = layer_intercept_fn is not None
    token_ids = check_token_ids(token_ids, vocabulary_size)
    shape = tuple(ops.shape(token_ids))
    targets = None
    if target_ids is not None:
        target_ids = check_token_ids(target_ids, vocabulary_size, "target_ids")
        if tuple(ops.shape(target_ids)) != shape:
            raise ValueError(
                "`target_ids` must have the shape of `token_ids`, "
                f"{shape}. Received shape {tuple(ops.shape(target_ids))}."
            )
        targets = target_ids if eager else _host(target_ids)
    if padding_mask is not None:
        check_right_padded(padding_mask, shape)
    memory_length = check_optional_positive_int(
        "memory_length", memory_length, allow_zero=True
    )
    segment_length = check_optional_positive_int(
        "segment_length", segment_length
    )
    if segment_length is None:
        segment_length = DEFAULT_SEGMENT_LENGTH
    memory_start = check_memory_start(memory_start)
    return_memory = check_bool("return_memory", return_memory)
    if strategy is not None:
        _check_strategy(strategy, shape[0], eager)
        if strategy.backend == "tensorflow" and strategy.num_replicas == 1:
            strategy = None  # one device: the XLA step, nothing to place
    pad_to_bucket = check_bool("pad_to_bucket", pad_to_bucket)
    batch_size, length = shape
    if memory is None:
        if memory_length is None:
            memory_length = lm.carried_memory_length
        memory = backbone.initial_memory(
            batch_size, memory_length=memory_length, start=memory_start
        )
    else:
        memory = _given_memory(
            lm, memory, batch_size, memory_length, memory_start
        )
    if return_memory and padding_mask is not None:
        _check_full_rows(padding_mask)
    loss = scoring_mode == "loss"
    place = gather = _same
    if eager:
        step = _intercepted_step(lm, layer_intercept_fn, loss)
        ids = token_ids
    else:
        step = _compiled_step(lm, loss, strategy)
        ids = _host(token_ids)
        if strategy is not None:
            # Each replica scores its rows, carrying their memory.
            place, gather = strategy.distribute_rows, strategy.gather_rows
            memory = place(memory)
    scores = []
    for start in range(0, length, segment_length):
        end = min(start + segment_length, length)
        segment = ids[:, start:end]
        segment_targets = None if targets is None else targets[:, start:end]
        pad = 0
        if pad_to_bucket and not eager:
            pad = _padding(backbone, start, end, segment_length, return_memory)
        if pad:
            # A shorter segment padded at its end to its bucket length,
            # which changes none of its scores and, with its token count,
            # not the memory: a few compilations for pieces of any length.
            segment = np.pad(segment, [(0, 0), (0, pad)])
            if segment_targets is not None:
                segment_targets = np.pad(segment_targets, [(0, 0), (0, pad)])
        token_count = np.full((batch_size,), end - start, "int32")
        segment, segment_targets, token_count = place(
            (segment, segment_targets, token_count)
        )
        segment_scores, memory = step(
            segment, segment_targets, memory, token_count
        )  # (batch, T, vocab) or (batch, T)
        if eager:
            scores.append(segment_scores)
        else:
            segment_scores = _host(gather(segment_scores))
            scores.append(segment_scores[:, : end - start])
        if progress is not None:
            progress(end, length)
    if eager:
        scores = scores[0] if len(scores) == 1 else ops.concatenate(scores, 1)
    else:
        scores = ops.convert_to_tensor(np.concatenate(scores, axis=1))
    if return_memory:
        return scores, gather(memory)
    return scores


def _same(values):
    return values


def _check_strategy(strategy, batch_size, eager):
    """Raises a `ValueError` unless `score(strategy=...)` can share the
    `batch_size` rows between the strategy's replicas (of every
    process)."""
    if eager:
        raise ValueError(
            "`layer_intercept_fn` runs the layers eagerly on one device, "
            "not in a strategy. Drop `strategy` (or `layer_intercept_fn`)."
        )
    if batch_size % strategy.num_replicas:
        raise ValueError(
            f"`score(strategy=...)` gives each of the {strategy.num_replicas} "
            f"replicas of strategy {strategy.name!r} the same number of "
            f"rows of `token_ids`, and received {batch_size} rows. Score "
            f"{strategy.nearest_multiples(batch_size)} rows (add or drop "
            "texts), or the rows left over without `strategy`."
        )


def _given_memory(lm, memory, batch_size, memory_length, memory_start):
    """`score(memory=...)`'s memory, checked and cast: one row per text,
    the backbone's spec, and no other start."""
    backbone = lm.backbone
    if memory_start != "empty":
        raise ValueError(
            "`memory_start` sets the memory of a text scored without "
            f"`memory`; received memory_start={memory_start!r} and a "
            "`memory`. Drop one of them."
        )
    backbone.check_memory(memory)
    rows, slots = memory["memory"].shape[0], memory["memory"].shape[2]
    if rows != batch_size:
        raise ValueError(
            f"`memory` holds {rows} rows, and `token_ids` {batch_size}: "
            "pass the memory returned for the same texts (one row per "
            "text), or `backbone.initial_memory(batch_size)`."
        )
    if memory_length is not None and memory_length != slots:
        raise ValueError(
            f"`memory_length` ({memory_length}) must be the slots of "
            f"`memory` ({slots}) when a `memory` is given. Drop "
            "`memory_length`."
        )
    backbone.check_memory(memory, batch_size)
    return backbone.memory_spec.cast(memory)


def _check_full_rows(padding_mask):
    """Raises a `ValueError` if a row of a concrete `padding_mask` has
    padding: `return_memory` keeps every row's memory after the same
    number of tokens."""
    mask = _host(padding_mask).astype(bool)
    if not mask.all():
        raise ValueError(
            "`score(return_memory=True)` needs texts of one length (a "
            "`padding_mask` all True): every row's memory holds the same "
            "number of tokens. Score rows of different lengths one at a "
            "time, or pass `padding_mask=None` for rows that are all text."
        )


def _padding(backbone, start, end, segment_length, return_memory):
    """How many ids pad the segment `[start, end)` of a compiled step:
    to `bucket_length(end - start, segment_length)` for a backbone that
    `counts_tokens` (exact, memory included); for the others, only a
    last segment after a first, to `segment_length`, and only when the
    memory is not returned (its scores are exact, not the memory it
    leaves)."""
    if backbone.counts_tokens:
        return bucket_length(end - start, segment_length) - (end - start)
    if return_memory or start == 0:
        return 0
    return start + segment_length - end


def _host(x):
    return np.asarray(ops.convert_to_numpy(x))


def _segment_scores(lm, logits, targets, loss):
    """Logits, or the negative log-likelihood `(batch, T)` of `targets`."""
    if not loss:
        return logits
    log_probs = ops.log_softmax(logits, axis=-1)  # (batch, T, vocab)
    picked = ops.take_along_axis(
        log_probs, ops.expand_dims(ops.cast(targets, "int32"), -1), axis=-1
    )  # (batch, T, 1)
    return -picked[..., 0]


def _intercepted_step(lm, layer_intercept_fn, loss):
    """One segment, eagerly, layer by layer (`layer_intercept_fn`)."""
    backbone = lm.backbone

    def step(token_ids, targets, memory, unused_count):
        inputs = {"token_ids": ops.cast(token_ids, "int32"), **memory}
        outputs = backbone.call_with_intercept(inputs, layer_intercept_fn)
        logits = lm.compute_logits(outputs["sequence_output"])
        memory = backbone.memory_spec.select(outputs)
        return _segment_scores(lm, logits, targets, loss), memory

    return step


def _compiled_step(lm, loss, strategy=None):
    """One segment `(token_ids, targets, memory) -> (scores, memory)`,
    compiled as `generate` is: XLA on JAX and TensorFlow (one function
    for every segment of a length), eager without gradients on torch.
    Kept for the model and its variables of the time (a change, such as
    `enable_lora` or `quantize`, makes another).

    With a `strategy`, the step runs on every replica (`strategy.run`),
    on arguments placed by `strategy.distribute_rows`: TensorFlow runs
    the compiled step in each replica from one `tf.function`; JAX's
    compiled step follows its arguments' layout along the batch. (On
    TensorFlow the replicas' step runs without XLA, as Keras's own steps
    under `tf.distribute`.)"""
    import keras

    key = (loss, keras.config.backend(), tuple(map(id, lm.variables)))
    if strategy is not None:
        key += (id(strategy),)
    steps = _COMPILED_STEPS.setdefault(lm, {})
    if key not in steps:
        # Steps of other variables go; one per strategy (or none) stays.
        for other in [other for other in steps if other[:3] != key[:3]]:
            del steps[other]
        step = _make_compiled_step(lm, loss, xla=strategy is None)
        if strategy is not None:
            step = _in_strategy(strategy, step)
        steps[key] = step
    return steps[key]


def _in_strategy(strategy, step):
    """`step` run by `strategy` on each replica's rows."""
    import keras

    def run(*args):
        return strategy.run(step, args)

    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(run, reduce_retracing=True)
    return run


# `{model: {key: compiled step}}`. Weak: a step refers to its model only
# weakly, so the cache never keeps a model alive.
_COMPILED_STEPS = weakref.WeakKeyDictionary()


def _make_compiled_step(lm, loss, xla=True):
    """The step of `_compiled_step`; `xla=False`: TensorFlow's graph
    without XLA, as Keras compiles under `tf.distribute` (an XLA function
    reads a replica's mirrored variables from the first device and
    fails)."""
    import keras

    model = weakref.ref(lm)

    def step(token_ids, targets, memory, token_count):
        lm = model()
        inputs = {"token_ids": ops.cast(token_ids, "int32"), **memory}
        if lm.backbone.counts_tokens:
            # Only the first `token_count` tokens enter the memory.
            inputs["token_count"] = token_count  # (batch,)
            outputs = lm.backbone.call_with_intercept(inputs)
            logits = lm.compute_logits(outputs["sequence_output"])
        else:
            outputs = lm(inputs, training=False)
            logits = outputs["logits"]
        memory = lm.backbone.memory_spec.select(outputs)
        scores = _segment_scores(lm, logits, targets, loss)
        return scores, memory

    backend = keras.config.backend()
    if backend == "jax":
        import jax

        def variables():
            lm = model()
            return list(lm.trainable_variables) + list(
                lm.non_trainable_variables
            )

        @jax.jit
        def stateless_step(values, token_ids, targets, memory, token_count):
            mapping = zip(variables(), values)
            with keras.StatelessScope(state_mapping=mapping):
                return step(token_ids, targets, memory, token_count)

        def run(token_ids, targets, memory, token_count):
            values = [variable.value for variable in variables()]
            return stateless_step(
                values, token_ids, targets, memory, token_count
            )

        return run
    if backend == "tensorflow":
        import tensorflow as tf

        # XLA, as on JAX: every layer of the model compiles.
        return tf.function(step, jit_compile=xla, reduce_retracing=True)
    if backend == "torch":
        import torch

        def run(token_ids, targets, memory, token_count):
            with torch.no_grad():
                return step(token_ids, targets, memory, token_count)

        return run
    return step
