"""The authors' adaptive Transformer-XL, loaded from their weights,
computes their numbers (fixture: tests/fixtures, see its README)."""

import json

import numpy as np
import pytest
from keras import ops

from keras_txl.convert import from_official_pytorch
from keras_txl.layers import AdaptiveEmbedding
from keras_txl.layers import AdaptiveSoftmax
from tests.test_case import FIXTURES

FIXTURE = FIXTURES / "official_adaptive_prelnorm.npz"


@pytest.mark.torch_ok
def test_adaptive_prelnorm_log_probs_and_memories():
    data = np.load(FIXTURE)
    config = json.loads(str(data["config"]))
    params = {k: data[k] for k in data.files if k.startswith("param/")}
    lm = from_official_pytorch(params, config)
    assert isinstance(lm.backbone.token_embedding, AdaptiveEmbedding)
    assert isinstance(lm.adaptive_softmax, AdaptiveSoftmax)
    assert lm.tie_weights
    assert lm.tie_projections == [False, True, True]  # the config's tie_projs
    num_layers, length = config["n_layer"], config["tgt_len"]
    memory = None
    for s in range(4):
        tokens = data["tokens"][:, s * length : (s + 1) * length]
        log_probs, memory = lm.call_with_memory(tokens, memory)
        np.testing.assert_allclose(
            ops.convert_to_numpy(log_probs),
            data[f"logprobs_s{s}"],
            atol=1e-4,
            err_msg=f"segment {s}",
        )
        # Official entries [batch, mlen, d]; ours: the last mlen of M slots.
        official = data[f"mems_s{s}"][:num_layers].transpose(1, 0, 2, 3)
        mlen = official.shape[2]
        valid = ops.convert_to_numpy(memory["valid_length"])
        np.testing.assert_array_equal(valid, [mlen] * len(valid))
        ours = ops.convert_to_numpy(memory["memory"])
        np.testing.assert_allclose(
            ours[:, :, ours.shape[2] - mlen :], official, atol=1e-4
        )


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_div_val_1_with_projection():
    """`div_val == 1`, `d_embed != d_model`: one table and one output
    layer, sliced by cluster; one embedding projection, which tied output
    projections share. Random weights in the authors' layout against the
    authors' formulas, in numpy."""
    rng = np.random.default_rng(0)
    d_model, d_embed, n_token, cutoff = 8, 6, 40, 10
    config = {
        "n_token": n_token, "n_layer": 1, "n_head": 2, "d_model": d_model,
        "d_head": 4, "d_inner": 16, "mem_len": 4, "cutoffs": [cutoff],
        "div_val": 1, "d_embed": d_embed,
    }  # fmt: skip
    shapes = {
        "word_emb.emb_layers.0.weight": (n_token, d_embed),
        "word_emb.emb_projs.0": (d_model, d_embed),
        "crit.out_layers.0.bias": (n_token,),
        "crit.out_projs.0": (d_model, d_embed),
        "crit.cluster_weight": (1, d_embed),
        "crit.cluster_bias": (1,),
        "r_w_bias": (2, 4),
        "r_r_bias": (2, 4),
        "layers.0.dec_attn.qkv_net.weight": (24, d_model),
        "layers.0.dec_attn.r_net.weight": (8, d_model),
        "layers.0.dec_attn.o_net.weight": (d_model, 8),
        "layers.0.dec_attn.layer_norm.weight": (d_model,),
        "layers.0.dec_attn.layer_norm.bias": (d_model,),
        "layers.0.pos_ff.CoreNet.0.weight": (16, d_model),
        "layers.0.pos_ff.CoreNet.0.bias": (16,),
        "layers.0.pos_ff.CoreNet.3.weight": (d_model, 16),
        "layers.0.pos_ff.CoreNet.3.bias": (d_model,),
        "layers.0.pos_ff.layer_norm.weight": (d_model,),
        "layers.0.pos_ff.layer_norm.bias": (d_model,),
    }
    params = {
        k: rng.normal(size=v).astype("float32") for k, v in shapes.items()
    }
    # tie_weight and tie_projs [False, True]: repeated under both names.
    params["crit.out_layers.0.weight"] = params["word_emb.emb_layers.0.weight"]
    params["crit.out_projs.1"] = params["word_emb.emb_projs.0"]
    lm = from_official_pytorch(params, config)
    assert lm.tie_weights and lm.tie_projections == [False, True]

    tokens = np.array([[1, 12, 39, 3]])
    embedded = ops.convert_to_numpy(lm.backbone.token_embedding(tokens))
    table, projection = (
        params["word_emb.emb_layers.0.weight"],
        params["word_emb.emb_projs.0"],
    )
    np.testing.assert_allclose(
        embedded, table[tokens] @ projection.T, atol=1e-5
    )

    hidden = rng.normal(size=(1, 4, d_model)).astype("float32")
    weight, bias = table, params["crit.out_layers.0.bias"]
    head = _log_softmax(
        hidden
        @ params["crit.out_projs.0"]
        @ np.concatenate([weight[:cutoff], params["crit.cluster_weight"]]).T
        + np.concatenate([bias[:cutoff], params["crit.cluster_bias"]])
    )
    tail = _log_softmax(
        hidden @ params["crit.out_projs.1"] @ weight[cutoff:].T + bias[cutoff:]
    )
    expected = np.concatenate([head[..., :cutoff], tail + head[..., -1:]], -1)
    np.testing.assert_allclose(
        ops.convert_to_numpy(lm.adaptive_softmax(hidden)), expected, atol=1e-5
    )
