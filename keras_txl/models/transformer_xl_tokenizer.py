"""The word tokenizers: `TransformerXLTokenizer` (WikiText-103's Moses
rules, for the released models), and what makes the `"word"` tokenizer
of `keras_txl.data.make_tokenizer` (keras-hub's
`WordPieceTokenizer(split=False)`, which takes words, not text) text in,
text out for `TransformerXLCausalLMPreprocessor` and
`keras_txl.data.tokenization.encode`/`decode`: `split_words` and `join_words`.

>>> split_words("the cat\\nsat", END_OF_LINE_TOKEN)
['the', 'cat', '<eos>', 'sat']
>>> join_words(["<unk>", "<eos>", "the", "cat"], [2, 3, 1, 2])
'the cat\\nthe'
"""

import json
import os
import re

import keras
import keras_hub
import numpy as np

from keras_txl.models.vocabulary_tokenizer import VocabularyTokenizer
from keras_txl.utils.missing_extra_error import import_extra
from keras_txl.utils.restricted_unpickler import restricted_loads

VOCABULARY_FILE = "vocabulary.txt"
SETTINGS_FILE = "settings.json"
HF_VOCABULARY_FILE = "vocab.pkl"
HF_TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
HF_CONFIG_FILE = "config.json"
HF_MODEL_TYPE = "transfo-xl"
HF_SCHEME = "hf://"
END_OF_LINE_TOKEN = "<eos>"
# The characters of Python's `str.isspace()`, for RE2 (whose `\s` is ASCII
# only), so that `tf.data` splits text where `str.split()` does.
_WHITESPACE = (
    r"[\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]+"
)
# A decimal separator or a thousands separator between two digits.
_NUMBER_SEPARATOR = re.compile(r"(?<=\d)[,.](?=\d)")
_SPLIT_NUMBER = re.compile(r" @([,.])@ ")


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLTokenizer(VocabularyTokenizer):
    """Word-level tokenizer of the WikiText-103 Transformer-XL models.

    Splits text as HuggingFace's `TransfoXLTokenizer` (transformers 4.44)
    does for the released `transfo-xl-wt103` model, so that its ids are
    those the model was trained on:

    1. the special tokens (`special_tokens`, by default every one of
       `<eos>`, `<unk>` and `<formula>` in the vocabulary) are cut out of
       the text first and kept whole;
    2. every other stretch of text is stripped (lowercased with
       `lower_case=True`), normalized and tokenized by the Moses rules of
       `sacremoses` (`MosesPunctNormalizer`, then `MosesTokenizer` with
       aggressive dash splits and no escaping);
    3. a comma or a period between two digits becomes a token of its own,
       `@,@` or `@.@` (`23,000` -> `23 @,@ 000`), as in WikiText;
    4. each token is looked up in the vocabulary; unknown ones get the id
       of `unknown_token`.

    Nothing is added around the text: the `<eos>` that ends each line in
    the corpus is added by `TransformerXLCausalLMPreprocessor` (or written
    in the text). `detokenize` joins tokens with the Moses detokenizer and
    undoes the number splits.

    The vocabulary is saved as a plain text asset (`vocabulary.txt`, one
    token per line) and the settings as JSON (`settings.json`): nothing is
    pickled. `from_preset` also reads a HuggingFace Transformer-XL folder
    or handle (`from_huggingface`).

    Requires `sacremoses` (`pip install sacremoses`, or the
    `keras-txl[pretrained]` extra) to tokenize and detokenize.

    Args:
        vocabulary: list of str, or the path of a text file with one token
            per line. Tokens must be unique, non-empty and without line
            breaks. `None` leaves the tokenizer without vocabulary (set by
            `load_assets`).
        lower_case: bool. Lowercase the text before splitting it.
        delimiter: `None` (default: the Moses rules above) or `""` (every
            character is a token, HuggingFace's `delimiter=""`).
        language: str. Language of the Moses rules (`"en"`).
        unknown_token: str. Token of out-of-vocabulary words.
        end_token: str. Token that ends a line (also the start and padding
            token of the preprocessor, and the stop token of `generate`).
        special_tokens: list of str or `None`. Tokens never split and
            matched in the text as they are; `None`: those of `<eos>`,
            `<unk>` and `<formula>` that the vocabulary holds, and
            `unknown_token` and `end_token`.
        dtype: str. Integer dtype of the ids.
        **kwargs: other arguments of `keras_hub.tokenizers.Tokenizer`.

    Call arguments:
        inputs: a string or a batch (list, array or tensor) of strings.

    Returns:
        The ids: a list of ints for a string, a list of lists for a batch
        (a `tf.RaggedTensor` inside `tf.data` or a `tf.function`).

    Example:

    >>> tokenizer = TransformerXLTokenizer(
    ...     ["<eos>", "<unk>", "the", "cat", "sat", "@,@", "1", "000", "."]
    ... )
    >>> tokenizer("The cat sat on 1,000 mats.")
    [1, 3, 4, 1, 6, 5, 7, 1, 8]
    >>> tokenizer.detokenize([2, 3, 4, 6, 5, 7, 8])
    'the cat sat 1,000.'
    """

    how_to_set = "Pass `vocabulary=` or load one with `from_preset()`."

    def __init__(
        self,
        vocabulary=None,
        lower_case=False,
        delimiter=None,
        language="en",
        unknown_token="<unk>",
        end_token="<eos>",
        special_tokens=None,
        dtype="int32",
        **kwargs,
    ):
        if delimiter not in (None, ""):
            raise ValueError(
                "`delimiter` must be None (Moses rules) or '' (one token "
                f"per character). Received: delimiter={delimiter!r}"
            )
        for name, value in (
            ("unknown_token", unknown_token),
            ("end_token", end_token),
            ("language", language),
        ):
            if not isinstance(value, str) or not value:
                raise ValueError(
                    f"`{name}` must be a non-empty string. Received: "
                    f"{name}={value!r}"
                )
        if special_tokens is not None and (
            isinstance(special_tokens, str)
            or not all(isinstance(t, str) and t for t in special_tokens)
        ):
            raise ValueError(
                "`special_tokens` must be None or a list of non-empty "
                f"strings. Received: special_tokens={special_tokens!r}"
            )
        super().__init__(dtype=dtype, **kwargs)
        self.lower_case = bool(lower_case)
        self.delimiter = delimiter
        self.language = language
        self.unknown_token = unknown_token
        self.special_tokens_option = (
            None if special_tokens is None else list(special_tokens)
        )
        self._moses = None
        # keras-hub's packers read these: a stream of lines starts after an
        # `<eos>`, and the padding is masked out.
        self.end_token = self.start_token = self.pad_token = end_token
        self.set_vocabulary(vocabulary)
        self.file_assets = [VOCABULARY_FILE, SETTINGS_FILE]

    # --- Vocabulary -------------------------------------------------------

    def set_vocabulary(self, vocabulary):
        """Sets the vocabulary: a list of tokens, the path of a text file
        with one per line, or `None`."""
        self.vocabulary = None
        self._token_to_id = None
        self.end_token_id = self.start_token_id = self.pad_token_id = None
        if vocabulary is None:
            return
        if isinstance(vocabulary, (str, os.PathLike)):
            vocabulary = _read_vocabulary_file(vocabulary)
        vocabulary = list(vocabulary)
        bad = [
            token
            for token in vocabulary
            if not isinstance(token, str)
            or not token
            or "\n" in token
            or "\r" in token
        ]
        if bad:
            raise ValueError(
                "Every `vocabulary` entry must be a non-empty string "
                f"without line breaks. Received entries {bad[:5]!r}."
            )
        lookup = {}
        for index, token in enumerate(vocabulary):
            lookup.setdefault(token, index)
        if len(lookup) != len(vocabulary):
            raise ValueError(
                "`vocabulary` must not repeat a token. Received "
                f"{len(vocabulary)} entries, {len(lookup)} distinct."
            )
        for name in ("unknown_token", "end_token"):
            if getattr(self, name) not in lookup:
                raise ValueError(
                    f"`{name}={getattr(self, name)!r}` must be in the "
                    "vocabulary. Add it, or pass the vocabulary's token."
                )
        self.vocabulary = vocabulary
        self._token_to_id = lookup
        self._unknown_id = lookup[self.unknown_token]
        if self.special_tokens_option is None:
            special = [
                t for t in ("<eos>", "<unk>", "<formula>") if t in lookup
            ]
            special += [self.unknown_token, self.end_token]
        else:
            special = self.special_tokens_option
        self.never_split = list(dict.fromkeys(special))
        # Longest first, so that no special token cuts a longer one.
        alternatives = sorted(self.never_split, key=len, reverse=True)
        self._special_pattern = re.compile(
            "(" + "|".join(re.escape(t) for t in alternatives) + ")"
        )
        self.end_token_id = lookup[self.end_token]
        self.start_token_id = self.pad_token_id = self.end_token_id

    @property
    def special_tokens(self):
        """keras-hub's special tokens: `end_token` (also the start and
        padding token)."""
        return [self.end_token]

    @property
    def special_token_ids(self):
        """The ids of `special_tokens`."""
        self._check_vocabulary()
        return [self.end_token_id]

    # --- Splitting --------------------------------------------------------

    def _moses_tools(self):
        if self._moses is None:
            sacremoses = import_extra(
                "sacremoses",
                "pretrained",
                "TransformerXLTokenizer (the Moses rules of WikiText-103)",
            )
            self._moses = (
                sacremoses.MosesPunctNormalizer(self.language),
                sacremoses.MosesTokenizer(self.language),
                sacremoses.MosesDetokenizer(self.language),
            )
        return self._moses

    def _split_plain(self, text):
        """Tokens of text without special tokens."""
        text = text.strip()
        if self.lower_case:
            text = text.lower()
        if self.delimiter == "":
            return list(text)
        if not text:
            return []
        normalizer, moses, _ = self._moses_tools()
        words = moses.tokenize(
            normalizer.normalize(text),
            aggressive_dash_splits=True,
            return_str=False,
            escape=False,
            protected_patterns=self.never_split,
        )
        tokens = []
        for word in words:
            tokens.extend(_NUMBER_SEPARATOR.sub(r" @\g<0>@ ", word).split())
        return tokens

    def split(self, text):
        """The tokens (strings) of one text, before the id lookup."""
        self._check_vocabulary()
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        tokens = []
        for index, piece in enumerate(self._special_pattern.split(text)):
            if index % 2:  # a special token
                tokens.append(piece)
            elif piece:
                tokens.extend(self._split_plain(piece))
        return tokens

    def _encode(self, text):
        lookup, unknown = self._token_to_id, self._unknown_id
        return [lookup.get(token, unknown) for token in self.split(text)]

    def _decode(self, ids):
        ids = [int(i) for i in ids]
        size = len(self.vocabulary)
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise ValueError(
                f"Token ids must be in [0, {size}). Received: {bad[:5]}"
            )
        tokens = [self.vocabulary[i] for i in ids]
        if self.delimiter == "":
            return "".join(tokens)
        if not tokens:
            return ""
        text = self._moses_tools()[2].detokenize(tokens)
        return _SPLIT_NUMBER.sub(r"\1", text).strip()

    # --- Layer API --------------------------------------------------------

    def _tokenize_python(self, inputs):
        if isinstance(inputs, (str, bytes)):
            return self._encode(inputs)
        inputs = _to_list(inputs)
        if isinstance(inputs, (str, bytes)):
            return self._encode(inputs)
        return [self._encode(text) for text in inputs]

    def _detokenize_python(self, inputs):
        inputs = _to_list(inputs)
        if inputs and isinstance(inputs[0], (list, tuple)):
            return [self._decode(row) for row in inputs]
        return self._decode(inputs)

    def _tokenize_tf(self, inputs):
        import tensorflow as tf

        with tf.device("cpu"):
            inputs = tf.convert_to_tensor(inputs)
            unbatched = inputs.shape.rank == 0
            flat = tf.reshape(inputs, [-1])

            def encode(strings):
                rows = [self._encode(s) for s in strings.numpy().tolist()]
                values = np.array(
                    [i for row in rows for i in row], dtype=self.compute_dtype
                )
                lengths = np.array([len(row) for row in rows], "int64")
                return values, lengths

            values, lengths = tf.py_function(
                encode, [flat], [self.compute_dtype, tf.int64]
            )
            values.set_shape([None])
            lengths.set_shape([None])
            tokens = tf.RaggedTensor.from_row_lengths(values, lengths)
            if unbatched:
                return tokens[0]
            if inputs.shape.rank and inputs.shape.rank > 1:
                raise ValueError(
                    "TransformerXLTokenizer takes a string or a 1-D batch "
                    f"of strings. Received rank {inputs.shape.rank}."
                )
            return tokens

    def _detokenize_tf(self, inputs):
        import tensorflow as tf

        with tf.device("cpu"):
            if not isinstance(inputs, tf.RaggedTensor):
                inputs = tf.convert_to_tensor(inputs)
            unbatched = inputs.shape.rank == 1
            if unbatched:
                inputs = inputs[tf.newaxis]
            if not isinstance(inputs, tf.RaggedTensor):
                inputs = tf.RaggedTensor.from_tensor(inputs)

            def decode(values, lengths):
                values = values.numpy().tolist()
                rows, start = [], 0
                for length in lengths.numpy().tolist():
                    rows.append(self._decode(values[start : start + length]))
                    start += length
                return np.array(rows, dtype=object)

            text = tf.py_function(
                decode,
                [tf.cast(inputs.flat_values, "int64"), inputs.row_lengths()],
                tf.string,
            )
            text.set_shape([None])
            return text[0] if unbatched else text

    # --- Saving -----------------------------------------------------------

    def save_assets(self, dir_path):
        self._check_vocabulary()
        path = os.path.join(dir_path, VOCABULARY_FILE)
        with open(path, "w", encoding="utf-8", newline="\n") as file:
            file.write("\n".join(self.vocabulary) + "\n")
        with open(
            os.path.join(dir_path, SETTINGS_FILE), "w", encoding="utf-8"
        ) as file:
            json.dump({"vocabulary_size": len(self.vocabulary)}, file)

    def load_assets(self, dir_path):
        path = os.path.join(dir_path, VOCABULARY_FILE)
        vocabulary = _read_vocabulary_file(path)
        settings_path = os.path.join(dir_path, SETTINGS_FILE)
        if os.path.exists(settings_path):
            with open(settings_path, encoding="utf-8") as file:
                expected = json.load(file).get("vocabulary_size")
            if expected is not None and expected != len(vocabulary):
                raise ValueError(
                    f"'{path}' holds {len(vocabulary)} tokens where "
                    f"{expected} were saved: the file was changed or cut."
                )
        self.set_vocabulary(vocabulary)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                # The vocabulary travels as an asset (`vocabulary.txt`).
                "vocabulary": None,
                "lower_case": self.lower_case,
                "delimiter": self.delimiter,
                "language": self.language,
                "unknown_token": self.unknown_token,
                "end_token": self.end_token,
                "special_tokens": self.special_tokens_option,
            }
        )
        return config

    # --- HuggingFace ------------------------------------------------------

    @classmethod
    def from_preset(cls, preset, config_file="tokenizer.json", **kwargs):
        """A tokenizer from a keras-hub preset, or from a HuggingFace
        Transformer-XL folder or handle (`from_huggingface`)."""
        if is_huggingface_transformer_xl(preset):
            return cls.from_huggingface(preset, **kwargs)
        folder = os.fspath(preset)
        if (
            os.path.isdir(folder)
            and os.path.isfile(os.path.join(folder, config_file))
            and not os.path.isfile(os.path.join(folder, HF_CONFIG_FILE))
        ):
            # A tokenizer saved alone (`save_to_preset` of the tokenizer):
            # keras-hub's loader wants the backbone's config.json too.
            with open(os.path.join(folder, config_file), encoding="utf-8") as f:
                config = json.load(f)
            config["config"] = {**config["config"], **kwargs}
            tokenizer = keras.saving.deserialize_keras_object(config)
            tokenizer.load_preset_assets(folder)
            return tokenizer
        return super().from_preset(preset, config_file=config_file, **kwargs)

    @classmethod
    def from_huggingface(cls, preset, **kwargs):
        """The tokenizer of a HuggingFace Transformer-XL checkpoint (its
        `config.json` has `model_type` `"transfo-xl"`).

        Reads `tokenizer_config.json` (lower case, delimiter, language,
        special and added tokens) and the symbol list (`idx2sym`) of
        `vocab.pkl`, a pickle of HuggingFace's tokenizer object. The
        pickle is read by `keras_txl.utils.restricted_unpickler`, which
        builds only plain containers and strings and replaces every class
        or function the file names by an inert placeholder: a file made to
        run code when unpickled runs nothing here.

        Args:
            preset: a local folder, or a `hf://` handle (downloaded with
                `huggingface_hub`, as keras-hub does).
            **kwargs: constructor arguments that override the file's.

        Returns:
            A `TransformerXLTokenizer`.
        """
        settings = {}
        try:
            path = _preset_file(preset, HF_TOKENIZER_CONFIG_FILE)
        except FileNotFoundError:
            path = None
        if path is not None:
            with open(path, encoding="utf-8") as file:
                settings = json.load(file)
        with open(_preset_file(preset, HF_VOCABULARY_FILE), "rb") as file:
            state = restricted_loads(file.read())
        symbols = state.get("idx2sym") if isinstance(state, dict) else None
        if not isinstance(symbols, list) or not all(
            isinstance(s, str) for s in symbols
        ):
            raise ValueError(
                f"'{HF_VOCABULARY_FILE}' of {preset!r} has no list of "
                "strings `idx2sym`: it is not a Transformer-XL vocabulary."
            )
        vocabulary = list(symbols)
        # HuggingFace's added tokens (`<formula>`) live past `idx2sym`.
        added = {}
        for key, value in (settings.get("added_tokens_decoder") or {}).items():
            content = value.get("content") if isinstance(value, dict) else None
            if isinstance(content, str):
                added[int(key)] = content
        for index in sorted(added):
            token = added[index]
            if index < len(vocabulary):
                if vocabulary[index] != token:
                    raise ValueError(
                        f"Added token {token!r} has id {index}, which "
                        f"'{HF_VOCABULARY_FILE}' gives to "
                        f"{vocabulary[index]!r}."
                    )
            elif index == len(vocabulary):
                vocabulary.append(token)
            else:
                raise ValueError(
                    f"Added token {token!r} has id {index}, past the "
                    f"{len(vocabulary)} symbols of '{HF_VOCABULARY_FILE}'."
                )
        options = {
            "vocabulary": vocabulary,
            "lower_case": bool(settings.get("lower_case", False)),
            "delimiter": settings.get("delimiter") or None,
            "language": settings.get("language") or "en",
            "unknown_token": settings.get("unk_token") or "<unk>",
            "end_token": settings.get("eos_token") or "<eos>",
        }
        if settings.get("delimiter") == "":
            options["delimiter"] = ""
        never_split = settings.get("never_split")
        if isinstance(never_split, list) and never_split:
            options["special_tokens"] = never_split
        options.update(kwargs)
        return cls(**options)


def _read_vocabulary_file(path):
    with open(os.fspath(path), encoding="utf-8", newline="") as file:
        text = file.read()
    if text.endswith("\n"):
        text = text[:-1]
    return [line.rstrip("\r") for line in text.split("\n")] if text else []


def _to_list(inputs):
    if isinstance(inputs, (list, tuple)):
        return [
            _to_list(x) if not isinstance(x, (str, bytes)) else x
            for x in inputs
        ]
    if hasattr(inputs, "to_list"):  # tf.RaggedTensor
        return inputs.to_list()
    if hasattr(inputs, "numpy") and not isinstance(inputs, np.ndarray):
        inputs = inputs.numpy()
    if keras.ops.is_tensor(inputs):
        inputs = keras.ops.convert_to_numpy(inputs)
    if isinstance(inputs, np.ndarray):
        return inputs.tolist()
    return inputs


def _preset_file(preset, name):
    """The local path of file `name` of a folder, or of a `hf://` handle
    (downloaded once by `huggingface_hub`).

    Raises:
        FileNotFoundError: the folder or the repository has no `name`.
        ValueError: `preset` is neither a folder nor a `hf://` handle.
    """
    preset = os.fspath(preset)
    if preset.startswith(HF_SCHEME):
        import huggingface_hub
        from huggingface_hub import errors

        try:
            return huggingface_hub.hf_hub_download(
                repo_id=preset[len(HF_SCHEME) :], filename=name
            )
        except errors.HFValidationError as error:
            raise ValueError(
                "A HuggingFace handle has the form 'hf://{org}/{model}'. "
                f"Received: {preset!r}"
            ) from error
        except errors.EntryNotFoundError as error:
            raise FileNotFoundError(f"{preset!r} has no '{name}'.") from error
    if not os.path.isdir(preset):
        raise ValueError(
            "A HuggingFace Transformer-XL checkpoint is a local folder or a "
            f"'hf://{{org}}/{{model}}' handle. Received: {preset!r}"
        )
    path = os.path.join(preset, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Folder {preset!r} has no '{name}'.")
    return path


def is_huggingface_transformer_xl(preset):
    """Whether `preset` (a folder or a handle) is a HuggingFace
    Transformer-XL checkpoint: its `config.json` has `model_type`
    `"transfo-xl"`. Reads (downloads, for a handle) only `config.json`."""
    if not isinstance(preset, (str, os.PathLike)):
        return False
    try:
        path = _preset_file(preset, HF_CONFIG_FILE)
    except (FileNotFoundError, ValueError):
        return False
    try:
        with open(path, encoding="utf-8") as file:
            config = json.load(file)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("model_type") == (
        HF_MODEL_TYPE
    )


def is_whole_word_tokenizer(tokenizer):
    """Whether `tokenizer` takes whitespace words rather than text: a
    keras-hub `WordPieceTokenizer` with `split=False`."""
    return (
        isinstance(tokenizer, keras_hub.tokenizers.WordPieceTokenizer)
        and not tokenizer.split
    )


def end_of_line_id(tokenizer):
    """The id of `<eos>` in the vocabulary of `tokenizer`, else `None`."""
    vocabulary = tokenizer.get_vocabulary() or []
    if END_OF_LINE_TOKEN not in vocabulary:
        return None
    return vocabulary.index(END_OF_LINE_TOKEN)


def boundary_token_ids(tokenizer):
    """`(start, end, pad)`: the ids a preprocessor puts around and after
    each string. A tokenizer of whole words: `<eos>` (a string is a line:
    it follows an `<eos>` and ends with one), or `None` if its vocabulary
    lacks it; another tokenizer: the ids it names (`start_token_id`, ...),
    `None` where it names none (the character tokenizer), and padding
    with id 0 unless it names a `pad_token_id`."""
    if is_whole_word_tokenizer(tokenizer):
        start = end = end_of_line_id(tokenizer)
    else:
        start = getattr(tokenizer, "start_token_id", None)
        end = getattr(tokenizer, "end_token_id", None)
    return start, end, getattr(tokenizer, "pad_token_id", None) or 0


def split_words(inputs, end_of_line=None):
    """The whitespace words of text, for a tokenizer of whole words.

    Args:
        inputs: a string, or a batch (list, NumPy array or `tf.Tensor`) of
            strings. Strings are UTF-8 when given as bytes.
        end_of_line: `None`, or the word (`"<eos>"`) that each `"\\n"`
            becomes; without it a line break is whitespace like any other.

    Returns:
        For a string, its words (a list, or a 1-D `tf.Tensor` for a
        tensor); for a batch, one row of words per string (lists, or a
        2-D `tf.RaggedTensor` for a tensor: inside `tf.data` or a
        `tf.function`).
    """
    if _is_tensorflow(inputs):
        import tensorflow as tf

        text = tf.convert_to_tensor(inputs)
        if end_of_line is not None:
            text = tf.strings.regex_replace(text, "\n", f" {end_of_line} ")
        text = tf.strings.regex_replace(text, _WHITESPACE, " ")
        return tf.strings.split(text)
    if isinstance(inputs, np.ndarray):
        inputs = inputs.item() if inputs.ndim == 0 else inputs.tolist()
    if isinstance(inputs, (str, bytes)):
        if isinstance(inputs, bytes):
            inputs = inputs.decode("utf-8")
        if end_of_line is not None:
            inputs = inputs.replace("\n", f" {end_of_line} ")
        return inputs.split()
    if isinstance(inputs, (list, tuple)):
        return [split_words(text, end_of_line) for text in inputs]
    raise ValueError(
        "A tokenizer of whole words takes a string or a batch of strings. "
        f"Received: {type(inputs).__name__}"
    )


def join_words(vocabulary, token_ids):
    """The text of word ids: words one space apart, each `<eos>` a line
    break (the inverse of `split_words`, up to the whitespace).

    Args:
        vocabulary: list (or NumPy array) of the tokenizer's words.
        token_ids: 1-D ids.

    Returns:
        str.
    """
    vocabulary = np.asarray(vocabulary, dtype=object)
    ids = np.asarray(keras.ops.convert_to_numpy(token_ids)).reshape(-1)
    lines = []
    line = []
    for word in vocabulary[ids.astype(np.int64)]:
        if word == END_OF_LINE_TOKEN:
            lines.append(" ".join(line) + "\n")
            line = []
        else:
            line.append(word)
    return "".join(lines) + " ".join(line)


def _is_tensorflow(inputs):
    """Whether `inputs` is a TensorFlow tensor (symbolic inside `tf.data`
    or a `tf.function`, or eager), without importing TensorFlow."""
    module = type(inputs).__module__ or ""
    return module.startswith("tensorflow")
