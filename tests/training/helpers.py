"""Small data and models for the training tests.

`ordered_dataset` lays token ids out as `keras_txl.data.segment_dataset`
does (the authors' ordered layout: row `b` of batch `i + 1` continues row
`b` of batch `i`), so that these tests do not depend on the data package.
"""

import keras
import numpy as np
import tensorflow as tf


def ordered_arrays(ids, batch_size, sequence_length):
    """`(inputs, targets)` of shape `(num_batches, batch, T)`."""
    ids = np.asarray(ids, dtype="int32")
    stream = len(ids) // batch_size
    streams = ids[: stream * batch_size].reshape(batch_size, stream)
    num_batches = (stream - 1) // sequence_length
    inputs, targets = [], []
    for i in range(num_batches):
        start = i * sequence_length
        inputs.append(streams[:, start : start + sequence_length])
        targets.append(streams[:, start + 1 : start + sequence_length + 1])
    return np.stack(inputs), np.stack(targets)


def ordered_dataset(ids, batch_size, sequence_length):
    """A `tf.data.Dataset` of `(inputs, targets)` batches, static shapes."""
    inputs, targets = ordered_arrays(ids, batch_size, sequence_length)
    return tf.data.Dataset.from_tensor_slices((inputs, targets))


def periodic_ids(seed, num_documents, period, repeats, vocabulary_size):
    """Documents of `repeats` copies of a random block of `period` tokens.

    With segments of length `period` aligned to the blocks, the target of
    every position but the last of a segment is in the previous segment and
    nowhere in the current one: only a model that carries the memory of
    the previous batch can predict it.
    """
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, vocabulary_size, size=(num_documents, period))
    return np.repeat(blocks, repeats, axis=0).reshape(-1).astype("int32")


def explicit_loop(lm, inputs, memory_length=None):
    """Logits of every batch with the memory passed by hand: the model's
    explicit-memory path (dict inputs, as `call_with_memory`), compiled
    once by `predict_on_batch` rather than run op by op.

    Returns `(logits (num_batches, batch, T, V), last_memory)`.
    """
    memory = lm.backbone.initial_memory(inputs.shape[1], memory_length)
    all_logits = []
    for batch in inputs:
        outputs = lm.predict_on_batch({"token_ids": batch, **memory})
        memory = {
            "memory": outputs["memory"],
            "valid_length": outputs["valid_length"],
        }
        all_logits.append(np.asarray(outputs["logits"]))
    return np.stack(all_logits), memory


def nll(logits, targets):
    """Mean negative log-likelihood (nats) of `targets` under `logits`."""
    logits = logits.astype("float64")
    logits = logits - logits.max(-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)
    return float(-picked.mean())


def moved_as_theirs(lm, expected, start, tolerance):
    """Each trainable weight of `lm` against `expected`'s: the error of
    its move from `start`, relative to their move (Frobenius norms).
    Adam moves every weight with a gradient by about `lr` a step, so a
    relative error is comparable across weights."""
    assert len(lm.trainable_weights) == len(expected.trainable_weights)
    errors = {}
    for weight, want, before in zip(
        lm.trainable_weights,
        expected.trainable_weights,
        start.trainable_weights,
    ):
        got, want, before = (
            keras.ops.convert_to_numpy(w) for w in (weight, want, before)
        )
        moved = np.linalg.norm(want - before)
        assert moved > 0, weight.path
        errors[weight.path] = float(np.linalg.norm(got - want) / moved)
    worst = max(errors, key=errors.get)
    assert errors[worst] < tolerance, (worst, errors)
    return errors
