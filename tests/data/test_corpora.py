import hashlib
import pathlib
import zipfile

import numpy as np
import pytest

from keras_txl.data import corpora
from keras_txl.data import corpus_ids
from keras_txl.data import load_corpus
from keras_txl.data import make_tokenizer
from keras_txl.data.corpora import CORPORA
from keras_txl.data.corpora import HELD_OUT_SIZE
from keras_txl.data.text_source import CorpusError
from keras_txl.data.text_source import read_chunks
from keras_txl.data.text_source import text_chunks

# A fake enwik8 or text8: the held-out 10M bytes plus a short training part.
FAKE_SIZE = 2 * HELD_OUT_SIZE + 1000


def _one_line_error(excinfo, *fragments):
    message = str(excinfo.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def _write_zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def _bytes(corpus):
    """The bytes of each part of a corpus of files."""
    return [b"".join(read_chunks(part)) for part in corpus]


def _texts(corpus):
    """The text of each part of a corpus of files, decoded as it is
    tokenized."""
    return ["".join(text for text, _ in text_chunks(part)) for part in corpus]


@pytest.fixture(scope="module")
def fake_enwik8(tmp_path_factory):
    """10M + 1000 bytes of printable ASCII, newlines and, across the
    train/valid boundary, a 2-byte UTF-8 character cut in two."""
    rng = np.random.default_rng(0)
    data = bytearray(rng.integers(32, 127, FAKE_SIZE, dtype=np.uint8))
    data[::97] = b"\n" * len(data[::97])
    boundary = FAKE_SIZE - 2 * HELD_OUT_SIZE
    data[boundary - 1 : boundary + 1] = "é".encode("utf-8")
    folder = tmp_path_factory.mktemp("enwik8")
    (folder / "enwik8").write_bytes(bytes(data))
    zip_folder = folder / "zipped"
    zip_folder.mkdir()
    _write_zip(zip_folder / "enwik8.zip", {"enwik8": bytes(data)})
    return bytes(data), folder


def test_text_file_is_read_as_utf8(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("héllo\nworld", encoding="utf-8")
    corpus = load_corpus("builtin", str(path), valid_fraction=0.0)
    assert _texts(corpus) == ["héllo\nworld", "", ""]


def test_text_file_errors_name_path_and_fix(tmp_path):
    missing = tmp_path / "missing.txt"
    with pytest.raises(CorpusError) as excinfo:
        load_corpus("builtin", missing)
    _one_line_error(excinfo, str(missing), "does not exist")
    with pytest.raises(CorpusError) as excinfo:
        load_corpus("builtin", tmp_path)
    _one_line_error(excinfo, str(tmp_path), "folder")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    for fraction in (0.0, 0.1):
        with pytest.raises(CorpusError) as excinfo:
            load_corpus("builtin", empty, fraction, token_cache_dir=tmp_path)
        _one_line_error(excinfo, str(empty), "empty")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9 au lait")
    corpus = load_corpus("builtin", latin, valid_fraction=0.0)
    byte_ids = corpus_ids(make_tokenizer("byte"), corpus.train, tmp_path)
    assert len(byte_ids) == 12  # bytes need no decoding
    with pytest.raises(CorpusError) as excinfo:
        corpus_ids(make_tokenizer("char", "cafe"), corpus.train, tmp_path)
    _one_line_error(excinfo, str(latin), "utf-8", "byte 3")
    # The CLI catches it as a ValueError too.
    assert issubclass(CorpusError, ValueError)


def test_names_options_and_their_errors(tmp_path):
    assert tuple(CORPORA) == (
        "builtin", "enwik8", "text8", "wikitext103", "one_billion_word",
    )  # fmt: skip
    assert CORPORA["enwik8"] == "byte" and CORPORA["wikitext103"] == "word"
    with pytest.raises(ValueError, match="one_billion_word"):
        load_corpus("lm1b")
    with pytest.raises(ValueError, match="variant"):
        load_corpus("enwik8", tmp_path, variant="raw")
    with pytest.raises(CorpusError, match="path="):
        load_corpus("one_billion_word")


def test_builtin_corpus_is_sorted_topics_and_deterministic():
    from pydoc_data import topics

    text = load_corpus("builtin", valid_fraction=0.0).train
    assert len(text) > 100_000
    first = sorted(topics.topics)[0]
    assert text.startswith(topics.topics[first])
    corpora._builtin_text.cache_clear()
    assert load_corpus("builtin", valid_fraction=0.0).train == text
    expected = "\n\n".join(topics.topics[k] for k in sorted(topics.topics))
    assert text == expected


def test_split_is_contiguous_tail_split():
    split_text = corpora._split_text
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    train, valid, test = split_text(
        text, valid_fraction=0.1, test_fraction=0.05
    )
    assert (len(train), len(valid), len(test)) == (850, 100, 50)
    assert train + valid + test == text
    assert valid == text[850:950]
    assert tuple(split_text(text, 0.1, 0.05)) == (train, valid, test)
    no_test = split_text(text, 0.2, 0.0)
    assert no_test.test == "" and no_test.valid == text[800:]
    builtin = load_corpus("builtin", valid_fraction=0.0).train
    assert load_corpus("builtin", None, 0.1, 0.05) == split_text(
        builtin, 0.1, 0.05
    )


def test_split_errors(tmp_path):
    split_text = corpora._split_text
    with pytest.raises(ValueError, match="valid_fraction"):
        split_text("abc", valid_fraction=1.5, test_fraction=0.0)
    with pytest.raises(ValueError, match="below 1"):
        split_text("abcdef", valid_fraction=0.5, test_fraction=0.5)
    with pytest.raises(CorpusError) as excinfo:
        split_text("abc", valid_fraction=0.1, test_fraction=0.1)
    _one_line_error(excinfo, "3 characters", "valid_fraction=0.1")
    with pytest.raises(ValueError, match="below 1"):
        load_corpus("builtin", valid_fraction=0.5, test_fraction=0.5)
    path = tmp_path / "abc.txt"
    path.write_text("abc")
    with pytest.raises(CorpusError) as excinfo:
        load_corpus("builtin", path, 0.1, 0.1, token_cache_dir=tmp_path)
    _one_line_error(excinfo, "3 characters", "valid_fraction=0.1")
    with pytest.raises(ValueError, match="valid_fraction"):
        load_corpus("builtin", path, valid_fraction=1.5)


def _assert_held_out_split(splits, data):
    raw = _bytes(splits)
    assert raw[0] == data[: -2 * HELD_OUT_SIZE]
    assert raw[1] == data[-2 * HELD_OUT_SIZE : -HELD_OUT_SIZE]
    assert raw[2] == data[-HELD_OUT_SIZE:]
    assert len(raw[1]) == len(raw[2]) == HELD_OUT_SIZE


def _no_download(*args):
    raise AssertionError("a loader given `path` must not download")


def test_enwik8_from_file_zip_and_folders(fake_enwik8, monkeypatch):
    monkeypatch.setattr(corpora, "_download", _no_download)
    data, folder = fake_enwik8
    splits = load_corpus("enwik8", folder / "enwik8")
    _assert_held_out_split(splits, data)
    # The 2-byte character cut by the split survives as escaped bytes.
    assert _texts(splits)[0].endswith("\udcc3")
    for path in (folder / "zipped" / "enwik8.zip", folder / "zipped"):
        assert _bytes(load_corpus("enwik8", path)) == _bytes(splits)
    assert load_corpus("enwik8", str(folder)) == splits


def test_enwik8_download_checks_checksum(fake_enwik8, tmp_path):
    _, folder = fake_enwik8
    archive = folder / "zipped" / "enwik8.zip"
    origin = archive.as_uri()  # a file:// URL: no network
    splits = load_corpus(
        "enwik8",
        download_dir=tmp_path,
        origin=origin,
        file_hash=_sha256(archive),
    )
    assert _bytes(splits) == _bytes(load_corpus("enwik8", archive))
    assert (tmp_path / "datasets" / "enwik8.zip").is_file()
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(
            "enwik8",
            download_dir=tmp_path / "other",
            origin=origin,
            file_hash="0" * 64,
        )
    _one_line_error(excinfo, "checksum", origin, "path=")


def test_enwik8_errors(tmp_path):
    short = tmp_path / "enwik8"
    short.write_bytes(b"x" * 1000)
    with pytest.raises(CorpusError) as excinfo:
        load_corpus("enwik8", short)
    _one_line_error(excinfo, "1,000 bytes", "100,000,000")
    empty_folder = tmp_path / "empty"
    empty_folder.mkdir()
    with pytest.raises(CorpusError) as excinfo:
        load_corpus("enwik8", empty_folder)
    _one_line_error(excinfo, str(empty_folder), "enwik8.zip")
    wrong_zip = _write_zip(tmp_path / "wrong.zip", {"other": b"data"})
    with pytest.raises(CorpusError) as excinfo:
        load_corpus("enwik8", wrong_zip)
    _one_line_error(excinfo, str(wrong_zip), "enwik8")
    with pytest.raises(CorpusError, match="Could not download"):
        load_corpus(
            "enwik8",
            download_dir=tmp_path,
            origin=(tmp_path / "nowhere.zip").as_uri(),
            file_hash=None,
        )


def test_text8_splits_and_alphabet_check(tmp_path, monkeypatch):
    monkeypatch.setattr(corpora, "_download", _no_download)
    rng = np.random.default_rng(1)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz ", np.uint8)
    data = alphabet[rng.integers(0, 27, FAKE_SIZE)].tobytes()
    archive = _write_zip(tmp_path / "text8.zip", {"text8": data})
    splits = load_corpus("text8", archive, token_cache_dir=tmp_path)
    _assert_held_out_split(splits, data)
    assert load_corpus("text8", tmp_path, token_cache_dir=tmp_path) == splits
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "text8").write_bytes(data[:-1] + b"X")
    with pytest.raises(CorpusError, match="not the text8 corpus"):
        load_corpus("text8", bad, token_cache_dir=tmp_path)


@pytest.mark.parametrize("variant", ["tokens", "raw"])
def test_wikitext103_from_folder_and_zip(tmp_path, variant):
    texts = {
        "train": " = Valkyria = \n the <unk> game \n",
        "valid": " = Homarus = \n",
        "test": " = Robert = \n an @-@ actor \n",
    }
    extension = "tokens" if variant == "tokens" else "raw"
    subfolder = "wikitext-103" if variant == "tokens" else "wikitext-103-raw"
    members = {
        f"{subfolder}/wiki.{split}.{extension}": text.encode("utf-8")
        for split, text in texts.items()
    }
    archive = _write_zip(tmp_path / f"{variant}.zip", members)
    splits = _texts(load_corpus("wikitext103", archive, variant=variant))
    assert splits == [texts["train"], texts["valid"], texts["test"]]
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(tmp_path / "extracted")
    for path in (tmp_path / "extracted", tmp_path / "extracted" / subfolder):
        corpus = load_corpus("wikitext103", path, variant=variant)
        assert _texts(corpus) == splits
    downloaded = load_corpus(
        "wikitext103",
        variant=variant,
        download_dir=tmp_path / "cache",
        origin=archive.as_uri(),
        file_hash=_sha256(archive),
    )
    assert _texts(downloaded) == splits


def test_wikitext103_errors(tmp_path):
    with pytest.raises(ValueError, match="variant"):
        load_corpus("wikitext103", tmp_path, variant="bpe")
    (tmp_path / "wiki.train.tokens").write_text("a\n")
    with pytest.raises(CorpusError) as excinfo:
        load_corpus("wikitext103", tmp_path)
    _one_line_error(excinfo, "wiki.valid.tokens", str(tmp_path))
    archive = _write_zip(tmp_path / "w.zip", {"wiki.train.raw": b"a"})
    with pytest.raises(CorpusError) as excinfo:
        load_corpus("wikitext103", archive, variant="raw")
    _one_line_error(excinfo, "wiki.valid.raw", "wiki.test.raw")
    not_zip = tmp_path / "notzip.zip"
    not_zip.write_bytes(b"plain text")
    with pytest.raises(CorpusError, match="zip archive"):
        load_corpus("wikitext103", not_zip)


@pytest.mark.parametrize("variant", ["tokens", "raw"])
def test_wikitext103_from_hugging_face_parquet(tmp_path, variant):
    """The layout of `Salesforce/wikitext` on the Hugging Face hub: one
    row per line of the original files, blank lines as empty rows."""
    import pyarrow
    from pyarrow import parquet

    texts = {
        "train": " \n = Valkyria = \n \n the <unk> game \n",
        "validation": " \n = Homarus = \n",
        "test": " = Robert = \n \n an @-@ actor \n",
    }
    config = corpora.WIKITEXT103_CONFIGS[variant]
    folder = tmp_path / config
    folder.mkdir()
    for split, text in texts.items():
        rows = [line if line.strip() else "" for line in text.splitlines(True)]
        shards = [rows[:2], rows[2:]] if split == "train" else [rows]
        for number, shard in enumerate(shards):
            name = f"{split}-{number:05d}-of-{len(shards):05d}.parquet"
            table = pyarrow.table({"text": shard})
            parquet.write_table(table, folder / name)
    expected = [texts["train"], texts["validation"], texts["test"]]
    for path in (tmp_path, folder):
        corpus = load_corpus("wikitext103", path, variant=variant)
        assert _texts(corpus) == expected
    assert [s.member for s in corpus] == [None] * 3
    assert [open(s.path).read() for s in corpus] == expected
