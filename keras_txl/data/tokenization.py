"""Tokenizers for language modeling, and a corpus's token ids.

`make_tokenizer(kind, corpus)` builds a Keras tokenizer layer from a text
or a corpus; `corpus_ids` gives the ids of a corpus's parts (files through
the token cache); `encode` turns a text into one `np.int32` array of ids,
`decode` ids back into text. The tokenizers are
`keras_hub.tokenizers.Tokenizer` layers, so they serialize with
`get_config` (the word vocabulary as a keras-hub asset) and work inside
`tf.data`:

- `"byte"`: `keras_txl.models.Utf8ByteTokenizer(lowercase=False)` (keras-hub's,
  savable in a preset): the UTF-8 bytes of the text, 256 ids (enwik8 in
  the Transformer-XL paper).
- `"char"`: `keras_txl.models.CharacterTokenizer`: one id per distinct
  character of the text, in code point order, then `<unk>`, the id of
  every other character (66 ids for tinyshakespeare's 65 characters).
- `"word"`: `keras_hub.tokenizers.WordPieceTokenizer` over whole words:
  the text split on whitespace, as the Transformer-XL authors prepare
  WikiText-103 (punctuation is not split off: the corpus is expected to be
  tokenized already, as WikiText is). Ids: `<unk>` = 0, `<eos>` = 1, then
  the words, most frequent first (ties: first occurrence first). `encode`
  appends `<eos>` at the end of every line, as the authors do; `decode`
  turns it back into a newline. The tokenizer itself takes words, not raw
  text (`tokenizer(text.split())`); `TransformerXLCausalLMPreprocessor`
  splits text into words first (`split_words` of
  `keras_txl.models.transformer_xl_tokenizer`), so that a model with it
  is text in, text out: `lm.generate("the quick")`.

Example:

>>> tokenizer = make_tokenizer("char", "hello world")
>>> ids = encode(tokenizer, "hello")
>>> ids.tolist(), decode(tokenizer, ids)
([3, 2, 4, 4, 5], 'hello')
"""

import collections
import hashlib
import json
import sys
from typing import NamedTuple

import keras_hub
import numpy as np

from keras_txl.data.text_source import Corpus
from keras_txl.data.text_source import CorpusError
from keras_txl.data.text_source import TextSource
from keras_txl.data.text_source import part_sources
from keras_txl.data.text_source import read_chunks
from keras_txl.data.text_source import text_chunks
from keras_txl.data.token_cache import FORMAT_VERSION
from keras_txl.data.token_cache import cached_ids
from keras_txl.data.token_cache import cached_json
from keras_txl.data.token_cache import id_dtype
from keras_txl.models import CharacterTokenizer
from keras_txl.models import Utf8ByteTokenizer
from keras_txl.models.transformer_xl_tokenizer import END_OF_LINE_TOKEN
from keras_txl.models.transformer_xl_tokenizer import is_whole_word_tokenizer
from keras_txl.models.transformer_xl_tokenizer import join_words
from keras_txl.utils.validation import check_optional_positive_int

KINDS = ("byte", "char", "word")
UNKNOWN_TOKEN = "<unk>"
# `WordPieceTokenizer` maps longer words to its `oov_token`.
MAX_WORD_BYTES = 100
# Words per chunk in `encode`, to bound the memory of word lists.
_WORDS_PER_CHUNK = 1 << 20


def make_tokenizer(
    kind, corpus=None, vocabulary_size=None, token_cache_dir=None
):
    """Builds a tokenizer whose vocabulary comes from a text or a corpus.

    Args:
        kind: `"byte"`, `"char"` or `"word"` (see the module docstring).
        corpus: what the vocabulary is counted over (unused for
            `"byte"`): a text (`str`); a `Corpus` of
            `keras_txl.data.load_corpus`: its three parts (as the
            Transformer-XL authors count enwik8 and text8, so that
            validation and test text have no unknown characters), One
            Billion Word's training shards, or for `"word"` its own
            `word_list`; or a list of parts. Files are read in chunks
            (text larger than memory works) and their vocabulary is cached
            in the token cache; each file's words are counted apart (a
            file that does not end with whitespace does not join its last
            word to the next one's first).
        vocabulary_size: optional int, the largest vocabulary allowed.
            `"byte"`: 256 or `None`. `"char"`: `None` keeps every character
            plus `<unk>`, the id of every other character (a prompt or a
            text to score may hold characters the corpus lacks); an int
            keeps the `vocabulary_size - 1` most frequent characters plus
            `<unk>`. `"word"`: `None` keeps every
            word; an int keeps `<unk>`, `<eos>` and the
            `vocabulary_size - 2` most frequent words.
        token_cache_dir: optional token cache folder.

    Returns:
        A `keras_hub.tokenizers.Tokenizer`; `tokenizer.vocabulary_size()`
        is the `vocabulary_size` the model needs.

    Raises:
        ValueError: unknown `kind`, or a bad `vocabulary_size`.
        CorpusError: the text is empty or has no words.

    Example:

    >>> make_tokenizer("byte").vocabulary_size()
    256
    >>> make_tokenizer("word", "a b b\\nc").get_vocabulary()
    ['<unk>', '<eos>', 'b', 'a', 'c']
    """
    if kind not in KINDS:
        raise ValueError(
            f"`kind` must be one of {KINDS}. Received: kind={kind!r}"
        )
    vocabulary_size = check_optional_positive_int(
        "vocabulary_size", vocabulary_size
    )
    if kind == "byte":
        if vocabulary_size not in (None, 256):
            raise ValueError(
                "A byte tokenizer has 256 ids: `vocabulary_size` must be "
                f"None or 256. Received: vocabulary_size={vocabulary_size}"
            )
        return Utf8ByteTokenizer(lowercase=False)
    if isinstance(corpus, Corpus):
        if kind == "word" and corpus.word_list is not None:
            return _word_list_tokenizer(corpus.word_list, vocabulary_size)
        corpus = [getattr(corpus, name) for name in corpus.counted]
    elif isinstance(corpus, TextSource):
        corpus = [corpus]
    if isinstance(corpus, (list, tuple)):
        texts = [isinstance(part, str) for part in corpus]
        if all(texts):
            corpus = "".join(corpus)  # text in memory
        elif any(texts):
            raise ValueError(
                "`corpus` must be a text, a `Corpus` or its parts, either "
                "all text in memory or all files. Received a mix."
            )
        else:
            sources = [s for part in corpus for s in part_sources(part)]
            return _counted_tokenizer(
                kind, sources, vocabulary_size, token_cache_dir
            )
    if not isinstance(corpus, str) or not corpus:
        raise CorpusError(
            f"A {kind} tokenizer needs a non-empty training text for its "
            f"vocabulary. Received: {type(corpus).__name__} of length "
            f"{len(corpus) if isinstance(corpus, str) else 0}."
        )
    if kind == "char":
        return _character_tokenizer(_character_counts(corpus), vocabulary_size)
    return _word_tokenizer_from_counts(
        collections.Counter(corpus.split()), vocabulary_size
    )


class CorpusIds(NamedTuple):
    """A tokenizer and the ids of the train, validation and test parts
    (1-D arrays: `np.memmap`s of the token cache for files)."""

    tokenizer: object
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray


def corpus_ids(tokenizer, corpus, token_cache_dir=None, log=None):
    """The token ids of a corpus's parts: those of a file tokenized once
    into the token cache and memory-mapped, so a second run starts in
    seconds and a corpus costs 1, 2 or 4 bytes per token however large it
    is; those of a text in memory (the built-in corpus) encoded.

    Args:
        tokenizer: a tokenizer of `make_tokenizer` (or any `encode` takes).
        corpus: a `Corpus` of `keras_txl.data.load_corpus`, or one part of
            it (`corpus.valid`).
        token_cache_dir: optional token cache folder.
        log: optional function that prints a line when a file is
            tokenized.

    Returns:
        For a `Corpus`, `CorpusIds(tokenizer, train, valid, test)`; for a
        part, its 1-D ids: what `encode(tokenizer, text)` gives for its
        text (a read-only `np.memmap` of `uint8`, `uint16` or `int32` for
        files; empty for an empty part).

    Raises:
        CorpusError: a file cannot be read or decoded, or holds
            characters outside a closed character vocabulary.

    Example:

    >>> from keras_txl.data import load_corpus
    >>> corpus = load_corpus("builtin", valid_fraction=0.1)
    >>> tokenizer = make_tokenizer("char", corpus)
    >>> ids = corpus_ids(tokenizer, corpus)
    >>> tokenizer.vocabulary_size() > 50, len(ids.valid) > 10_000
    (True, True)
    """
    if isinstance(corpus, Corpus):
        return CorpusIds(
            tokenizer,
            *(
                corpus_ids(tokenizer, part, token_cache_dir, log)
                for part in corpus
            ),
        )
    if isinstance(corpus, str):
        return encode(tokenizer, corpus)
    return cached_ids(
        part_sources(corpus),
        tokenizer_fingerprint(tokenizer),
        id_dtype(int(tokenizer.vocabulary_size())),
        lambda source: _encode_pieces(tokenizer, source),
        token_cache_dir,
        log,
    )


def tokenizer_fingerprint(tokenizer):
    """sha256 of a tokenizer's class, configuration and vocabulary: two
    tokenizers with the same fingerprint give the same ids."""
    config = dict(tokenizer.get_config())
    for name in ("name", "trainable", "config_file"):
        config.pop(name, None)
    vocabulary = None
    if hasattr(tokenizer, "get_vocabulary"):
        vocabulary = list(tokenizer.get_vocabulary())
    payload = {
        "class": f"{type(tokenizer).__module__}.{type(tokenizer).__name__}",
        "config": config,
        "vocabulary": vocabulary,
        "format": FORMAT_VERSION,
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def encode(tokenizer, text):
    """Token ids of a whole corpus, as one array.

    Runs on the whole text at once, with NumPy for the byte, code point and
    character tokenizers and a dict lookup for the word tokenizers of
    `make_tokenizer` (same ids as the tokenizer): tinyshakespeare (1.1 MB)
    takes under 0.2 s with each kind. Other keras-hub tokenizers are called
    on the text as is.

    Args:
        tokenizer: a tokenizer from `make_tokenizer`, a
            `keras_hub.tokenizers.ByteTokenizer` or
            `UnicodeCodepointTokenizer`, a `CharacterTokenizer`, or any
            keras-hub tokenizer.
        text: str (or bytes, for the byte tokenizer).

    Returns:
        A 1-D `np.int32` array of token ids. For a word tokenizer with an
        `<eos>` token, `<eos>` ends every line.

    Raises:
        CorpusError: the text holds characters outside the vocabulary of a
            `CharacterTokenizer` without `oov_token`.

    Example:

    >>> encode(make_tokenizer("byte"), "hé").tolist()
    [104, 195, 169]
    """
    if isinstance(text, bytes) and not is_plain_byte_tokenizer(tokenizer):
        text = text.decode("utf-8", "surrogateescape")
    if is_plain_byte_tokenizer(tokenizer):
        if isinstance(text, str):
            text = text.encode("utf-8", "surrogateescape")
        ids = np.frombuffer(text, np.uint8)
    elif _is_plain_codepoint_tokenizer(tokenizer):
        ids = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), "<u4")
        if tokenizer.vocabulary_size():
            ids = np.minimum(ids, tokenizer.vocabulary_size() - 1)
    elif isinstance(tokenizer, CharacterTokenizer):
        try:
            ids = tokenizer.tokenize(text)
        except ValueError as error:
            raise CorpusError(str(error)) from error
    elif is_word_tokenizer(tokenizer):
        ids = _encode_words(tokenizer, text)
    else:
        ids = tokenizer.tokenize(text)
        if hasattr(ids, "flat_values"):  # a tf.RaggedTensor
            ids = ids.flat_values
        ids = np.asarray(ids).reshape(-1)
    return np.asarray(ids).astype(np.int32)


def decode(tokenizer, token_ids):
    """Text of token ids: the inverse of `encode`.

    `decode(tokenizer, encode(tokenizer, text)) == text` for byte and
    character tokenizers (for characters in the vocabulary). For word
    tokenizers the words are joined by single spaces and `<eos>` becomes a
    newline.

    Args:
        tokenizer: the tokenizer the ids come from.
        token_ids: 1-D ids (list, array or tensor).

    Returns:
        The text, as `str`.

    Example:

    >>> tokenizer = make_tokenizer("word", "the cat\\nthe dog")
    >>> decode(tokenizer, encode(tokenizer, "the dog\\nthe cat"))
    'the dog\\nthe cat\\n'
    """
    if hasattr(token_ids, "flat_values"):  # a tf.RaggedTensor
        token_ids = token_ids.flat_values
    ids = np.asarray(token_ids).reshape(-1).astype(np.int64)
    if is_plain_byte_tokenizer(tokenizer):
        if ids.size and (ids.min() < 0 or ids.max() > 255):
            raise ValueError(
                "Byte token ids must be in [0, 256). Received ids in "
                f"[{ids.min()}, {ids.max()}]."
            )
        return bytes(ids.astype(np.uint8)).decode("utf-8", "surrogateescape")
    if is_word_tokenizer(tokenizer):
        return join_words(tokenizer.get_vocabulary(), ids)
    text = tokenizer.detokenize(ids)
    tf = sys.modules.get("tensorflow")  # no TensorFlow, no tf.Tensor
    if tf is not None and isinstance(text, tf.Tensor):
        text = text.numpy()
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text


def _character_counts(text):
    """Occurrences of every code point of `text` (index: code point)."""
    codepoints = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), "<u4")
    return np.bincount(codepoints)


def _character_tokenizer(counts, vocabulary_size=None):
    """The `"char"` tokenizer of `make_tokenizer` from code point counts
    (`character_counts`, summed over the chunks of a text)."""
    counts = np.asarray(counts)
    present = np.flatnonzero(counts)  # ascending code points
    if vocabulary_size is None:
        # `<unk>` last: the characters' ids are those of a vocabulary
        # without it (as keras-txl built them before it reserved one).
        return CharacterTokenizer(
            vocabulary=[chr(c) for c in present] + [UNKNOWN_TOKEN],
            oov_token=UNKNOWN_TOKEN,
        )
    if vocabulary_size < 2:
        raise ValueError(
            "A capped character vocabulary holds `<unk>` and at least one "
            "character: `vocabulary_size` must be >= 2. Received: "
            f"vocabulary_size={vocabulary_size}"
        )
    # Most frequent first; a stable sort keeps code point order on ties.
    order = np.argsort(-counts[present], kind="stable")
    kept = np.sort(present[order[: vocabulary_size - 1]])
    return CharacterTokenizer(
        vocabulary=[chr(c) for c in kept] + [UNKNOWN_TOKEN],
        oov_token=UNKNOWN_TOKEN,
    )


def _word_tokenizer_from_counts(counts, vocabulary_size=None):
    """The `"word"` tokenizer of `make_tokenizer` from a `Counter` of the
    whitespace words (updated chunk by chunk, in text order, so that ties
    keep the order of first occurrence)."""
    reserved = [UNKNOWN_TOKEN, END_OF_LINE_TOKEN]
    words = [
        word
        for word, _ in counts.most_common()
        if word not in reserved
        and len(word.encode("utf-8", "surrogatepass")) <= MAX_WORD_BYTES
    ]
    if not words:
        raise CorpusError(
            "The text for the word vocabulary has no words (only "
            "whitespace). Pass the training text."
        )
    if vocabulary_size is not None:
        if vocabulary_size <= len(reserved):
            raise ValueError(
                f"A word vocabulary holds {reserved} and at least one word: "
                f"`vocabulary_size` must be > {len(reserved)}. Received: "
                f"vocabulary_size={vocabulary_size}"
            )
        words = words[: vocabulary_size - len(reserved)]
    return _word_tokenizer(reserved + words)


def _word_list_tokenizer(path, vocabulary_size):
    """The `"word"` tokenizer of a list of words, one a line (the first
    column), most frequent first (One Billion Word's `1b_word_vocab.txt`):
    `<unk>`, `<eos>`, then the `vocabulary_size - 2` first words; the
    list's own `<S>`, `</S>` and `<UNK>` are these two."""
    reserved = [UNKNOWN_TOKEN, END_OF_LINE_TOKEN]
    skipped = {"<S>", "</S>", "<UNK>", *reserved}
    words = []
    with open(path, encoding="utf-8") as file:
        for line in file:
            fields = line.split()
            if fields and fields[0] not in skipped:
                words.append(fields[0])
    if vocabulary_size is not None:
        words = words[: max(vocabulary_size - 2, 1)]
    return _word_tokenizer(reserved + words)


def _counted_tokenizer(kind, sources, vocabulary_size, token_cache_dir):
    """The `kind` tokenizer of the text of `sources` (files), counted chunk
    by chunk; its vocabulary is cached until a source changes."""

    def count():
        if kind == "char":
            counts = np.zeros(0, np.int64)
            for source in sources:
                for text, _ in text_chunks(source):
                    chunk = _character_counts(text)
                    if len(chunk) > len(counts):
                        counts = np.pad(counts, (0, len(chunk) - len(counts)))
                    counts[: len(chunk)] += chunk
            if not counts.any():
                raise CorpusError(
                    "A char tokenizer needs a non-empty training text for "
                    "its vocabulary; the corpus files are empty."
                )
            tokenizer = _character_tokenizer(counts, vocabulary_size)
        else:
            counts = collections.Counter()
            for source in sources:
                for text, _ in text_chunks(source, cut="whitespace"):
                    counts.update(text.split())
            tokenizer = _word_tokenizer_from_counts(counts, vocabulary_size)
        return {
            "vocabulary": tokenizer.get_vocabulary(),
            "oov_token": getattr(tokenizer, "oov_token", None),
        }

    value = cached_json(
        "vocabulary",
        # `unknown`: vocabularies cached before every character
        # vocabulary reserved `<unk>` are not reused.
        {
            "kind": kind,
            "vocabulary_size": vocabulary_size,
            "unknown": UNKNOWN_TOKEN,
        },
        sources,
        count,
        token_cache_dir,
    )
    if kind == "char":
        return CharacterTokenizer(
            vocabulary=value["vocabulary"], oov_token=value["oov_token"]
        )
    return _word_tokenizer(value["vocabulary"])


def _word_tokenizer(vocabulary):
    """The `"word"` tokenizer of `make_tokenizer` with this vocabulary
    (`<unk>` first, then `<eos>` if lines end with it, then the words)."""
    # A space never occurs inside a whitespace-split word, so with it as
    # the suffix indicator no word is ever cut into pieces: every word is
    # either in the vocabulary or `<unk>`.
    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=list(vocabulary),
        lowercase=False,
        strip_accents=False,
        split=False,
        suffix_indicator=" ",
        oov_token=UNKNOWN_TOKEN,
    )


def is_plain_byte_tokenizer(tokenizer):
    """Whether `tokenizer` is keras-hub's `ByteTokenizer` as is (bytes
    to ids, no lowercasing)."""
    return (
        isinstance(tokenizer, keras_hub.tokenizers.ByteTokenizer)
        and not tokenizer.lowercase
        and tokenizer.normalization_form is None
        and not tokenizer.sequence_length
    )


def _is_plain_codepoint_tokenizer(tokenizer):
    return (
        isinstance(tokenizer, keras_hub.tokenizers.UnicodeCodepointTokenizer)
        and not tokenizer.lowercase
        and tokenizer.normalization_form is None
        and tokenizer.input_encoding.upper() in ("UTF-8", "UTF8")
        and not tokenizer.sequence_length
    )


def is_word_tokenizer(tokenizer):
    """Whether `tokenizer` splits whole words and pads no sequence."""
    return is_whole_word_tokenizer(tokenizer) and not tokenizer.sequence_length


def _encode_words(tokenizer, text, last_line_ends=True):
    """Whitespace words of each line, then `<eos>`, as ids.

    `last_line_ends=False` gives a text that does not end with a newline
    (a chunk cut at a space) no `<eos>` after its last line.

    For the tokenizers of `make_tokenizer` (space suffix indicator, no
    case or accent folding) the ids are looked up in a dict, which gives
    what `WordPieceTokenizer` gives (a word is in the vocabulary or is
    `<unk>`; words over 100 bytes are `<unk>`), about 20 times faster than
    its Python path.
    Other pre-split word tokenizers run their own `tokenize`.
    """
    vocabulary = tokenizer.get_vocabulary()
    has_end_of_line = END_OF_LINE_TOKEN in vocabulary
    if (
        tokenizer.suffix_indicator == " "
        and not tokenizer.lowercase
        and not tokenizer.strip_accents
    ):
        index = {
            word: i
            for i, word in enumerate(vocabulary)
            if len(word.encode("utf-8", "surrogatepass")) <= MAX_WORD_BYTES
        }
        unknown = tokenizer.token_to_id(tokenizer.oov_token)

        def tokenize(words):
            ids = (index.get(word, unknown) for word in words)
            return np.fromiter(ids, np.int64, len(words))

    else:

        def tokenize(words):
            return np.asarray(tokenizer.tokenize(words)).reshape(-1)

    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()  # a final newline ends the last line, no new line
    ends_open = not last_line_ends and not text.endswith("\n")
    open_line = len(lines) - 1 if ends_open else -1
    chunks = []
    words = []
    for number, line in enumerate(lines):
        words.extend(line.split())
        if has_end_of_line and number != open_line:
            words.append(END_OF_LINE_TOKEN)
        if len(words) >= _WORDS_PER_CHUNK:
            chunks.append(tokenize(words))
            words = []
    chunks.append(tokenize(words))
    return np.concatenate(chunks)


def _encode_pieces(tokenizer, source):
    """The ids of a `TextSource`, chunk by chunk, as `encode` gives them
    for its whole text."""
    if is_plain_byte_tokenizer(tokenizer):
        for chunk in read_chunks(source):
            yield np.frombuffer(chunk, np.uint8)
    elif is_word_tokenizer(tokenizer):
        for text, ends_line in text_chunks(source, cut="whitespace"):
            yield _encode_words(tokenizer, text, last_line_ends=ends_line)
    elif isinstance(
        tokenizer,
        (
            CharacterTokenizer,
            keras_hub.tokenizers.ByteTokenizer,
            keras_hub.tokenizers.UnicodeCodepointTokenizer,
        ),
    ):
        for text, _ in text_chunks(source):
            yield encode(tokenizer, text)
    else:
        # Tokenizers that may merge across any cut (subwords): whole lines.
        for text, _ in text_chunks(source, cut="whitespace"):
            yield encode(tokenizer, text)
