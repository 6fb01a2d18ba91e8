"""Corpora by name: `load_corpus(name, path)` gives the train, validation
and test parts of a corpus, read where they are (byte ranges of files,
never the whole text in memory); `keras_txl.data.make_tokenizer` builds a
tokenizer from them and `keras_txl.data.corpus_ids` their token ids.

- `"builtin"`: English documentation text shipped with CPython (no file,
  no network), split by `valid_fraction` and `test_fraction` from its end;
  with `path`, your UTF-8 text file, split the same way.
- `"enwik8"`, `"text8"`, `"wikitext103"`: the benchmarks of the
  Transformer-XL paper in their standard splits, downloaded once into the
  Keras cache (`~/.keras/datasets`, or `$KERAS_HOME/datasets`) and checked
  against a checksum, or read from a local file, archive or folder
  (`path=...`, no network).
- `"one_billion_word"`: the extracted archive at `path`.

Problems with the corpus (missing or empty file, failed download or
checksum) raise `CorpusError` (`data/text_source.py`, a `ValueError`)
with a one-line message.

Example:

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "corpus.txt")
>>> _ = open(path, "w").write("abcdefghij")
>>> corpus = load_corpus("builtin", path, 0.2, 0.1, token_cache_dir=folder)
>>> [(part.start, part.stop) for part in corpus]
[(0, 7), (7, 9), (9, 10)]
>>> train, valid, test = load_corpus("builtin", valid_fraction=0.05)
>>> len(valid) > 20_000, test
(True, '')
"""

import functools
import os
import zipfile

import keras
import numpy as np

from keras_txl.data.one_billion_word import one_billion_word_corpus
from keras_txl.data.text_source import Corpus
from keras_txl.data.text_source import CorpusError
from keras_txl.data.text_source import TextSource
from keras_txl.data.text_source import read_chunks
from keras_txl.data.token_cache import cached_json
from keras_txl.utils.missing_extra_error import import_extra

# The names of `load_corpus`, and the tokenizer each is modeled with in
# the paper (enwik8: bytes, text8: characters, WikiText-103 and One
# Billion Word: words; characters for the built-in text or a file).
CORPORA = {
    "builtin": "char",
    "enwik8": "byte",
    "text8": "char",
    "wikitext103": "word",
    "one_billion_word": "word",
}
# Archives and their checksums (sha256 of the archive as served; the values
# are the ones recorded by the Hugging Face `datasets` loading scripts
# `enwik8/dataset_infos.json` and `wikitext/dataset_infos.json`).
ENWIK8_URL = "http://mattmahoney.net/dc/enwik8.zip"
ENWIK8_SHA256 = (
    "547994d9980ebed1288380d652999f38a14fe291a6247c157c3d33d4932534bc"
)
TEXT8_URL = "http://mattmahoney.net/dc/text8.zip"
# No published checksum of text8.zip was found; the content is checked
# instead (only "a"-"z" and " "). Pass `file_hash=` to pin one.
TEXT8_SHA256 = None
# WikiText-103: the authors' S3 archives no longer answer (2024); the
# Hugging Face copy (`Salesforce/wikitext`, Parquet files of one line per
# row) is the default source. `origin=` still takes a zip archive's URL.
WIKITEXT103_HF_URL = (
    "https://huggingface.co/datasets/Salesforce/wikitext/resolve/main"
)
WIKITEXT103_CONFIGS = {
    "tokens": "wikitext-103-v1",
    "raw": "wikitext-103-raw-v1",
}
WIKITEXT103_PARQUET_FILES = (
    "train-00000-of-00002.parquet",
    "train-00001-of-00002.parquet",
    "validation-00000-of-00001.parquet",
    "test-00000-of-00001.parquet",
)

# enwik8 and text8: the last 2 x 5M bytes are held out (the split of the
# `prep_enwik8.py` script used by the Transformer-XL authors).
HELD_OUT_SIZE = 5_000_000
FULL_CORPUS_SIZE = 100_000_000
_TEXT8_ALPHABET = b"abcdefghijklmnopqrstuvwxyz "
_ZIP_MAGIC = b"PK\x03\x04"


def load_corpus(
    name,
    path=None,
    valid_fraction=0.1,
    test_fraction=0.0,
    token_cache_dir=None,
    **options,
):
    """The train, validation and test parts of a corpus.

    Args:
        name: one of `CORPORA`: `"builtin"`, `"enwik8"`, `"text8"`,
            `"wikitext103"` or `"one_billion_word"`.
        path: `"builtin"`: optional UTF-8 text file that replaces the
            built-in text. A benchmark: its local copy (no network): the
            archive, the extracted file(s), or a folder that holds either
            (WikiText-103: also a folder of the Hugging Face Parquet files
            `train-0000N-of-00002.parquet`, `validation-...`, `test-...`);
            `None` downloads it once (not One Billion Word: extract
            `1-billion-word-language-modeling-benchmark-r13output.tar.gz`
            and pass its folder; a `1b_word_vocab.txt` beside it is the
            vocabulary of its `"word"` tokenizer).
        valid_fraction: float in [0, 1): the share of the built-in text
            or the file held out from its end for validation, before the
            test share (`text = train + valid + test`). The benchmarks keep
            the paper's splits: enwik8 and text8 the first 90M bytes for
            training, the next 5M for validation, the last 5M for test;
            One Billion Word the held-out shard 00000 for both.
        test_fraction: float in [0, 1): the share held out for test, the
            last one.
        token_cache_dir: optional token cache folder (a file's split
            offsets and text8's content check are cached there; default
            `$KERAS_TXL_CACHE`, else `~/.keras/keras_txl_cache`).
        **options: of the benchmarks: `download_dir` (where downloads
            go: the `cache_dir` of `keras.utils.get_file`, default
            `~/.keras`), `origin` (the URL
            of a mirror of the archive) and `file_hash` (the sha256 or md5
            the download must have; `None` skips the check); of
            `"wikitext103"` also `variant`: `"tokens"` (default,
            `wikitext-103-v1`, the word-level text with `<unk>` that the
            paper used) or `"raw"` (`wikitext-103-raw-v1`, for character
            or byte models).

    Returns:
        A `Corpus` (unpacks as `train, valid, test`): byte ranges of the
        files (`str` for the built-in text).

    Raises:
        CorpusError: missing, empty or short file, failed download,
            checksum mismatch, or a part with a non-zero fraction would be
            empty.
        ValueError: unknown `name` or option, or a bad fraction.
    """
    if name not in CORPORA:
        raise ValueError(
            f"`name` must be one of {tuple(CORPORA)}. Received: {name!r}"
        )
    allowed = {
        "enwik8": ("download_dir", "origin", "file_hash"),
        "text8": ("download_dir", "origin", "file_hash"),
        "wikitext103": ("download_dir", "origin", "file_hash", "variant"),
    }.get(name, ())
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"The {name} corpus takes the options {allowed or 'none'}. "
            f"Received: {unknown}"
        )
    if name == "builtin":
        if path is None:
            return _split_text(_builtin_text(), valid_fraction, test_fraction)
        return _text_file_corpus(
            path, valid_fraction, test_fraction, token_cache_dir
        )
    if name == "enwik8":
        source = _archived_source("enwik8", path, **options)
        return _held_out_parts(source._replace(errors="surrogateescape"))
    if name == "text8":
        return _text8(path, token_cache_dir, **options)
    if name == "wikitext103":
        return _wikitext103(path, **options)
    if path is None:
        raise CorpusError(
            "One Billion Word is not downloaded here: extract "
            "1-billion-word-language-modeling-benchmark-r13output.tar.gz and "
            "pass path= (or --corpus) to its folder."
        )
    return one_billion_word_corpus(path)


@functools.lru_cache(maxsize=1)
def _builtin_text():
    """English text that every CPython install ships: the default corpus.

    The text is the documentation of Python's statements, operators and
    types that `help()` prints (`pydoc_data.topics`), joined in sorted
    topic order with blank lines between topics, so it is the same on every
    run of a given Python. It needs no file and no network. Its size depends
    on the Python version: 465,126 characters (79 topics, 103 distinct
    characters) on CPython 3.11.7.

    Returns:
        The text, as `str`.

    Raises:
        CorpusError: this Python was installed without `pydoc_data` (some
            Linux distributions split it off).

    Example:

    >>> text = _builtin_text()
    >>> len(text) > 100_000, text == _builtin_text()
    (True, True)
    """
    try:
        from pydoc_data import topics
    except ImportError as error:
        raise CorpusError(
            "This Python has no `pydoc_data` module, the source of the "
            "built-in corpus. Pass a text file instead, or install the "
            "Python documentation package of your distribution."
        ) from error
    return "\n\n".join(topics.topics[key] for key in sorted(topics.topics))


def _split_text(text, valid_fraction, test_fraction):
    """The `Corpus` of a text in memory: contiguous parts, validation and
    test from the end (`text = train + valid + test`), each
    `floor(len(text) * fraction)` characters."""
    num_train, num_valid, _ = split_sizes(
        len(text), valid_fraction, test_fraction
    )
    return Corpus(
        text[:num_train],
        text[num_train : num_train + num_valid],
        text[num_train + num_valid :],
    )


def split_sizes(size, valid_fraction, test_fraction):
    """Characters of the train, validation and test parts of `_split_text`
    for a text of `size` characters (same checks and errors)."""
    valid_fraction = _check_fraction("valid_fraction", valid_fraction)
    test_fraction = _check_fraction("test_fraction", test_fraction)
    if valid_fraction + test_fraction >= 1.0:
        raise ValueError(
            "`valid_fraction + test_fraction` must be below 1 to leave "
            f"training text. Received: valid_fraction={valid_fraction}, "
            f"test_fraction={test_fraction}"
        )
    num_valid = int(size * valid_fraction)
    num_test = int(size * test_fraction)
    for name, fraction, count in (
        ("valid_fraction", valid_fraction, num_valid),
        ("test_fraction", test_fraction, num_test),
    ):
        if fraction > 0 and count == 0:
            raise CorpusError(
                f"A text of {size} characters is too short for "
                f"{name}={fraction}: that part would be empty. Use a longer "
                f"text or a larger fraction (or 0 for no such part)."
            )
    num_train = size - num_valid - num_test
    if num_train <= 0:
        raise CorpusError(
            f"A text of {size} characters leaves no training text. Use a "
            f"longer text."
        )
    return num_train, num_valid, size - num_train - num_valid


def _text_file_corpus(path, valid_fraction, test_fraction, token_cache_dir):
    """The parts of a text file as `_split_text` cuts its text, as byte
    ranges: the file is read in chunks to count its UTF-8 characters and
    to find the byte where each part starts; the offsets are cached
    against the file's size and modification time. A part of fraction 0
    is an empty range."""
    path = _check_file(path)
    source = TextSource(os.path.abspath(path))
    if not valid_fraction and not test_fraction:  # no offsets to find
        _check_fraction("valid_fraction", valid_fraction)
        _check_fraction("test_fraction", test_fraction)
        size = os.path.getsize(path)
        if not size:
            raise CorpusError(
                f"Corpus file '{path}' is empty. Pass a file that contains "
                "text."
            )
        empty = source._replace(start=size, stop=size)
        return Corpus(source, empty, empty)

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
        num_train, num_valid, _ = split_sizes(
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
        token_cache_dir,
    )
    return Corpus(
        source._replace(stop=train_end),
        source._replace(start=train_end, stop=valid_end),
        source._replace(start=valid_end, stop=size),
    )


def _text8(
    path, token_cache_dir, download_dir=None, origin=TEXT8_URL, file_hash=None
):
    """text8's parts, after a check (once per file, in chunks, cached)
    that it holds only "a"-"z" and " " (no checksum is published)."""
    source = _archived_source("text8", path, download_dir, origin, file_hash)

    def check():
        for chunk in read_chunks(source):
            if chunk.translate(None, _TEXT8_ALPHABET):
                return False
        return True

    if not cached_json("text8-check", {}, [source], check, token_cache_dir):
        raise CorpusError(
            "This text8 file holds characters other than 'a'-'z' and ' ': "
            "it is not the text8 corpus. Pass the original text8 or "
            "text8.zip."
        )
    return _held_out_parts(source)


def _wikitext103(
    path, variant="tokens", download_dir=None, origin=None, file_hash=None
):
    location, names = wikitext103_location(
        path, variant, download_dir, origin, file_hash
    )
    if os.path.isdir(location):
        return Corpus(
            *(TextSource(_find_in_folder(location, name)) for name in names)
        )
    with _opened_zip(location) as archive:
        present = {os.path.basename(m) for m in archive.namelist()}
    missing = [name for name in names if name not in present]
    if missing:
        raise CorpusError(
            f"Archive '{location}' has no {', '.join(missing)}. Pass the "
            "archive of this corpus, or a folder with its files."
        )
    return Corpus(
        *(TextSource(os.path.abspath(location), member=n) for n in names)
    )


def wikitext103_location(
    path=None, variant="tokens", download_dir=None, origin=None, file_hash=None
):
    """Where the three WikiText-103 files are, downloaded (into
    `download_dir`, Keras's download folder) or converted from Parquet if
    needed: the Hugging Face copy (`Salesforce/wikitext`: four Parquet
    files, 0.3 GB, read with pyarrow) without `path` and `origin`.

    Returns:
        `(location, names)`: a folder that holds the files (maybe in a
        `wikitext-103*` subfolder) or a zip archive, and the three file
        names (`wiki.{train,valid,test}.{tokens|raw}`).
    """
    if variant not in WIKITEXT103_CONFIGS:
        raise ValueError(
            '`variant` must be "tokens" or "raw". Received: '
            f"variant={variant!r}"
        )
    extension = "tokens" if variant == "tokens" else "raw"
    names = [
        f"wiki.{split}.{extension}" for split in ("train", "valid", "test")
    ]
    config = WIKITEXT103_CONFIGS[variant]
    if path is None and origin is None:
        subfolder = os.path.join("datasets", "wikitext-103-hf", config)
        downloaded = [
            _download(
                name,
                f"{WIKITEXT103_HF_URL}/{config}/{name}",
                None,
                download_dir,
                subfolder=subfolder,
            )
            for name in WIKITEXT103_PARQUET_FILES
        ]
        path = os.path.dirname(downloaded[0])
    elif path is None:
        path = _download(
            os.path.basename(origin), origin, file_hash, download_dir
        )
    path = os.fspath(path)
    if os.path.isdir(path) and _parquet_files(path, config):
        path = _parquet_to_text(path, config, names)
    return path, names


def _parquet_files(folder, config):
    """`{split: [files]}` of the Hugging Face Parquet layout in `folder`
    (or its `config` subfolder), or `{}`."""
    for base in (folder, os.path.join(folder, config)):
        if not os.path.isdir(base):
            continue
        found = {}
        for split in ("train", "validation", "test"):
            found[split] = sorted(
                os.path.join(base, name)
                for name in os.listdir(base)
                if name.startswith(f"{split}-") and name.endswith(".parquet")
            )
        if all(found.values()):
            return found
    return {}


def _parquet_to_text(folder, config, names):
    """Writes the three splits of the Parquet copy as the original text
    files (one row per line; Hugging Face stored each blank line, " \n"
    in the original files, as an empty row) in `folder/text`, once."""
    parquet = import_extra(
        "pyarrow.parquet",
        "wikitext",
        "Reading the Hugging Face copy of WikiText-103 (Parquet files)",
    )
    files = _parquet_files(folder, config)
    target = os.path.join(folder, "text")
    os.makedirs(target, exist_ok=True)
    for split, name in zip(("train", "validation", "test"), names):
        path = os.path.join(target, name)
        if os.path.isfile(path):
            continue
        temporary = f"{path}.partial{os.getpid()}"
        with open(temporary, "w", encoding="utf-8", newline="") as out:
            for file in files[split]:
                try:
                    table = parquet.ParquetFile(file)
                    for batch in table.iter_batches(columns=["text"]):
                        for row in batch.column(0).to_pylist():
                            out.write(row or " \n")
                except Exception as error:
                    raise CorpusError(
                        f"Cannot read the Parquet file '{file}' ({error}). "
                        "Download it again."
                    ) from error
        os.replace(temporary, path)
    return target


def _check_fraction(name, value):
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0.0 <= value < 1.0
    ):
        raise ValueError(
            f"`{name}` must be a float in [0, 1). Received: {name}={value!r}"
        )
    return float(value)


def _check_file(path):
    """The path as `str`, after checking that it is an existing file."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CorpusError(
            f"Corpus file '{path}' does not exist. Check the path (relative "
            f"paths start at {os.getcwd()})."
        )
    if os.path.isdir(path):
        raise CorpusError(
            f"'{path}' is a folder, not a file. Pass the path of a text file."
        )
    return path


def _read_bytes(path, size=-1):
    path = _check_file(path)
    try:
        with open(path, "rb") as file:
            return file.read(size)
    except OSError as error:
        raise CorpusError(
            f"Cannot read '{path}': {error.strerror}. Check its permissions."
        ) from error


def _download(fname, origin, file_hash, download_dir, subfolder="datasets"):
    """`keras.utils.get_file` with one-line errors."""
    try:
        return keras.utils.get_file(
            fname=fname,
            origin=origin,
            file_hash=file_hash,
            cache_dir=download_dir,
            cache_subdir=subfolder,
        )
    except ValueError as error:
        raise CorpusError(
            f"The download of {origin} does not have the expected checksum "
            f"{file_hash}. Delete the cached {fname} and retry, or pass "
            f"path= to a copy you trust."
        ) from error
    except Exception as error:
        raise CorpusError(
            f"Could not download {origin} ({error}). Download it where "
            f"there is network access and pass path= to the file."
        ) from error


def _find_archived(name, path):
    """`path`, or the `name` or `name.zip` file in folder `path`."""
    if os.path.isdir(path):
        for candidate in (name, f"{name}.zip"):
            if os.path.isfile(os.path.join(path, candidate)):
                return os.path.join(path, candidate)
        raise CorpusError(
            f"Folder '{path}' holds neither '{name}' nor '{name}.zip'. "
            f"Pass the folder or file of the {name} corpus."
        )
    return path


def _find_in_folder(folder, name):
    for subfolder in ("", "wikitext-103", "wikitext-103-raw"):
        candidate = os.path.join(folder, subfolder, name)
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise CorpusError(
        f"Folder '{folder}' holds no '{name}' (also looked in its "
        f"wikitext-103 and wikitext-103-raw subfolders). Pass the folder of "
        f"the extracted archive."
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


def _archived_source(
    name, path, download_dir=None, origin=ENWIK8_URL, file_hash=ENWIK8_SHA256
):
    """The `TextSource` of `name` in `name.zip` (downloaded into
    `download_dir` without `path`), or a file, or a folder of either."""
    if path is None:
        path = _download(f"{name}.zip", origin, file_hash, download_dir)
    path = _find_archived(name, os.fspath(path))
    if _read_bytes(path, size=4) == _ZIP_MAGIC:
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


def _held_out_parts(source):
    """First all but 10M / next 5M / last 5M bytes, as the authors'
    `prep_enwik8.py` splits enwik8 (and text8)."""
    if source.member is None:
        size = os.path.getsize(source.path)
    else:
        with _opened_zip(source.path) as archive:
            by_name = {os.path.basename(m): m for m in archive.namelist()}
            size = archive.getinfo(by_name[source.member]).file_size
    held_out = HELD_OUT_SIZE
    if size <= 2 * held_out:
        name = source.member or os.path.basename(source.path)
        raise CorpusError(
            f"This {name} file has {size:,} bytes; the standard split holds "
            f"out the last {2 * held_out:,} and needs more (the full corpus "
            f"has {FULL_CORPUS_SIZE:,}). Pass the full file."
        )
    return Corpus(
        source._replace(stop=size - 2 * held_out),
        source._replace(start=size - 2 * held_out, stop=size - held_out),
        source._replace(start=size - held_out, stop=size),
    )
