"""The splits of a corpus as `TextSource`s: byte ranges of its files,
never read whole into memory.

Each function returns `SourceSplits(train, valid, test)` of
`keras_txl.data.TextSource`, the same texts as the loaders of
`keras_txl.data.corpora` return as `str`, for `build_tokenizer` and
`cached_token_ids` (`keras_txl.data.token_cache`):

- `text_file_sources(path, valid_fraction, test_fraction)`: the splits of
  `split_text(load_text(path), ...)`, found by counting characters in
  chunks (cached);
- `enwik8_sources()`, `text8_sources()`: the paper's held-out splits of
  the archive or file (last 2 x 5M bytes);
- `wikitext103_sources()`: the three files of WikiText-103.

Example:

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "corpus.txt")
>>> _ = open(path, "w").write("abcdefghij")
>>> splits = text_file_sources(path, 0.2, 0.1, cache_dir=folder)
>>> [(s.start, s.stop) for s in splits]
[(0, 7), (7, 9), (9, 10)]
"""

import os
import zipfile
from typing import NamedTuple

import numpy as np

from keras_txl.data import corpora
from keras_txl.data.corpus_error import CorpusError
from keras_txl.data.text_source import TextSource
from keras_txl.data.text_source import read_chunks
from keras_txl.data.token_cache import cached_json


class SourceSplits(NamedTuple):
    """Train, validation and test `TextSource`s of a corpus."""

    train: TextSource
    valid: TextSource
    test: TextSource


def text_file_sources(
    path, valid_fraction=0.05, test_fraction=0.05, cache_dir=None
):
    """The splits of `split_text(load_text(path), ...)` as byte ranges.

    The file is read in chunks to count its UTF-8 characters and to find
    the byte where each split starts; the offsets are cached against the
    file's size and modification time.

    Args:
        path: a UTF-8 text file.
        valid_fraction, test_fraction: floats (see `split_text`).
        cache_dir: optional cache folder (see `cache_folder`).

    Returns:
        `SourceSplits` (the validation or test part is an empty range when
        its fraction is 0).

    Raises:
        CorpusError: missing or empty file, or a part would be empty.
    """
    path = corpora._check_file(path)
    source = TextSource(os.path.abspath(path))

    def offsets():
        starts = []  # (first character, first byte) of every chunk
        characters, position = 0, 0
        for chunk in read_chunks(source):
            data = np.frombuffer(chunk, np.uint8)
            starts.append((characters, position))
            characters += int(np.count_nonzero((data & 0xC0) != 0x80))
            position += len(chunk)
        if not position:
            raise CorpusError(
                f"Corpus file '{path}' is empty. Pass a file that contains "
                "text."
            )
        num_train, num_valid, _ = corpora.split_sizes(
            characters, valid_fraction, test_fraction
        )
        cuts = [num_train, num_train + num_valid]
        return [_byte_of_character(source, starts, cut) for cut in cuts] + [
            position
        ]

    train_end, valid_end, size = cached_json(
        "split",
        {"fractions": [valid_fraction, test_fraction]},
        [source],
        offsets,
        cache_dir,
    )
    return SourceSplits(
        source._replace(stop=train_end),
        source._replace(start=train_end, stop=valid_end),
        source._replace(start=valid_end, stop=size),
    )


def enwik8_sources(
    path=None,
    cache_dir=None,
    origin=corpora.ENWIK8_URL,
    file_hash=corpora.ENWIK8_SHA256,
):
    """The splits of `load_enwik8` (90M / 5M / 5M bytes) as byte ranges of
    the archive's member or of the file; arguments as `load_enwik8`."""
    source = _archived_source("enwik8", path, cache_dir, origin, file_hash)
    return _held_out_sources(source._replace(errors="surrogateescape"))


def text8_sources(
    path=None,
    cache_dir=None,
    origin=corpora.TEXT8_URL,
    file_hash=corpora.TEXT8_SHA256,
):
    """The splits of `load_text8` as byte ranges; arguments as
    `load_text8`. The content check ("a"-"z" and " " only) runs once per
    file, in chunks."""
    source = _archived_source("text8", path, cache_dir, origin, file_hash)

    def check():
        for chunk in read_chunks(source):
            if chunk.translate(None, corpora._TEXT8_ALPHABET):
                return False
        return True

    if not cached_json("text8-check", {}, [source], check, cache_dir):
        raise CorpusError(
            "This text8 file holds characters other than 'a'-'z' and ' ': "
            "it is not the text8 corpus. Pass the original text8 or "
            "text8.zip."
        )
    return _held_out_sources(source)


def wikitext103_sources(
    path=None, variant="tokens", cache_dir=None, origin=None, file_hash=None
):
    """The three files of `load_wikitext103` as sources; arguments as
    `load_wikitext103` (without `path`, the Hugging Face copy is
    downloaded once and converted to text files)."""
    location, names = corpora.wikitext103_location(
        path, variant, cache_dir, origin, file_hash
    )
    if os.path.isdir(location):
        return SourceSplits(
            *(
                TextSource(corpora._find_in_folder(location, name))
                for name in names
            )
        )
    with _opened_zip(location) as archive:
        present = {os.path.basename(m) for m in archive.namelist()}
    missing = [name for name in names if name not in present]
    if missing:
        raise CorpusError(
            f"Archive '{location}' has no {', '.join(missing)}. Pass the "
            "archive of this corpus, or a folder with its files."
        )
    return SourceSplits(
        *(TextSource(os.path.abspath(location), member=n) for n in names)
    )


def _byte_of_character(source, starts, index):
    """Byte offset of character `index` (UTF-8: counting the bytes that
    do not continue a character)."""
    for number, (characters, position) in enumerate(starts):
        following = starts[number + 1][0] if number + 1 < len(starts) else None
        if following is None or index < following:
            break
    chunk = source._replace(start=position, stop=None)
    data = np.frombuffer(next(read_chunks(chunk)), np.uint8)
    heads = np.flatnonzero((data & 0xC0) != 0x80)
    local = index - characters
    if local >= len(heads):
        return position + len(data)
    return position + int(heads[local])


def _archived_source(name, path, cache_dir, origin, file_hash):
    if path is None:
        path = corpora._download(f"{name}.zip", origin, file_hash, cache_dir)
    path = corpora._find_archived(name, os.fspath(path))
    if corpora._read_bytes(path, size=4) == corpora._ZIP_MAGIC:
        with _opened_zip(path) as archive:
            if name not in {os.path.basename(m) for m in archive.namelist()}:
                raise CorpusError(
                    f"Archive '{path}' has no {name}. Pass the archive of "
                    "this corpus, or a folder with its files."
                )
        return TextSource(os.path.abspath(path), member=name)
    return TextSource(os.path.abspath(path))


def _opened_zip(path):
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as error:
        raise CorpusError(
            f"Cannot read the zip archive '{path}' ({error}). Download it "
            f"again, or pass the extracted files."
        ) from error


def _held_out_sources(source):
    if source.member is None:
        size = os.path.getsize(source.path)
    else:
        with _opened_zip(source.path) as archive:
            by_name = {os.path.basename(m): m for m in archive.namelist()}
            size = archive.getinfo(by_name[source.member]).file_size
    held_out = corpora.HELD_OUT_SIZE
    if size <= 2 * held_out:
        name = source.member or os.path.basename(source.path)
        raise CorpusError(
            f"This {name} file has {size:,} bytes; the standard split holds "
            f"out the last {2 * held_out:,} and needs more (the full corpus "
            f"has {corpora.FULL_CORPUS_SIZE:,}). Pass the full file."
        )
    return SourceSplits(
        source._replace(stop=size - 2 * held_out),
        source._replace(start=size - 2 * held_out, stop=size - held_out),
        source._replace(start=size - held_out, stop=size),
    )
