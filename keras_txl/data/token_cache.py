"""The token cache: corpora tokenized once into a compact file on disk,
read with `np.memmap`.

A corpus of hundreds of megabytes costs about 15 bytes per character when
it is read as a Python `str`, encoded into an `int32` array and copied
into `tf.data`. Here `keras_txl.data.corpus_ids` tokenizes a file (a
`TextSource`: a file, a byte range of it, or a member of a zip archive)
chunk by chunk into a file of `uint8` ids (vocabularies of at most 256
ids), `uint16` (at most 65,536) or `int32`, and returns it as a read-only
`np.memmap`. Every later call with the same tokenizer (its fingerprint:
class, configuration and vocabulary) and an unchanged source (same size
and modification time) maps the file again in milliseconds; a changed
source or another tokenizer rebuilds it. Vocabularies counted from files
(`keras_txl.data.make_tokenizer`) and a text file's split offsets are
cached too (`cached_json`).

Files are written under a temporary name and renamed into place, the
metadata file last: a run killed while tokenizing leaves no file that a
later run trusts. An empty text is never cached. Inside
`token_cache_writes().active()` new files stay under their temporary
names until `commit()` (`keras-txl train` commits with its first
checkpoint: a run that fails before leaves no entry), and with
`store=False` nothing is written at all: the ids are tokenized into
memory (`keras-txl evaluate --corpus FILE`, a one-off text).
`token_cache_entries()` and `clear_token_cache()` list and free the cache
(`keras-txl cache --list`, `--clear`). The folder is `token_cache_dir`, else
`$KERAS_TXL_CACHE`, else `$KERAS_HOME/keras_txl_cache`
(`~/.keras/keras_txl_cache`): `token_cache_folder()`.
"""

import contextlib
import contextvars
import hashlib
import json
import os
import shutil
import tempfile

import numpy as np

from keras_txl.data.text_source import CorpusError
from keras_txl.data.text_source import TextSource
from keras_txl.data.text_source import describe_source
from keras_txl.data.text_source import source_identity
from keras_txl.data.text_source import source_stat

# Bumped when the bytes written for a given text and tokenizer change.
FORMAT_VERSION = 1
ENVIRONMENT_VARIABLE = "KERAS_TXL_CACHE"


_PENDING = contextvars.ContextVar("keras_txl_token_cache", default=None)


def token_cache_writes(store=True, log=None):
    """The token cache's writes of one run, to keep or drop together.

    Args:
        store: bool. Write the cache (committed later), or not at all.
        log: optional function that prints a line: the cache's folder,
            when this creates it.

    Returns:
        An object with `active()` (a context manager: the cache's writes
        inside it are this object's), `commit()` (renames them into
        place, metadata last) and `discard()` (removes what was not
        committed).

    Example:

    >>> import os, tempfile
    >>> from keras_txl import data
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "corpus.txt")
    >>> _ = open(path, "w").write("to be or not to be\\n")
    >>> cache = os.path.join(folder, "cache")
    >>> writes = token_cache_writes()
    >>> with writes.active():
    ...     corpus = data.load_corpus(
    ...         "builtin", path, 0.25, token_cache_dir=cache
    ...     )
    ...     tokenizer = data.make_tokenizer(
    ...         "char", corpus, token_cache_dir=cache
    ...     )
    >>> all(name.endswith(".partial") for name in os.listdir(cache))
    True
    >>> writes.commit()
    >>> sorted(e["kind"] for e in token_cache_entries(cache))
    ['split', 'vocabulary']
    """
    return PendingWrites(store, log)


class PendingWrites:
    """What `token_cache_writes` returns. Inside `active()`, every new
    file of the cache (token ids, vocabulary, split offsets) is written
    under a temporary name in the cache folder;
    `commit()` renames them into place (metadata last), `discard()`
    removes them and a cache folder created for them. With
    `store=False`, nothing is written (not even the folder): token ids
    are tokenized into memory, existing entries are still read."""

    def __init__(self, store=True, log=None):
        self.store = bool(store)
        self.log = log
        self.files = []  # (temporary, final)
        self.created = []  # cache folders made for these writes

    @contextlib.contextmanager
    def active(self):
        """Routes the cache's writes of this block through `self`."""
        token = _PENDING.set(self)
        try:
            yield self
        finally:
            _PENDING.reset(token)

    def commit(self):
        """Renames the files written into place, metadata last."""
        files = sorted(self.files, key=lambda pair: pair[1].endswith("json"))
        for temporary, final in files:
            os.replace(temporary, final)
        self.files, self.created = [], []

    def discard(self):
        """Removes the files written, and the cache folder if this made it
        and it is empty."""
        for temporary, _ in self.files:
            with contextlib.suppress(OSError):
                os.remove(temporary)
        for folder in reversed(self.created):
            with contextlib.suppress(OSError):
                os.rmdir(folder)  # only while empty
        self.files, self.created = [], []


def token_cache_folder(token_cache_dir=None):
    """The folder of the token cache (not created): `token_cache_dir`, else
    `$KERAS_TXL_CACHE`, else `$KERAS_HOME/keras_txl_cache`
    (`~/.keras/keras_txl_cache`)."""
    return cache_folder(token_cache_dir, create=False)


def cache_folder(token_cache_dir=None, create=True):
    """The folder of the token cache, created if needed.

    Args:
        token_cache_dir: optional folder; `None`: `$KERAS_TXL_CACHE`, else
            `$KERAS_HOME/keras_txl_cache` (`~/.keras/keras_txl_cache`),
            else (not writable) one in the temporary folder.
        create: bool. Create the folder if it does not exist (inside a
            `PendingWrites(store=False)`, never).

    Returns:
        The folder, as `str`.
    """
    pending = _PENDING.get()
    if pending is not None and not pending.store:
        create = False
    if token_cache_dir is None:
        token_cache_dir = os.environ.get(ENVIRONMENT_VARIABLE)
    if token_cache_dir is None:
        home = os.environ.get("KERAS_HOME") or os.path.join(
            os.path.expanduser("~"), ".keras"
        )
        token_cache_dir = os.path.join(home, "keras_txl_cache")
        if create and not _can_create(token_cache_dir):
            token_cache_dir = os.path.join(
                tempfile.gettempdir(), ".keras", "keras_txl_cache"
            )
    token_cache_dir = os.fspath(token_cache_dir)
    if create and not os.path.isdir(token_cache_dir):
        missing = token_cache_dir
        while not os.path.exists(os.path.dirname(missing)):
            missing = os.path.dirname(missing)
        os.makedirs(token_cache_dir, exist_ok=True)
        if pending is not None:
            pending.created.append(missing)
            if pending.log is not None:
                pending.log(
                    f"Token cache: {token_cache_dir} (new; `keras-txl cache "
                    "--list` shows it, `keras-txl cache --clear` frees it, "
                    f"${ENVIRONMENT_VARIABLE} moves it)."
                )
    return token_cache_dir


def _can_create(folder):
    """Whether `folder` exists or could be made (its nearest existing
    ancestor is writable)."""
    while not os.path.exists(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent
    return os.access(folder, os.W_OK)


def id_dtype(vocabulary_size):
    """The smallest dtype of the cache for ids in `[0, vocabulary_size)`:
    `uint8`, `uint16` or `int32`."""
    if vocabulary_size <= 1 << 8:
        return np.dtype(np.uint8)
    if vocabulary_size <= 1 << 16:
        return np.dtype(np.uint16)
    return np.dtype(np.int32)


def cached_ids(
    sources, fingerprint, dtype, pieces, token_cache_dir=None, log=None
):
    """The ids of `sources`, computed once and then memory-mapped.

    Args:
        sources: the `TextSource`s of one text, read one after the other.
        fingerprint: str. What else the ids depend on (the tokenizer's).
        dtype: the dtype of the file (`id_dtype`).
        pieces: function of a source that yields its ids, piece by piece.
        token_cache_dir: optional cache folder (see `cache_folder`).
        log: optional function that prints a line when the cache is built.

    Returns:
        A read-only 1-D `np.memmap` of `dtype` (an empty array for an
        empty text).

    Raises:
        CorpusError: an id does not fit `dtype`.
    """
    sources = [s for s in sources if s.stop is None or s.start < s.stop]
    if not sources:
        return np.zeros(0, dtype)  # an empty part: nothing to cache
    identity = [source_identity(source) for source in sources]
    stat = [source_stat(source) for source in sources]
    if len(sources) == 1:  # the key of a single source, as ever
        identity, stat = identity[0], stat[0]
    key = _key({"ids": identity, "tokenizer": fingerprint})
    pending = _PENDING.get()
    folder = cache_folder(token_cache_dir)
    ids_path = os.path.join(folder, f"{key}.{dtype.name}.ids")
    meta_path = os.path.join(folder, f"{key}.json")
    meta = _read_json(meta_path)
    fresh = (
        meta is not None
        and meta.get("stat") == stat
        and meta.get("tokenizer") == fingerprint
        and meta.get("dtype") == dtype.name
        and os.path.isfile(ids_path)
        and os.path.getsize(ids_path) == meta["count"] * dtype.itemsize
    )
    if fresh:
        if meta["count"] == 0:
            return np.zeros(0, dtype)
        return np.memmap(
            ids_path, dtype=dtype, mode="r", shape=(meta["count"],)
        )
    where = describe_source(sources[0])
    if len(sources) > 1:
        where += f" and {len(sources) - 1} more"

    def checked_pieces():
        for source in sources:
            yield from _checked_pieces(pieces(source), dtype)

    if pending is not None and not pending.store:
        if log is not None:
            log(f"Tokenizing {where} (not cached).")
        parts = [np.asarray(ids).astype(dtype) for ids in checked_pieces()]
        return np.concatenate(parts) if parts else np.zeros(0, dtype)
    if log is not None:
        log(f"Tokenizing {where} into {ids_path} (once).")
    count, temporary = _write_ids(checked_pieces(), ids_path, dtype)
    if count == 0:  # never cache an empty text
        os.remove(temporary)
        return np.zeros(0, dtype)
    meta = {
        "source": identity,
        "stat": stat,
        "tokenizer": fingerprint,
        "dtype": dtype.name,
        "count": count,
    }
    if pending is None:
        os.replace(temporary, ids_path)
        path = ids_path
    else:
        pending.files.append((temporary, ids_path))
        path = temporary  # the mapping stays valid once renamed
    _write_json(meta_path, meta)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


def cached_json(name, parameters, sources, compute, token_cache_dir=None):
    """`compute()` (a JSON value computed from `sources`), cached until a
    source changes.

    Args:
        name: str. What is computed (part of the cache key).
        parameters: JSON dict of what else the value depends on.
        sources: the `TextSource`s the value is computed from.
        compute: function of no argument that returns the value.
        token_cache_dir: optional cache folder.

    Returns:
        The value, from the cache when `sources` have the size and
        modification time they had when it was computed.
    """
    sources = list(sources)
    key = _key(
        {
            "name": name,
            "parameters": parameters,
            "sources": [source_identity(source) for source in sources],
            "format": FORMAT_VERSION,
        }
    )
    path = os.path.join(cache_folder(token_cache_dir), f"{key}.{name}.json")
    stats = [source_stat(source) for source in sources]
    meta = _read_json(path)
    if meta is not None and meta.get("stats") == stats:
        return meta["value"]
    value = compute()
    _write_json(path, {"stats": stats, "value": value})
    return value


def _write_ids(pieces, ids_path, dtype):
    """Writes the ids of `pieces` into a temporary file beside `ids_path`;
    returns `(count, temporary)`."""
    folder = os.path.dirname(ids_path)
    handle, temporary = tempfile.mkstemp(
        prefix=os.path.basename(ids_path) + ".", suffix=".partial", dir=folder
    )
    count = 0
    try:
        with os.fdopen(handle, "wb") as file:
            for ids in pieces:
                file.write(ids.astype(dtype).tobytes())
                count += int(ids.size)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return count, temporary


def _checked_pieces(pieces, dtype):
    """The ids of `pieces`, checked to fit `dtype`."""
    for ids in pieces:
        ids = np.asarray(ids)
        if ids.size and (ids.min() < 0 or ids.max() > np.iinfo(dtype).max):
            raise CorpusError(
                f"Token ids in [{ids.min()}, {ids.max()}] do not fit "
                f"the cache's {dtype.name}: the tokenizer's "
                "vocabulary_size() is smaller than its ids."
            )
        yield ids


def _key(payload):
    text = json.dumps(payload, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[
        :24
    ]


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError):
        return None


def _write_json(path, value):
    """Writes JSON under a temporary name, then renames it into place (or
    leaves the renaming to the active `PendingWrites`; with
    `store=False`, writes nothing)."""
    pending = _PENDING.get()
    if pending is not None and not pending.store:
        return
    handle, temporary = tempfile.mkstemp(
        prefix=os.path.basename(path) + ".",
        suffix=".partial",
        dir=os.path.dirname(path),
    )
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(value, file)
        if pending is None:
            os.replace(temporary, path)
        else:
            pending.files.append((temporary, path))
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def token_cache_entries(token_cache_dir=None):
    """What the token cache holds, one dict per entry: `kind` (`"ids"`,
    `"vocabulary"`, `"split"` and other computed values, or
    `"unfinished"`: a temporary file of a process that was killed),
    `files` (paths), `bytes`, and for token ids `source` (the text's
    file and byte range) and `tokens`. Empty if the folder does not
    exist (it is not created)."""
    folder = cache_folder(token_cache_dir, create=False)
    if not os.path.isdir(folder):
        return []
    names = sorted(os.listdir(folder))
    entries, claimed = [], set()
    for name in names:
        path = os.path.join(folder, name)
        if name.endswith(".partial"):
            continue
        key, _, rest = name.partition(".")
        if rest == "json":  # token ids: KEY.json and KEY.DTYPE.ids
            meta = _read_json(path) or {}
            ids = [
                n
                for n in names
                if n.startswith(f"{key}.") and n.endswith(".ids")
            ]
            files = [path] + [os.path.join(folder, n) for n in ids]
            claimed.update([name, *ids])
            source = meta.get("source", {})
            more = ""
            if isinstance(source, list):  # several files, one text
                more = f" and {len(source) - 1} more"
                source = source[0] if source else {}
            entries.append(
                {
                    "kind": "ids",
                    "files": files,
                    "bytes": sum(_size(f) for f in files),
                    "source": describe_source(
                        TextSource(
                            source.get("path", "?"),
                            source.get("start", 0),
                            source.get("stop"),
                            source.get("member"),
                        )
                    )
                    + more,
                    "tokens": meta.get("count"),
                }
            )
        elif rest.endswith(".json"):
            claimed.add(name)
            entries.append(
                {
                    "kind": rest[: -len(".json")],
                    "files": [path],
                    "bytes": _size(path),
                }
            )
    for name in names:
        if name not in claimed:
            path = os.path.join(folder, name)
            kind = "unfinished" if name.endswith(".partial") else "other"
            entries.append(
                {"kind": kind, "files": [path], "bytes": _size(path)}
            )
    return entries


def clear_token_cache(token_cache_dir=None):
    """Deletes the token cache's folder and everything in it. Returns
    `(files, bytes)` deleted."""
    folder = cache_folder(token_cache_dir, create=False)
    if not os.path.isdir(folder):
        return 0, 0
    count = size = 0
    for root, _, names in os.walk(folder):
        for name in names:
            count += 1
            size += _size(os.path.join(root, name))
    shutil.rmtree(folder)
    return count, size


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
