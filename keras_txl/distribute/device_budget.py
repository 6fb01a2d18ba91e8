"""Bytes that one replica needs to train a Transformer-XL.

The counts follow the complexity of Dai et al. (2019): the memory (`M`
hidden states per layer) grows as `O(M d L)`, the activations kept for
the backward pass as `O(T d L)`, the attention maps as `O(T (T + M))` per
head and layer; to these come the parameters, their gradients and the
optimizer's state. All sizes are per replica: the batch is split between
replicas, the weights and the optimizer state are copied on each (data
parallelism).
"""

from keras_txl.utils.validation import check_memory_dtype
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int

_CONFIG_KEYS = (
    "vocabulary_size",
    "num_layers",
    "num_heads",
    "hidden_dim",
    "head_dim",
    "intermediate_dim",
    "memory_length",
)

# Bytes of one number of the compute dtype, and of the variables, for the
# dtype policies that Keras knows.
_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_POLICIES = {
    "float32": (4, 4),
    "float16": (2, 2),
    "bfloat16": (2, 2),
    "mixed_float16": (2, 4),
    "mixed_bfloat16": (2, 4),
}

# Options of the variants, with the paper's value.
_PLAIN_OPTIONS = {
    "cutoffs": [],
    "div_val": 1,
    "embedding_dim": None,
    "compressed_memory_length": 0,
    "position_encoding": "relative",
}

# Slot variables per parameter.
_OPTIMIZER_SLOTS = {"adam": 2, "adamw": 2, "lamb": 2, "rmsprop": 1, "sgd": 0}


def _backbone_config(config):
    if hasattr(config, "get_config"):
        config = config.get_config()
    if not isinstance(config, dict):
        raise ValueError(
            "`config` must be a backbone's `get_config()` dict. Received: "
            f"{type(config).__name__}"
        )
    missing = [key for key in _CONFIG_KEYS if key not in config]
    if missing:
        raise ValueError(
            f"`config` lacks the keys {missing}. Pass "
            "`backbone.get_config()` or a dict with the keys "
            f"{list(_CONFIG_KEYS)}."
        )
    checked = {
        key: check_positive_int(key, config[key], allow_zero=True)
        for key in _CONFIG_KEYS
    }
    checked["memory_dtype"] = config.get("memory_dtype")
    # Options whose weights the count below does not know.
    checked["variant"] = sorted(
        key
        for key, plain in _PLAIN_OPTIONS.items()
        if config.get(key, plain) not in (plain, None)
        and not (key == "embedding_dim" and config[key] == config["hidden_dim"])
    )
    return checked


def _parameter_count(c, tie_weights):
    """Trainable parameters of the paper's model (`TransformerXLCausalLM`
    on a plain `TransformerXLBackbone`), from its config: the count of
    `lm.count_params()` (tests/distribute/test_device_budget.py)."""
    d, v, di = c["hidden_dim"], c["vocabulary_size"], c["intermediate_dim"]
    nh = c["num_heads"] * c["head_dim"]
    # Query, key, value, position and output projections (no biases), the
    # biases u and v, two layer norms, the feed-forward with its biases.
    layer = 5 * d * nh + 2 * nh + 2 * 2 * d + 2 * d * di + di + d
    output = v if tie_weights else v + d * v  # the bias (and a kernel)
    return v * d + c["num_layers"] * layer + output


def device_budget(
    config,
    batch_size,
    segment_length,
    memory_length=None,
    replicas=1,
    dtype="float32",
    optimizer="adam",
    tie_weights=True,
    parameter_count=None,
):
    """Bytes that one replica holds during a training step.

    An estimate, not a measurement: it counts the tensors that a training
    step keeps alive at its peak. Compilers fuse some of them and add
    buffers of their own; at small scale it lies within 0.8x to 1.05x of
    XLA's buffer analysis of the compiled step (`measure_train_step_memory`
    on JAX; see `docs/distributed.md`). It needs the model's sizes only:
    strategies know no model class.

    Args:
        config: a backbone's config (`backbone.get_config()`, or the
            backbone itself): the sizes of the model.
        batch_size: int. GLOBAL batch size (streams of text); each replica
            gets `batch_size // replicas` of them.
        segment_length: int. Tokens per segment `T`.
        memory_length: int or `None`. Memory length `M`; `None` uses the
            config's.
        replicas: int. Number of replicas the batch is split between.
        dtype: dtype policy name: `"float32"`, `"mixed_bfloat16"`,
            `"mixed_float16"`, `"bfloat16"` or `"float16"`.
        optimizer: `"adam"`, `"adamw"`, `"lamb"`, `"rmsprop"` or `"sgd"`
            (slot variables per parameter: 2, 2, 2, 1, 0).
        tie_weights: bool, as in `TransformerXLCausalLM`.
        parameter_count: int or `None`. The model's trainable parameters,
            `lm.count_params()`; `None` counts them from the config, which
            knows the paper's model only (not the adaptive input and
            softmax, the compressed memory's weights, learned positions).

    Returns:
        A dict of bytes per replica: `"parameters"`, `"gradients"`,
        `"optimizer"`, `"memory"` (the carried memory and the one the step
        writes, in the compute dtype unless the backbone's `memory_dtype`
        is set), `"activations"` (kept for the backward
        pass), `"attention"` (the `(T, T + M)` maps of every head and
        layer), `"logits"` (float32, with the softmax and its gradient) and
        `"total"`; and `"per_replica_batch"`, `"parameter_count"`.

    Example:

    >>> budget = device_budget(
    ...     {"vocabulary_size": 256, "num_layers": 2, "num_heads": 2,
    ...      "hidden_dim": 32, "head_dim": 16, "intermediate_dim": 64,
    ...      "memory_length": 16},
    ...     batch_size=8, segment_length=16, replicas=2,
    ... )
    >>> budget["per_replica_batch"], budget["memory"]
    (4, 32768)
    """
    c = _backbone_config(config)
    if parameter_count is None:
        if c["variant"]:
            raise ValueError(
                f"The config sets {c['variant']}, whose weights the count "
                "from a config does not know: pass "
                "`parameter_count=lm.count_params()`."
            )
        parameter_count = _parameter_count(c, tie_weights)
    count = check_positive_int("parameter_count", parameter_count)
    batch_size = check_positive_int("batch_size", batch_size)
    replicas = check_positive_int("replicas", replicas)
    t = check_positive_int("segment_length", segment_length)
    m = check_optional_positive_int("memory_length", memory_length, True)
    m = c["memory_length"] if m is None else m
    if batch_size % replicas:
        raise ValueError(
            f"`batch_size` (the global batch, {batch_size}) must be a "
            f"multiple of `replicas` ({replicas}): each replica carries "
            "the memory of the same number of streams."
        )
    if dtype not in _POLICIES:
        raise ValueError(
            f"`dtype` must be one of {sorted(_POLICIES)}. Received: "
            f"dtype={dtype!r}"
        )
    if optimizer not in _OPTIMIZER_SLOTS:
        raise ValueError(
            f"`optimizer` must be one of {sorted(_OPTIMIZER_SLOTS)}. "
            f"Received: optimizer={optimizer!r}"
        )
    act, var = _POLICIES[dtype]
    # The memory is kept in the compute dtype unless `memory_dtype` is set.
    memory_dtype = c["memory_dtype"]
    memory_bytes = (
        act
        if memory_dtype is None
        else _BYTES[check_memory_dtype(memory_dtype)]
    )
    b = batch_size // replicas
    layers, d = c["num_layers"], c["hidden_dim"]
    heads, nh = c["num_heads"], c["num_heads"] * c["head_dim"]
    di, v = c["intermediate_dim"], c["vocabulary_size"]
    k = t + m  # keys: memory and segment

    # Per layer, kept for the backward pass: the context (memory and
    # segment, K d), seven segment-wide tensors of width d (input,
    # attention output, residual, norm, feed-forward output, residual,
    # norm), queries with both biases and the attended values (4 T nh),
    # keys and values (2 K nh), the feed-forward hidden layer before and
    # after its activation (2 T di). Plus the embeddings (T d).
    per_layer = (k + 7 * t) * d + (4 * t + 2 * k) * nh + 2 * t * di
    activations = b * (layers * per_layer + t * d) * act
    # Attention maps (batch, heads, T, K): every layer keeps two float32
    # maps for the backward pass (the softmax's exponentials and its
    # output), and a copy in the compute dtype under mixed precision; one
    # layer at a time also holds the content, position and shifted
    # position scores.
    attention_map = b * heads * t * k
    kept = 2 * 4 + (act if act != 4 else 0)
    attention = attention_map * (layers * kept + 3 * act)
    budget = {
        "per_replica_batch": b,
        "parameter_count": count,
        "parameters": count * var,
        "gradients": count * var,
        "optimizer": count * var * _OPTIMIZER_SLOTS[optimizer],
        "memory": 2 * b * layers * m * d * memory_bytes,
        "activations": activations,
        "attention": attention,
        # Logits, their log-softmax and its gradient, float32.
        "logits": 3 * b * t * v * 4,
    }
    budget["total"] = sum(
        value
        for key, value in budget.items()
        if key not in ("per_replica_batch", "parameter_count")
    )
    return budget
