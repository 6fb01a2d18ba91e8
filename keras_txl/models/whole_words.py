"""Text in, text out for tokenizers of whole words.

The `"word"` tokenizer of `keras-txl train --tokenizer word` (and of
`keras_txl.data.make_tokenizer("word", ...)`) is keras-hub's
`WordPieceTokenizer(split=False)`: it takes words, not text
(`tokenizer(["the cat"])` is one id, `<unk>`). What makes it text in, text
out, for `TransformerXLCausalLMPreprocessor` (`lm.fit(strings)`,
`lm.generate("the quick")`, `keras-txl generate`) and for
`keras_txl.data.encode`/`decode` alike:

- `split_words`: the text cut into words at whitespace (Python's
  `str.split()`: the same Unicode whitespace on the Python path and
  inside `tf.data`), each line break `"\\n"` an `<eos>` word when the
  vocabulary has `<eos>` (the token that ends every line of the corpus);
- `join_words`: words joined by single spaces, `<eos>` back to `"\\n"`.

Example:

>>> split_words("the cat\\nsat", END_OF_LINE_TOKEN)
['the', 'cat', '<eos>', 'sat']
>>> join_words(["<unk>", "<eos>", "the", "cat"], [2, 3, 1, 2])
'the cat\\nthe'
"""

import keras
import keras_hub
import numpy as np

END_OF_LINE_TOKEN = "<eos>"
# The characters of Python's `str.isspace()`, for RE2 (whose `\s` is ASCII
# only), so that `tf.data` splits text where `str.split()` does.
_WHITESPACE = (
    r"[\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]+"
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
