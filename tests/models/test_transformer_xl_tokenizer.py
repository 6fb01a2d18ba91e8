"""TransformerXLTokenizer: HuggingFace's ids, Moses rules, safe vocab.pkl."""

import os
import pickle
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_txl.models import TransformerXLTokenizer
from keras_txl.models.transformer_xl_tokenizer import (
    is_huggingface_transformer_xl,
)
from keras_txl.utils.restricted_unpickler import OpaqueObject
from keras_txl.utils.restricted_unpickler import restricted_loads

HF_FOLDER = os.path.join(
    os.path.dirname(__file__), "..", "fixtures", "hf_transfo_xl"
)
VOCABULARY = ["<eos>", "<unk>", "the", "cat", "sat", "@,@", "1", "000", "."]


def test_reproduces_huggingface_token_ids():
    reference = np.load(os.path.join(HF_FOLDER, "reference.npz"))
    tokenizer = TransformerXLTokenizer.from_preset(HF_FOLDER)
    assert tokenizer.vocabulary_size() == 1203  # idx2sym + <formula>
    assert tokenizer.token_to_id("<formula>") == 1202
    ids = tokenizer([str(text) for text in reference["text"]])
    for row, expected in zip(ids, reference["token_ids"]):
        np.testing.assert_array_equal(np.array(row[:48]), expected)


def test_moses_rules_numbers_and_special_tokens():
    tokenizer = TransformerXLTokenizer(VOCABULARY + ["<formula>"])
    assert tokenizer.split("23,000 people: 1.80 m<formula> x<eos>") == [
        "23", "@,@", "000", "people", ":", "1", "@.@", "80", "m",
        "<formula>", "x", "<eos>",
    ]  # fmt: skip
    # Aggressive dash splits, no escaping of & or quotes.
    assert tokenizer.split('well-known "A&B"') == [
        "well", "@-@", "known", '"', "A", "&", "B", '"',
    ]  # fmt: skip
    ids = tokenizer("the cat sat on 1,000.")
    assert ids == [2, 3, 4, 1, 6, 5, 7, 8]
    assert tokenizer.detokenize(ids) == "the cat sat <unk> 1,000."
    lower = TransformerXLTokenizer(VOCABULARY, lower_case=True)
    assert lower("The CAT") == [2, 3]


def test_tf_data_path_matches_python_path():
    tokenizer = TransformerXLTokenizer(VOCABULARY)
    texts = ["the cat sat.", "1,000 cats", ""]
    expected = tokenizer(texts)
    dataset = tf.data.Dataset.from_tensor_slices(texts)
    batched = dataset.batch(3).map(tokenizer).get_single_element()
    assert batched.to_list() == expected
    one = [x.numpy().tolist() for x in dataset.map(tokenizer)]
    assert one == expected
    text = tf.data.Dataset.from_tensors(tf.ragged.constant(expected)).map(
        tokenizer.detokenize
    )
    assert [t.decode() for t in text.get_single_element().numpy()] == [
        tokenizer.detokenize(row) for row in expected
    ]


def test_preset_round_trip_is_plain_text(tmp_path):
    tokenizer = TransformerXLTokenizer.from_preset(HF_FOLDER)
    tokenizer.save_to_preset(tmp_path)
    assets = tmp_path / "assets" / "tokenizer"
    assert sorted(os.listdir(assets)) == ["settings.json", "vocabulary.txt"]
    lines = (assets / "vocabulary.txt").read_text("utf-8").split("\n")
    assert lines[:2] == ["<eos>", "<unk>"] and lines[1202] == "<formula>"
    restored = TransformerXLTokenizer.from_preset(str(tmp_path))
    assert restored.get_vocabulary() == tokenizer.get_vocabulary()
    assert restored.never_split == tokenizer.never_split
    text = "Alack, thither where more attends you <formula> 3.5"
    assert restored(text) == tokenizer(text)
    # A cut vocabulary file is refused, not read as a shorter vocabulary.
    (assets / "vocabulary.txt").write_text("<eos>\n<unk>\n", "utf-8")
    with pytest.raises(ValueError, match="changed or cut"):
        TransformerXLTokenizer.from_preset(str(tmp_path))


def test_bad_arguments_are_explained():
    with pytest.raises(ValueError, match="unknown_token"):
        TransformerXLTokenizer(["<eos>", "a"])
    with pytest.raises(ValueError, match="repeat"):
        TransformerXLTokenizer(["<eos>", "<unk>", "a", "a"])
    with pytest.raises(ValueError, match="line breaks"):
        TransformerXLTokenizer(["<eos>", "<unk>", "a\nb"])
    with pytest.raises(ValueError, match="delimiter"):
        TransformerXLTokenizer(VOCABULARY, delimiter=" ")


def test_end_token_is_the_special_token():
    """What keras-hub's `_add_special_token` set, set here: the end,
    start and padding token are `end_token`, and keras-hub's
    `special_tokens` / `special_token_ids` name it."""
    tokenizer = TransformerXLTokenizer(VOCABULARY)
    ids = (tokenizer.start_token_id, tokenizer.end_token_id)
    assert ids + (tokenizer.pad_token_id,) == (0, 0, 0)
    assert tokenizer.start_token == tokenizer.pad_token == "<eos>"
    assert tokenizer.special_tokens == ["<eos>"]
    assert tokenizer.special_token_ids == [0]
    other = TransformerXLTokenizer(["<unk>", "x", "<eos>"])
    assert other.end_token_id == other.start_token_id == 2
    empty = TransformerXLTokenizer()
    assert empty.end_token == "<eos>" and empty.end_token_id is None
    with pytest.raises(ValueError, match="No vocabulary"):
        empty.special_token_ids
    empty.set_vocabulary(["<eos>", "<unk>", "z", "y"])
    assert empty.end_token_id == 0 and empty("z y") == [2, 3]
    with pytest.raises(ValueError, match="end_token"):
        TransformerXLTokenizer(["<unk>", "a"])
    restored = TransformerXLTokenizer.from_config(tokenizer.get_config())
    assert restored.end_token == "<eos>" and restored.end_token_id is None


def test_huggingface_handle_is_read_with_huggingface_hub(monkeypatch):
    import huggingface_hub
    from huggingface_hub import errors

    downloads = []

    def hf_hub_download(repo_id, filename, **kwargs):
        downloads.append((repo_id, filename))
        path = os.path.join(HF_FOLDER, filename)
        if repo_id != "transfo-xl/transfo-xl-wt103" or not os.path.isfile(path):
            raise errors.EntryNotFoundError(f"no {filename}")
        return path

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    handle = "hf://transfo-xl/transfo-xl-wt103"
    assert is_huggingface_transformer_xl(handle)
    tokenizer = TransformerXLTokenizer.from_preset(handle)
    assert tokenizer.vocabulary_size() == 1203
    assert ("transfo-xl/transfo-xl-wt103", "vocab.pkl") in downloads
    count = len(downloads)
    # Not a folder, not a HuggingFace handle: not read at all.
    assert not is_huggingface_transformer_xl("kaggle://keras/gpt2/keras/x")
    assert not is_huggingface_transformer_xl("/no/such/folder")
    assert len(downloads) == count
    # A handle without config.json is no HuggingFace checkpoint.
    assert not is_huggingface_transformer_xl("hf://someone/empty")
    with pytest.raises(ValueError, match="folder or"):
        TransformerXLTokenizer.from_huggingface("kaggle://a/b/c/d")


class _RunsCode:
    """What an attacker puts in a pickle: unpickling calls os.system."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_malicious_vocab_pickle_runs_no_code(tmp_path):
    marker = tmp_path / "pwned"
    folder = tmp_path / "hf"
    shutil.copytree(HF_FOLDER, folder)
    state = {
        "idx2sym": ["<eos>", "<unk>", "hello"],
        "payload": _RunsCode(f"touch {marker}"),
        "nested": [{"again": _RunsCode(f"touch {marker}")}],
    }
    (folder / "vocab.pkl").write_bytes(pickle.dumps(state, protocol=4))
    (folder / "tokenizer_config.json").write_text("{}", "utf-8")
    tokenizer = TransformerXLTokenizer.from_preset(str(folder))
    assert not marker.exists()
    assert tokenizer.get_vocabulary() == ["<eos>", "<unk>", "hello"]
    loaded = restricted_loads((folder / "vocab.pkl").read_bytes())
    assert isinstance(loaded["payload"], OpaqueObject)
    assert "system" in repr(loaded["payload"])
    assert not marker.exists()
    # The same file through pickle.load would have run the command.
    pickle.loads((folder / "vocab.pkl").read_bytes())
    assert marker.exists()


def test_vocab_pickle_without_symbols_is_refused(tmp_path):
    folder = tmp_path / "hf"
    shutil.copytree(HF_FOLDER, folder)
    (folder / "vocab.pkl").write_bytes(pickle.dumps({"idx2sym": "abc"}))
    with pytest.raises(ValueError, match="idx2sym"):
        TransformerXLTokenizer.from_preset(str(folder))
    (folder / "vocab.pkl").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="without running code"):
        TransformerXLTokenizer.from_preset(str(folder))
