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
    if shape[0] == 0:
        raise ValueError(
            f"`{name}` must hold at least one sequence. Received shape {shape}."
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


def in_vocabulary(token_ids, vocabulary_size):
    """Boolean tensor, True where `0 <= token_ids < vocabulary_size`."""
    token_ids = ops.convert_to_tensor(token_ids)
    return ops.logical_and(
        ops.greater_equal(token_ids, 0),
        ops.less(token_ids, vocabulary_size),
    )


def ensure_batch_size(x, batch_size, message):
    """Returns `x` after checking that its first dimension is `batch_size`.

    A static dimension is checked now and raises `ValueError(message)`. A
    dynamic one (a TensorFlow graph fed by a dataset without a static batch
    size: JAX and torch shapes are always concrete) is checked when the
    graph runs: TensorFlow then raises `InvalidArgumentError` with
    `message` and the two sizes, instead of a shape error deep inside the
    model.
    """
    size = x.shape[0]
    if size is not None:
        if size != batch_size:
            raise ValueError(f"{message} Received a batch of size {size}.")
        return x
    if keras.config.backend() != "tensorflow":
        return x
    import tensorflow as tf  # only TensorFlow graphs have dynamic shapes

    check = tf.debugging.assert_equal(
        tf.shape(x)[0],
        tf.constant(batch_size, tf.int32),
        message=message,
        summarize=1,
    )
    with tf.control_dependencies([check]):
        x = tf.identity(x)
    return tf.ensure_shape(x, [batch_size] + [None] * (len(x.shape) - 1))


# Keras's default `batch_size` for arrays given to fit/evaluate/predict.
_KERAS_DEFAULT_BATCH_SIZE = 32


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


def static_batch_size(x, batch_size=None, vocabulary_size=None, name="x"):
    """The batch size that `fit`/`evaluate`/`predict` will feed, if known.

    Checks what can be checked before any step runs, so that errors name
    the argument instead of surfacing inside a traced step:

    - arrays (NumPy, tensors; or a dict with `"token_ids"`): dtype, rank
      and range of the token ids, and that the rows split into batches of
      one size (a smaller last batch cannot meet the carried memory);
    - a `tf.data.Dataset`: dtype and rank of its token ids' spec.

    Args:
        x: what was passed as `x`.
        batch_size: the `batch_size` argument (arrays only; `None` is
            Keras's default of 32).
        vocabulary_size: int, for the range check of arrays.
        name: the argument's name in messages.

    Returns:
        The number of rows of every batch, or `None` when it is not static
        (a dataset without a static batch dimension, a generator).
    """
    if isinstance(x, dict) and "memory" not in x:
        x = x.get("token_ids")
        name = f"{name}['token_ids']"
    if x is None or isinstance(x, dict):
        return None
    if is_dataset(x):
        spec = x.element_spec
        if isinstance(spec, (tuple, list)):
            spec = spec[0]
        if isinstance(spec, dict):
            if "memory" in spec:
                return None
            spec = spec.get("token_ids")
        if spec is None or not hasattr(spec, "shape"):
            return None
        dtype = dtype_name(spec)
        if "int" not in dtype or len(spec.shape) != 2:
            raise TypeError(
                f"The dataset passed as `{name}` must yield int token ids of "
                "shape (batch, sequence_length), as "
                "`keras_txl.data.segment_dataset` does. Its element spec "
                f"gives dtype {dtype} and shape {tuple(spec.shape)}."
            )
        return spec.shape[0]
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        return None  # generators, PyDatasets: checked batch by batch
    check_token_ids(x, vocabulary_size, name=name)
    rows = int(x.shape[0])
    batch_size = check_optional_positive_int("batch_size", batch_size)
    batch_size = batch_size or _KERAS_DEFAULT_BATCH_SIZE
    if rows > batch_size and rows % batch_size:
        raise ValueError(
            f"`{name}` has {rows} rows, which do not split into batches of "
            f"batch_size={batch_size}: the last batch would have "
            f"{rows % batch_size} rows, and the memory carried between "
            f"batches needs one batch size. Pass {rows - rows % batch_size}"
            f" rows, or a batch_size that divides {rows}."
        )
    return min(rows, batch_size)


def with_batch_size(dataset, batch_size, message):
    """`dataset` with every batch checked to have `batch_size` rows.

    For a `tf.data.Dataset` without a static batch dimension: the check
    runs in the input pipeline (outside any compiled step, where XLA would
    drop an assertion), raises `InvalidArgumentError` with `message` for
    a batch of another size, and gives the elements a static batch
    dimension.
    """
    import tensorflow as tf  # only called with a tf.data.Dataset

    def check(tensor):
        if not isinstance(tensor, tf.Tensor) or tensor.shape.rank == 0:
            return tensor
        ok = tf.debugging.assert_equal(
            tf.shape(tensor)[0], batch_size, message=message, summarize=1
        )
        with tf.control_dependencies([ok]):
            tensor = tf.identity(tensor)
        return tf.ensure_shape(
            tensor, [batch_size] + [None] * (tensor.shape.rank - 1)
        )

    def check_element(*element):
        element = element[0] if len(element) == 1 else element
        return tf.nest.map_structure(check, element)

    return dataset.map(check_element)
