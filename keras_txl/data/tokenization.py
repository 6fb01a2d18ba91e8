"""Tokenizers for language modeling, and fast whole-corpus encoding.

`make_tokenizer(kind, text)` builds a Keras tokenizer layer; `encode` turns
a whole corpus into one `np.int32` array of ids; `decode` turns ids back
into text. The tokenizers are `keras_hub.tokenizers.Tokenizer` layers, so
they serialize with `get_config` (the word vocabulary as a keras-hub asset)
and work inside `tf.data`:

- `"byte"`: `keras_txl.data.ByteTokenizer(lowercase=False)` (keras-hub's,
  savable in a preset): the
  UTF-8 bytes of the text, 256 ids (enwik8 in the Transformer-XL paper).
- `"char"`: `keras_txl.data.CharacterTokenizer`: one id per distinct
  character of `text`, in code point order (65 for tinyshakespeare).
- `"word"`: `keras_hub.tokenizers.WordPieceTokenizer` over whole words:
  the text split on whitespace, as the Transformer-XL authors prepare
  WikiText-103 (punctuation is not split off: the corpus is expected to be
  tokenized already, as WikiText is). Ids: `<unk>` = 0, `<eos>` = 1, then
  the words, most frequent first (ties: first occurrence first). `encode`
  appends `<eos>` at the end of every line, as the authors do; `decode`
  turns it back into a newline. The tokenizer itself takes words, not raw
  text (`tokenizer(text.split())`); `TransformerXLCausalLMPreprocessor`
  splits text into words first (`keras_txl.models.whole_words`), so that a
  model with it is text in, text out: `lm.generate("the quick")`.

Example:

>>> tokenizer = make_tokenizer("char", "hello world")
>>> ids = encode(tokenizer, "hello")
>>> ids.tolist(), decode(tokenizer, ids)
([3, 2, 4, 4, 5], 'hello')
"""

import collections

import keras_hub
import numpy as np
import tensorflow as tf

from keras_txl.data.byte_tokenizer import ByteTokenizer
from keras_txl.data.character_tokenizer import CharacterTokenizer
from keras_txl.data.corpus_error import CorpusError
from keras_txl.models.whole_words import END_OF_LINE_TOKEN
from keras_txl.models.whole_words import is_whole_word_tokenizer
from keras_txl.models.whole_words import join_words
from keras_txl.utils.validation import check_optional_positive_int

KINDS = ("byte", "char", "word")
UNKNOWN_TOKEN = "<unk>"
# `WordPieceTokenizer` maps longer words to its `oov_token`.
_MAX_WORD_BYTES = 100
# Words per chunk in `encode`, to bound the memory of word lists.
_WORDS_PER_CHUNK = 1 << 20


def make_tokenizer(kind, text=None, vocabulary_size=None):
    """Builds a tokenizer whose vocabulary comes from a training text.

    Args:
        kind: `"byte"`, `"char"` or `"word"` (see the module docstring).
        text: str. The text the vocabulary is built from (unused for
            `"byte"`). To tokenize validation and test text without unknown
            characters, build a `"char"` vocabulary from all splits
            (`train + valid + test`), as the Transformer-XL authors do for
            enwik8 and text8, or cap `vocabulary_size`.
        vocabulary_size: optional int, the largest vocabulary allowed.
            `"byte"`: 256 or `None`. `"char"`: `None` keeps every character
            and makes unknown characters an error; an int keeps the
            `vocabulary_size - 1` most frequent characters plus `<unk>`,
            the id of every other character. `"word"`: `None` keeps every
            word; an int keeps `<unk>`, `<eos>` and the
            `vocabulary_size - 2` most frequent words.

    Returns:
        A `keras_hub.tokenizers.Tokenizer`; `tokenizer.vocabulary_size()`
        is the `vocabulary_size` the model needs.

    Raises:
        ValueError: unknown `kind`, or a bad `vocabulary_size`.
        CorpusError: `text` is empty or has no words.

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
        return ByteTokenizer(lowercase=False)
    if not isinstance(text, str) or not text:
        raise CorpusError(
            f"A {kind} tokenizer needs a non-empty training `text` for its "
            f"vocabulary. Received: {type(text).__name__} of length "
            f"{len(text) if isinstance(text, str) else 0}."
        )
    if kind == "char":
        return _make_character_tokenizer(text, vocabulary_size)
    return _make_word_tokenizer(text, vocabulary_size)


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
    if isinstance(text, bytes) and not _is_plain_byte_tokenizer(tokenizer):
        text = text.decode("utf-8", "surrogateescape")
    if _is_plain_byte_tokenizer(tokenizer):
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
    elif _is_word_tokenizer(tokenizer):
        ids = _encode_words(tokenizer, text)
    else:
        ids = tokenizer.tokenize(text)
        if isinstance(ids, tf.RaggedTensor):
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
    if isinstance(token_ids, tf.RaggedTensor):
        token_ids = token_ids.flat_values
    ids = np.asarray(token_ids).reshape(-1).astype(np.int64)
    if _is_plain_byte_tokenizer(tokenizer):
        if ids.size and (ids.min() < 0 or ids.max() > 255):
            raise ValueError(
                "Byte token ids must be in [0, 256). Received ids in "
                f"[{ids.min()}, {ids.max()}]."
            )
        return bytes(ids.astype(np.uint8)).decode("utf-8", "surrogateescape")
    if _is_word_tokenizer(tokenizer):
        return join_words(tokenizer.get_vocabulary(), ids)
    text = tokenizer.detokenize(ids)
    if isinstance(text, tf.Tensor):
        text = text.numpy()
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text


def _make_character_tokenizer(text, vocabulary_size):
    return character_tokenizer_from_counts(
        character_counts(text), vocabulary_size
    )


def character_counts(text):
    """Occurrences of every code point of `text` (index: code point)."""
    codepoints = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), "<u4")
    return np.bincount(codepoints)


def character_tokenizer_from_counts(counts, vocabulary_size=None):
    """The `"char"` tokenizer of `make_tokenizer` from code point counts
    (`character_counts`, summed over the chunks of a text)."""
    counts = np.asarray(counts)
    present = np.flatnonzero(counts)  # ascending code points
    if vocabulary_size is None:
        return CharacterTokenizer(vocabulary=[chr(c) for c in present])
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


def _make_word_tokenizer(text, vocabulary_size):
    return word_tokenizer_from_counts(
        collections.Counter(text.split()), vocabulary_size
    )


def word_tokenizer_from_counts(counts, vocabulary_size=None):
    """The `"word"` tokenizer of `make_tokenizer` from a `Counter` of the
    whitespace words (updated chunk by chunk, in text order, so that ties
    keep the order of first occurrence)."""
    reserved = [UNKNOWN_TOKEN, END_OF_LINE_TOKEN]
    words = [
        word
        for word, _ in counts.most_common()
        if word not in reserved
        and len(word.encode("utf-8", "surrogatepass")) <= _MAX_WORD_BYTES
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
    return word_tokenizer(reserved + words)


def word_tokenizer(vocabulary):
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


def _is_plain_byte_tokenizer(tokenizer):
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


def _is_word_tokenizer(tokenizer):
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
            if len(word.encode("utf-8", "surrogatepass")) <= _MAX_WORD_BYTES
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
