"""The library computes what the authors' TensorFlow Transformer-XL
(`tf/model.py`, which trained the released checkpoints) computes.

`tests/fixtures/tf_official/` holds checkpoints of that code and its
per-token losses and memories over 4 segments, from the zero memory its
scripts start with; see `tests/fixtures/README.md`.
"""

import json
import sys

import numpy as np
import pytest
from keras import ops

from keras_txl.convert import from_official_tensorflow
from keras_txl.convert.official_tensorflow import is_official_tensorflow_folder
from keras_txl.convert.official_tensorflow import parse_flags
from keras_txl.models import TransformerXLCausalLM
from keras_txl.models.transformer_xl_tokenizer import (
    is_huggingface_transformer_xl as is_huggingface_folder,
)
from tests.test_case import FIXTURES
from tests.test_case import to_numpy

FOLDER = FIXTURES / "tf_official"


def _nll_and_memory(lm, tokens, T, segments, start="zeros"):
    memory = lm.backbone.initial_memory(tokens.shape[0], start=start)
    for s in range(segments):
        logits, memory = lm.call_with_memory(
            tokens[:, s * T : (s + 1) * T], memory
        )
        log_probs = to_numpy(ops.log_softmax(logits, axis=-1))
        targets = tokens[:, s * T + 1 : (s + 1) * T + 1]
        nll = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
        yield nll, to_numpy(memory["memory"])


@pytest.mark.torch_ok
@pytest.mark.parametrize("name", ["tf_char", "tf_word"])
def test_matches_the_authors_tensorflow_code(name):
    folder = FOLDER / name
    reference = np.load(folder / "reference.npz")
    T = json.loads((folder / "config.json").read_text())["tgt_len"]
    lm = from_official_tensorflow(folder)  # its config.json
    backbone = lm.backbone
    assert backbone.same_length == "tensorflow"
    assert backbone.layer_norm_epsilon == 1e-12
    outputs = _nll_and_memory(lm, reference["tokens"], T, 4)
    for s, (nll, memory) in enumerate(outputs):
        np.testing.assert_allclose(nll, reference["nll"][s], atol=1e-4)
        # (batch, L, M, d), as the reference
        np.testing.assert_allclose(memory, reference["memory"][s], atol=1e-4)
    # From an empty memory (the PyTorch convention) the numbers differ.
    nll, _ = next(_nll_and_memory(lm, reference["tokens"], T, 1, "empty"))
    assert np.abs(nll - reference["nll"][0]).max() > 1e-2


SCRIPT = """#!/bin/bash
N_LAYER=2
D_MODEL=32
TEST_MEM_LEN=12
python data_utils.py --dataset=wt103 --tgt_len=8
python train_gpu.py \\
    --div_val=2 \\
    --untie_r=True \\
    --proj_share_all_but_first=True \\
    --n_layer=${N_LAYER} \\
    --d_model=${D_MODEL} \\
    --d_embed=${D_MODEL} \\
    --n_head=2 \\
    --d_head=16 \\
    --d_inner=64 \\
    --dropout=0.0 \\
    --tgt_len=8 \\
    --mem_len=${TEST_MEM_LEN} \\
    --clamp_len=9 \\
    --same_length=True \\
    --do_eval=True
"""


@pytest.mark.torch_ok
def test_flags_of_a_sota_script(tmp_path):
    """The config as the flags of the authors' tf/sota scripts; `n_token`
    and `cutoffs` come from the checkpoint."""
    config = parse_flags(SCRIPT)
    assert config["mem_len"] == 12 and config["untie_r"] is True
    assert config["proj_share_all_but_first"] and config["n_layer"] == 2
    script = tmp_path / "wt103.sh"
    script.write_text(SCRIPT)
    folder = FOLDER / "tf_word"
    lm = from_official_tensorflow(folder / "model.ckpt", str(script))
    # The authors' layout: the checkpoint in model/, the script above it.
    (tmp_path / "model").mkdir()
    for file in folder.glob("model.ckpt.*"):
        (tmp_path / "model" / file.name).write_bytes(file.read_bytes())
    assert from_official_tensorflow(tmp_path / "model").tie_projections == [
        False,
        True,
        True,
        True,
    ]
    # from_preset finds the same script.
    preset = TransformerXLCausalLM.from_preset(str(tmp_path / "model"))
    assert preset.tie_projections == [False, True, True, True]
    assert preset.backbone.memory_length == 12
    assert list(lm.backbone.cutoffs) == [50, 200, 500]
    assert lm.tie_projections == [False, True, True, True]
    reference = np.load(folder / "reference.npz")
    nll, memory = next(_nll_and_memory(lm, reference["tokens"], 8, 1))
    np.testing.assert_allclose(nll, reference["nll"][0], atol=1e-4)


def test_folder_detection():
    assert is_official_tensorflow_folder(FOLDER / "tf_word")
    assert not is_official_tensorflow_folder(FIXTURES / "hf_transfo_xl")
    assert not is_huggingface_folder(FOLDER / "tf_word")


def test_errors_name_the_fix(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="model.ckpt-"):
        from_official_tensorflow(tmp_path, {})
    empty = tmp_path / "no_config"
    empty.mkdir()
    for file in (FOLDER / "tf_char").glob("model.ckpt.*"):
        (empty / file.name).write_bytes(file.read_bytes())
    with pytest.raises(FileNotFoundError, match="tf/sota script"):
        from_official_tensorflow(empty)
    with pytest.raises(ValueError, match="n_token=61 but .* give 60"):
        from_official_tensorflow(
            FOLDER / "tf_char", {"n_token": 61, "n_layer": 2}
        )
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    with pytest.raises(ImportError, match="pip install tensorflow"):
        from_official_tensorflow(FOLDER / "tf_char")


def test_paper_evaluation_protocol():
    """`evaluate_segments` with the settings of the authors' evaluation
    (zero starting memory, their mask) gives their mean loss."""
    from keras_txl.training.evaluation import evaluate_segments
    from keras_txl.training.evaluation import evaluation_model

    folder = FOLDER / "tf_word"
    reference = np.load(folder / "reference.npz")
    lm = from_official_tensorflow(folder)
    # 2 streams of 33 tokens: 4 segments of 8, as the reference.
    result = evaluate_segments(
        lm, reference["tokens"].reshape(-1), 2, 8, start="zeros"
    )
    assert result["tokens"] == reference["nll"].size
    np.testing.assert_allclose(
        result["loss"], reference["nll"].mean(), rtol=1e-5
    )
    assert evaluation_model(lm, clamp_length=9, same_length="tensorflow") is lm
    other = evaluation_model(lm, clamp_length=-1, same_length=True)
    assert other.backbone.clamp_length is None
    assert other.backbone.same_length is True
    assert other.cluster_order == "tensorflow"
    np.testing.assert_array_equal(
        to_numpy(other.adaptive_softmax.cluster_kernel),
        to_numpy(lm.adaptive_softmax.cluster_kernel),
    )
