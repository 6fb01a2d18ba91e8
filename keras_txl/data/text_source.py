"""Where a corpus's text is and how it is read.

A `Corpus` (what `keras_txl.data.load_corpus` returns) names the text of
its train, validation and test parts: a `TextSource` (a file, a byte range
of it, or a member of a zip archive), a tuple of them read one after the
other (One Billion Word's shards), or a `str` (the built-in text). Files
are read in chunks of a few megabytes (`read_chunks`, `text_chunks`), so
that a text larger than memory can be counted and tokenized.
"""

import codecs
import dataclasses
import os
import zipfile
from typing import NamedTuple


class CorpusError(ValueError):
    """A corpus is missing, empty, unreadable or too short for the request.

    The message is one line that names the file or the numbers involved and
    says how to fix the call, so that a command-line tool can print it
    without a traceback:

    ```python
    try:
        corpus = keras_txl.data.load_corpus("enwik8", path)
    except ValueError as error:  # a CorpusError
        raise SystemExit(f"error: {error}")
    ```
    """


# Bytes read at a time: the transient memory of tokenization is a few
# times this, whatever the corpus size.
CHUNK_BYTES = 1 << 22


class TextSource(NamedTuple):
    """Where a corpus's text is: a file, or the member of a zip archive.

    Fields:
        path: str. The file (or the zip archive).
        start: int. First byte of the text in the file (or member).
        stop: int or `None`. Byte after the last one (`None`: the end).
        member: str or `None`. Name of the zip member holding the text.
        errors: str. How bytes that are not UTF-8 are decoded (`"strict"`
            raises; enwik8 uses `"surrogateescape"`).
    """

    path: str
    start: int = 0
    stop: int = None
    member: str = None
    errors: str = "strict"


@dataclasses.dataclass(frozen=True)
class Corpus:
    """The parts of a corpus (`keras_txl.data.load_corpus`); unpacks as
    `train, valid, test`.

    Fields:
        train, valid, test: each a part: a `TextSource`, a tuple of them
            (read one after the other), or a `str` (text in memory). An
            empty part is an empty byte range or `""`.
        word_list: optional path of the corpus's own list of words, one a
            line, most frequent first (One Billion Word's
            `1b_word_vocab.txt`): the vocabulary of a `"word"` tokenizer.
        counted: the names of the parts a tokenizer's vocabulary is counted
            over: all three (the Transformer-XL authors' choice for enwik8
            and text8), or the training part alone (One Billion Word).
    """

    train: object
    valid: object
    test: object
    word_list: str = None
    counted: tuple = ("train", "valid", "test")

    def __iter__(self):
        return iter((self.train, self.valid, self.test))


def part_sources(part):
    """The `TextSource`s of a part (`()` for a `str`)."""
    if isinstance(part, TextSource):
        return (part,)
    if isinstance(part, str):
        return ()
    return tuple(part)


def source_stat(source):
    """Size and modification time of the file of `source`: a cache built
    from it is stale when they change."""
    try:
        stat = os.stat(source.path)
    except OSError as error:
        raise CorpusError(
            f"Cannot read corpus file '{source.path}': {error.strerror}. "
            "Check the path."
        ) from error
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def read_chunks(source, chunk_bytes=None):
    """Yields the bytes of `source`, at most `chunk_bytes` at a time.

    Args:
        source: a `TextSource`.
        chunk_bytes: int. Bytes per chunk (`None`: `CHUNK_BYTES`).

    Yields:
        `bytes`, in order; together the bytes `[start, stop)`.
    """
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    remaining = None if source.stop is None else source.stop - source.start
    with _open(source) as file:
        _skip(file, source.start, chunk_bytes)
        while remaining is None or remaining > 0:
            size = (
                chunk_bytes
                if remaining is None
                else min(chunk_bytes, remaining)
            )
            chunk = file.read(size)
            if not chunk:
                break
            if remaining is not None:
                remaining -= len(chunk)
            yield chunk


def text_chunks(source, cut="any", chunk_bytes=None):
    """Yields the text of `source` decoded from UTF-8, piece by piece.

    Args:
        source: a `TextSource`.
        cut: `"any"` (pieces end anywhere between characters) or
            `"whitespace"` (pieces end after a newline, or after a space
            in a line longer than a chunk, so no word is cut in two).
        chunk_bytes: int. Bytes read at a time (`None`: `CHUNK_BYTES`).

    Yields:
        `(text, ends_line)`: a `str` piece, and whether its last line ends
        there (it ends with a newline, or it is the last piece).
    """
    decoder = codecs.getincrementaldecoder("utf-8")(source.errors)
    carry = ""
    try:
        for chunk in read_chunks(source, chunk_bytes):
            text = carry + decoder.decode(chunk)
            carry = ""
            if cut == "whitespace":
                end = text.rfind("\n") + 1 or text.rfind(" ") + 1
                if end == 0:
                    carry = text  # one word longer than a chunk
                    continue
                text, carry = text[:end], text[end:]
            if text:
                yield text, text.endswith("\n")
        text = carry + decoder.decode(b"", final=True)
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"Cannot decode {describe_source(source)} as utf-8: {error.reason} "
            f"near byte {error.start} of a chunk. Pass a text in utf-8."
        ) from error
    if text:
        yield text, True


def _open(source):
    try:
        if source.member is None:
            return open(source.path, "rb")
        archive = zipfile.ZipFile(source.path)
        by_name = {os.path.basename(m): m for m in archive.namelist()}
        name = by_name.get(source.member, source.member)
        return _ZipMember(archive, archive.open(name))
    except KeyError as error:
        raise CorpusError(
            f"Archive '{source.path}' has no member {source.member!r}."
        ) from error
    except (OSError, zipfile.BadZipFile) as error:
        raise CorpusError(
            f"Cannot read {describe_source(source)} ({error}). Check the file."
        ) from error


class _ZipMember:
    """A zip member's stream that closes its archive too."""

    def __init__(self, archive, stream):
        self.archive, self.stream = archive, stream

    def read(self, size):
        return self.stream.read(size)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stream.close()
        self.archive.close()


def _skip(file, count, chunk_bytes):
    if not count:
        return
    if hasattr(file, "seek") and not isinstance(file, _ZipMember):
        file.seek(count)
        return
    while count > 0:  # compressed: read and drop
        dropped = len(file.read(min(chunk_bytes, count)))
        if not dropped:
            return
        count -= dropped


def source_identity(source):
    """What names `source` in a cache key: its real path, range, member
    and decoding."""
    return {
        "path": os.path.realpath(source.path),
        "start": source.start,
        "stop": source.stop,
        "member": source.member,
        "errors": source.errors,
    }


def describe_source(source):
    """`source` in words, for messages: `'path'`, `member in 'path'`,
    with its byte range if it has one."""
    where = f"'{source.path}'"
    if source.member is not None:
        where = f"{source.member} in {where}"
    if source.start or source.stop is not None:
        where += f" bytes [{source.start}, {source.stop})"
    return where
