"""Argument checks shared by the layers and models.

Every check raises `ValueError` (or `TypeError`) with a message that names the
argument, the value received and what is allowed, so that a user can fix the
call without reading the library's code.
"""

import keras
import numpy as np


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
