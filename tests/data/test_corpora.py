import hashlib
import pathlib
import zipfile

import numpy as np
import pytest

from keras_txl import data
from keras_txl.data import CorpusError
from keras_txl.data import builtin_corpus
from keras_txl.data import corpora
from keras_txl.data import load_enwik8
from keras_txl.data import load_text
from keras_txl.data import load_text8
from keras_txl.data import load_wikitext103
from keras_txl.data import split_text
from keras_txl.data.corpora import HELD_OUT_SIZE

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


def test_load_text_reads_utf8_and_other_encodings(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes("Ça va?\n".encode("latin-1"))
    assert load_text(path, encoding="latin-1") == "Ça va?\n"
    path.write_text("héllo\nworld", encoding="utf-8")
    assert load_text(str(path)) == "héllo\nworld"


def test_load_text_errors_name_path_and_fix(tmp_path):
    missing = tmp_path / "missing.txt"
    with pytest.raises(CorpusError) as excinfo:
        load_text(missing)
    _one_line_error(excinfo, str(missing), "does not exist")
    with pytest.raises(CorpusError) as excinfo:
        load_text(tmp_path)
    _one_line_error(excinfo, str(tmp_path), "folder")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(CorpusError) as excinfo:
        load_text(empty)
    _one_line_error(excinfo, str(empty), "empty")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9 au lait")
    with pytest.raises(CorpusError) as excinfo:
        load_text(latin)
    _one_line_error(excinfo, str(latin), "utf-8", "byte 3", "encoding=")
    with pytest.raises(CorpusError) as excinfo:
        load_text(latin, encoding="no-such-codec")
    _one_line_error(excinfo, "no-such-codec", str(latin))
    # The CLI catches it as a ValueError too.
    assert issubclass(CorpusError, ValueError)


def test_builtin_corpus_is_sorted_topics_and_deterministic():
    from pydoc_data import topics

    text = builtin_corpus()
    assert len(text) > 100_000
    first = sorted(topics.topics)[0]
    assert text.startswith(topics.topics[first])
    builtin_corpus.cache_clear()
    assert builtin_corpus() == text
    expected = "\n\n".join(topics.topics[k] for k in sorted(topics.topics))
    assert text == expected


def test_split_text_is_contiguous_tail_split():
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    train, valid, test = split_text(
        text, valid_fraction=0.1, test_fraction=0.05
    )
    assert (len(train), len(valid), len(test)) == (850, 100, 50)
    assert train + valid + test == text
    assert valid == text[850:950]
    assert split_text(text, 0.1, 0.05) == (train, valid, test)
    no_test = split_text(text, 0.2, 0.0)
    assert no_test.test == "" and no_test.valid == text[800:]


def test_split_text_errors():
    with pytest.raises(ValueError, match="valid_fraction"):
        split_text("abc", valid_fraction=1.5, test_fraction=0.0)
    with pytest.raises(ValueError, match="below 1"):
        split_text("abcdef", valid_fraction=0.5, test_fraction=0.5)
    with pytest.raises(CorpusError) as excinfo:
        split_text("abc", valid_fraction=0.1, test_fraction=0.1)
    _one_line_error(excinfo, "3 characters", "valid_fraction=0.1")


def _assert_held_out_split(splits, data):
    raw = [s.encode("utf-8", "surrogateescape") for s in splits]
    assert raw[0] == data[: -2 * HELD_OUT_SIZE]
    assert raw[1] == data[-2 * HELD_OUT_SIZE : -HELD_OUT_SIZE]
    assert raw[2] == data[-HELD_OUT_SIZE:]
    assert len(raw[1]) == len(raw[2]) == HELD_OUT_SIZE


def _no_download(*args):
    raise AssertionError("a loader given `path` must not download")


def test_load_enwik8_from_file_zip_and_folders(fake_enwik8, monkeypatch):
    monkeypatch.setattr(corpora, "_download", _no_download)
    data, folder = fake_enwik8
    splits = load_enwik8(path=folder / "enwik8")
    _assert_held_out_split(splits, data)
    # The 2-byte character cut by the split survives as escaped bytes.
    assert splits.train.endswith("\udcc3")
    assert load_enwik8(path=folder / "zipped" / "enwik8.zip") == splits
    assert load_enwik8(path=folder / "zipped") == splits
    assert load_enwik8(path=str(folder)) == splits


def test_load_enwik8_download_checks_checksum(fake_enwik8, tmp_path):
    _, folder = fake_enwik8
    archive = folder / "zipped" / "enwik8.zip"
    origin = archive.as_uri()  # a file:// URL: no network
    splits = load_enwik8(
        cache_dir=tmp_path, origin=origin, file_hash=_sha256(archive)
    )
    assert splits == load_enwik8(path=archive)
    assert (tmp_path / "datasets" / "enwik8.zip").is_file()
    with pytest.raises(CorpusError) as excinfo:
        load_enwik8(
            cache_dir=tmp_path / "other", origin=origin, file_hash="0" * 64
        )
    _one_line_error(excinfo, "checksum", origin, "path=")


def test_load_enwik8_errors(tmp_path):
    short = tmp_path / "enwik8"
    short.write_bytes(b"x" * 1000)
    with pytest.raises(CorpusError) as excinfo:
        load_enwik8(path=short)
    _one_line_error(excinfo, "1,000 bytes", "100,000,000")
    empty_folder = tmp_path / "empty"
    empty_folder.mkdir()
    with pytest.raises(CorpusError) as excinfo:
        load_enwik8(path=empty_folder)
    _one_line_error(excinfo, str(empty_folder), "enwik8.zip")
    wrong_zip = _write_zip(tmp_path / "wrong.zip", {"other": b"data"})
    with pytest.raises(CorpusError) as excinfo:
        load_enwik8(path=wrong_zip)
    _one_line_error(excinfo, str(wrong_zip), "enwik8")
    with pytest.raises(CorpusError, match="Could not download"):
        load_enwik8(
            cache_dir=tmp_path,
            origin=(tmp_path / "nowhere.zip").as_uri(),
            file_hash=None,
        )


def test_load_text8_splits_and_alphabet_check(tmp_path, monkeypatch):
    monkeypatch.setattr(corpora, "_download", _no_download)
    rng = np.random.default_rng(1)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz ", np.uint8)
    data = alphabet[rng.integers(0, 27, FAKE_SIZE)].tobytes()
    archive = _write_zip(tmp_path / "text8.zip", {"text8": data})
    splits = load_text8(path=archive)
    _assert_held_out_split(splits, data)
    assert load_text8(path=tmp_path) == splits  # folder with text8.zip
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "text8").write_bytes(data[:-1] + b"X")
    with pytest.raises(CorpusError, match="not the text8 corpus"):
        load_text8(path=bad)


@pytest.mark.parametrize("variant", ["tokens", "raw"])
def test_load_wikitext103_from_folder_and_zip(tmp_path, variant):
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
    splits = load_wikitext103(path=archive, variant=variant)
    assert splits == (texts["train"], texts["valid"], texts["test"])
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(tmp_path / "extracted")
    assert (
        load_wikitext103(path=tmp_path / "extracted", variant=variant) == splits
    )
    assert (
        load_wikitext103(
            path=tmp_path / "extracted" / subfolder, variant=variant
        )
        == splits
    )
    downloaded = load_wikitext103(
        variant=variant,
        cache_dir=tmp_path / "cache",
        origin=archive.as_uri(),
        file_hash=_sha256(archive),
    )
    assert downloaded == splits


def test_load_wikitext103_errors(tmp_path):
    with pytest.raises(ValueError, match="variant"):
        load_wikitext103(path=tmp_path, variant="bpe")
    (tmp_path / "wiki.train.tokens").write_text("a\n")
    with pytest.raises(CorpusError) as excinfo:
        load_wikitext103(path=tmp_path)
    _one_line_error(excinfo, "wiki.valid.tokens", str(tmp_path))
    archive = _write_zip(tmp_path / "w.zip", {"wiki.train.raw": b"a"})
    with pytest.raises(CorpusError) as excinfo:
        load_wikitext103(path=archive, variant="raw")
    _one_line_error(excinfo, "wiki.valid.raw", "wiki.test.raw")
    not_zip = tmp_path / "notzip.zip"
    not_zip.write_bytes(b"plain text")
    with pytest.raises(CorpusError, match="zip archive"):
        load_wikitext103(path=not_zip)


@pytest.mark.parametrize("variant", ["tokens", "raw"])
def test_load_wikitext103_from_hugging_face_parquet(tmp_path, variant):
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
    expected = (texts["train"], texts["validation"], texts["test"])
    assert load_wikitext103(path=tmp_path, variant=variant) == expected
    assert load_wikitext103(path=folder, variant=variant) == expected
    sources = data.wikitext103_sources(path=tmp_path, variant=variant)
    assert [s.member for s in sources] == [None] * 3
    assert [open(s.path).read() for s in sources] == list(expected)
