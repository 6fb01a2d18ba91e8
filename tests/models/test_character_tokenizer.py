import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_txl.models import CharacterTokenizer

VOCABULARY = ["\n", " ", "!", "a", "b", "c", "é"]


def test_ids_follow_vocabulary_and_round_trip():
    tokenizer = CharacterTokenizer(vocabulary=VOCABULARY)
    text = "cab é!\nabc"
    ids = tokenizer(text)
    assert ids.dtype == np.int32
    np.testing.assert_array_equal(ids, [VOCABULARY.index(c) for c in text])
    assert tokenizer.detokenize(ids) == text
    assert tokenizer.vocabulary_size() == 7
    assert tokenizer.id_to_token(6) == "é"
    assert tokenizer.token_to_id("\n") == 0
    batch = tokenizer(["ab", "c"])
    assert batch == [[3, 4], [5]]
    assert tokenizer.detokenize(batch) == ["ab", "c"]


def test_unknown_character_is_an_error_without_oov_token():
    tokenizer = CharacterTokenizer(vocabulary=VOCABULARY)
    with pytest.raises(ValueError, match="1 character.*: 'z'; "):
        tokenizer("abz")
    assert tokenizer.unknown_characters(["abz", "y\tz"]) == ["\t", "y", "z"]
    assert tokenizer.unknown_characters("cab") == []
    with pytest.raises(ValueError, match="in \\[0, 7\\)"):
        tokenizer.detokenize([0, 7])


def test_oov_token_maps_unknown_characters():
    tokenizer = CharacterTokenizer(
        vocabulary=VOCABULARY + ["<unk>"], oov_token="<unk>"
    )
    ids = tokenizer("azb")
    np.testing.assert_array_equal(ids, [3, 7, 4])
    assert tokenizer.detokenize(ids) == "a<unk>b"


def test_tensorflow_path_in_tf_data_matches_python_path():
    tokenizer = CharacterTokenizer(
        vocabulary=VOCABULARY + ["<unk>"], oov_token="<unk>"
    )
    texts = ["cab é!", "x\nab"]
    dataset = tf.data.Dataset.from_tensor_slices(texts).map(tokenizer)
    for text, ids in zip(texts, dataset.as_numpy_iterator()):
        np.testing.assert_array_equal(ids, tokenizer(text))
    batched = tf.function(tokenizer.tokenize)(tf.constant(texts))
    assert batched.to_list() == tokenizer(texts)
    detokenized = tf.function(tokenizer.detokenize)(batched)
    assert [t.decode() for t in detokenized.numpy()] == [
        "cab é!",
        "<unk>\nab",
    ]


def test_eager_calls_run_python_traced_calls_run_tensorflow():
    """The dispatch of keras-hub's `_use_tf_workflow`, which the tokenizers
    call (as keras-hub's own do): eager inputs, tensors included, take the
    NumPy path; inside a `tf.function` the TensorFlow path runs."""
    tokenizer = CharacterTokenizer(vocabulary=VOCABULARY)
    eager = tokenizer(tf.constant("abc"))
    assert isinstance(eager, np.ndarray) and eager.tolist() == [3, 4, 5]
    assert tokenizer.detokenize(tf.constant([3, 4])) == "ab"
    traced = tf.function(tokenizer.tokenize)(tf.constant("abc"))
    assert isinstance(traced, tf.Tensor) and traced.numpy().tolist() == [
        3,
        4,
        5,
    ]


def test_tensorflow_path_raises_on_unknown_character():
    tokenizer = CharacterTokenizer(vocabulary=VOCABULARY)
    dataset = tf.data.Dataset.from_tensor_slices(["abz"]).map(tokenizer)
    with pytest.raises(tf.errors.InvalidArgumentError, match="oov_token"):
        list(dataset)


def test_config_and_assets_restore_identical_ids(tmp_path):
    tokenizer = CharacterTokenizer(
        vocabulary=VOCABULARY + ["<unk>"], oov_token="<unk>"
    )
    text = "bac!\né?"
    serialized = keras.saving.serialize_keras_object(tokenizer)
    restored = keras.saving.deserialize_keras_object(serialized)
    assert isinstance(restored, CharacterTokenizer)
    np.testing.assert_array_equal(restored(text), tokenizer(text))
    tokenizer.save_assets(str(tmp_path))
    empty = CharacterTokenizer()
    empty.load_assets(str(tmp_path))
    assert empty.get_vocabulary() == tokenizer.get_vocabulary()
    with pytest.raises(ValueError, match="No vocabulary"):
        CharacterTokenizer()("a")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"vocabulary": ["a", "a"]}, "repeat"),
        ({"vocabulary": ["a", "bc"]}, "one character"),
        ({"vocabulary": "abc"}, "list of strings"),
        ({"vocabulary": ["a"], "oov_token": "<unk>"}, "oov_token"),
        ({"vocabulary": ["<unk>"], "oov_token": "<unk>"}, "at least one"),
        ({"vocabulary": ["a"], "dtype": "float32"}, "integer dtype"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CharacterTokenizer(**kwargs)
