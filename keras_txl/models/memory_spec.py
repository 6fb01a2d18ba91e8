"""What a Transformer-XL memory holds: the one place that says it.

Every part of the package that makes, casts, stores, saves or exports a
memory asks a `MemorySpec` (`backbone.memory_spec`) instead of writing the
tensors out by hand: the backbone's inputs and `initial_memory()`,
`generate`'s empty memory, the memory carried between the batches of
`fit` (`MemoryState`), `TrainingCheckpoint`, the SavedModel signatures and
`keras_txl.ablation.UnrolledSegmentsLM`. A new kind of memory is added
here, and they all follow.
"""

import keras
import numpy as np
from keras import ops

from keras_txl.utils.validation import check_positive_int
from keras_txl.utils.validation import dtype_name
from keras_txl.utils.validation import is_concrete

# The states of the last `M` positions at the input of every layer, and
# how many of those slots (the last ones) hold states.
MEMORY_KEYS = ("memory", "valid_length")
# The same for the compressed memory of a compressive backbone.
COMPRESSED_KEYS = ("compressed_memory", "compressed_valid_length")
# The keys whose tensors count valid slots (int32, shape `(batch,)`).
LENGTH_KEYS = ("valid_length", "compressed_valid_length")
# The memories a text can start from (`backbone.initial_memory(start=...)`).
MEMORY_STARTS = ("empty", "zeros")


class MemorySpec:
    """Which tensors a Transformer-XL memory holds, their shapes and dtypes.

    A memory is a dict of tensors (the words are docs/design.md's "Memory
    vocabulary"):

    - `"memory"`, the memory states: `(batch, num_layers, memory_length,
      hidden_dim)`, of `dtype`. Entry `l` holds the INPUT of layer `l` at
      the last `memory_length` positions, the most recent last.
    - `"valid_length"`: int32 `(batch,)`: how many of those slots (the
      last ones) hold states; 0 is an empty memory.
    - with `compressed_memory_length > 0` (a compressive backbone), also
      `"compressed_memory"` `(batch, num_layers, compressed_memory_length,
      hidden_dim)` of `dtype` and `"compressed_valid_length"` int32
      `(batch,)`.

    The lengths are defaults: a memory of another length fits the same
    model (`zeros(batch, memory_length=...)`).

    Args:
        num_layers: int. Layers of the backbone.
        hidden_dim: int. Width of the states.
        memory_length: int >= 0. Default memory slots `M`.
        compressed_memory_length: int >= 0. Default compressed slots `Mc`;
            0 means no compressed memory (the paper's model).
        dtype: dtype of the states (the lengths are always int32).
            Defaults to `"float32"`. A backbone's spec has the backbone's
            `memory_dtype`: its compute dtype unless set (`"bfloat16"`
            under `"mixed_bfloat16"`).

    Example:

    >>> spec = MemorySpec(num_layers=2, hidden_dim=4, memory_length=3)
    >>> spec.keys
    ('memory', 'valid_length')
    >>> memory = spec.zeros(batch_size=5)
    >>> tuple(memory["memory"].shape), tuple(memory["valid_length"].shape)
    ((5, 2, 3, 4), (5,))
    """

    def __init__(
        self,
        num_layers,
        hidden_dim,
        memory_length,
        compressed_memory_length=0,
        dtype="float32",
    ):
        self.num_layers = check_positive_int("num_layers", num_layers)
        self.hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        self.memory_length = check_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        self.compressed_memory_length = check_positive_int(
            "compressed_memory_length",
            compressed_memory_length,
            allow_zero=True,
        )
        dtype = keras.backend.standardize_dtype(dtype)
        if "float" not in dtype:
            raise ValueError(
                "`dtype` of a memory must be a float dtype (the states). "
                f"Received: dtype={dtype}"
            )
        self.dtype = dtype

    def __repr__(self):
        return (
            f"MemorySpec(num_layers={self.num_layers}, hidden_dim="
            f"{self.hidden_dim}, memory_length={self.memory_length}, "
            f"compressed_memory_length={self.compressed_memory_length}, "
            f"dtype={self.dtype!r})"
        )

    def __eq__(self, other):
        return isinstance(other, MemorySpec) and vars(self) == vars(other)

    @property
    def compressive(self):
        """Whether the memory holds a compressed memory too."""
        return self.compressed_memory_length > 0

    @property
    def keys(self):
        """The keys of a memory dict, in a fixed order."""
        return (
            MEMORY_KEYS + COMPRESSED_KEYS if self.compressive else MEMORY_KEYS
        )

    def dtype_of(self, key):
        """The dtype of the tensor under `key`."""
        return "int32" if key in LENGTH_KEYS else self.dtype

    def shapes(
        self, batch_size=None, memory_length=None, compressed_memory_length=None
    ):
        """`{key: shape}` of a memory; `None` lengths are the defaults,
        `batch_size=None` leaves the batch axis unknown."""
        if memory_length is None:
            memory_length = self.memory_length
        if compressed_memory_length is None:
            compressed_memory_length = self.compressed_memory_length
        shapes = {
            "memory": (
                batch_size,
                self.num_layers,
                memory_length,
                self.hidden_dim,
            ),
            "valid_length": (batch_size,),
        }
        if self.compressive:
            shapes["compressed_memory"] = (
                batch_size,
                self.num_layers,
                compressed_memory_length,
                self.hidden_dim,
            )
            shapes["compressed_valid_length"] = (batch_size,)
        return shapes

    def zeros(
        self,
        batch_size,
        memory_length=None,
        compressed_memory_length=None,
        valid_length=0,
    ):
        """A memory of zero states: empty (`valid_length=0`, what a segment
        without context attends to), or with its last `valid_length` zero
        slots counted as states (`backbone.initial_memory(start="zeros")`:
        the authors' TensorFlow code). The compressed memory starts empty.
        `batch_size` and the lengths may be traced scalars (`generate`
        under `jit`)."""
        shapes = self.shapes(
            batch_size, memory_length, compressed_memory_length
        )
        memory = {
            key: ops.zeros(shape, dtype=self.dtype_of(key))
            for key, shape in shapes.items()
        }
        if not isinstance(valid_length, int) or valid_length:
            memory["valid_length"] = ops.full(
                shapes["valid_length"], valid_length, dtype="int32"
            )
        return memory

    def cast(self, memory):
        """`memory` with states of `dtype` and int32 lengths."""
        return {
            key: ops.cast(value, self.dtype_of(key))
            for key, value in memory.items()
        }

    def check(self, memory, batch_size=None):
        """Raises a `ValueError` (a `TypeError` for a dtype) unless
        `memory` is a memory of this spec: its keys; float states
        `(batch, num_layers, slots, hidden_dim)` of any length; int
        lengths `(batch,)` within the slots (checked when concrete); and
        a compressed memory that holds states only behind a full memory
        (it fills with states evicted from it)."""
        keys = list(self.keys)
        if not isinstance(memory, dict) or set(memory) != set(keys):
            got = sorted(memory) if isinstance(memory, dict) else type(memory)
            raise ValueError(
                f"`memory` must be a dict with keys {keys} (see "
                f"`backbone.initial_memory()`). Received: {got}"
            )
        lengths = {}
        for key, length_key, slots in (
            ("memory", "valid_length", "M"),
            ("compressed_memory", "compressed_valid_length", "Mc"),
        ):
            if key not in memory:
                continue
            states, valid = memory[key], memory[length_key]
            shape, expected = tuple(states.shape), (batch_size,)
            expected += (self.num_layers, slots, self.hidden_dim)
            if len(shape) != 4 or any(
                None not in (got, want) and got != want
                for got, want in zip(shape, expected)
                if want != slots
            ):
                raise ValueError(
                    f"`memory['{key}']` must have shape (batch, num_layers, "
                    f"{slots}, hidden_dim) = {expected}. Received shape "
                    f"{shape}. Build it with "
                    "`backbone.initial_memory(batch_size)`."
                )
            if "float" not in dtype_name(states):
                raise TypeError(
                    f"`memory['{key}']` must be a float tensor (of the "
                    "backbone's `memory_dtype`; other floats are cast). "
                    f"Received dtype {dtype_name(states)}."
                )
            valid_shape = tuple(valid.shape)
            if (
                len(valid_shape) != 1
                or None
                not in (
                    valid_shape[0],
                    shape[0],
                )
                and (valid_shape[0] != shape[0])
            ):
                raise ValueError(
                    f"`memory['{length_key}']` must have shape (batch,) = "
                    f"({shape[0]},). Received shape {valid_shape}."
                )
            if "int" not in dtype_name(valid):
                raise TypeError(
                    f"`memory['{length_key}']` must hold integers (int32), "
                    "the number of valid slots. Received dtype "
                    f"{dtype_name(valid)}."
                )
            if is_concrete(valid) and shape[2] is not None:
                values = np.asarray(ops.convert_to_numpy(valid))
                lengths[key] = (values, shape[2])
                if values.size and (
                    values.min() < 0 or values.max() > shape[2]
                ):
                    raise ValueError(
                        f"`memory['{length_key}']` must lie in [0, {slots}] "
                        f"for a memory of {slots}={shape[2]} slots. Received "
                        f"values in [{values.min()}, {values.max()}]. Pass "
                        "the lengths returned with the memory."
                    )
        if len(lengths) == 2:
            (valid, slots), (held, _) = lengths.values()
            if ((held > 0) & (valid != slots)).any():
                raise ValueError(
                    "`memory['compressed_valid_length']` must be 0 wherever "
                    "the memory is not full (the compressed memory fills "
                    "only with states evicted from a full memory). Received "
                    f"compressed_valid_length={held.tolist()}, valid_length="
                    f"{valid.tolist()}. Pass the memory dict returned by "
                    "the previous call."
                )

    def select(self, outputs):
        """The memory in a dict of outputs (e.g. a backbone's)."""
        return {key: outputs[key] for key in self.keys}

    def stop_gradient(self, memory):
        """`memory` with no gradient flowing through its states."""
        return {
            key: value if key in LENGTH_KEYS else ops.stop_gradient(value)
            for key, value in memory.items()
        }

    def inputs(self):
        """`keras.Input`s of a memory, named by key (the inputs of a
        functional backbone). The memory's length axis is free: one model
        takes memories of any length (evaluating with a longer memory than
        in training is the paper's setting)."""
        shapes = self.shapes()
        return {
            key: keras.Input(
                shape=(self.num_layers, None, self.hidden_dim)
                if len(shapes[key]) == 4
                else (),
                dtype=self.dtype_of(key),
                name=key,
            )
            for key in self.keys
        }

    def signature(self, batch_size, memory_length=None):
        """`[(key, shape, dtype)]` of a memory of fixed shapes, in the
        order of `keys`: the inputs and outputs of an exported model
        (`tf.TensorSpec(shape, dtype, name=key)` each)."""
        shapes = self.shapes(batch_size, memory_length)
        return [(key, shapes[key], self.dtype_of(key)) for key in self.keys]

    def flatten(self, memory):
        """`{key: numpy array}` of a memory, to save (e.g. `np.savez`).

        The states are float32 arrays (float64 for float64 states):
        exact for bfloat16 and float16 states, and readable by any
        numpy."""
        return {
            key: _saved_array(memory[key], self.dtype_of(key))
            for key in self.keys
        }

    def unflatten(self, arrays):
        """The memory dict saved by `flatten` (numpy arrays, the states as
        float32 or float64: cast them with `cast`, or write them into a
        `MemoryState`).

        `arrays` may lack the compressed memory (a checkpoint written
        before it was saved): the memory then has none, which every
        consumer reads as an empty compressed memory.

        Raises:
            ValueError: if `"memory"` or `"valid_length"` is missing.
        """
        missing = [key for key in MEMORY_KEYS if key not in arrays]
        if missing:
            raise ValueError(
                f"A saved memory needs the arrays {list(MEMORY_KEYS)}; it "
                f"lacks {missing}. Received the arrays {sorted(arrays)}."
            )
        return {
            key: np.asarray(arrays[key], _saved_dtype(self.dtype_of(key)))
            for key in self.keys
            if key in arrays
        }


def _saved_dtype(dtype):
    """The numpy dtype a tensor of `dtype` is saved as: int32 lengths,
    float64 states as they are, and other states as float32 (exact for
    float16 and bfloat16; numpy has no bfloat16 of its own)."""
    if dtype in ("int32", "float64"):
        return dtype
    return "float32"


def _saved_array(value, dtype):
    value = ops.convert_to_numpy(ops.cast(value, _saved_dtype(dtype)))
    return np.asarray(value)


def check_memory_start(start):
    """Checks the `start` of `initial_memory` (and of `generate`,
    `score`)."""
    if start not in MEMORY_STARTS:
        raise ValueError(
            "`start` must be 'empty' (no valid slot: the authors' PyTorch "
            "code) or 'zeros' (memory_length zero vectors that are attended "
            "to: the authors' TensorFlow code and HuggingFace). Received: "
            f"start={start!r}"
        )
    return start
