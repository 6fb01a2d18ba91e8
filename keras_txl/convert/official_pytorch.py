"""Weights of the authors' PyTorch Transformer-XL, and of HuggingFace's
`TransfoXLLMHeadModel`, into `TransformerXLCausalLM`.

The authors' code is `pytorch/mem_transformer.py` of kimiyoung/transformer-xl
(`MemTransformerLM`, `attn_type=0`). Its parameter names:

| official name                                  | shape (torch)        |
| ---------------------------------------------- | -------------------- |
| `word_emb.emb_layers.0.weight`                 | `[n_token, d_embed]` |
| `layers.{l}.dec_attn.qkv_net.weight`           | `[3*n*d, d_model]`   |
| `layers.{l}.dec_attn.r_net.weight`             | `[n*d, d_model]`     |
| `layers.{l}.dec_attn.o_net.weight`             | `[d_model, n*d]`     |
| `layers.{l}.dec_attn.layer_norm.{weight,bias}` | `[d_model]`          |
| `layers.{l}.pos_ff.CoreNet.{0,3}.{weight,bias}`| linear layers        |
| `layers.{l}.pos_ff.layer_norm.{weight,bias}`   | `[d_model]`          |
| `r_w_bias`, `r_r_bias` (shared by all layers)  | `[n_head, d_head]`   |
| `crit.out_layers.0.{weight,bias}`              | `[n_token, d_embed]` |

With adaptive input and softmax (`cutoffs`, `div_val`, `d_embed`), cluster
`i` (of `n_token` ids split at `cutoffs`) has `word_emb.emb_layers.{i}.weight`
`[size_i, d_embed // div_val**i]` and `word_emb.emb_projs.{i}`
`[d_model, d_embed // div_val**i]` (with `div_val == 1`: one table of all
ids, and one projection only if `d_embed != d_model`); the output has
`crit.out_layers.{i}.{weight,bias}` (with `div_val == 1`: one, of all ids),
`crit.out_projs.{i}` (none if `div_val == 1` and `d_embed == d_model`) and
`crit.cluster_weight` `[len(cutoffs), d_embed]`, `crit.cluster_bias`.
Tied weights (`tie_weight`, `tie_projs`) appear under both names; they are
found by comparing the arrays.

HuggingFace prefixes the model's names with `transformer.` and, with
`untie_r=True`, keeps `r_w_bias`/`r_r_bias` per layer under
`transformer.layers.{l}.dec_attn.`. The converted backbone has
`tie_relative_biases` as the weights have it: one pair (layer 0's, read
by all) from `r_w_bias`, `r_r_bias`, or one per layer.
"""

import json

import numpy as np

from keras_txl.layers.adaptive_embedding import AdaptiveEmbedding
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM

# HuggingFace `TransfoXLConfig` names of the official constructor arguments.
_HF_NAMES = {"vocab_size": "n_token", "untie_r": "untie_r"}

_DEFAULTS = {
    "clamp_len": -1,
    "same_length": False,
    "pre_lnorm": False,
    "cutoffs": [],
    "div_val": 1,
    "tie_projs": [False],
    "d_embed": None,
}


def normalize_config(config):
    """The official constructor arguments from a dict, a JSON string or a
    HuggingFace `TransfoXLConfig` (its `to_dict()`)."""
    if isinstance(config, (str, bytes)):
        config = json.loads(config)
    elif hasattr(config, "to_dict"):
        config = config.to_dict()
    config = dict(config)
    for hf_name, name in _HF_NAMES.items():
        if hf_name in config and name not in config:
            config[name] = config[hf_name]
    required = (
        "n_token",
        "n_layer",
        "n_head",
        "d_model",
        "d_head",
        "d_inner",
        "mem_len",
    )
    missing = [key for key in required if key not in config]
    if missing:
        raise ValueError(
            f"`config` lacks the official constructor arguments {missing}. "
            f"Received keys: {sorted(config)}"
        )
    for key, value in _DEFAULTS.items():
        config.setdefault(key, value)
    if config["d_embed"] is None:
        config["d_embed"] = config["d_model"]
    return config


def _to_numpy(value):
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype="float32")


def _strip_prefix(params):
    """Official names, whether `params` uses them or HuggingFace's."""
    out = {}
    for name, value in params.items():
        if name.startswith("param/"):
            name = name[len("param/") :]
        if name.startswith("transformer."):
            name = name[len("transformer.") :]
        out[name] = value
    return out


def from_official_pytorch(params, config, dtype=None):
    """Builds a `TransformerXLCausalLM` from the authors' weights.

    Args:
        params: dict of parameter name to array (numpy or torch), e.g. the
            `state_dict()` of the authors' `MemTransformerLM` or of
            HuggingFace's `TransfoXLLMHeadModel`. Keys may carry the
            `param/` prefix of the reference fixtures.
        config: the official constructor arguments (`n_token`, `n_layer`,
            `n_head`, `d_model`, `d_head`, `d_inner`, `mem_len`,
            `clamp_len`, `same_length`, `pre_lnorm`, `cutoffs`, `div_val`,
            `tie_projs`, `d_embed`), as a dict or JSON string, or a
            HuggingFace `TransfoXLConfig`.
        dtype: optional dtype policy of the model.

    Returns:
        A `TransformerXLCausalLM` that computes the same log-probabilities
        and memories as the PyTorch model in eval mode.

    Raises:
        ValueError: for a missing or misshapen parameter.
    """
    return load_pytorch_names(params, config, dtype=dtype)


def load_pytorch_names(
    params,
    config,
    dtype=None,
    cluster_order="pytorch",
    same_length=None,
    layer_norm_epsilon=1e-5,
    preprocessor=None,
):
    """`from_official_pytorch` with the options in which the authors'
    PyTorch code, their TensorFlow code and HuggingFace differ: the
    `cluster_order` of the adaptive softmax, the `same_length` mask
    (`None`: `bool(config["same_length"])`, the PyTorch mask) and the
    layer-norm epsilon; `preprocessor` is the task's (given at
    construction: a built task takes no new sublayer). The other
    converters translate their weights to the PyTorch names and build
    through this function."""
    config = normalize_config(config)
    params = _strip_prefix(dict(params))
    n_layer, n_head, d_head = (
        config["n_layer"],
        config["n_head"],
        config["d_head"],
    )
    clamp = config["clamp_len"]
    # One u, v pair for all layers where the source has one (the authors'
    # PyTorch code; `untie_r=False` in their TensorFlow code and
    # HuggingFace's), a pair per layer where it has per-layer ones.
    tie_biases = "layers.0.dec_attn.r_w_bias" not in params
    backbone = TransformerXLBackbone(
        vocabulary_size=config["n_token"],
        num_layers=n_layer,
        num_heads=n_head,
        hidden_dim=config["d_model"],
        head_dim=d_head,
        intermediate_dim=config["d_inner"],
        memory_length=config["mem_len"],
        clamp_length=clamp if clamp is not None and clamp > 0 else None,
        same_length=bool(config["same_length"])
        if same_length is None
        else same_length,
        layer_norm_epsilon=layer_norm_epsilon,
        pre_norm=bool(config["pre_lnorm"]),
        cutoffs=list(config["cutoffs"]),
        div_val=config["div_val"],
        embedding_dim=config["d_embed"],
        tie_relative_biases=tie_biases,
        dtype=dtype,
    )

    def tied(name, embedding_name):
        """True when the output parameter `name` is absent or equals the
        embedding's (the authors' state_dict repeats tied weights)."""
        if name not in params or embedding_name not in params:
            return name not in params
        return np.array_equal(
            _to_numpy(params[name]), _to_numpy(params[embedding_name])
        )

    adaptive = isinstance(backbone.token_embedding, AdaptiveEmbedding)
    num_tables = 1 if config["div_val"] == 1 else len(config["cutoffs"]) + 1
    tie_weights = all(
        tied(f"crit.out_layers.{i}.weight", f"word_emb.emb_layers.{i}.weight")
        for i in range(num_tables)
    )
    tie_projections = None
    if adaptive:
        has_projections = (
            config["div_val"] != 1 or config["d_embed"] != config["d_model"]
        )
        tie_projections = [
            has_projections
            and tied(
                f"crit.out_projs.{i}",
                f"word_emb.emb_projs.{0 if config['div_val'] == 1 else i}",
            )
            for i in range(len(config["cutoffs"]) + 1)
        ]
    lm = TransformerXLCausalLM(
        backbone,
        tie_weights=bool(tie_weights),
        tie_projections=tie_projections,
        cluster_order=cluster_order,
        preprocessor=preprocessor,
    )

    def get(name, shape=None):
        if name not in params:
            raise ValueError(
                f"`params` lacks '{name}'. Pass the full state_dict of the "
                "official `MemTransformerLM` (or HuggingFace "
                "`TransfoXLLMHeadModel`)."
            )
        value = _to_numpy(params[name])
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise ValueError(
                f"Parameter '{name}' has shape {tuple(value.shape)}, "
                f"expected {tuple(shape)} from the config."
            )
        return value

    d_model, width = config["d_model"], n_head * d_head
    if adaptive:
        _load_adaptive(lm, get, config)
    else:
        backbone.token_embedding.embeddings.assign(
            get("word_emb.emb_layers.0.weight", (config["n_token"], d_model))
        )
        if not tie_weights:
            lm.output_projection.output_kernel.assign(
                get("crit.out_layers.0.weight", (config["n_token"], d_model)).T
            )
        lm.output_projection.output_bias.assign(
            get("crit.out_layers.0.bias", (config["n_token"],))
        )
    for i, block in enumerate(backbone.transformer_layers):
        prefix = f"layers.{i}."
        attention = block.attention
        qkv = get(prefix + "dec_attn.qkv_net.weight", (3 * width, d_model))
        for part, dense in zip(
            np.split(qkv, 3, axis=0),
            (attention.query_dense, attention.key_dense, attention.value_dense),
        ):
            # torch [n*d, d_model] -> keras (d_model, heads, head_dim)
            dense.kernel.assign(part.T.reshape(d_model, n_head, d_head))
        attention.position_dense.kernel.assign(
            get(prefix + "dec_attn.r_net.weight", (width, d_model)).T.reshape(
                d_model, n_head, d_head
            )
        )
        attention.output_dense.kernel.assign(
            get(prefix + "dec_attn.o_net.weight", (d_model, width)).T.reshape(
                n_head, d_head, d_model
            )
        )
        if not tie_biases or i == 0:  # layer 0 owns a shared pair
            source = "" if tie_biases else prefix + "dec_attn."
            for name, bias in (
                ("r_w_bias", attention.content_bias),
                ("r_r_bias", attention.position_bias),
            ):
                bias.assign(get(source + name, (n_head, d_head)))
        block.attention_norm.gamma.assign(
            get(prefix + "dec_attn.layer_norm.weight", (d_model,))
        )
        block.attention_norm.beta.assign(
            get(prefix + "dec_attn.layer_norm.bias", (d_model,))
        )
        inner = config["d_inner"]
        block.intermediate_dense.kernel.assign(
            get(prefix + "pos_ff.CoreNet.0.weight", (inner, d_model)).T
        )
        block.intermediate_dense.bias.assign(
            get(prefix + "pos_ff.CoreNet.0.bias", (inner,))
        )
        block.output_dense.kernel.assign(
            get(prefix + "pos_ff.CoreNet.3.weight", (d_model, inner)).T
        )
        block.output_dense.bias.assign(
            get(prefix + "pos_ff.CoreNet.3.bias", (d_model,))
        )
        block.feedforward_norm.gamma.assign(
            get(prefix + "pos_ff.layer_norm.weight", (d_model,))
        )
        block.feedforward_norm.beta.assign(
            get(prefix + "pos_ff.layer_norm.bias", (d_model,))
        )
    return lm


def _load_adaptive(lm, get, config):
    """Loads `AdaptiveEmbedding` and `AdaptiveSoftmax` weights. Projections
    are `[d_model, dim]` in torch and `(dim, d_model)` here."""
    embedding = lm.backbone.token_embedding
    softmax = lm.adaptive_softmax
    d_model = config["d_model"]
    for i, table in enumerate(embedding.embeddings):
        shape = tuple(table.shape)
        table.assign(get(f"word_emb.emb_layers.{i}.weight", shape))
        if not softmax.tie_weights:
            softmax.kernels[i].assign(get(f"crit.out_layers.{i}.weight", shape))
        softmax.biases[i].assign(get(f"crit.out_layers.{i}.bias", shape[:1]))
    for i, projection in enumerate(embedding.projections):
        projection.assign(
            get(f"word_emb.emb_projs.{i}", (d_model, projection.shape[0])).T
        )
    for i, projection in enumerate(softmax.projections):
        if projection is not None:  # not tied
            projection.assign(
                get(f"crit.out_projs.{i}", (d_model, projection.shape[0])).T
            )
    if softmax.cutoffs:
        clusters = len(softmax.cutoffs)
        softmax.cluster_kernel.assign(
            get("crit.cluster_weight", (clusters, config["d_embed"]))
        )
        softmax.cluster_bias.assign(get("crit.cluster_bias", (clusters,)))
