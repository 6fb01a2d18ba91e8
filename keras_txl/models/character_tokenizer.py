import json
import os
import sys

import keras
import numpy as np

from keras_txl.models.vocabulary_tokenizer import VocabularyTokenizer

VOCABULARY_FILE = "vocabulary.json"


@keras.saving.register_keras_serializable(package="keras_txl")
class CharacterTokenizer(VocabularyTokenizer):
    """Character tokenizer with a closed vocabulary of characters.

    Token `i` is the character `vocabulary[i]`. The vocabulary is usually the
    set of characters of a training text (65 for tinyshakespeare), built by
    `keras_txl.data.make_tokenizer("char", text)`. Unlike
    `keras_hub.tokenizers.UnicodeCodepointTokenizer`, ids are dense
    (`0 .. len(vocabulary) - 1`), so the model's embedding has one row per
    character that occurs.

    Out-of-vocabulary policy: with `oov_token` set (for example
    `"<unk>"`, which must be an entry of `vocabulary`), a character outside
    the vocabulary gets its id, and `detokenize` writes the token itself,
    so any text goes in and valid text comes out. The vocabularies of
    `make_tokenizer("char", ...)` (and so of `keras-txl train`) end with
    `<unk>`. With `oov_token=None` (the default here, and the vocabularies
    keras-txl built before it reserved `<unk>`) such a character is an
    error (`ValueError` naming the characters on the Python path,
    `InvalidArgumentError` inside `tf.data`): it has no id, and dropping it
    would change the text. `unknown_characters(text)` lists them.

    Nothing is lowercased or normalized, and id 0 is an ordinary character,
    not padding: `detokenize(tokenize(text)) == text` for every text made
    of vocabulary characters.

    The vocabulary is part of `get_config()` (a JSON list of strings), and
    is also written with `oov_token` to `vocabulary.json` by `save_assets`,
    so it travels with a saved model or preset; nothing is pickled.

    Eager calls run on NumPy (the whole text at once, one table lookup per
    character); inside `tf.data` or a `tf.function` the TensorFlow path
    runs.

    Args:
        vocabulary: list of str. The tokens: single characters, plus
            `oov_token` if it is set. No duplicates.
        oov_token: optional str. The token for characters outside the
            vocabulary; `None` raises an error for them.
        dtype: str. Integer dtype of the token ids, `"int32"` by default.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: a string, or a batch (list, array or tensor) of strings.

    Returns:
        The token ids: a 1-D integer array for a string, one list of ids per
        string for a batch (a `tf.RaggedTensor` on the TensorFlow path).

    Example:

    >>> tokenizer = CharacterTokenizer(vocabulary=[" ", "a", "b", "c"])
    >>> ids = tokenizer("cab a")
    >>> ids.tolist()
    [3, 1, 2, 0, 1]
    >>> tokenizer.detokenize(ids)
    'cab a'
    """

    how_to_set = (
        "Pass `vocabulary=` or build it with "
        "`keras_txl.data.make_tokenizer('char', text)`."
    )

    def __init__(
        self, vocabulary=None, oov_token=None, dtype="int32", **kwargs
    ):
        super().__init__(dtype=dtype, **kwargs)
        if oov_token is not None and (
            not isinstance(oov_token, str) or not oov_token
        ):
            raise ValueError(
                "`oov_token` must be None or a non-empty string. Received: "
                f"oov_token={oov_token!r}"
            )
        self.oov_token = oov_token
        self.set_vocabulary(vocabulary)
        self.file_assets = [VOCABULARY_FILE]

    def set_vocabulary(self, vocabulary):
        """Sets the vocabulary: a list of single characters (and
        `oov_token`), or `None` to leave the tokenizer without one."""
        if vocabulary is None:
            self.vocabulary = self._token_to_id = None
            return
        if isinstance(vocabulary, str) or not all(
            isinstance(token, str) for token in vocabulary
        ):
            raise ValueError(
                "`vocabulary` must be a list of strings, one per token. "
                f"Received: vocabulary={vocabulary!r:.80}"
            )
        vocabulary = list(vocabulary)
        bad = [
            token
            for token in vocabulary
            if len(token) != 1 and token != self.oov_token
        ]
        if bad:
            raise ValueError(
                "Every `vocabulary` entry must be one character (or the "
                f"`oov_token`). Received entries {bad[:5]!r}."
            )
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError(
                "`vocabulary` must not repeat a token. Received "
                f"{len(vocabulary)} entries, {len(set(vocabulary))} distinct."
            )
        if self.oov_token is not None and self.oov_token not in vocabulary:
            raise ValueError(
                f"`oov_token={self.oov_token!r}` must be an entry of "
                "`vocabulary`. Add it, or pass oov_token=None."
            )
        if all(len(token) != 1 for token in vocabulary):
            raise ValueError(
                "`vocabulary` must hold at least one character. Received: "
                f"vocabulary={vocabulary!r}"
            )
        self.vocabulary = vocabulary
        self._token_to_id = {token: i for i, token in enumerate(vocabulary)}
        # Code point -> id, -1 outside the vocabulary; the last entry
        # stands for every larger code point.
        largest = max(ord(token) for token in vocabulary if len(token) == 1)
        self._lookup = np.full(largest + 2, -1, "int32")
        for index, token in enumerate(vocabulary):
            if len(token) == 1:
                self._lookup[ord(token)] = index
        self._oov_id = (
            None if self.oov_token is None else vocabulary.index(self.oov_token)
        )

    def unknown_characters(self, inputs):
        """The characters of a text, or of a batch of texts, that are not
        in the vocabulary: each once, in code point order (`oov_token`'s
        id stands for them, or they are an error without one)."""
        self._check_vocabulary()
        inputs = _as_python(inputs)
        if isinstance(inputs, (str, bytes)):
            inputs = [inputs]
        unknown = set()
        for text in inputs:
            codepoints, ids = self._lookup_text(text)
            unknown.update(np.unique(codepoints[ids < 0]).tolist())
        return [chr(c) for c in sorted(unknown)]

    def _lookup_text(self, text):
        """`(code points, ids)` of one Python string, with NumPy; id -1
        outside the vocabulary."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        codepoints = np.frombuffer(
            text.encode("utf-32-le", "surrogatepass"), "<u4"
        )  # (num_chars,)
        last = len(self._lookup) - 1
        return codepoints, self._lookup[np.minimum(codepoints, last)]

    def _encode_text(self, text):
        """Ids of one Python string, with NumPy."""
        codepoints, ids = self._lookup_text(text)
        found = ids >= 0
        if not found.all():
            if self._oov_id is None:
                unknown = [chr(c) for c in np.unique(codepoints[~found])]
                raise ValueError(unknown_characters_message(self, unknown))
            ids = np.where(found, ids, self._oov_id)
        return ids.astype(self.compute_dtype)

    def _tokenize_python(self, inputs):
        inputs = _as_python(inputs)
        if isinstance(inputs, (str, bytes)):
            return self._encode_text(inputs)
        return [self._encode_text(text).tolist() for text in inputs]

    def _detokenize_python(self, inputs):
        tf = sys.modules.get("tensorflow")
        if tf is not None and isinstance(inputs, tf.RaggedTensor):
            inputs = inputs.to_list()
        if (
            isinstance(inputs, (list, tuple))
            and inputs
            and (isinstance(inputs[0], (list, tuple, np.ndarray)))
        ):
            return [self._detokenize_python(row) for row in inputs]
        ids = np.asarray(keras.ops.convert_to_numpy(inputs)).astype("int64")
        if ids.ndim == 2:
            return [self._detokenize_python(row) for row in ids]
        ids = ids.reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= len(self.vocabulary)):
            raise ValueError(
                f"Token ids must be in [0, {len(self.vocabulary)}). Received "
                f"ids in [{ids.min()}, {ids.max()}]."
            )
        table = np.array(self.vocabulary, dtype=object)
        return "".join(table[ids])

    def _tokenize_tf(self, inputs):
        import tensorflow as tf

        with tf.device("cpu"):
            inputs = tf.convert_to_tensor(inputs)
            unbatched = inputs.shape.rank == 0
            if unbatched:
                inputs = tf.expand_dims(inputs, 0)
            codepoints = tf.strings.unicode_decode(inputs, "UTF-8")
            last = len(self._lookup) - 1
            ids = tf.gather(
                tf.constant(self._lookup),
                tf.minimum(codepoints.flat_values, last),
            )  # (num_chars,)
            found = ids >= 0
            if self._oov_id is None:
                check = tf.debugging.assert_equal(
                    tf.reduce_all(found),
                    True,
                    message="CharacterTokenizer: a character is not in the "
                    "vocabulary and there is no `oov_token`.",
                )
                with tf.control_dependencies([check]):
                    ids = tf.identity(ids)
            else:
                ids = tf.where(found, ids, self._oov_id)
            tokens = codepoints.with_flat_values(
                tf.cast(ids, self.compute_dtype)
            )
            return tokens[0] if unbatched else tokens

    def _detokenize_tf(self, inputs):
        import tensorflow as tf

        with tf.device("cpu"):
            if not isinstance(inputs, tf.RaggedTensor):
                inputs = tf.convert_to_tensor(inputs)
            table = tf.constant(self.vocabulary)
            tokens = tf.gather(table, tf.cast(inputs, "int64"))
            return tf.strings.reduce_join(tokens, axis=-1)

    def save_assets(self, dir_path):
        path = os.path.join(dir_path, VOCABULARY_FILE)
        with open(path, "w", encoding="utf-8") as file:
            json.dump(
                {"vocabulary": self.vocabulary, "oov_token": self.oov_token},
                file,
                ensure_ascii=False,
            )

    def load_assets(self, dir_path):
        path = os.path.join(dir_path, VOCABULARY_FILE)
        with open(path, "r", encoding="utf-8") as file:
            assets = json.load(file)
        self.oov_token = assets["oov_token"]
        self.set_vocabulary(assets["vocabulary"])

    def get_config(self):
        config = super().get_config()
        config.update(
            {"vocabulary": self.vocabulary, "oov_token": self.oov_token}
        )
        return config


def _as_python(inputs):
    """A string, or a batch of strings (list, array or tensor), as Python
    strings: a `str`/`bytes`, or a list of them."""
    if isinstance(inputs, (str, bytes)):
        return inputs
    tf = sys.modules.get("tensorflow")  # no TensorFlow, no tf.Tensor
    tensor_types = (np.ndarray,) if tf is None else (tf.Tensor, np.ndarray)
    if isinstance(inputs, tensor_types) or keras.ops.is_tensor(inputs):
        return np.asarray(inputs).tolist()
    return inputs


def unknown_characters_message(tokenizer, unknown):
    """The error for the characters `unknown` of a text, outside the
    vocabulary of `tokenizer` (a `CharacterTokenizer` without
    `oov_token`)."""
    shown = ", ".join(repr(character) for character in unknown[:10])
    more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
    return (
        f"{len(unknown)} character(s) of the text are not in the "
        f"vocabulary of {len(tokenizer.vocabulary)} tokens: {shown}{more}; "
        "this tokenizer has no `oov_token` to read them as (keras-txl "
        "built character vocabularies without `<unk>` before it reserved "
        "one). Leave them out of the text, or use a tokenizer whose "
        "vocabulary holds an `oov_token`: `keras_txl.data.make_tokenizer("
        "'char', text)` and `keras-txl train` reserve `<unk>`."
    )
