"""Argument checks shared by the layers and models.

Every check raises `ValueError` (or `TypeError`) with a message that names the
argument, the value received and what is allowed, so that a user can fix the
call without reading the library's code.

`is_concrete` and `dtype_name` say what a tensor holds now: whether its
values can be read (an array or an eager tensor) or not (symbolic,
traced), and its dtype's name. The checks of token ids, memories and
lengths ask these before they read a value.
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
