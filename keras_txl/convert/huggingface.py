"""HuggingFace Transformer-XL checkpoints (`TransfoXLLMHeadModel`,
transformers <= 4.44) into `TransformerXLCausalLM`.

A checkpoint folder, as `save_pretrained` writes it, holds `config.json`
(`model_type` `"transfo-xl"`) and the weights in `model.safetensors` (or,
older, `pytorch_model.bin`, a pickle). HuggingFace's parameter names are
the authors' PyTorch names with a `transformer.` prefix (and, with
`untie_r`, per-layer `r_w_bias`/`r_r_bias`); tied tensors are stored once,
under the embedding's name.

HuggingFace converted `transfo-xl-wt103` from the authors' TensorFlow
checkpoint and computes what their TensorFlow code computes in two points
where it differs from their PyTorch code: the adaptive softmax's
`cluster_order` is `"tensorflow"`, and the memory starts as `mem_len`
zero vectors that are attended to (`initial_memory(..., start="zeros")`).
Its `same_length` mask is the PyTorch one (`same_length=True`) and its
layer-norm epsilon is the config's `layer_norm_epsilon` (1e-5).
"""

import json
import os

import numpy as np

from keras_txl.convert.official_pytorch import load_pytorch_names
from keras_txl.convert.safetensors_file import read_safetensors

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
PICKLE_FILE = "pytorch_model.bin"
MODEL_TYPE = "transfo-xl"

# `TransfoXLConfig` defaults (transformers 4.44.2) of the keys a
# `config.json` may omit.
_HF_DEFAULTS = {
    "cutoffs": [20000, 40000, 200000],
    "div_val": 4,
    "pre_lnorm": False,
    "clamp_len": 1000,
    "same_length": True,
    "attn_type": 0,
    "sample_softmax": -1,
    "untie_r": True,
    "layer_norm_epsilon": 1e-5,
    "tie_word_embeddings": True,
}

_GET_SAFETENSORS = (
    "To get `model.safetensors`, in an environment with torch and "
    "transformers<=4.44 (which you trust with this pickle): "
    "`TransfoXLLMHeadModel.from_pretrained(folder).save_pretrained("
    "folder, safe_serialization=True)`."
)


def _read_config(path):
    with open(os.path.join(path, CONFIG_FILE)) as f:
        return json.load(f)


def huggingface_config(config):
    """The authors' constructor arguments (as `normalize_config` takes
    them) and HuggingFace's options, from a `config.json` dict."""
    config = {**_HF_DEFAULTS, **config}
    if config.get("model_type", MODEL_TYPE) != MODEL_TYPE:
        raise ValueError(
            f"This is not a Transformer-XL config: model_type="
            f"{config['model_type']!r}, expected {MODEL_TYPE!r}. "
            "`from_huggingface` reads `TransfoXLLMHeadModel` folders only."
        )
    if config["attn_type"] != 0:
        raise ValueError(
            "Only the paper's relative attention (attn_type 0) is "
            f"supported. Received: attn_type={config['attn_type']}"
        )
    if config["sample_softmax"] > 0:
        raise ValueError(
            "A sampled softmax (sample_softmax > 0) is not supported. "
            f"Received: sample_softmax={config['sample_softmax']}"
        )
    cutoffs = list(config["cutoffs"])
    if "tie_projs" not in config:
        share = config.get("proj_share_all_but_first", True)
        config["tie_projs"] = [False] + [bool(share)] * len(cutoffs)
    config["n_token"] = config["vocab_size"]
    config["cutoffs"] = cutoffs
    return config


def _load_weights(path):
    safetensors = os.path.join(path, SAFETENSORS_FILE)
    pickled = os.path.join(path, PICKLE_FILE)
    if os.path.exists(safetensors):
        return read_safetensors(safetensors)
    if os.path.exists(pickled):
        try:
            import torch
        except ImportError:
            raise ImportError(
                f"{pickled} is a Python pickle; keras-txl reads it only "
                "with torch's `torch.load(..., weights_only=True)`, which "
                "builds no arbitrary objects, and torch is not installed. "
                "Install torch (`pip install torch`), or convert the "
                f"folder to safetensors. {_GET_SAFETENSORS}"
            ) from None
        state = torch.load(pickled, map_location="cpu", weights_only=True)
        return {name: value.float().numpy() for name, value in state.items()}
    raise FileNotFoundError(
        f"{path} has no weights: expected {SAFETENSORS_FILE} (or "
        f"{PICKLE_FILE}). Found: {sorted(os.listdir(path))}. Download the "
        "whole checkpoint folder, e.g. `huggingface-cli download "
        "transfo-xl/transfo-xl-wt103 --local-dir FOLDER`."
    )


def _untie(params, config):
    """Adds the tied output tensors that the checkpoint stores once, under
    the embedding's names, per `tie_word_embeddings` and `tie_projs`."""
    params = {
        name[len("transformer.") :]
        if name.startswith("transformer.")
        else name: value
        for name, value in params.items()
    }
    cutoffs, div_val = config["cutoffs"], config["div_val"]
    d_embed = config.get("d_embed") or config["d_model"]
    num_tables = 1 if div_val == 1 else len(cutoffs) + 1
    if config["tie_word_embeddings"]:
        for i in range(num_tables):
            name = f"word_emb.emb_layers.{i}.weight"
            if name in params:
                params[f"crit.out_layers.{i}.weight"] = params[name]
    projected = div_val != 1 or d_embed != config["d_model"]
    for i, tie in enumerate(config["tie_projs"]):
        name = f"word_emb.emb_projs.{0 if div_val == 1 else i}"
        if tie and projected and name in params:
            params[f"crit.out_projs.{i}"] = params[name]
    # Untied output tensors must be there (absent ones would read as tied).
    untied = [
        f"crit.out_layers.{i}.weight"
        for i in range(num_tables)
        if not config["tie_word_embeddings"]
    ] + [
        f"crit.out_projs.{i}"
        for i, tie in enumerate(config["tie_projs"])
        if projected and not tie
    ]
    missing = [name for name in untied if name not in params]
    if missing:
        raise ValueError(
            f"The checkpoint lacks {missing}, which its config does not tie "
            "to the embedding (tie_word_embeddings="
            f"{config['tie_word_embeddings']}, tie_projs="
            f"{config['tie_projs']}). Save the model again with "
            "`save_pretrained`, or fix the config."
        )
    return params


def from_huggingface(path, dtype=None, preprocessor=None):
    """Builds a `TransformerXLCausalLM` from a HuggingFace Transformer-XL
    checkpoint folder.

    The model computes what HuggingFace's `TransfoXLLMHeadModel` computes
    (in eval mode) when run from HuggingFace's starting memory,
    `lm.backbone.initial_memory(batch_size, start="zeros")`.

    Args:
        path: a folder with `config.json` (`model_type` `"transfo-xl"`)
            and `model.safetensors`. A `pytorch_model.bin` (a pickle) is
            read only with torch's `weights_only=True` loader, if torch is
            installed.
        dtype: optional dtype policy of the model.
        preprocessor: optional preprocessor of the task (`from_preset`
            attaches the folder's tokenizer); `None`: none.

    Returns:
        A `TransformerXLCausalLM` with HuggingFace's `mem_len`,
        `clamp_len`, `same_length`, layer-norm epsilon and the
        `"tensorflow"` cluster order.

    Raises:
        FileNotFoundError: for a folder without `config.json` or weights.
        ValueError: for another `model_type` or unsupported options.
        ImportError: for a `pytorch_model.bin` without torch.

    Example:

    >>> lm = from_huggingface("tests/fixtures/hf_transfo_xl")  # doctest: +SKIP
    >>> memory = lm.backbone.initial_memory(1, start="zeros")  # doctest: +SKIP
    """
    path = os.fspath(path)
    if not os.path.exists(os.path.join(path, CONFIG_FILE)):
        raise FileNotFoundError(
            f"{path} is not a HuggingFace checkpoint folder: it has no "
            f"{CONFIG_FILE}. Pass the folder that `save_pretrained` wrote "
            "(config.json and model.safetensors)."
        )
    config = huggingface_config(_read_config(path))
    params = _untie(_load_weights(path), config)
    clamp = config["clamp_len"]
    config["clamp_len"] = clamp if clamp and clamp > 0 else -1
    return load_pytorch_names(
        {name: np.asarray(value) for name, value in params.items()},
        config,
        dtype=dtype,
        cluster_order="tensorflow",
        same_length=bool(config["same_length"]),
        layer_norm_epsilon=float(config["layer_norm_epsilon"]),
        preprocessor=preprocessor,
    )
