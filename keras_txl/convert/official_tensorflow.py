"""The authors' TensorFlow Transformer-XL checkpoints into
`TransformerXLCausalLM`.

The released models (enwik8, text8, WikiText-103, One Billion Word) are
TensorFlow checkpoints of the authors' `tf/model.py`
(kimiyoung/transformer-xl), whose `transformer()` names its variables:

- `r_w_bias`, `r_r_bias`: `[n_head, d_head]`, or `[n_layer, n_head,
  d_head]` with `untie_r`.
- `adaptive_embed/lookup_table` `[n_token, d_embed]` and, if `d_embed !=
  d_model`, `adaptive_embed/proj_W` `[d_embed, d_model]` (`div_val` 1);
  else `adaptive_embed/cutoff_{i}/lookup_table` `[size_i, d_i]`
  (`d_i = d_embed // div_val**i`) and `.../cutoff_{i}/proj_W`
  `[d_i, d_model]`, absent when `d_i == d_model` and not `proj_same_dim`.
- `layer_{l}/rel_attn/qkv/kernel` `[d_model, 3 * n_head * d_head]`,
  `.../r/kernel` `[d_model, n_head * d_head]`, `.../o/kernel`
  `[n_head * d_head, d_model]`, `.../LayerNorm/{gamma,beta}`.
- `layer_{l}/ff/layer_{1,2}/{kernel,bias}`, `.../ff/LayerNorm/...`.
- `adaptive_softmax/bias` `[n_token]` (no `cutoffs`), else
  `adaptive_softmax/cutoff_{i}/b` `[size_i]`, `.../cutoff_{i}/proj`
  `[d_i, d_model]` (untied projections only) and
  `.../cutoff_0/cluster_{W,b}` `[len(cutoffs), d_embed]`,
  `[len(cutoffs)]`.

The output always shares the embedding tables; `tie_projs[i]` shares the
projection of cluster `i`. This converter maps the variables to the
authors' PyTorch names and builds the model with the four options in
which their TensorFlow code differs from their PyTorch code: the
`"tensorflow"` cluster order of the adaptive softmax, the
`same_length="tensorflow"` mask (one key more), layer-norm epsilon 1e-12,
and (not a weight: pass it when running) the memory that starts as
`mem_len` zero vectors, `initial_memory(batch_size, start="zeros")`.
"""

import json
import os
import re
import shlex

import numpy as np

from keras_txl.convert.official_pytorch import load_pytorch_names

LAYER_NORM_EPSILON = 1e-12

# Flags of the authors' `train_gpu.py` that set `transformer()` arguments,
# with their defaults there.
_FLAG_DEFAULTS = {
    "n_layer": 6,
    "d_model": 500,
    "d_embed": 500,
    "n_head": 10,
    "d_head": 50,
    "d_inner": 1000,
    "tgt_len": 70,
    "mem_len": 70,
    "same_length": False,
    "clamp_len": -1,
    "untie_r": False,
    "div_val": 1,
    "proj_share_all_but_first": False,
    "proj_same_dim": True,
}
_BOOL_FLAGS = {
    "same_length",
    "untie_r",
    "proj_share_all_but_first",
    "proj_same_dim",
}


def _parse_bool(name, value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "t", "yes"):
        return True
    if text in ("false", "0", "f", "no"):
        return False
    raise ValueError(f"Flag --{name} must be True or False. Received {value!r}")


def parse_flags(flags):
    """`transformer()` arguments from the flags of the authors' `tf/sota`
    scripts: a list of `--name=value` strings, one string of them, or the
    text of a script (its `NAME=value` shell variables are substituted and
    only the `train_gpu.py` command is read).

    `n_token` and `cutoffs` come from the corpus, not from flags: they are
    read from the checkpoint by `from_official_tensorflow`.
    """
    if isinstance(flags, str):
        text = flags.replace("\\\n", " ")
        variables = dict(
            re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)=(\S+)\s*$", text, re.M)
        )
        if "train_gpu.py" in text:
            text = text[text.index("train_gpu.py") :]
        text = re.sub(
            r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
            lambda m: variables.get(m.group(1), m.group(0)),
            text,
        )
        flags = [word for word in shlex.split(text, comments=True)]
    config = dict(_FLAG_DEFAULTS)
    for flag in flags:
        match = re.fullmatch(r"--([A-Za-z_0-9]+)=(.*)", flag)
        if not match or match.group(1) not in _FLAG_DEFAULTS:
            continue
        name, value = match.groups()
        if name in _BOOL_FLAGS:
            config[name] = _parse_bool(name, value)
        else:
            config[name] = int(value)
    return config


def _load_config(config):
    if isinstance(config, dict):
        return dict(config)
    if isinstance(config, (list, tuple)):
        return parse_flags(list(config))
    config = os.fspath(config)
    if os.path.exists(config):
        with open(config) as f:
            text = f.read()
        if config.endswith(".json"):
            return json.loads(text)
        return parse_flags(text)
    if config.lstrip().startswith("{"):
        return json.loads(config)
    return parse_flags(config)


def official_tensorflow_config(config):
    """The authors' `transformer()` arguments from `config`: a dict of
    them, a JSON file or string of them (the fixtures' `config.json`), or
    the flags of their `tf/sota` scripts (a list, a string, or the path of
    the `.sh` script). With flags, `proj_share_all_but_first` becomes
    `tie_projs`. Missing arguments take `transformer()`'s defaults."""
    config = _load_config(config)
    config.setdefault("cutoffs", [])
    config.setdefault("div_val", 1)
    config.setdefault("same_length", False)
    config.setdefault("clamp_len", -1)
    config.setdefault("untie_r", False)
    config.setdefault("proj_same_dim", True)
    if config.get("d_embed") is None and "d_model" in config:
        config["d_embed"] = config["d_model"]
    return config


def _tie_projs(config, num_clusters):
    tie = config.get("tie_projs")
    if tie is None or len(tie) != num_clusters:
        share = bool(config.get("proj_share_all_but_first", False))
        tie = [False] + [share] * (num_clusters - 1)
    return [bool(v) for v in tie]


def find_checkpoint(path):
    """The checkpoint prefix (`.../model.ckpt-0`) of a checkpoint prefix,
    or of a folder with a `checkpoint` file or a single `*.index` file."""
    path = os.fspath(path)
    if os.path.exists(path + ".index"):
        return path
    if os.path.isdir(path):
        state = os.path.join(path, "checkpoint")
        if os.path.exists(state):
            with open(state) as f:
                match = re.search(
                    r'model_checkpoint_path:\s*"([^"]+)"', f.read()
                )
            if match:
                name = match.group(1)
                prefix = (
                    name if os.path.isabs(name) else os.path.join(path, name)
                )
                if os.path.exists(prefix + ".index"):
                    return prefix
        indexes = sorted(f for f in os.listdir(path) if f.endswith(".index"))
        if len(indexes) == 1:
            return os.path.join(path, indexes[0][: -len(".index")])
    raise FileNotFoundError(
        f"No TensorFlow checkpoint at {path}: expected a checkpoint prefix "
        "(`.../model.ckpt-0`, with its `.index` and `.data-*` files) or a "
        "folder holding one. Download the authors' `model.ckpt-*.index` "
        "and `model.ckpt-*.data-00000-of-00001` (tf/sota/download.sh)."
    )


def find_config(folder):
    """The config of a checkpoint in `folder`: `config.json` there, else
    the one `.sh` script there (a tf/sota script), else the same in the
    parent folder (the authors' layout: `tf_wt103/model/` beside the
    script); `None` if there is none."""
    for place in (folder, os.path.dirname(folder)):
        path = os.path.join(place, "config.json")
        if os.path.exists(path):
            return path
        scripts = sorted(f for f in os.listdir(place) if f.endswith(".sh"))
        if len(scripts) == 1:
            return os.path.join(place, scripts[0])
    return None


def is_official_tensorflow_folder(path):
    """True when `path` is (a folder with) a TensorFlow checkpoint whose
    index names the authors' Transformer-XL variables (read without
    TensorFlow)."""
    try:
        prefix = find_checkpoint(path)
        with open(prefix + ".index", "rb") as f:
            index = f.read()
    except (OSError, FileNotFoundError):
        return False
    # Keys are prefix-compressed: look for pieces that stay whole.
    return b"transformer/" in index and b"rel_attn" in index


def _read_checkpoint(prefix):
    try:
        import tensorflow as tf
    except ImportError:
        raise ImportError(
            "Reading the authors' TensorFlow checkpoints needs TensorFlow "
            "(`pip install tensorflow`, or `pip install keras-txl"
            "[tensorflow]`); the converted model then runs on any Keras "
            "backend. Convert once with TensorFlow installed and save the "
            "model (`lm.save_to_preset(...)`)."
        ) from None
    reader = tf.train.load_checkpoint(prefix)
    names = reader.get_variable_to_shape_map()
    scopes = [n[: -len("r_w_bias")] for n in names if n.endswith("r_w_bias")]
    scopes = [s for s in scopes if "/Adam" not in s]
    if len(scopes) != 1:
        raise ValueError(
            f"{prefix} does not hold one Transformer-XL of the authors' "
            f"`tf/model.py`: found {len(scopes)} `r_w_bias` variables. "
            f"Some of its variables: {sorted(names)[:8]}"
        )
    scope = scopes[0]
    return {
        name[len(scope) :]: np.asarray(reader.get_tensor(name), "float32")
        for name in names
        if name.startswith(scope) and "/Adam" not in name
    }


def _infer_vocabulary(variables, config):
    """`n_token` and `cutoffs` from the embedding tables' sizes, checked
    against `config` where it gives them."""
    if "adaptive_embed/lookup_table" in variables:
        n_token = variables["adaptive_embed/lookup_table"].shape[0]
        cutoffs = list(config.get("cutoffs") or [])
    else:
        sizes, i = [], 0
        while f"adaptive_embed/cutoff_{i}/lookup_table" in variables:
            sizes.append(variables[f"adaptive_embed/cutoff_{i}/lookup_table"])
            i += 1
        if not sizes:
            raise ValueError(
                "The checkpoint has no `adaptive_embed/lookup_table` nor "
                "`adaptive_embed/cutoff_0/lookup_table`: not the authors' "
                f"Transformer-XL. Variables: {sorted(variables)[:8]}"
            )
        ends = np.cumsum([table.shape[0] for table in sizes]).tolist()
        n_token, cutoffs = ends[-1], ends[:-1]
    for key, value in (("n_token", n_token), ("cutoffs", cutoffs)):
        given = config.get(key)
        if given not in (None, []) and given != value:
            raise ValueError(
                f"The config gives {key}={given} but the checkpoint's "
                f"embedding tables give {value}."
            )
    return int(n_token), [int(c) for c in cutoffs]


def _pytorch_names(variables, config):
    """The checkpoint's weights under the authors' PyTorch names."""

    def get(name):
        if name not in variables:
            raise ValueError(
                f"The checkpoint lacks `transformer/{name}`. Is the config "
                f"right (untie_r, div_val, proj_same_dim)? Config: {config}"
            )
        return variables[name]

    n_layer, d_model = config["n_layer"], config["d_model"]
    cutoffs, div_val = config["cutoffs"], config["div_val"]
    tie_projs = _tie_projs(config, len(cutoffs) + 1)
    params = {}
    # Embedding: tables and projections `[d, d_model]` (torch: transposed).
    embed_projs = []
    if div_val == 1:
        params["word_emb.emb_layers.0.weight"] = get(
            "adaptive_embed/lookup_table"
        )
        if "adaptive_embed/proj_W" in variables:
            params["word_emb.emb_projs.0"] = get("adaptive_embed/proj_W").T
        embed_projs.append(params.get("word_emb.emb_projs.0"))
    else:
        for i in range(len(cutoffs) + 1):
            table = get(f"adaptive_embed/cutoff_{i}/lookup_table")
            params[f"word_emb.emb_layers.{i}.weight"] = table
            name = f"adaptive_embed/cutoff_{i}/proj_W"
            # No projection (proj_same_dim=False, width d_model): identity.
            projection = (
                get(name).T
                if name in variables
                else np.eye(d_model, dtype="float32")
            )
            params[f"word_emb.emb_projs.{i}"] = projection
            embed_projs.append(projection)
    # Output: always the embedding tables; biases; projections.
    num_tables = 1 if div_val == 1 else len(cutoffs) + 1
    for i in range(num_tables):
        params[f"crit.out_layers.{i}.weight"] = params[
            f"word_emb.emb_layers.{i}.weight"
        ]
    if not cutoffs:
        params["crit.out_layers.0.bias"] = get("adaptive_softmax/bias")
        if embed_projs[0] is not None:
            params["crit.out_projs.0"] = embed_projs[0]
    else:
        biases = [
            get(f"adaptive_softmax/cutoff_{i}/b")
            for i in range(len(cutoffs) + 1)
        ]
        if div_val == 1:
            params["crit.out_layers.0.bias"] = np.concatenate(biases)
        else:
            for i, bias in enumerate(biases):
                params[f"crit.out_layers.{i}.bias"] = bias
        for i in range(len(cutoffs) + 1):
            name = f"adaptive_softmax/cutoff_{i}/proj"
            if tie_projs[i]:
                projection = embed_projs[0 if div_val == 1 else i]
            elif name in variables:
                projection = get(name).T
            else:
                projection = None
            if projection is None and (
                div_val != 1 or embed_projs[0] is not None
            ):
                projection = np.eye(d_model, dtype="float32")
            if projection is not None:
                params[f"crit.out_projs.{i}"] = projection
        params["crit.cluster_weight"] = get(
            "adaptive_softmax/cutoff_0/cluster_W"
        )
        params["crit.cluster_bias"] = get("adaptive_softmax/cutoff_0/cluster_b")
    # Layers: TensorFlow kernels are `[in, out]`, torch weights `[out, in]`.
    r_w_bias, r_r_bias = get("r_w_bias"), get("r_r_bias")
    for layer in range(n_layer):
        tf_prefix, prefix = f"layer_{layer}/", f"layers.{layer}."
        for tf_name, name in (
            ("rel_attn/qkv/kernel", "dec_attn.qkv_net.weight"),
            ("rel_attn/r/kernel", "dec_attn.r_net.weight"),
            ("rel_attn/o/kernel", "dec_attn.o_net.weight"),
            ("ff/layer_1/kernel", "pos_ff.CoreNet.0.weight"),
            ("ff/layer_2/kernel", "pos_ff.CoreNet.3.weight"),
        ):
            params[prefix + name] = get(tf_prefix + tf_name).T
        for tf_name, name in (
            ("ff/layer_1/bias", "pos_ff.CoreNet.0.bias"),
            ("ff/layer_2/bias", "pos_ff.CoreNet.3.bias"),
            ("rel_attn/LayerNorm/gamma", "dec_attn.layer_norm.weight"),
            ("rel_attn/LayerNorm/beta", "dec_attn.layer_norm.bias"),
            ("ff/LayerNorm/gamma", "pos_ff.layer_norm.weight"),
            ("ff/LayerNorm/beta", "pos_ff.layer_norm.bias"),
        ):
            params[prefix + name] = get(tf_prefix + tf_name)
        if r_w_bias.ndim == 3:  # untie_r
            params[prefix + "dec_attn.r_w_bias"] = r_w_bias[layer]
            params[prefix + "dec_attn.r_r_bias"] = r_r_bias[layer]
    if r_w_bias.ndim == 2:
        params["r_w_bias"], params["r_r_bias"] = r_w_bias, r_r_bias
    return params


def from_official_tensorflow(
    checkpoint, config=None, dtype=None, preprocessor=None
):
    """Builds a `TransformerXLCausalLM` from a TensorFlow checkpoint of the
    authors' `tf/model.py`.

    The model computes what their code computes in evaluation mode when
    run from their starting memory,
    `lm.backbone.initial_memory(batch_size, start="zeros")`: per-token
    losses and memories.

    Args:
        checkpoint: the checkpoint prefix (`.../model.ckpt-0`), or a folder
            holding one (with a `checkpoint` file or one `*.index`).
        config: the arguments of their `transformer()`: a dict, a JSON
            file or string (as the fixtures' `config.json`: `n_layer`,
            `d_model`, `d_embed`, `n_head`, `d_head`, `d_inner`,
            `mem_len`, `clamp_len`, `same_length`, `untie_r`, `div_val`,
            `tie_projs`, `proj_same_dim`, ...), or the flags of their
            `tf/sota` scripts (a list or string of `--name=value`, or the
            path of the `.sh` script; `--proj_share_all_but_first` sets
            `tie_projs`). `None`: `config.json` or the one `.sh` script
            beside the checkpoint or in the folder above it.
            `n_token` and `cutoffs` are read from the checkpoint's
            embedding tables (and checked against the config's, if given).
        dtype: optional dtype policy of the model.
        preprocessor: optional preprocessor of the task (their
            checkpoints come with no tokenizer); `None`: none.

    Returns:
        A `TransformerXLCausalLM` with `memory_length` `mem_len`,
        `clamp_len`, the TensorFlow `same_length` mask, layer-norm epsilon
        1e-12 and the `"tensorflow"` cluster order.

    Raises:
        ImportError: without TensorFlow (needed to read the checkpoint).
        FileNotFoundError: without a checkpoint or config.
        ValueError: for a config that does not fit the checkpoint.
    """
    prefix = find_checkpoint(checkpoint)
    if config is None:
        config = find_config(os.path.dirname(os.path.abspath(prefix)))
        if config is None:
            raise FileNotFoundError(
                f"No config for {prefix}: pass `config`, the arguments of "
                "the authors' `transformer()` (a dict or JSON file) or the "
                "flags of their tf/sota script (e.g. `tf/sota/wt103.sh`), "
                "or put either beside the checkpoint as config.json or "
                "the one .sh file."
            )
    config = official_tensorflow_config(config)
    variables = _read_checkpoint(prefix)
    config["n_token"], config["cutoffs"] = _infer_vocabulary(variables, config)
    num_clusters = len(config["cutoffs"]) + 1
    config["tie_projs"] = _tie_projs(config, num_clusters)
    missing = [
        key
        for key in ("n_layer", "d_model", "n_head", "d_head", "d_inner")
        if key not in config
    ]
    if missing:
        raise ValueError(
            f"The config lacks {missing}, arguments of the authors' "
            f"`transformer()`. Received: {sorted(config)}"
        )
    if config.get("mem_len") is None:
        config["mem_len"] = 0
    params = _pytorch_names(variables, config)
    clamp = config["clamp_len"]
    config["clamp_len"] = clamp if clamp and clamp > 0 else -1
    return load_pytorch_names(
        params,
        config,
        dtype=dtype,
        cluster_order="tensorflow",
        same_length="tensorflow" if config["same_length"] else False,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        preprocessor=preprocessor,
    )
