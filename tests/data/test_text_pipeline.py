import os

import numpy as np
import pytest
import tensorflow as tf

from keras_txl.data import make_tokenizer
from keras_txl.data import segment_dataset
from keras_txl.data import text_segment_dataset
from keras_txl.data.text_pipeline import text_ids_fn
from keras_txl.data.tokenization import encode
from keras_txl.models import CharacterTokenizer

CORPUS = os.path.join(
    os.path.dirname(__file__), "..", "..", "data", "tinyshakespeare.txt"
)
ODD_TEXT = "héllo wörld 😀 a\n\n  b  c\t d\n" + "x" * 120 + " mot\nfin"


def _texts():
    with open(CORPUS, encoding="utf-8") as file:
        return {"shakespeare": file.read()[:300_000], "odd": ODD_TEXT * 200}


@pytest.mark.parametrize("kind", ["byte", "char", "word"])
@pytest.mark.parametrize("name", ["shakespeare", "odd"])
def test_in_graph_ids_equal_the_numpy_path(kind, name):
    text = _texts()[name]
    tokenizer = make_tokenizer(kind, text[: len(text) // 2] + "\n")
    if kind == "char":  # a capped vocabulary: unknown characters exist
        tokenizer = make_tokenizer(kind, text, vocabulary_size=20)
    ids = tf.function(text_ids_fn(tokenizer))(tf.constant(text))
    np.testing.assert_array_equal(ids.numpy(), encode(tokenizer, text))


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_segments_equal_those_of_segment_dataset(tmp_path, drop_remainder):
    texts = _texts()
    paths = []
    for name, text in texts.items():
        path = tmp_path / f"{name}.txt"
        path.write_text(text[:20_000], encoding="utf-8")
        paths.append(path)
    tokenizer = make_tokenizer("word", texts["shakespeare"])
    dataset = text_segment_dataset(
        paths, tokenizer, 3, 16, drop_remainder=drop_remainder
    )
    expected = []
    for name in texts:
        ids = encode(tokenizer, texts[name][:20_000])
        expected += list(
            segment_dataset(ids, 3, 16, drop_remainder=drop_remainder)
        )
    got = list(dataset)
    assert len(got) == len(expected) > 20
    for (a, b), (c, d) in zip(got, expected):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    if drop_remainder:
        assert dataset.element_spec[0].shape == (3, 16)


def test_unknown_character_and_tokenizer_errors(tmp_path):
    tokenizer = make_tokenizer("char", "abc")
    unk = tokenizer.get_vocabulary().index("<unk>")
    ids = text_ids_fn(tokenizer)(tf.constant("abz")).numpy()
    np.testing.assert_array_equal(ids, tokenizer(["abz"])[0])
    assert ids[-1] == unk and unk not in ids[:2]
    # A vocabulary saved before `<unk>` was reserved: an error, not a guess.
    old = CharacterTokenizer(vocabulary=list("abc"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="vocabulary"):
        text_ids_fn(old)(tf.constant("abz"))
    with pytest.raises(ValueError, match="UnicodeCodepointTokenizer"):
        import keras_hub

        text_ids_fn(keras_hub.tokenizers.UnicodeCodepointTokenizer())
