"""Text corpora: local files, a built-in default and the standard benchmarks.

Every loader returns text (`str`); tokenize it with
`keras_txl.data.make_tokenizer` and `keras_txl.data.encode`. Problems with
the corpus (missing or empty file, wrong encoding, failed download or
checksum) raise `keras_txl.data.CorpusError` with a one-line message.

- `load_text(path)`: one text file.
- `builtin_corpus()`: English documentation text shipped with CPython, for
  runs that need no file and no network.
- `load_enwik8()`, `load_text8()`, `load_wikitext103()`: the benchmarks of
  the Transformer-XL paper, with their standard train/valid/test splits,
  downloaded once into the Keras cache (`~/.keras/datasets`, or
  `$KERAS_HOME/datasets`) and checked against a checksum, or read from a
  local file or folder (`path=...`, no network).
- `split_text(text, valid_fraction, test_fraction)`: contiguous splits of
  any other text.

Example:

>>> splits = split_text("abcdefghij", valid_fraction=0.2, test_fraction=0.1)
>>> splits.train, splits.valid, splits.test
('abcdefg', 'hi', 'j')
"""

import codecs
import functools
import os
import zipfile
from typing import NamedTuple

import keras

from keras_txl.data.corpus_error import CorpusError

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


class TextSplits(NamedTuple):
    """Train, validation and test text of a corpus (unpacks as a tuple)."""

    train: str
    valid: str
    test: str


def load_text(path, encoding="utf-8"):
    """Reads a whole text file.

    Args:
        path: str or path-like. The file to read.
        encoding: str. Its text encoding, `"utf-8"` by default.

    Returns:
        The text of the file, as `str`.

    Raises:
        CorpusError: the file is missing, is a folder, is empty, cannot be
            read, or does not decode with `encoding`.

    Example:

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> _ = open(path, "w", encoding="utf-8").write("To be, or not to be")
    >>> load_text(path)
    'To be, or not to be'
    """
    data = _read_bytes(path)
    if not data:
        raise CorpusError(
            f"Corpus file '{os.fspath(path)}' is empty. Pass a file that "
            f"contains text."
        )
    return _decode(data, encoding, f"'{os.fspath(path)}'")


@functools.lru_cache(maxsize=1)
def builtin_corpus():
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

    >>> text = builtin_corpus()
    >>> len(text) > 100_000, text == builtin_corpus()
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


def split_text(text, valid_fraction=0.05, test_fraction=0.05):
    """Splits a text into contiguous train, validation and test parts.

    The validation and test parts are taken from the end of the text, in
    that order: `text = train + valid + test`. Their sizes are
    `floor(len(text) * fraction)`. Nothing is shuffled, so the split is the
    same on every run.

    Args:
        text: str (or bytes). The corpus.
        valid_fraction: float in [0, 1). Share of the validation part.
        test_fraction: float in [0, 1). Share of the test part.
            `valid_fraction + test_fraction` must be below 1.

    Returns:
        A `TextSplits(train, valid, test)` named tuple.

    Raises:
        CorpusError: a part with a non-zero fraction would be empty, or the
            training part would be empty.

    Example:

    >>> train, valid, test = split_text("0123456789", 0.1, 0.2)
    >>> train, valid, test
    ('0123456', '7', '89')
    """
    num_train, num_valid, _ = split_sizes(
        len(text), valid_fraction, test_fraction
    )
    return TextSplits(
        train=text[:num_train],
        valid=text[num_train : num_train + num_valid],
        test=text[num_train + num_valid :],
    )


def split_sizes(size, valid_fraction, test_fraction):
    """Characters of the train, validation and test parts of `split_text`
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


def load_enwik8(
    path=None, cache_dir=None, origin=ENWIK8_URL, file_hash=ENWIK8_SHA256
):
    """enwik8: the first 10^8 bytes of an English Wikipedia XML dump.

    The splits of the Transformer-XL paper (the `prep_enwik8.py` script):
    the first 90M bytes for training, the next 5M for validation and the
    last 5M for test. Models of this benchmark read bytes: tokenize with
    `make_tokenizer("byte")`. The bytes are returned as `str` decoded from
    UTF-8 with `errors="surrogateescape"`, so that
    `split.encode("utf-8", "surrogateescape")` gives back the exact bytes
    even where a split cuts a multi-byte character (the byte tokenizer does
    this). The three parts take about 0.1 to 0.4 GB of memory.

    Args:
        path: optional local copy, no network: the `enwik8.zip` archive, the
            extracted `enwik8` file, or a folder that holds either.
            `None` downloads the archive once into the Keras cache.
        cache_dir: optional cache folder for the download (default
            `~/.keras`, or `$KERAS_HOME`).
        origin: str. URL of the archive (a mirror of the same file).
        file_hash: str or `None`. sha256 (or md5) the downloaded archive
            must have; `None` skips the check.

    Returns:
        `TextSplits(train, valid, test)`.

    Raises:
        CorpusError: missing file, failed download, checksum mismatch, or
            fewer than 10M + 1 bytes.

    Example:

    ```python
    train, valid, test = keras_txl.data.load_enwik8()  # 36 MB download
    len(train), len(valid), len(test)  # (90_000_000, 5_000_000, 5_000_000)
    ```
    """
    data = _load_archived_corpus("enwik8", path, cache_dir, origin, file_hash)
    return _held_out_splits(data, "enwik8", errors="surrogateescape")


def load_text8(
    path=None, cache_dir=None, origin=TEXT8_URL, file_hash=TEXT8_SHA256
):
    """text8: 10^8 characters of lowercased Wikipedia text ("a"-"z", " ").

    The splits of the Transformer-XL paper: the first 90M characters for
    training, the next 5M for validation and the last 5M for test. Its
    download has no published checksum (`file_hash=None` by default); the
    content is checked instead: only "a"-"z" and spaces.

    Args:
        path: optional local copy, no network: the `text8.zip` archive, the
            extracted `text8` file, or a folder that holds either.
        cache_dir: optional cache folder for the download.
        origin: str. URL of the archive.
        file_hash: str or `None`. sha256 (or md5) the downloaded archive
            must have.

    Returns:
        `TextSplits(train, valid, test)`.

    Raises:
        CorpusError: missing file, failed download, checksum mismatch,
            characters outside "a"-"z" and " ", or fewer than 10M + 1
            characters.

    Example:

    ```python
    train, valid, test = keras_txl.data.load_text8()  # 31 MB download
    ```
    """
    data = _load_archived_corpus("text8", path, cache_dir, origin, file_hash)
    if data.translate(None, _TEXT8_ALPHABET):
        raise CorpusError(
            "This text8 file holds characters other than 'a'-'z' and ' ': "
            "it is not the text8 corpus. Pass the original text8 or "
            "text8.zip."
        )
    return _held_out_splits(data, "text8", errors="strict")


def load_wikitext103(
    path=None, variant="tokens", cache_dir=None, origin=None, file_hash=None
):
    """WikiText-103: Wikipedia articles, in the splits of its authors.

    `variant="tokens"` (default) is `wikitext-103-v1`, the word-level text
    with rare words replaced by `<unk>` that the Transformer-XL paper used
    (files `wiki.{train,valid,test}.tokens`); `variant="raw"` is
    `wikitext-103-raw-v1`, the same articles without `<unk>` (files
    `wiki.{train,valid,test}.raw`), for character or byte models. Each
    training text is about 0.54 GB (1 to 2 GB as a Python `str`).

    Args:
        path: optional local copy, no network: the zip archive, a folder
            that holds the three files (directly or in a `wikitext-103` /
            `wikitext-103-raw` subfolder), or a folder of the Hugging Face
            Parquet files (`train-0000N-of-00002.parquet`,
            `validation-...`, `test-...`, directly or in a
            `wikitext-103-v1` / `wikitext-103-raw-v1` subfolder).
        variant: `"tokens"` or `"raw"`.
        cache_dir: optional cache folder for the download.
        origin: optional URL of a zip archive of the files. `None` (with
            `path=None`) downloads the Hugging Face copy
            (`Salesforce/wikitext`: four Parquet files, 0.3 GB, read with
            pyarrow) once and writes its text files beside it. The
            authors' S3 archives no longer answer.
        file_hash: optional sha256 (or md5) of the `origin` archive (the
            Parquet files are not checked: none is published).

    Returns:
        `TextSplits(train, valid, test)`.

    Raises:
        CorpusError: missing files, failed download, checksum mismatch.

    Example:

    ```python
    splits = keras_txl.data.load_wikitext103(path="data/wikitext-103")
    ```
    """
    location, names = wikitext103_location(
        path, variant, cache_dir, origin, file_hash
    )
    if os.path.isdir(location):
        texts = [_read_from_folder(location, name) for name in names]
    else:
        members = _read_zip_members(_check_file(location), names)
        texts = [
            _decode(data, "utf-8", f"{name} in '{location}'")
            for data, name in zip(members, names)
        ]
    return TextSplits(*texts)


def wikitext103_location(
    path=None, variant="tokens", cache_dir=None, origin=None, file_hash=None
):
    """Where the three WikiText-103 files are, downloaded or converted
    from Parquet if needed.

    Args: as `load_wikitext103`.

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
    names = [f"wiki.{split}.{extension}" for split in TextSplits._fields]
    config = WIKITEXT103_CONFIGS[variant]
    if path is None and origin is None:
        subfolder = os.path.join("datasets", "wikitext-103-hf", config)
        downloaded = [
            _download(
                name,
                f"{WIKITEXT103_HF_URL}/{config}/{name}",
                None,
                cache_dir,
                cache_subdir=subfolder,
            )
            for name in WIKITEXT103_PARQUET_FILES
        ]
        path = os.path.dirname(downloaded[0])
    elif path is None:
        path = _download(os.path.basename(origin), origin, file_hash, cache_dir)
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
    try:
        import pyarrow.parquet as parquet
    except ImportError as error:
        raise CorpusError(
            "Reading the Hugging Face copy of WikiText-103 (Parquet files) "
            "needs pyarrow: pip install 'keras-txl[wikitext]' (or pyarrow)."
        ) from error
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


def _decode(data, encoding, where, errors="strict"):
    try:
        codecs.lookup(encoding)
    except LookupError as error:
        raise CorpusError(
            f"Unknown encoding {encoding!r} for {where}. Pass an encoding "
            f"Python knows, such as 'utf-8' or 'latin-1'."
        ) from error
    try:
        return data.decode(encoding, errors)
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"Cannot decode {where} as {encoding}: byte {error.start} "
            f"({data[error.start : error.start + 1]!r}) is not valid "
            f"{encoding}. Pass the file's encoding, e.g. encoding='latin-1'."
        ) from error


def _download(fname, origin, file_hash, cache_dir, cache_subdir="datasets"):
    """`keras.utils.get_file` with one-line errors."""
    try:
        return keras.utils.get_file(
            fname=fname,
            origin=origin,
            file_hash=file_hash,
            cache_dir=cache_dir,
            cache_subdir=cache_subdir,
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


def _load_archived_corpus(name, path, cache_dir, origin, file_hash):
    """Bytes of `name` from `name.zip` (downloaded or local) or a file."""
    if path is None:
        path = _download(f"{name}.zip", origin, file_hash, cache_dir)
    path = _find_archived(name, os.fspath(path))
    if _read_bytes(path, size=4) == _ZIP_MAGIC:
        (data,) = _read_zip_members(path, [name])
        return data
    return _read_bytes(path)


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


def _read_zip_members(path, names):
    """The bytes of the members of a zip archive, found by base name."""
    try:
        with zipfile.ZipFile(path) as archive:
            by_name = {os.path.basename(m): m for m in archive.namelist()}
            missing = [name for name in names if name not in by_name]
            if missing:
                raise CorpusError(
                    f"Archive '{path}' has no {', '.join(missing)}. Pass the "
                    f"archive of this corpus, or a folder with its files."
                )
            return [archive.read(by_name[name]) for name in names]
    except (zipfile.BadZipFile, OSError) as error:
        raise CorpusError(
            f"Cannot read the zip archive '{path}' ({error}). Download it "
            f"again, or pass the extracted files."
        ) from error


def _read_from_folder(folder, name):
    return load_text(_find_in_folder(folder, name))


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


def _held_out_splits(data, name, errors):
    """First all but 10M / next 5M / last 5M, as `prep_enwik8.py`."""
    if len(data) <= 2 * HELD_OUT_SIZE:
        raise CorpusError(
            f"This {name} file has {len(data):,} bytes; the standard split "
            f"holds out the last {2 * HELD_OUT_SIZE:,} and needs more (the "
            f"full corpus has {FULL_CORPUS_SIZE:,}). Pass the full file."
        )
    train = data[: -2 * HELD_OUT_SIZE]
    valid = data[-2 * HELD_OUT_SIZE : -HELD_OUT_SIZE]
    test = data[-HELD_OUT_SIZE:]
    return TextSplits(
        *(_decode(part, "utf-8", name, errors) for part in (train, valid, test))
    )
