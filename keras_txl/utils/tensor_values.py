"""What a tensor holds now: whether its values can be read (an array or
an eager tensor) or not (symbolic, traced), and its dtype's name. The
checks of token ids, memories and lengths ask these before they read a
value."""

import keras
import numpy as np
from keras import ops


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
