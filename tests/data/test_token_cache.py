import os
import zipfile

import numpy as np
import pytest

from keras_txl.data import corpus_ids
from keras_txl.data import load_corpus
from keras_txl.data import make_tokenizer
from keras_txl.data import segment_dataset
from keras_txl.data import text_source
from keras_txl.data import tokenization
from keras_txl.data.corpora import HELD_OUT_SIZE
from keras_txl.data.corpora import _split_text
from keras_txl.data.text_source import CorpusError
from keras_txl.data.text_source import TextSource
from keras_txl.data.text_source import text_chunks
from keras_txl.data.token_cache import token_cache_entries
from keras_txl.data.tokenization import encode
from keras_txl.data.tokenization import tokenizer_fingerprint

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
    tokenizer = make_tokenizer(kind, [source], token_cache_dir=tmp_path)
    reference = make_tokenizer(kind, text)
    assert tokenizer_fingerprint(tokenizer) == tokenizer_fingerprint(reference)
    built = []
    ids = corpus_ids(tokenizer, source, tmp_path, log=built.append)
    assert isinstance(ids, np.memmap) and len(built) == 1
    expected = encode(reference, text)
    np.testing.assert_array_equal(ids, expected)
    size = reference.vocabulary_size()
    assert ids.dtype == (np.uint8 if size <= 256 else np.uint16)
    again = corpus_ids(tokenizer, source, tmp_path, log=built.append)
    assert len(built) == 1  # read from the cache, not tokenized again
    np.testing.assert_array_equal(again, expected)
    # The vocabulary is cached too.
    kinds = [entry["kind"] for entry in token_cache_entries(tmp_path)]
    assert kinds.count("vocabulary") == (kind != "byte")
    rebuilt = make_tokenizer(kind, [source], token_cache_dir=tmp_path)
    assert tokenizer_fingerprint(rebuilt) == tokenizer_fingerprint(reference)


def test_stale_cache_and_other_tokenizer_rebuild(tmp_path):
    path = _write(tmp_path, "abcabc\n")
    source = TextSource(path)
    tokenizer = make_tokenizer("char", "abc\n")
    built = []
    first = corpus_ids(tokenizer, source, tmp_path, log=built.append)
    assert first.tolist() == [1, 2, 3, 1, 2, 3, 0]
    _write(tmp_path, "cba\n")  # another size: the cache is stale
    second = corpus_ids(tokenizer, source, tmp_path, log=built.append)
    assert second.tolist() == [3, 2, 1, 0] and len(built) == 2
    other = make_tokenizer("char", "dcba\n")
    assert other.vocabulary_size() == 6  # 5 characters and <unk>
    third = corpus_ids(other, source, tmp_path, log=built.append)
    assert len(built) == 3
    assert third.tolist() == encode(other, "cba\n").tolist()
    # Same size, other content, other modification time: rebuilt too.
    _write(tmp_path, "aaa\n")
    os.utime(path, ns=(0, 10**9))
    fourth = corpus_ids(tokenizer, source, tmp_path, log=built.append)
    assert fourth.tolist() == [1, 1, 1, 0] and len(built) == 4


def test_killed_tokenization_leaves_nothing_trusted(tmp_path, monkeypatch):
    path = _write(tmp_path, "abc" * 1000)
    tokenizer = make_tokenizer("char", "abc")
    real = tokenization._encode_pieces

    def dies_midway(tokenizer, source):
        pieces = real(tokenizer, source)
        yield next(pieces)
        raise KeyboardInterrupt  # as a run killed while tokenizing

    monkeypatch.setattr(text_source, "CHUNK_BYTES", 100)
    monkeypatch.setattr(tokenization, "_encode_pieces", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        corpus_ids(tokenizer, TextSource(path), tmp_path)
    left = [name for name in os.listdir(tmp_path) if name != "corpus.txt"]
    assert not any(name.endswith((".ids", ".partial")) for name in left)
    monkeypatch.setattr(tokenization, "_encode_pieces", real)
    built = []
    ids = corpus_ids(tokenizer, TextSource(path), tmp_path, built.append)
    assert len(ids) == 3000 and len(built) == 1


def test_text_file_splits_as_text_in_memory(tmp_path, small_chunks):
    text = ODD_TEXT * 7
    path = _write(tmp_path, text)
    splits = load_corpus("builtin", path, 0.1, 0.2, token_cache_dir=tmp_path)
    expected = _split_text(text, 0.1, 0.2)
    tokenizer = make_tokenizer("char", text)
    for source, part in zip(splits, expected):
        ids = corpus_ids(tokenizer, source, tmp_path)
        np.testing.assert_array_equal(ids, encode(tokenizer, part))
    with pytest.raises(CorpusError, match="empty"):
        load_corpus("builtin", _write(tmp_path, "", "empty.txt"), 0.1)


def test_enwik8_ids_from_zip_and_file(tmp_path, small_chunks):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 2 * HELD_OUT_SIZE + 3000, np.uint8).tobytes()
    (tmp_path / "enwik8").write_bytes(data)
    with zipfile.ZipFile(tmp_path / "enwik8.zip", "w") as archive:
        archive.writestr("enwik8", data)
    expected = [
        part.decode("utf-8", "surrogateescape")
        for part in (
            data[: -2 * HELD_OUT_SIZE],
            data[-2 * HELD_OUT_SIZE : -HELD_OUT_SIZE],
            data[-HELD_OUT_SIZE:],
        )
    ]
    byte = make_tokenizer("byte")
    for path in (tmp_path / "enwik8.zip", tmp_path / "enwik8"):
        sources = load_corpus("enwik8", path)
        for source, part in zip(sources, expected):
            ids = corpus_ids(byte, source, tmp_path)
            np.testing.assert_array_equal(ids, encode(byte, part))
    # A character vocabulary of the bytes decoded with surrogateescape.
    sources = load_corpus("enwik8", tmp_path / "enwik8")
    char = make_tokenizer("char", sources, token_cache_dir=tmp_path)
    ids = corpus_ids(char, sources.valid, tmp_path)
    np.testing.assert_array_equal(ids, encode(char, expected[1]))


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
    fake = np.frombuffer(b"fake enwik8 text\n", np.uint8)
    data = np.resize(fake, 2 * HELD_OUT_SIZE + 5000).tobytes()
    (tmp_path / "enwik8").write_bytes(data)
    built = []

    def load():
        corpus = load_corpus("enwik8", tmp_path, token_cache_dir=tmp_path)
        tokenizer = make_tokenizer("byte", corpus, token_cache_dir=tmp_path)
        return corpus_ids(tokenizer, corpus, tmp_path, log=built.append)

    first = load()
    assert len(built) == 3  # train, valid, test
    second = load()
    assert len(built) == 3  # nothing tokenized again
    assert [len(part) for part in second[1:]] == [5000, *[HELD_OUT_SIZE] * 2]
    assert all(isinstance(part, np.memmap) for part in second[1:])
    np.testing.assert_array_equal(first.train, second.train)


def test_parts_of_several_files_and_of_text(tmp_path, small_chunks):
    """A part of several files (One Billion Word's training shards) is one
    text, cached once; a text in memory (the built-in corpus) is encoded,
    nothing cached."""
    texts = [ODD_TEXT, "abc\n" * 400, "x y z\n"]
    sources = tuple(
        TextSource(_write(tmp_path, text, f"{i}.txt"))
        for i, text in enumerate(texts)
    )
    for kind in ("char", "word"):
        tokenizer = make_tokenizer(kind, [sources], token_cache_dir=tmp_path)
        built = []
        ids = corpus_ids(tokenizer, sources, tmp_path, built.append)
        again = corpus_ids(tokenizer, sources, tmp_path, built.append)
        assert len(built) == 1 and "and 2 more" in built[0]
        expected = np.concatenate([encode(tokenizer, t) for t in texts])
        np.testing.assert_array_equal(ids, expected)
        np.testing.assert_array_equal(again, expected)
    entries = [e for e in token_cache_entries(tmp_path) if e["kind"] == "ids"]
    assert all("and 2 more" in entry["source"] for entry in entries)
    assert len(entries) == 2
    tokenizer = make_tokenizer("char", "".join(texts))
    np.testing.assert_array_equal(
        corpus_ids(tokenizer, texts[1]), encode(tokenizer, texts[1])
    )
    kinds = sorted(e["kind"] for e in token_cache_entries(tmp_path))
    assert kinds == ["ids"] * 2 + ["other"] * 3 + ["vocabulary"] * 2
    chunks = "".join(text for text, _ in text_chunks(sources[0]))
    assert chunks == ODD_TEXT
