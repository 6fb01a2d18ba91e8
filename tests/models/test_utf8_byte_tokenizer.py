import keras
import numpy as np

from keras_txl.models import Utf8ByteTokenizer


def test_utf8_byte_tokenizer_decodes_whole_characters_only():
    """Text cut anywhere in its bytes (as a byte-level model writes it)
    detokenizes to whole characters: an incomplete one at the end is held
    back, never U+FFFD; an invalid byte elsewhere is U+FFFD."""
    tokenizer = Utf8ByteTokenizer(lowercase=False)
    text = "नमस्ते 你好 déjà vu"
    data = text.encode("utf-8")
    for end in range(len(data) + 1):
        decoded = tokenizer.detokenize(list(data[:end]))
        assert "\ufffd" not in decoded and text.startswith(decoded), end
        assert len(data[:end]) - len(decoded.encode("utf-8")) < 4
    # A batch, padded with zeros.
    rows = np.array([list(data[:4]), list(data[:2]) + [0, 0]])
    assert tokenizer.detokenize(rows) == ["न", ""]
    assert tokenizer.detokenize([104, 255, 105]) == "h\ufffdi"


# What `keras.saving.serialize_keras_object` wrote for keras-txl's byte
# tokenizer when its class was named `ByteTokenizer` (keras-txl c88e1f8):
# the `tokenizer.json` of a byte-level preset and the tokenizer of a
# `.keras` file.
SAVED_AS_BYTE_TOKENIZER = {
    "module": "keras_txl.models.byte_tokenizer",
    "class_name": "ByteTokenizer",
    "config": {
        "name": "byte_tokenizer",
        "trainable": True,
        "dtype": {
            "module": "keras",
            "class_name": "DTypePolicy",
            "config": {"name": "int32"},
            "registered_name": None,
        },
        "config_file": "tokenizer.json",
        "lowercase": False,
        "sequence_length": None,
        "normalization_form": None,
        "errors": "replace",
        "replacement_char": 65533,
    },
    "registered_name": "keras_txl>ByteTokenizer",
}


def test_files_saved_with_the_name_byte_tokenizer_still_load():
    """The rename kept the registered name: a tokenizer saved as
    `keras_txl>ByteTokenizer` loads as `Utf8ByteTokenizer` (not as
    keras-hub's `ByteTokenizer`), and a new save writes the same name."""
    loaded = keras.saving.deserialize_keras_object(SAVED_AS_BYTE_TOKENIZER)
    assert type(loaded) is Utf8ByteTokenizer
    assert loaded.detokenize(list("né".encode())[:-1]) == "n"
    saved = keras.saving.serialize_keras_object(loaded)
    assert saved["registered_name"] == "keras_txl>ByteTokenizer"
    assert saved["config"] == SAVED_AS_BYTE_TOKENIZER["config"]
