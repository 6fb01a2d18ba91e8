"""`keras-txl convert` and `TransformerXLCausalLM.from_preset` of
HuggingFace folders and handles (offline: the download is faked), and the
preset round trip of a model with its tokenizer."""

import json
import os
import shutil

import keras
import keras_hub
import numpy as np
import pytest

from keras_txl.convert import preset_loader
from keras_txl.models import TransformerXLCausalLM
from keras_txl.models import TransformerXLTokenizer
from keras_txl_cli.cli import main
from keras_txl_cli.convert_command import CHECK_SENTENCE
from keras_txl_cli.convert_command import sentence_log_probabilities
from tests.tiny_models import tiny_lm
from tests.tiny_models import tokenizer_lm

HF_FOLDER = os.path.join(
    os.path.dirname(__file__), "..", "fixtures", "hf_transfo_xl"
)


def _lm_for(tokenizer):
    """The preprocessor tests' tiny LM, adaptive for the fixture's 1,203
    words."""
    return tokenizer_lm(tokenizer, seed=0, cutoffs=[100, 400, 900], div_val=2)


def test_preset_round_trip_is_exact_with_keras_hub(tmp_path):
    lm = _lm_for(TransformerXLTokenizer.from_preset(HF_FOLDER))
    expected = sentence_log_probabilities(lm, CHECK_SENTENCE)
    lm.save_to_preset(str(tmp_path))
    loaded = keras_hub.models.CausalLM.from_preset(str(tmp_path))
    assert type(loaded) is TransformerXLCausalLM
    assert type(loaded.preprocessor.tokenizer) is TransformerXLTokenizer
    for a, b in zip(lm.weights, loaded.weights):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b)
        )
    got = sentence_log_probabilities(loaded, CHECK_SENTENCE)
    np.testing.assert_array_equal(got, expected)
    # A folder that does not exist: keras-hub's error, naming it.
    with pytest.raises(ValueError, match="Received: preset=.*clowntown"):
        TransformerXLCausalLM.from_preset(str(tmp_path / "clowntown"))
    random = TransformerXLCausalLM.from_preset(
        str(tmp_path), load_weights=False
    )
    assert random.backbone.get_config() == lm.backbone.get_config()


@pytest.fixture
def fake_from_huggingface(monkeypatch):
    """Stands for the weight converter that `from_preset`'s HuggingFace
    loader calls: a random model of the fixture's vocabulary."""
    calls = []

    def from_huggingface(path, preprocessor=None):
        calls.append(path)
        tokenizer = TransformerXLTokenizer.from_preset(HF_FOLDER)
        # Built, as the real one, with the loader's preprocessor given at
        # construction (a built task takes no new sublayer).
        return tiny_lm(
            seed=0,
            preprocessor=preprocessor,
            num_layers=1,
            vocabulary_size=tokenizer.vocabulary_size(),
            cutoffs=[100, 400, 900],
            div_val=2,
        )

    monkeypatch.setattr(
        preset_loader, "from_huggingface", from_huggingface, raising=False
    )
    return calls


def test_from_preset_of_a_huggingface_folder(fake_from_huggingface):
    lm = TransformerXLCausalLM.from_preset(HF_FOLDER)
    assert fake_from_huggingface == [HF_FOLDER]
    tokenizer = lm.preprocessor.tokenizer
    assert isinstance(tokenizer, TransformerXLTokenizer)
    assert tokenizer.vocabulary_size() == 1203
    lm.compile(sampler="greedy")
    text = lm.generate("I tell you", max_length=8, stop_token_ids=None)
    assert isinstance(text, str) and text.startswith("I tell you")


def test_from_preset_of_a_huggingface_handle_offline(
    fake_from_huggingface, monkeypatch
):
    import huggingface_hub

    downloads = []

    def hf_hub_download(repo_id, filename, **kwargs):
        downloads.append((repo_id, filename))
        return os.path.join(HF_FOLDER, filename)

    # keras-hub downloads through `huggingface_hub.hf_hub_download`.
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    lm = TransformerXLCausalLM.from_preset("hf://transfo-xl/transfo-xl-wt103")
    assert fake_from_huggingface == ["hf://transfo-xl/transfo-xl-wt103"]
    assert ("transfo-xl/transfo-xl-wt103", "vocab.pkl") in downloads
    assert lm.preprocessor.tokenizer.vocabulary_size() == 1203


def test_convert_command(tmp_path, capsys, fake_from_huggingface):
    source = tmp_path / "hf"
    shutil.copytree(HF_FOLDER, source)
    out = str(tmp_path / "preset")
    assert main(["convert", str(source), out]) == 0
    line = capsys.readouterr().out.strip()
    assert "finite" in line and "max |difference|" in line
    assert "0.00e+00" in line  # the preset loads back exactly
    assert len(line.splitlines()) == 1
    loaded = TransformerXLCausalLM.from_preset(out)
    assert loaded.preprocessor.tokenizer.vocabulary_size() == 1203
    # keras-txl generate reads the converted preset and its tokenizer.
    argv = ["generate", out, "--prompt", "I tell you", "--max-length", "9"]
    assert main(argv + ["--sampler", "greedy"]) == 0
    assert capsys.readouterr().out.startswith("I tell you")
    # keras-txl evaluate scores a text with it under the paper's protocol
    # (docs/pretrained.md), its tokenizer reading the words.
    corpus = tmp_path / "test.tokens"
    corpus.write_text("I tell you , friends , it is so .\n" * 8)
    metrics = tmp_path / "metrics.json"
    argv = ["evaluate", out, "--corpus", str(corpus), "--batch-size", "2"]
    argv += ["--segment-length", "4", "--memory-length", "8"]
    argv += ["--clamp-length", "6", "--same-length", "tensorflow"]
    argv += ["--memory-start", "zeros", "--metrics-json", str(metrics)]
    assert main(argv) == 0
    capsys.readouterr()
    scored = json.loads(metrics.read_text())
    assert np.isfinite(scored["perplexity"]) and scored["perplexity"] > 1
    # An existing preset is kept unless --overwrite.
    assert main(["convert", str(source), out]) == 1
    assert "already holds a preset" in capsys.readouterr().err
    assert main(["convert", str(source), out, "--overwrite"]) == 0
