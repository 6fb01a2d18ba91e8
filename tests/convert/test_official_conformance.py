"""The library computes what the authors' PyTorch Transformer-XL computes.

The fixtures were made by running the official `mem_transformer.py` (eval
mode, dropout 0) segment after segment with the memory carried; see
`tests/fixtures/README.md`.
"""

import json

import numpy as np
import pytest
from keras import ops

from keras_txl.convert import from_official_pytorch
from tests.test_case import FIXTURES
from tests.test_case import to_numpy


def _load(name):
    data = np.load(FIXTURES / name)
    config = json.loads(str(data["config"]))
    params = {k: data[k] for k in data.files if k.startswith("param/")}
    return data, config, params


def _run_and_compare(lm, data, config):
    T, L = config["tgt_len"], config["n_layer"]
    tokens = data["tokens"]
    segments = (tokens.shape[1] - 1) // T
    memory = None
    for s in range(segments):
        logits, memory = lm.call_with_memory(
            tokens[:, s * T : (s + 1) * T], memory
        )
        logprobs = to_numpy(ops.log_softmax(logits, axis=-1))
        np.testing.assert_allclose(
            logprobs, data[f"logprobs_s{s}"], atol=1e-4, err_msg=f"segment {s}"
        )
        targets = tokens[:, s * T + 1 : (s + 1) * T + 1]
        nll = -np.take_along_axis(logprobs, targets[..., None], -1)[..., 0]
        np.testing.assert_allclose(nll, data[f"nll_s{s}"], atol=1e-4)
        reference = data[f"mems_s{s}"]  # (L + 1, batch, mlen, d)
        held = to_numpy(memory["memory"])  # (batch, L, M, d)
        valid = to_numpy(memory["valid_length"])
        mlen = reference.shape[2]
        np.testing.assert_array_equal(valid, mlen)
        for layer in range(L):
            np.testing.assert_allclose(
                held[:, layer, held.shape[2] - mlen :],
                reference[layer],
                atol=1e-4,
                err_msg=f"memory of layer {layer} after segment {s}",
            )


@pytest.mark.torch_ok
def test_official_small_log_probs_and_memories():
    data, config, params = _load("official_small.npz")
    lm = from_official_pytorch(params, config)
    # One r_w_bias, r_r_bias in the source: one pair, as it trains there.
    assert lm.backbone.tie_relative_biases is True
    _run_and_compare(lm, data, config)


@pytest.mark.torch_ok
def test_huggingface_names_with_per_layer_biases():
    data, config, params = _load("official_small.npz")
    hf = {}
    for name, value in params.items():
        name = name[len("param/") :]
        if name in ("r_w_bias", "r_r_bias"):
            for layer in range(config["n_layer"]):
                hf[f"transformer.layers.{layer}.dec_attn.{name}"] = value
        elif name.startswith("crit."):
            hf[name] = value
        else:
            hf["transformer." + name] = value
    hf_config = dict(config)
    hf_config["vocab_size"] = hf_config.pop("n_token")
    lm = from_official_pytorch(hf, hf_config)
    assert lm.backbone.tie_relative_biases is False
    _run_and_compare(lm, data, config)


def test_missing_parameter_is_named():
    _, config, params = _load("official_small.npz")
    del params["param/layers.1.dec_attn.r_net.weight"]
    with pytest.raises(ValueError, match="layers.1.dec_attn.r_net.weight"):
        from_official_pytorch(params, config)


def test_misshapen_parameter_is_named():
    _, config, params = _load("official_small.npz")
    params["param/r_w_bias"] = np.zeros((3, 8), "float32")
    with pytest.raises(ValueError, match="r_w_bias"):
        from_official_pytorch(params, config)


def test_config_without_required_keys():
    with pytest.raises(ValueError, match="n_layer"):
        from_official_pytorch({}, {"n_token": 5})
