"""Ordered segments of a token stream, for models that carry memory.

Transformer-XL reads a corpus as `batch_size` long streams, one segment of
`sequence_length` tokens of each stream per batch, so that the memory a
row keeps from batch `i` is the text just before its segment in batch
`i + 1`. This is the layout of the authors' `LMOrderedIterator`:

- the ids are cut into `batch_size` contiguous streams of
  `stream_length = num_tokens // batch_size` tokens; stream `b` holds ids
  `[b * stream_length, (b + 1) * stream_length)` and is row `b` of every
  batch (the last `num_tokens % batch_size` ids are dropped);
- batch `i` holds positions `[i * T, (i + 1) * T)` of every stream as
  inputs and positions `[i * T + 1, (i + 1) * T + 1)` as targets
  (`T = sequence_length`);
- there are `(stream_length - 1) // T` full batches. With
  `drop_remainder=False` a last, shorter batch holds the rest of each
  stream (the authors evaluate with it).

`segment_info` gives these numbers, and `num_batches` the count of batches.

Replicas: a data-parallel step splits a global batch into `R` contiguous
blocks of rows and gives replica `r` rows `[r * B / R, (r + 1) * B / R)`
at every step, so the memory of a replica always continues its own
streams. This holds for the global dataset fed to `fit` under a
`tf.distribute` strategy (`experimental_distribute_dataset`) and under
`keras.distribution.DataParallel` (both checked on 2 CPU devices:
`MirroredStrategy` and JAX `DataParallel` give each device its block of
rows at every step). `shard_streams` names
the rows of a replica; `segment_dataset(..., num_shards=R, shard_index=r)`
yields only them, for a pipeline that feeds replica `r` alone (one replica
per worker, `input_context.input_pipeline_id`). Do not use shards for a
pipeline that feeds several replicas in turn
(`distribute_datasets_from_function` with several local replicas hands
them consecutive elements): give it the global dataset instead.

Example:

>>> import numpy as np
>>> ids = np.arange(20)
>>> dataset = segment_dataset(ids, batch_size=2, sequence_length=4)
>>> for inputs, targets in dataset.as_numpy_iterator():
...     print(inputs.tolist(), targets.tolist())
[[0, 1, 2, 3], [10, 11, 12, 13]] [[1, 2, 3, 4], [11, 12, 13, 14]]
[[4, 5, 6, 7], [14, 15, 16, 17]] [[5, 6, 7, 8], [15, 16, 17, 18]]
"""

from typing import NamedTuple

import numpy as np

from keras_txl.data.text_source import CorpusError
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int


class SegmentInfo(NamedTuple):
    """How `segment_dataset` lays out a token stream.

    Fields:
        num_batches: the number of batches.
        stream_length: tokens per stream, `num_tokens // batch_size`.
        last_sequence_length: length of the last batch (`sequence_length`,
            or less for the partial batch kept by `drop_remainder=False`).
        used_tokens: ids that appear as an input or a target.
        dropped_tokens: `num_tokens - used_tokens`, the ids no batch reads.
    """

    num_batches: int
    stream_length: int
    last_sequence_length: int
    used_tokens: int
    dropped_tokens: int


def segment_info(num_tokens, batch_size, sequence_length, drop_remainder=True):
    """The layout of `segment_dataset` for a stream of `num_tokens` ids.

    Args:
        num_tokens: int, or the token ids themselves (their length is used).
        batch_size: int. Number of streams (rows of a batch).
        sequence_length: int. Segment length `T`.
        drop_remainder: bool. Whether the partial last batch is dropped.

    Returns:
        A `SegmentInfo`.

    Raises:
        CorpusError: too few tokens for one batch: `batch_size *
            (sequence_length + 1)` are needed (`batch_size * 2` with
            `drop_remainder=False`).

    Example:

    >>> info = segment_info(100, batch_size=4, sequence_length=5)
    >>> info.num_batches, info.stream_length, info.dropped_tokens
    (4, 25, 16)
    """
    if hasattr(num_tokens, "__len__") and not isinstance(num_tokens, str):
        num_tokens = len(num_tokens)
    num_tokens = check_positive_int("num_tokens", num_tokens, allow_zero=True)
    batch_size = check_positive_int("batch_size", batch_size)
    sequence_length = check_positive_int("sequence_length", sequence_length)
    drop_remainder = check_bool("drop_remainder", drop_remainder)
    stream_length = num_tokens // batch_size
    needed_length = sequence_length + 1 if drop_remainder else 2
    if stream_length < needed_length:
        raise CorpusError(
            f"The corpus has {num_tokens} tokens, fewer than one batch of "
            f"{batch_size} streams x {needed_length} tokens "
            f"({batch_size * needed_length}) with batch_size={batch_size}, "
            f"sequence_length={sequence_length}, drop_remainder="
            f"{drop_remainder}. Use a longer text or a smaller batch_size or "
            f"sequence_length."
        )
    num_inputs = stream_length - 1  # positions that have a next token
    full_batches = num_inputs // sequence_length
    rest = num_inputs - full_batches * sequence_length
    if drop_remainder or rest == 0:
        batches, last = full_batches, sequence_length
        used_per_stream = full_batches * sequence_length + 1
    else:
        batches, last = full_batches + 1, rest
        used_per_stream = stream_length
    used = batch_size * used_per_stream
    return SegmentInfo(
        num_batches=batches,
        stream_length=stream_length,
        last_sequence_length=last,
        used_tokens=used,
        dropped_tokens=num_tokens - used,
    )


def num_batches(num_tokens, batch_size, sequence_length, drop_remainder=True):
    """Number of batches of `segment_dataset` (`steps_per_epoch`).

    Args:
        num_tokens: int, or the token ids themselves.
        batch_size: int. Number of streams.
        sequence_length: int. Segment length.
        drop_remainder: bool. Whether the partial last batch is dropped.

    Returns:
        int.

    Example:

    >>> num_batches(1_000_000, batch_size=22, sequence_length=512)
    88
    """
    return segment_info(
        num_tokens, batch_size, sequence_length, drop_remainder
    ).num_batches


def shard_streams(batch_size, num_shards, shard_index):
    """The streams (rows of the global batch) that one replica reads.

    Shard `r` of `R` owns the contiguous rows `[r * B / R, (r + 1) * B / R)`
    of every global batch of `B` rows: the block that `tf.distribute` and
    `keras.distribution.DataParallel` hand to replica `r`. Row `j` of the
    global batch is stream `j`.

    Args:
        batch_size: int. The global batch size `B`, a multiple of
            `num_shards`.
        num_shards: int. The number of replicas `R`.
        shard_index: int in `[0, num_shards)`.

    Returns:
        An int array of the `B / R` stream indices, ascending.

    Example:

    >>> shard_streams(8, num_shards=4, shard_index=1).tolist()
    [2, 3]
    """
    batch_size = check_positive_int("batch_size", batch_size)
    num_shards = check_positive_int("num_shards", num_shards)
    shard_index = check_positive_int("shard_index", shard_index, True)
    if batch_size % num_shards:
        raise ValueError(
            "`batch_size` must be a multiple of `num_shards`, so that every "
            f"replica reads as many streams. Received: batch_size="
            f"{batch_size}, num_shards={num_shards}"
        )
    if shard_index >= num_shards:
        raise ValueError(
            f"`shard_index` must be in [0, num_shards={num_shards}). "
            f"Received: shard_index={shard_index}"
        )
    rows = batch_size // num_shards
    return np.arange(shard_index * rows, (shard_index + 1) * rows)


def segment_dataset(
    token_ids,
    batch_size,
    sequence_length,
    drop_remainder=True,
    vocabulary_size=None,
    num_shards=1,
    shard_index=0,
):
    """A `tf.data.Dataset` of ordered `(inputs, targets)` segments.

    See the module docstring for the layout: row `b` of batch `i + 1`
    continues row `b` of batch `i`, and `targets` are `inputs` shifted by
    one token. Feed it to `model.fit` / `evaluate` on any backend without
    shuffling, so that carried memory stays aligned with the text.

    Args:
        token_ids: 1-D integer ids of the whole corpus (a part's
            `corpus_ids`, or `encode`).
        batch_size: int. Number of streams: the (global) batch size.
        sequence_length: int. Segment length `T`.
        drop_remainder: bool. `True` (default) keeps only full batches, of
            static shape `(batch_size, sequence_length)`. `False` adds a
            last, shorter batch with the rest of each stream; the time
            dimension of the dataset's shapes is then `None`.
        vocabulary_size: optional int. If set, every id must lie in
            `[0, vocabulary_size)` (checked now, with NumPy).
        num_shards: int. Number of replicas with their own input pipeline.
        shard_index: int. This pipeline's replica: it yields only the
            streams `shard_streams(batch_size, num_shards, shard_index)`,
            as batches of `batch_size // num_shards` rows.

    Returns:
        A `tf.data.Dataset` of `(inputs, targets)`, both `int32` of shape
        `(batch_size // num_shards, sequence_length)`, with known
        cardinality `num_batches(...)`.

    Raises:
        CorpusError: fewer tokens than one batch, or ids outside
            `[0, vocabulary_size)`.

    Example:

    >>> import numpy as np
    >>> dataset = segment_dataset(np.arange(1000), 4, 8, vocabulary_size=1000)
    >>> inputs, targets = next(iter(dataset))
    >>> tuple(inputs.shape), int(dataset.cardinality())
    ((4, 8), 31)
    """
    import tensorflow as tf

    ids = _check_token_ids(token_ids, vocabulary_size)
    info = segment_info(len(ids), batch_size, sequence_length, drop_remainder)
    rows = shard_streams(batch_size, num_shards, shard_index)
    streams = ids[: batch_size * info.stream_length].reshape(
        batch_size, info.stream_length
    )[rows[0] : rows[-1] + 1]  # (rows, stream_length), a view
    num_rows = len(rows)
    full_batches = (info.stream_length - 1) // sequence_length
    if full_batches == info.num_batches:
        # Nothing after the full batches is read: keep only what is.
        streams = streams[:, : full_batches * sequence_length + 1]
    if isinstance(ids, np.memmap):
        dataset = _memmap_batches(streams, full_batches, sequence_length)
        streams = streams[:, full_batches * sequence_length :]
        offset = 0
    else:
        streams = tf.constant(streams, tf.int32)
        offset = full_batches * sequence_length

        def full_batch(index):
            start = tf.cast(index, tf.int32) * sequence_length
            inputs = tf.slice(streams, [0, start], [num_rows, sequence_length])
            targets = tf.slice(
                streams, [0, start + 1], [num_rows, sequence_length]
            )
            return inputs, targets  # (rows, T) each

        dataset = tf.data.Dataset.range(full_batches).map(full_batch)
    if info.num_batches > full_batches:
        last = info.last_sequence_length
        rest = np.asarray(streams[:, offset : offset + 1 + last], np.int32)
        dataset = dataset.concatenate(
            tf.data.Dataset.from_tensors((rest[:, :-1], rest[:, 1:]))
        )
    return dataset.prefetch(tf.data.AUTOTUNE)


def _memmap_batches(streams, full_batches, sequence_length):
    """Batches read from a memory-mapped array when they are needed: only
    the `(rows, T + 1)` block of a batch is ever copied, so the corpus is
    never held whole in memory (its pages are the file's, which the
    system can drop). The slicing runs in NumPy (`tf.numpy_function`), so
    this dataset runs in the Python process that made it."""
    import tensorflow as tf

    num_rows = streams.shape[0]

    def read(index):
        start = int(index) * sequence_length
        block = streams[:, start : start + sequence_length + 1]
        block = np.asarray(block, np.int32)  # (rows, T + 1)
        return block[:, :-1], block[:, 1:]

    def full_batch(index):
        inputs, targets = tf.numpy_function(
            read, [index], (tf.int32, tf.int32), stateful=False
        )
        inputs.set_shape((num_rows, sequence_length))
        targets.set_shape((num_rows, sequence_length))
        return inputs, targets

    return tf.data.Dataset.range(full_batches).map(
        full_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )


def _check_token_ids(token_ids, vocabulary_size):
    """The ids as a 1-D NumPy array, range-checked: int32, or as they are
    for a memory map or a dtype of under 4 bytes."""
    vocabulary_size = check_optional_positive_int(
        "vocabulary_size", vocabulary_size
    )
    if isinstance(token_ids, np.memmap):
        ids = token_ids  # np.asarray would drop the memmap type
    else:
        ids = np.asarray(token_ids)
    if ids.ndim != 1:
        raise ValueError(
            "`token_ids` must be a 1-D array of the whole corpus (from "
            f"`keras_txl.data.corpus_ids`). Received shape {ids.shape}."
        )
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(
            "`token_ids` must hold integer ids. Received dtype "
            f"{ids.dtype}. Tokenize the text with `keras_txl.data.corpus_ids` "
            "or the tokenizer."
        )
    limit = vocabulary_size or np.iinfo(np.int32).max
    if isinstance(ids, np.memmap) or ids.dtype.itemsize < 4:
        # Ids of a compact cache stay as they are (no int32 copy of the
        # corpus); a range its dtype cannot exceed is not read at all.
        if ids.size and not _dtype_fits(ids.dtype, limit):
            low, high = _chunked_range(ids)
            if low < 0 or high >= limit:
                raise _out_of_range(low, high, limit)
        return ids
    if ids.size:
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= limit:
            raise _out_of_range(low, high, limit)
    return ids.astype(np.int32, copy=False)


def _dtype_fits(dtype, limit):
    info = np.iinfo(dtype)
    return info.min >= 0 and info.max < limit


def _chunked_range(ids, chunk=1 << 24):
    low, high = None, None
    for start in range(0, len(ids), chunk):
        part = ids[start : start + chunk]
        low = int(part.min()) if low is None else min(low, int(part.min()))
        high = int(part.max()) if high is None else max(high, int(part.max()))
    return low, high


def _out_of_range(low, high, limit):
    return CorpusError(
        f"Token ids must lie in [0, vocabulary_size={limit}); the corpus "
        f"holds ids in [{low}, {high}]. Encode it with the model's "
        f"tokenizer, or use a vocabulary_size above {high}."
    )
