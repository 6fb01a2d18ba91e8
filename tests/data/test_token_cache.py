import os
import zipfile

import numpy as np
import pytest

from keras_txl.data import CorpusError
from keras_txl.data import TextSource
from keras_txl.data import build_tokenizer
from keras_txl.data import cached_token_ids
from keras_txl.data import encode
from keras_txl.data import enwik8_sources
from keras_txl.data import load_enwik8
from keras_txl.data import make_tokenizer
from keras_txl.data import segment_dataset
from keras_txl.data import split_text
from keras_txl.data import text_file_sources
from keras_txl.data import text_source
from keras_txl.data import token_cache
from keras_txl.data.corpora import HELD_OUT_SIZE
from keras_txl.data.token_cache import tokenizer_fingerprint

CORPUS = os.path.join(
    os.path.dirname(__file__), "..", "..", "data", "tinyshakespeare.txt"
)
# Not ASCII, long lines, a line without a final newline.
ODD_TEXT = "héllo wörld 😀 a\n\n  b  c\t d\n" + "mot " * 300 + "fin"


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 1,000 bytes: a multi-byte character or a word is cut."""
    monkeypatch.setattr(text_source, "CHUNK_BYTES", 1000)


def _write(folder, text, name="corpus.txt"):
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8", newline="") as file:
        file.write(text)
    return path


@pytest.mark.parametrize("kind", ["byte", "char", "word"])
@pytest.mark.parametrize("text", ["shakespeare", "odd"])
def test_cache_gives_the_ids_of_encode(tmp_path, small_chunks, kind, text):
    if text == "shakespeare":
        with open(CORPUS, encoding="utf-8") as file:
            text = file.read()[:200_000]
    else:
        text = ODD_TEXT
    source = TextSource(_write(tmp_path, text))
    tokenizer = build_tokenizer(kind, [source], cache_dir=tmp_path)
    reference = make_tokenizer(kind, text)
    assert tokenizer_fingerprint(tokenizer) == tokenizer_fingerprint(reference)
    built = []
    ids = cached_token_ids(tokenizer, source, tmp_path, log=built.append)
    assert isinstance(ids, np.memmap) and len(built) == 1
    expected = encode(reference, text)
    np.testing.assert_array_equal(ids, expected)
    size = reference.vocabulary_size()
    assert ids.dtype == (np.uint8 if size <= 256 else np.uint16)
    again = cached_token_ids(tokenizer, source, tmp_path, log=built.append)
    assert len(built) == 1  # read from the cache, not tokenized again
    np.testing.assert_array_equal(again, expected)
    # The vocabulary is cached too.
    rebuilt = build_tokenizer(kind, [source], cache_dir=tmp_path)
    assert tokenizer_fingerprint(rebuilt) == tokenizer_fingerprint(reference)


def test_stale_cache_and_other_tokenizer_rebuild(tmp_path):
    path = _write(tmp_path, "abcabc\n")
    source = TextSource(path)
    tokenizer = make_tokenizer("char", "abc\n")
    built = []
    first = cached_token_ids(tokenizer, source, tmp_path, log=built.append)
    assert first.tolist() == [1, 2, 3, 1, 2, 3, 0]
    _write(tmp_path, "cba\n")  # another size: the cache is stale
    second = cached_token_ids(tokenizer, source, tmp_path, log=built.append)
    assert second.tolist() == [3, 2, 1, 0] and len(built) == 2
    other = make_tokenizer("char", "dcba\n")
    assert other.vocabulary_size() == 5
    third = cached_token_ids(other, source, tmp_path, log=built.append)
    assert len(built) == 3
    assert third.tolist() == encode(other, "cba\n").tolist()
    # Same size, other content, other modification time: rebuilt too.
    _write(tmp_path, "aaa\n")
    os.utime(path, ns=(0, 10**9))
    fourth = cached_token_ids(tokenizer, source, tmp_path, log=built.append)
    assert fourth.tolist() == [1, 1, 1, 0] and len(built) == 4


def test_killed_tokenization_leaves_nothing_trusted(tmp_path, monkeypatch):
    path = _write(tmp_path, "abc" * 1000)
    tokenizer = make_tokenizer("char", "abc")
    real = token_cache._encode_pieces

    def dies_midway(tokenizer, source):
        pieces = real(tokenizer, source)
        yield next(pieces)
        raise KeyboardInterrupt  # as a run killed while tokenizing

    monkeypatch.setattr(text_source, "CHUNK_BYTES", 100)
    monkeypatch.setattr(token_cache, "_encode_pieces", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        cached_token_ids(tokenizer, TextSource(path), tmp_path)
    left = [name for name in os.listdir(tmp_path) if name != "corpus.txt"]
    assert not any(name.endswith((".ids", ".partial")) for name in left)
    monkeypatch.setattr(token_cache, "_encode_pieces", real)
    built = []
    ids = cached_token_ids(tokenizer, TextSource(path), tmp_path, built.append)
    assert len(ids) == 3000 and len(built) == 1


def test_text_file_sources_split_as_split_text(tmp_path, small_chunks):
    text = ODD_TEXT * 7
    path = _write(tmp_path, text)
    splits = text_file_sources(path, 0.1, 0.2, cache_dir=tmp_path)
    expected = split_text(text, 0.1, 0.2)
    tokenizer = make_tokenizer("char", text)
    for source, part in zip(splits, expected):
        ids = cached_token_ids(tokenizer, source, tmp_path)
        np.testing.assert_array_equal(ids, encode(tokenizer, part))
    with pytest.raises(CorpusError, match="empty"):
        text_file_sources(_write(tmp_path, "", "empty.txt"), 0.1, 0.0)


def test_enwik8_sources_from_zip_and_file(tmp_path, small_chunks):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 2 * HELD_OUT_SIZE + 3000, np.uint8).tobytes()
    (tmp_path / "enwik8").write_bytes(data)
    with zipfile.ZipFile(tmp_path / "enwik8.zip", "w") as archive:
        archive.writestr("enwik8", data)
    expected = load_enwik8(path=tmp_path / "enwik8")
    byte = make_tokenizer("byte")
    for path in (tmp_path / "enwik8.zip", tmp_path / "enwik8"):
        sources = enwik8_sources(path=path)
        for source, part in zip(sources, expected):
            ids = cached_token_ids(byte, source, tmp_path)
            np.testing.assert_array_equal(ids, encode(byte, part))
    # A character vocabulary of the bytes decoded with surrogateescape.
    sources = enwik8_sources(path=tmp_path / "enwik8")
    char = build_tokenizer("char", sources, cache_dir=tmp_path)
    ids = cached_token_ids(char, sources.valid, tmp_path)
    np.testing.assert_array_equal(ids, encode(char, expected.valid))


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_segments_of_a_memmap_equal_those_of_the_array(
    tmp_path, drop_remainder
):
    ids = np.random.default_rng(1).integers(0, 300, 1001).astype(np.uint16)
    path = tmp_path / "ids.bin"
    ids.tofile(path)
    mapped = np.memmap(path, np.uint16, "r", shape=(len(ids),))
    for shards, index in ((1, 0), (2, 1)):
        kwargs = dict(
            drop_remainder=drop_remainder,
            vocabulary_size=300,
            num_shards=shards,
            shard_index=index,
        )
        expected = list(segment_dataset(ids, 4, 7, **kwargs))
        dataset = segment_dataset(mapped, 4, 7, **kwargs)
        got = list(dataset)
        assert int(dataset.cardinality()) == len(expected) == len(got)
        for (a, b), (c, d) in zip(got, expected):
            assert a.dtype.name == "int32"
            np.testing.assert_array_equal(a, c)
            np.testing.assert_array_equal(b, d)
    with pytest.raises(CorpusError, match="vocabulary_size=200"):
        segment_dataset(mapped, 4, 7, vocabulary_size=200)


def test_second_load_reads_the_cache(tmp_path):
    from keras_txl.data import load_corpus_ids

    fake = np.frombuffer(b"fake enwik8 text\n", np.uint8)
    data = np.resize(fake, 2 * HELD_OUT_SIZE + 5000).tobytes()
    (tmp_path / "enwik8").write_bytes(data)
    built = []
    first = load_corpus_ids(
        "enwik8", tmp_path, "byte", cache_dir=tmp_path, log=built.append
    )
    assert len(built) == 3  # train, valid, test
    second = load_corpus_ids(
        "enwik8", tmp_path, "byte", cache_dir=tmp_path, log=built.append
    )
    assert len(built) == 3  # nothing tokenized again
    assert [len(part) for part in second[1:]] == [5000, *[HELD_OUT_SIZE] * 2]
    assert all(isinstance(part, np.memmap) for part in second[1:])
    np.testing.assert_array_equal(first.train, second.train)
