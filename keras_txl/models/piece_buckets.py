"""Pieces of any length at a few compilations (issue 53 item 5;
docs/design.md, "Pieces of any length").

On JAX every operation compiles once per shape, so each new length of a
piece compiles again (eagerly in `call_with_memory`, and `score`'s step
on JAX and TensorFlow). These calls pad a piece at its end to a bucket
length (`bucket_length`) and run it with the backbone input
`"token_count"`, int32 `(batch,)`: only each row's first `token_count`
tokens are text. Their outputs are those of the unpadded piece (the
attention is causal: a token never sees the ones after it) and only
their states enter the next memory (`MemoryCache(token_count=...)`), so
outputs and memory are those of the unpadded rows; the outputs at the
padded positions are dropped. The count goes through
`backbone.call_with_intercept` only: the functional graph (`call`, the
SavedModel) takes none. Only backbones with `counts_tokens` (the
paper's model) accept it.
"""

import keras
from keras import ops

from keras_txl.utils.validation import check_bool

# The shortest bucket: shorter pieces are padded to it.
MIN_BUCKET_LENGTH = 8


def bucket_length(length, maximum=None):
    """The length a piece of `length` tokens is padded to, so that pieces
    of any length compile a few functions only: the smallest power of two
    >= `length`, at least `MIN_BUCKET_LENGTH` (8), and at most `maximum`
    (a segment length) when `length <= maximum`.

    Pieces of 1 to `N` tokens fall in at most `max(1, ceil(log2(N)) - 2)`
    buckets (8, 16, ..., `2**ceil(log2(N))`; with `maximum=S`, 8, 16, ...
    below `S`, and `S`), and a piece is padded to less than twice its
    length (or to 8).

    Example:

    >>> [bucket_length(n) for n in (1, 8, 9, 33, 100)]
    [8, 8, 16, 64, 128]
    >>> [bucket_length(n, maximum=100) for n in (33, 65, 100)]
    [64, 100, 100]
    """
    bucket = max(MIN_BUCKET_LENGTH, 1 << (int(length) - 1).bit_length())
    if maximum is not None and length <= maximum:
        bucket = min(bucket, int(maximum))
    return bucket


def pad_to_bucket(token_ids, maximum=None):
    """`(padded, token_count)`: int32 `token_ids` `(batch, T)` padded at
    their end with id 0 to `bucket_length(T, maximum)`, and the int32
    `(batch,)` count of tokens of each row, `T` (a backbone's
    `"token_count"` input)."""
    batch_size, length = tuple(token_ids.shape)
    pad = bucket_length(length, maximum) - length
    token_ids = ops.cast(token_ids, "int32")  # (batch, T)
    if pad:
        token_ids = ops.pad(token_ids, [[0, 0], [0, pad]])  # (batch, bucket)
    return token_ids, ops.full((batch_size,), length, dtype="int32")


def counted_tokens(backbone, inputs):
    """`{"token_count": ...}` of a backbone's `inputs` dict, or `{}`
    without one (the keyword arguments of its `MemoryCache`). Raises a
    `ValueError` for a backbone without `counts_tokens`."""
    if inputs.get("token_count") is None:
        return {}
    if not backbone.counts_tokens:
        raise ValueError(
            f"{type(backbone).__name__} does not take `token_count` "
            "(padded segments): run each piece at its own length "
            "(`call_with_memory(..., pad_to_bucket=False)`)."
        )
    return {"token_count": inputs["token_count"]}  # (batch,)


def pads_to_bucket(backbone, pad_to_bucket, training):
    """Whether `call_with_memory` pads its piece: `pad_to_bucket`, or
    when `None` on JAX in inference for a backbone with `counts_tokens`.
    Raises a `ValueError` for `pad_to_bucket=True` with `training`."""
    if pad_to_bucket is None:
        return (
            keras.config.backend() == "jax"
            and not training
            and backbone.counts_tokens
        )
    pad_to_bucket = check_bool("pad_to_bucket", pad_to_bucket)
    if pad_to_bucket and training:
        raise ValueError(
            "`pad_to_bucket=True` runs a padded piece in inference; "
            "with `training=True` pass `pad_to_bucket=False` (or None)."
        )
    return pad_to_bucket


def call_padded(backbone, inputs):
    """`backbone.call_with_memory`'s `(sequence_output, memory)` of an
    inputs dict `{"token_ids", **memory}`, run padded to the bucket of
    its length."""
    length = inputs["token_ids"].shape[1]
    token_ids, token_count = pad_to_bucket(inputs["token_ids"])
    outputs = backbone.call_with_intercept(
        {**inputs, "token_ids": token_ids, "token_count": token_count}
    )
    sequence_output = outputs["sequence_output"][:, :length]  # (b, T, h)
    return sequence_output, backbone.memory_spec.select(outputs)
