"""Checks of the token ids a language model is given: arrays and tensors
(dtype, rank, range) and the `tf.data` datasets of `fit`, `evaluate` and
`predict` (their spec, and whether they shuffle the ordered segments the
carried memory needs). Each error names the argument, what was received
and how to fix it."""

import warnings

import keras
import numpy as np
from keras import ops

from keras_txl.utils.validation import dtype_name
from keras_txl.utils.validation import is_concrete


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


def check_right_padded(padding_mask, shape, item="text"):
    """Raises a `ValueError` unless `padding_mask` has the shape `shape` of
    the ids and, when it holds values (`is_concrete`), each row is True,
    then False (keras-hub's right padding). `item` names what a row holds
    in the message ("text", "document")."""
    if not hasattr(padding_mask, "shape"):  # A Python list.
        padding_mask = np.asarray(padding_mask)
    if tuple(padding_mask.shape) != tuple(shape):
        raise ValueError(
            f"`padding_mask` must have the shape of `token_ids`, {shape}. "
            f"Received shape {tuple(padding_mask.shape)}."
        )
    if not is_concrete(padding_mask):
        return
    mask = np.asarray(ops.convert_to_numpy(padding_mask)).astype(bool)
    rows = np.flatnonzero(np.any(mask[:, 1:] & ~mask[:, :-1], axis=1))
    if rows.size:
        raise ValueError(
            f"`padding_mask` must be True on a {item}'s tokens, then False "
            f"(right padding). Row {int(rows[0])} has padding before "
            f"tokens: move each {item} to the start of its row."
        )
