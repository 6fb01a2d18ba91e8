"""The library computes what HuggingFace's `TransfoXLLMHeadModel`
(transformers 4.44.2) computes, from a checkpoint folder as its
`save_pretrained` writes it (`tests/fixtures/hf_transfo_xl/`, with every
option of `transfo-xl-wt103`; see `tests/fixtures/README.md`)."""

import json
import pickle
import shutil
import sys

import numpy as np
import pytest

from keras_txl.convert import from_huggingface
from keras_txl.convert.safetensors_file import read_safetensors
from keras_txl.models.transformer_xl_tokenizer import (
    is_huggingface_transformer_xl as is_huggingface_folder,
)
from tests.test_case import FIXTURES
from tests.test_case import to_numpy

FOLDER = FIXTURES / "hf_transfo_xl"


@pytest.mark.torch_ok
def test_matches_huggingface_from_its_starting_memory():
    reference = np.load(FOLDER / "reference.npz")
    lm = from_huggingface(FOLDER)
    assert lm.cluster_order == "tensorflow"
    assert lm.tie_projections == [False, True, True, True]
    token_ids = reference["token_ids"]  # (2, 48)
    memory = lm.backbone.initial_memory(2, start="zeros")
    assert to_numpy(memory["valid_length"]).tolist() == [16, 16]
    for s in range(4):
        log_probs, memory = lm.call_with_memory(
            token_ids[:, 12 * s : 12 * (s + 1)], memory
        )
        np.testing.assert_allclose(
            to_numpy(log_probs), reference["logp"][s], atol=1e-4
        )


def test_tied_tensors_are_stored_once():
    names = set(read_safetensors(FOLDER / "model.safetensors"))
    assert "transformer.word_emb.emb_layers.1.weight" in names
    assert "crit.out_layers.1.weight" not in names
    assert "crit.out_projs.0" in names and "crit.out_projs.1" not in names


def _copy(tmp_path, weights=True, **config):
    folder = tmp_path / "checkpoint"
    folder.mkdir(parents=True)
    data = json.loads((FOLDER / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**data, **config}))
    if weights:
        shutil.copy(FOLDER / "model.safetensors", folder)
    return folder


def test_errors_name_the_fix(tmp_path, monkeypatch):
    assert is_huggingface_folder(FOLDER)
    with pytest.raises(FileNotFoundError, match="config.json"):
        from_huggingface(tmp_path)
    gpt2 = _copy(tmp_path / "a", model_type="gpt2")
    assert not is_huggingface_folder(gpt2)
    with pytest.raises(ValueError, match="expected 'transfo-xl'"):
        from_huggingface(gpt2)
    bare = _copy(tmp_path / "b", weights=False)
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        from_huggingface(bare)
    untied = _copy(tmp_path / "c", tie_word_embeddings=False)
    with pytest.raises(ValueError, match="crit.out_layers.0.weight"):
        from_huggingface(untied)
    # A pickle is read only by torch's weights_only loader.
    (bare / "pytorch_model.bin").write_bytes(pickle.dumps({"a": 1}))
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match="safe_serialization=True"):
        from_huggingface(bare)


class _Payload:
    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path('ran').touch()",))


def test_pickle_is_read_without_running_code(tmp_path, monkeypatch):
    # torch's weights_only loader reads the pickle: a test dependency
    # (CONTRIBUTING.md), which CI installs, so its absence fails here
    # rather than skip the check.
    import torch  # noqa: F401

    bare = _copy(tmp_path, weights=False)
    (bare / "pytorch_model.bin").write_bytes(pickle.dumps({"w": _Payload()}))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match="(?i)weights.only"):
        from_huggingface(bare)
    assert not (tmp_path / "ran").exists()
