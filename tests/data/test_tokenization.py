import keras
import keras_hub
import numpy as np
import pytest

from keras_txl.data import load_corpus
from keras_txl.data import make_tokenizer
from keras_txl.data.text_source import CorpusError
from keras_txl.data.tokenization import decode
from keras_txl.data.tokenization import encode
from keras_txl.models import CharacterTokenizer
from tests.test_case import DATA

SHAKESPEARE = DATA / "tinyshakespeare.txt"
TEXT = "First Citizen:\nBefore we proceed, héar me speak.\n\nAll:\nSpeak!\n"


@keras.saving.register_keras_serializable(package="keras_txl_tests")
class TokenizerHolder(keras.Model):
    """A model that only carries a tokenizer, to save it in a .keras file."""

    def __init__(self, tokenizer, **kwargs):
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.built = True  # no weights

    def call(self, inputs):
        return inputs

    def get_config(self):
        config = super().get_config()
        config["tokenizer"] = keras.saving.serialize_keras_object(
            self.tokenizer
        )
        return config

    @classmethod
    def from_config(cls, config):
        config["tokenizer"] = keras.saving.deserialize_keras_object(
            config["tokenizer"]
        )
        return cls(**config)


def _reload_through_keras_file(tokenizer, tmp_path):
    path = str(tmp_path / "holder.keras")
    TokenizerHolder(tokenizer).save(path)
    return keras.saving.load_model(path).tokenizer


@pytest.fixture(scope="module")
def shakespeare():
    return SHAKESPEARE.read_text(encoding="utf-8")


def test_shakespeare_char_and_byte_round_trip(shakespeare):
    char = make_tokenizer("char", shakespeare)
    assert isinstance(char, CharacterTokenizer)
    assert char.vocabulary_size() == 66  # 65 characters and <unk>
    ids = encode(char, shakespeare)
    assert ids.dtype == np.int32 and len(ids) == len(shakespeare)
    assert decode(char, ids) == shakespeare
    byte = make_tokenizer("byte")
    ids = encode(byte, shakespeare)
    assert ids.dtype == np.int32 and len(ids) == 1_115_394
    assert decode(byte, ids) == shakespeare


def test_byte_encoding_matches_keras_hub_and_keeps_raw_bytes():
    tokenizer = make_tokenizer("byte")
    assert isinstance(tokenizer, keras_hub.tokenizers.ByteTokenizer)
    ids = encode(tokenizer, TEXT)
    np.testing.assert_array_equal(ids, tokenizer(TEXT))
    assert tokenizer.detokenize(ids) == TEXT
    # Bytes that are not UTF-8 (as at the edges of enwik8's splits).
    raw = b"ab\xc3"
    text = raw.decode("utf-8", "surrogateescape")
    np.testing.assert_array_equal(encode(tokenizer, text), [97, 98, 195])
    np.testing.assert_array_equal(encode(tokenizer, raw), [97, 98, 195])
    assert (
        decode(tokenizer, [97, 98, 195]).encode("utf-8", "surrogateescape")
        == raw
    )
    with pytest.raises(ValueError, match="256"):
        decode(tokenizer, [300])


def test_codepoint_tokenizer_fast_path_matches_tokenizer():
    tokenizer = keras_hub.tokenizers.UnicodeCodepointTokenizer(lowercase=False)
    np.testing.assert_array_equal(encode(tokenizer, TEXT), tokenizer(TEXT))
    assert decode(tokenizer, encode(tokenizer, TEXT)) == TEXT
    capped = keras_hub.tokenizers.UnicodeCodepointTokenizer(
        lowercase=False, vocabulary_size=128
    )
    np.testing.assert_array_equal(encode(capped, TEXT), capped(TEXT))


def test_char_tokenizer_unknown_characters_and_cap():
    # Every character of the text, in code point order, then <unk>: the
    # id of any other character, decoded as its text (valid UTF-8).
    tokenizer = make_tokenizer("char", "abcabca")
    assert tokenizer.get_vocabulary() == ["a", "b", "c", "<unk>"]
    assert tokenizer.oov_token == "<unk>"
    ids = encode(tokenizer, "ab\tdé☕c")
    np.testing.assert_array_equal(ids, [0, 1, 3, 3, 3, 3, 2])
    assert decode(tokenizer, ids) == "ab<unk><unk><unk><unk>c"
    # A vocabulary saved without <unk> (keras-txl before it reserved one).
    closed = CharacterTokenizer(vocabulary=["a", "b", "c"])
    with pytest.raises(CorpusError, match="'d'; .*oov_token"):
        encode(closed, "abd")
    capped = make_tokenizer("char", "aaabbc", vocabulary_size=3)
    assert capped.get_vocabulary() == ["a", "b", "<unk>"]
    np.testing.assert_array_equal(encode(capped, "cab"), [2, 0, 1])
    with pytest.raises(ValueError, match=">= 2"):
        make_tokenizer("char", "abc", vocabulary_size=1)


def test_word_tokenizer_ids_eos_and_decode():
    text = "the cat sat\nthe dog\n\nsat  the\tend"
    tokenizer = make_tokenizer("word", text)
    assert isinstance(tokenizer, keras_hub.tokenizers.WordPieceTokenizer)
    vocabulary = tokenizer.get_vocabulary()
    # <unk>, <eos>, then by count; ties keep the first occurrence first.
    assert vocabulary == ["<unk>", "<eos>", "the", "sat", "cat", "dog", "end"]
    ids = encode(tokenizer, text)
    words = ["the", "cat", "sat", "<eos>", "the", "dog", "<eos>", "<eos>"]
    words += ["sat", "the", "end", "<eos>"]
    np.testing.assert_array_equal(ids, [vocabulary.index(w) for w in words])
    assert decode(tokenizer, ids) == "the cat sat\nthe dog\n\nsat the end\n"
    np.testing.assert_array_equal(encode(tokenizer, "the bird\n"), [2, 0, 1])


def test_word_encoding_matches_the_keras_hub_tokenizer(shakespeare):
    text = shakespeare[: shakespeare.index("\n", 20_000) + 1]
    tokenizer = make_tokenizer("word", text[:15_000])
    ids = encode(tokenizer, text)
    words = []
    for line in text.split("\n")[:-1]:
        words.extend(line.split() + ["<eos>"])
    expected = tokenizer(words)  # keras-hub's own WordPiece tokenization
    np.testing.assert_array_equal(ids, expected)
    assert (ids == 0).any()  # unseen words of the last 5,000 characters


def test_words_over_100_bytes_are_unknown_as_in_keras_hub():
    long_word = "x" * 101
    tokenizer = make_tokenizer("word", f"a {long_word} a")
    assert tokenizer.get_vocabulary() == ["<unk>", "<eos>", "a"]
    np.testing.assert_array_equal(
        encode(tokenizer, f"{long_word} a"), [0, 2, 1]
    )
    np.testing.assert_array_equal(tokenizer([long_word, "a"]), [0, 2])


def test_word_tokenizer_cap_and_errors():
    tokenizer = make_tokenizer("word", "a a a b b c", vocabulary_size=4)
    assert tokenizer.get_vocabulary() == ["<unk>", "<eos>", "a", "b"]
    with pytest.raises(ValueError, match="> 2"):
        make_tokenizer("word", "a b", vocabulary_size=2)
    with pytest.raises(CorpusError, match="no words"):
        make_tokenizer("word", " \n\t")
    with pytest.raises(CorpusError, match="non-empty"):
        make_tokenizer("char", "")
    with pytest.raises(ValueError, match="kind"):
        make_tokenizer("bpe", "abc")
    with pytest.raises(ValueError, match="256"):
        make_tokenizer("byte", vocabulary_size=100)


@pytest.mark.parametrize("kind", ["byte", "char", "word"])
def test_saved_tokenizer_gives_identical_ids(kind, tmp_path):
    tokenizer = make_tokenizer(kind, TEXT)
    restored = _reload_through_keras_file(tokenizer, tmp_path)
    assert type(restored) is type(tokenizer)
    assert restored.get_config() == tokenizer.get_config()
    np.testing.assert_array_equal(
        encode(restored, TEXT), encode(tokenizer, TEXT)
    )
    assert restored.vocabulary_size() == tokenizer.vocabulary_size()


def test_factory_takes_a_text_a_corpus_or_its_parts(tmp_path):
    corpus = load_corpus("builtin", None, 0.1, 0.05)
    text = "".join(corpus)
    for kind in ("char", "word"):
        expected = make_tokenizer(kind, text).get_vocabulary()
        assert make_tokenizer(kind, corpus).get_vocabulary() == expected
        assert make_tokenizer(kind, list(corpus)).get_vocabulary() == expected
    path = tmp_path / "corpus.txt"
    path.write_text(text[:5000], encoding="utf-8")
    files = load_corpus("builtin", path, 0.1, token_cache_dir=tmp_path)
    with pytest.raises(ValueError, match="mix"):
        make_tokenizer("char", [files.train, "abc"], token_cache_dir=tmp_path)
    with pytest.raises(CorpusError, match="non-empty"):
        make_tokenizer("char", [])
