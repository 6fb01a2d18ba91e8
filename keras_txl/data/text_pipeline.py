"""Ordered segments from raw text, tokenized by TensorFlow ops in `tf.data`:
the in-graph alternative to `corpus_ids` + `segment_dataset`, not a second
way to the same place.

`text_segment_dataset(paths, tokenizer, batch_size, sequence_length)` is
a `tf.data.Dataset` whose every step is a TensorFlow op: files are read
with `tf.io.read_file`, tokenized with tensorflow-text
(`UnicodeCharTokenizer` for characters, `WhitespaceTokenizer` for words)
and a `tf.lookup` table, or `tf.io.decode_raw` for bytes, and cut into the
ordered segments of `segment_dataset`. No Python runs per batch, so the
dataset can be serialized to the input workers of a TPU or of
`tf.distribute` (the memory-mapped path of `segment_dataset` slices with
`tf.numpy_function`, which runs only in the Python process that made it).

The ids are those of `encode(tokenizer, text)` (the NumPy path) for the
tokenizers of `make_tokenizer`, with one difference for words:
`WhitespaceTokenizer` splits on ICU white space, Python's `str.split` on
Unicode white space; they differ only on rare control characters
(U+001C..U+001F), absent from the usual corpora.

Memory: each file's text and its ids (4 bytes per token) are held while
its segments are read. For corpora larger than memory, or to start in
seconds on every run after the first, use the token cache
(`keras_txl.data.corpus_ids` + `segment_dataset`).

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "text.txt")
>>> _ = open(path, "w").write("abcdefghij" * 4)
>>> tokenizer = make_tokenizer("char", "abcdefghij")
>>> dataset = text_segment_dataset([path], tokenizer, 2, 4)
>>> inputs, targets = next(iter(dataset))
>>> inputs.numpy().tolist()
[[0, 1, 2, 3], [0, 1, 2, 3]]
"""

import numpy as np

from keras_txl.data.tokenization import END_OF_LINE_TOKEN
from keras_txl.data.tokenization import MAX_WORD_BYTES
from keras_txl.data.tokenization import is_plain_byte_tokenizer
from keras_txl.data.tokenization import is_word_tokenizer
from keras_txl.data.tokenization import make_tokenizer  # noqa: F401
from keras_txl.models import CharacterTokenizer
from keras_txl.utils.missing_extra_error import import_extra
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_positive_int


def text_ids_fn(tokenizer):
    """A TensorFlow function from a text (scalar string) to its 1-D int32
    ids, equal to `encode(tokenizer, text)`.

    Args:
        tokenizer: a `"byte"`, `"char"` or `"word"` tokenizer of
            `make_tokenizer`.

    Returns:
        A function of a scalar `tf.string` tensor, usable in `tf.data`.

    Raises:
        ValueError: another kind of tokenizer.
    """
    import tensorflow as tf

    if is_plain_byte_tokenizer(tokenizer):

        def byte_ids(text):
            return tf.cast(tf.io.decode_raw(text, tf.uint8), tf.int32)

        return byte_ids
    if isinstance(tokenizer, CharacterTokenizer):
        return _character_ids_fn(tokenizer)
    if is_word_tokenizer(tokenizer) and tokenizer.suffix_indicator == " ":
        return _word_ids_fn(tokenizer)
    raise ValueError(
        "text_segment_dataset tokenizes with the byte, char and word "
        "tokenizers of keras_txl.data.make_tokenizer. Received: "
        f"{type(tokenizer).__name__}. Encode other tokenizers with "
        "keras_txl.data.corpus_ids (or encode) and segment_dataset."
    )


def text_segment_dataset(
    paths, tokenizer, batch_size, sequence_length, drop_remainder=True
):
    """Ordered `(inputs, targets)` segments of text files, in-graph: the
    alternative to `corpus_ids` + `segment_dataset` for input pipelines
    that must be pure TensorFlow (a TPU's or `tf.data` service's input
    workers), as `examples/train_char_lm.py` builds by hand.

    Each file is one token stream, laid out as `segment_dataset` lays out
    `encode(tokenizer, text)`; the batches of several files follow each
    other (the memory then carries from one file into the next, as from
    one shard of a corpus into the next).

    Args:
        paths: a path or a list of paths of UTF-8 text files.
        tokenizer: a byte, char or word tokenizer of `make_tokenizer`.
        batch_size: int. Number of streams.
        sequence_length: int. Segment length `T`.
        drop_remainder: bool. As in `segment_dataset`.

    Returns:
        A `tf.data.Dataset` of `(inputs, targets)`, `int32`, of shape
        `(batch_size, sequence_length)` (time `None` with
        `drop_remainder=False`). A file too short for one batch yields
        none.
    """
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    import tensorflow as tf

    paths = [str(path) for path in paths]
    batch_size = check_positive_int("batch_size", batch_size)
    sequence_length = check_positive_int("sequence_length", sequence_length)
    drop_remainder = check_bool("drop_remainder", drop_remainder)
    text_ids = text_ids_fn(tokenizer)
    length = sequence_length

    def segments(ids):
        stream_length = tf.size(ids) // batch_size
        streams = tf.reshape(
            ids[: batch_size * stream_length], [batch_size, stream_length]
        )  # (B, L)
        inputs_per_stream = tf.maximum(stream_length - 1, 0)
        full = inputs_per_stream // length
        if drop_remainder:
            count = full
        else:
            count = (inputs_per_stream + length - 1) // length

        def batch(index):
            start = tf.cast(index, tf.int32) * length
            stop = tf.minimum(start + length, inputs_per_stream)
            return (
                streams[:, start:stop],  # (B, T)
                streams[:, start + 1 : stop + 1],  # (B, T)
            )

        return tf.data.Dataset.range(tf.cast(count, tf.int64)).map(batch)

    dataset = tf.data.Dataset.from_tensor_slices(paths)
    dataset = dataset.map(tf.io.read_file).map(text_ids)
    dataset = dataset.flat_map(segments)
    time = sequence_length if drop_remainder else None

    def static_shape(inputs, targets):
        inputs = tf.ensure_shape(inputs, (batch_size, time))
        targets = tf.ensure_shape(targets, (batch_size, time))
        return inputs, targets

    return dataset.map(static_shape).prefetch(tf.data.AUTOTUNE)


def _character_ids_fn(tokenizer):
    import tensorflow as tf

    vocabulary = tokenizer.get_vocabulary()
    codepoints = [ord(t) for t in vocabulary if len(t) == 1]
    ids = [i for i, t in enumerate(vocabulary) if len(t) == 1]
    unknown = (
        -1
        if tokenizer.oov_token is None
        else vocabulary.index(tokenizer.oov_token)
    )
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(codepoints, tf.int32), tf.constant(ids, tf.int32)
        ),
        default_value=unknown,
    )
    splitter = _tensorflow_text().UnicodeCharTokenizer()

    def character_ids(text):
        # Bytes that are not UTF-8 (the enwik8 splits' cut characters)
        # decode as U+FFFD, outside a vocabulary built from clean text.
        codes = splitter.tokenize(text)  # (characters,)
        result = table.lookup(tf.cast(codes, tf.int32))
        if unknown < 0:
            tf.debugging.assert_non_negative(
                result,
                message="The text holds characters outside the "
                "vocabulary, and the tokenizer has no oov_token.",
            )
        return result

    return character_ids


def _word_ids_fn(tokenizer):
    import tensorflow as tf

    vocabulary = list(tokenizer.get_vocabulary())
    unknown = tokenizer.token_to_id(tokenizer.oov_token)
    has_end_of_line = END_OF_LINE_TOKEN in vocabulary
    end_of_line = vocabulary.index(END_OF_LINE_TOKEN) if has_end_of_line else 0
    lengths = np.array([len(w.encode("utf-8")) for w in vocabulary])
    kept = [i for i, n in enumerate(lengths) if n <= MAX_WORD_BYTES]
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant([vocabulary[i] for i in kept]),
            tf.constant(kept, tf.int32),
        ),
        default_value=unknown,
    )
    splitter = _tensorflow_text().WhitespaceTokenizer()

    def word_ids(text):
        lines = tf.strings.split(text, "\n")  # (lines,)
        # A final newline ends the last line; it does not start one.
        ends_with_newline = tf.strings.regex_full_match(text, "(?s).*\n")
        lines = tf.cond(ends_with_newline, lambda: lines[:-1], lambda: lines)
        words = splitter.tokenize(lines)  # (lines, None)
        ids = tf.ragged.map_flat_values(table.lookup, words)
        if has_end_of_line:
            column = tf.fill([tf.shape(lines)[0], 1], end_of_line)
            ids = tf.concat([ids, column], axis=1)
        return ids.flat_values

    return word_ids


def _tensorflow_text():
    """tensorflow-text, imported when a pipeline is built (it is part of
    the `tensorflow` extra; `import keras_txl.data` does not need it)."""
    return import_extra(
        "tensorflow_text",
        "tensorflow",
        "text_segment_dataset (it tokenizes with tensorflow-text)",
    )
