"""Argument checks shared by the layers and models.

Every check raises `ValueError` (or `TypeError`) with a message that names the
argument, the value received and what is allowed, so that a user can fix the
call without reading the library's code.
"""

import warnings

import keras
import numpy as np
from keras import ops


def check_positive_int(name, value, allow_zero=False):
    """Checks that `value` is an `int` above zero (or at least zero)."""
    lowest = 0 if allow_zero else 1
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or value < lowest
    ):
        raise ValueError(
            f"`{name}` must be an integer >= {lowest}. "
            f"Received: {name}={value!r}"
        )
    return int(value)


def check_optional_positive_int(name, value, allow_zero=False):
    """Like `check_positive_int`, but `None` passes through."""
    if value is None:
        return None
    return check_positive_int(name, value, allow_zero=allow_zero)


def check_rate(name, value):
    """Checks a dropout rate: a float in [0, 1)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.floating))
        or not 0.0 <= float(value) < 1.0
    ):
        raise ValueError(
            f"`{name}` must be a float in [0, 1). Received: {name}={value!r}"
        )
    return float(value)


def check_positive_float(name, value, maximum=1.0):
    """Checks a float in (0, maximum] (an epsilon, a standard deviation):
    larger ones overflow float32 or give non-finite weights."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not 0 < value <= maximum  # False for NaN
    ):
        raise ValueError(
            f"`{name}` must be a float in (0, {maximum}]. Received: "
            f"{name}={value!r}"
        )
    return float(value)


def check_float_policy(name, dtype):
    """Checks that a dtype policy (`None`: the global one) computes in a
    float dtype: the layers cannot run in integer or complex arithmetic."""
    policy = keras.dtype_policies.get(dtype)  # raises for unknown names
    if "float" not in policy.compute_dtype:
        raise ValueError(
            f"`{name}` must be a float dtype policy such as 'float32', "
            f"'mixed_bfloat16' or 'mixed_float16'. Received: {name}="
            f"{dtype!r} (compute dtype {policy.compute_dtype})."
        )
    return dtype


def check_memory_dtype(memory_dtype, dtype=None):
    """Checks `memory_dtype` (`None` or a float dtype) and returns the
    dtype the memory is kept in: `memory_dtype`, else the compute dtype of
    the policy `dtype` (`None`: the global policy)."""
    if memory_dtype is None:
        return keras.dtype_policies.get(dtype).compute_dtype
    try:
        standard = keras.backend.standardize_dtype(memory_dtype)
    except ValueError:
        standard = None
    if standard not in ("float16", "bfloat16", "float32", "float64"):
        raise ValueError(
            "`memory_dtype` must be None (the compute dtype of the "
            "model's dtype policy) or a float dtype: 'float32', "
            f"'bfloat16' or 'float16'. Received: memory_dtype="
            f"{memory_dtype!r}"
        )
    return standard


def check_bool(name, value):
    """Checks a boolean flag (numpy booleans pass)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(
            f"`{name}` must be True or False. Received: {name}={value!r}"
        )
    return bool(value)


def is_concrete(x):
    """True when `x` holds values now (numpy, a Python list or an eager
    tensor), False for symbolic or traced tensors (Keras functional build,
    `jax.jit`, `tf.function`, torch's meta device).

    A variable (a `keras.Variable`, its `.value` under TensorFlow: a
    `tf.Variable`) is the same object inside and outside a trace, and
    fetching its values inside a `tf.function` raises. It is judged by
    a tensor copy of it instead (`ops.convert_to_tensor` returns a
    `tf.Variable` unchanged): an eager tensor outside a trace, a graph
    tensor inside `tf.function` (with `jit_compile` too), a tracer in
    JAX's stateless `fit` step. Inside a trace that copy is symbolic: the
    variable's values are never fetched there. (Keras makes the same
    decision with `tf.executing_eagerly()`, in a private helper.)"""
    if isinstance(x, (np.ndarray, list, tuple, int, np.integer)):
        return True
    if isinstance(x, keras.Variable) or callable(getattr(x, "assign", None)):
        x = ops.copy(x)
    if not ops.is_tensor(x):
        return False
    name = type(x).__name__
    if "Tracer" in name or "KerasTensor" in name or "Symbolic" in name:
        return False
    return str(getattr(x, "device", "")) != "meta"


def dtype_name(x):
    """The dtype of a tensor or array as a plain string ('float32', ...)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        dtype = np.asarray(x).dtype
    try:
        return keras.backend.standardize_dtype(dtype)
    except ValueError:  # strings, objects: not a Keras dtype
        return str(dtype)


def check_token_ids(token_ids, vocabulary_size, name="token_ids"):
    """Checks dtype, rank and range of concrete token ids.

    JAX clamps out-of-range gathers silently and TensorFlow on GPU returns
    zeros, so the range is checked here, on the host, for every input that
    holds values. Symbolic and traced inputs only get the rank check: their
    dtype and range are checked where the data enters (`fit`, `evaluate`
    and `predict` check arrays and dataset specs before any step, and the
    data pipelines in `keras_txl.data` what they feed). Keras itself traces
    a model with float32 placeholders for integer inputs when it builds it
    under `tf.distribute` (its `_symbolic_build` reads no dtype from the
    per-replica values), so a float dtype here is not an error.

    Returns:
        `token_ids`, as a NumPy array if it came as a Python list or tuple.
    """
    if isinstance(token_ids, (list, tuple)):
        token_ids = np.asarray(token_ids)
    shape = tuple(getattr(token_ids, "shape", np.shape(token_ids)))
    dtype = dtype_name(token_ids)
    # Anything but a symbolic or traced tensor holds its values now.
    symbolic = isinstance(token_ids, keras.KerasTensor) or (
        ops.is_tensor(token_ids) and not is_concrete(token_ids)
    )
    concrete = not symbolic
    if "int" not in dtype and concrete:
        raise TypeError(
            f"`{name}` must hold integer token ids. Received dtype {dtype}. "
            f"Tokenize the text first (for example with "
            f"`keras_hub.tokenizers.ByteTokenizer`) and pass int32 ids."
        )
    if len(shape) != 2:
        raise ValueError(
            f"`{name}` must have rank 2, shape (batch, sequence_length). "
            f"Received shape {shape}."
        )
    if shape[0] == 0:
        raise ValueError(
            f"`{name}` must hold at least one sequence. Received shape {shape}."
        )
    if concrete:
        values = np.asarray(ops.convert_to_numpy(token_ids))
        if values.size:
            low, high = int(values.min()), int(values.max())
            if low < 0 or high >= vocabulary_size:
                raise ValueError(
                    f"`{name}` must lie in [0, vocabulary_size="
                    f"{vocabulary_size}). Received values in [{low}, {high}]."
                    f" Use the tokenizer the model was trained with, or a "
                    f"model with a larger `vocabulary_size`."
                )
    return token_ids


def in_vocabulary(token_ids, vocabulary_size):
    """Boolean tensor, True where `0 <= token_ids < vocabulary_size`."""
    token_ids = ops.convert_to_tensor(token_ids)
    return ops.logical_and(
        ops.greater_equal(token_ids, 0),
        ops.less(token_ids, vocabulary_size),
    )


def is_dataset(x):
    """True for a `tf.data.Dataset` (duck-typed: no TensorFlow import)."""
    return hasattr(x, "element_spec") and hasattr(x, "_inputs")


def shuffles(dataset):
    """True if a `.shuffle()` is part of a `tf.data` pipeline.

    Walks the (private, but long-stable) `_inputs()` graph of the dataset.
    A shuffle before the text is cut into streams is harmless, but cannot
    be told apart from one after: callers warn, they do not raise.
    """
    seen, stack = set(), [dataset]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if "Shuffle" in type(node).__name__:
            return True
        try:
            stack.extend(node._inputs())
        except Exception:  # not a tf.data node: nothing more to see
            pass
    return False


def check_token_data(x, y=None, vocabulary_size=None):
    """Checks what `fit`/`evaluate`/`predict` of a language model get,
    before any step is traced (inside a step, values cannot raise):

    - arrays (NumPy, tensors, or a dict with `"token_ids"`): dtype, rank
      and range of the ids `x` and the targets `y`;
    - a `tf.data.Dataset`: dtype and rank of its token ids' spec, and a
      warning if it shuffles (carried memory needs ordered segments).

    Generators and other inputs pass: `call` checks every batch's dtype
    and rank, and makes the loss of out-of-range ids NaN.
    """
    if isinstance(x, dict) and "memory" not in x:
        x = x.get("token_ids")
    if is_dataset(x):
        _check_dataset(x)
        return
    for name, ids in (("x", x), ("y", y)):
        if hasattr(ids, "shape") and hasattr(ids, "dtype"):
            check_token_ids(ids, vocabulary_size, name=name)


def _check_dataset(dataset):
    if shuffles(dataset):
        warnings.warn(
            "The dataset passed as `x` shuffles its elements (it has a "
            "`.shuffle()`). The memory carried between batches assumes "
            "that row b of each batch continues row b of the batch before "
            "(`keras_txl.data.segment_dataset`): shuffled segments give the "
            "model unrelated context. Shuffle only before the text is cut "
            "into streams, if at all.",
            stacklevel=4,
        )
    spec = dataset.element_spec
    if isinstance(spec, (tuple, list)):
        spec = spec[0]
    if isinstance(spec, dict):
        spec = None if "memory" in spec else spec.get("token_ids")
    if spec is None or not hasattr(spec, "shape"):
        return
    dtype = dtype_name(spec)
    if "int" not in dtype or len(spec.shape) != 2:
        raise TypeError(
            "The dataset passed as `x` must yield int token ids of shape "
            "(batch, sequence_length), as `keras_txl.data.segment_dataset` "
            f"does. Its element spec gives dtype {dtype} and shape "
            f"{tuple(spec.shape)}."
        )


# Keras's quantization modes that these models compute correctly: the
# `Dense`, `EinsumDense` and `Embedding` layers quantize their own weights
# and every layer here reads them through their calls. GPTQ and AWQ
# calibrate a block on the previous block's outputs alone, and a
# Transformer-XL block also needs its memory and position embeddings.
QUANTIZATION_MODES = ("int8", "int4", "float8")


def check_quantize(model, mode, config):
    """Raises a `ValueError` if `model.quantize(mode, config=config)`
    cannot give correct numbers, before any layer changes (Keras checks a
    layer only when it reaches it, so a refusal half-way would leave some
    layers quantized). Returns the mode (from `config` when `mode` is
    `None`)."""
    if mode is None and config is not None:
        mode = getattr(config, "mode", None)
    if mode in ("gptq", "awq"):
        raise ValueError(
            f"keras-txl models do not support quantize(mode={mode!r}): it "
            "calibrates each block on the previous block's outputs alone, "
            "and a Transformer-XL block also needs its memory and the "
            f"relative position embeddings. Use one of {QUANTIZATION_MODES}."
        )
    if mode not in QUANTIZATION_MODES:
        raise ValueError(
            f"`mode` must be one of {list(QUANTIZATION_MODES)}. Received: "
            f"mode={mode!r}"
        )
    if model.quantization_mode is not None or any(
        weight.path.endswith(("kernel_scale", "embeddings_scale"))
        for weight in model.weights
    ):
        raise ValueError(
            f"{model.name} is already quantized. Quantize a float model "
            f"once. Received: mode={mode!r}"
        )
    if mode == "int8" and model.compute_dtype == "float16":
        raise ValueError(
            "quantize(mode='int8') does not work well with the compute "
            "dtype float16: load the model under 'mixed_bfloat16' or "
            "'mixed_float16' first."
        )
    return mode


def check_attention_memory(query, memory, memory_valid_length, key_values=None):
    """Checks `memory` (or `key_values`) and `memory_valid_length`
    before they are used, as the backbone's `MemorySpec` checks a memory
    dict. Raises a `ValueError` that names the argument, what was
    received, what is expected and how to fix it.

    Shapes and dtypes are static: they are checked at trace time too.
    The values of `memory_valid_length` (within `[0, M]`) are checked
    only where they are concrete (NumPy, a Python list, an eager
    tensor): under `jit` or `tf.function` a traced value cannot be read
    without a host sync, and is not checked."""
    query_shape = tuple(query.shape)
    memory_length = 0
    if memory is not None:
        shape = tuple(memory.shape)
        if len(shape) != 3:
            raise ValueError(
                "`memory` must have shape `(batch, M, dim)`, the states of "
                "the layer below for `M` earlier positions. Received: "
                f"memory.shape={shape}. Pass `memory=None` for no memory."
            )
        dtype = dtype_name(memory)
        if "float" not in dtype:
            raise ValueError(
                "`memory` must hold hidden states, a floating-point tensor "
                f"(the states of the layer below). Received: dtype={dtype}. "
                "Pass the states themselves (token ids go through the "
                "embedding first)."
            )
        for axis, name in ((-1, "width"), (0, "batch size")):
            got, want = shape[axis], query_shape[axis]
            if got is not None and want is not None and got != want:
                raise ValueError(
                    f"`memory` must have the {name} of the query, {want}: "
                    "shape `(batch, M, dim)` with the query's batch and "
                    f"dim. Received: memory.shape={shape}, query.shape="
                    f"{query_shape}. Pass the states of this layer's input "
                    "for the same batch."
                )
        memory_length = shape[1]
    elif key_values is not None:
        keys = key_values.shape[1]
        memory_length = None if keys is None else keys - query_shape[1]
    if memory_valid_length is None:
        return
    valid_dtype = dtype_name(memory_valid_length)
    if "int" not in valid_dtype:
        raise ValueError(
            "`memory_valid_length` must be integers: the number of valid "
            f"slots of each row. Received: dtype={valid_dtype}. Cast it to "
            "int32."
        )
    valid_shape = tuple(np.shape(memory_valid_length))
    if (
        len(valid_shape) != 1
        or None not in (valid_shape[0], query_shape[0])
        and valid_shape[0] != query_shape[0]
    ):
        raise ValueError(
            "`memory_valid_length` must have shape `(batch,)`, one length "
            f"per row of the query, ({query_shape[0]},). Received: "
            f"memory_valid_length.shape={valid_shape}."
        )
    if memory_length is None or not is_concrete(memory_valid_length):
        return
    values = np.asarray(ops.convert_to_numpy(memory_valid_length))
    if values.size and (values.min() < 0 or values.max() > memory_length):
        raise ValueError(
            f"`memory_valid_length` must lie in [0, M] = [0, {memory_length}]"
            f" for a memory of M={memory_length} slots. Received: "
            f"memory_valid_length={values.tolist()}. Pass the lengths "
            "returned with the memory (`MemoryCache`), or `None` when "
            "every slot is valid."
        )
