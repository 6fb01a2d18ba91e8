"""Argument checks shared by the layers and models.

Every check raises `ValueError` (or `TypeError`) with a message that names the
argument, the value received and what is allowed, so that a user can fix the
call without reading the library's code.
"""

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


def check_positive_float(name, value):
    """Checks a finite float above zero (an epsilon, a standard deviation)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not np.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"`{name}` must be a finite float > 0. Received: {name}={value!r}"
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
    `jax.jit`, `tf.function`, torch's meta device)."""
    if isinstance(x, (np.ndarray, list, tuple, int, np.integer)):
        return True
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
    holds values. Symbolic and traced inputs only get the dtype and rank
    checks (the data pipelines in `keras_txl.data` check the range of what
    they feed to `fit`).

    Returns:
        `token_ids`, as a NumPy array if it came as a Python list or tuple.
    """
    if isinstance(token_ids, (list, tuple)):
        token_ids = np.asarray(token_ids)
    shape = tuple(getattr(token_ids, "shape", np.shape(token_ids)))
    dtype = dtype_name(token_ids)
    if "int" not in dtype:
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
    if is_concrete(token_ids):
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
