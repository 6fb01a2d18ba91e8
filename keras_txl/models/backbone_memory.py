"""The explicit memory of a `TransformerXLBackbone` (a mixin before
keras-hub's `Backbone` in its bases): its `MemorySpec`, the memory of a
first segment, the checks of a memory given by a caller, and
`call_with_memory`. What the memory holds is `MemorySpec`'s
(`memory_spec.py`); a variant changes it through the backbone's
`_memory_spec` hook."""

import numpy as np
from keras import ops

from keras_txl.utils.validation import check_positive_int
from keras_txl.utils.validation import check_token_ids
from keras_txl.utils.validation import dtype_name
from keras_txl.utils.validation import is_concrete

MEMORY_STARTS = ("empty", "zeros")


class BackboneMemory:
    """The backbone's explicit-memory methods."""

    @property
    def memory_spec(self):
        """The `MemorySpec` of this backbone's memory: its keys, shapes and
        dtypes, at the constructor's lengths."""
        return self._memory_spec(
            self.num_layers,
            self.hidden_dim,
            self.memory_length,
            self.memory_cache.compute_dtype,
        )

    @property
    def memory_keys(self):
        """The keys of a memory dict of this backbone."""
        return self.memory_spec.keys

    def initial_memory(
        self,
        batch_size,
        memory_length=None,
        start="empty",
    ):
        """The memory of a first segment: `memory_length` zero slots.

        Two conventions exist, and give different numbers:

        - `start="empty"` (default): no slot is valid (`valid_length` 0);
          the first segment attends only to itself, as in the authors'
          PyTorch code (`official_*.npz` fixtures).
        - `start="zeros"`: the `memory_length` zero vectors count as valid
          states (`valid_length = memory_length`) and every layer attends
          to them, as the authors' TensorFlow code (which trained and
          evaluated the released checkpoints) and HuggingFace's
          `TransfoXLLMHeadModel` do. Use it to reproduce their numbers.

        Args:
            batch_size: int. Number of examples (streams).
            memory_length: int >= 0 or `None` (the constructor's
                `memory_length`).
            start: `"empty"` or `"zeros"` (see above).

        Returns:
            A dict `{"memory": (batch, num_layers, M, hidden_dim),
            "valid_length": (batch,) int32}` (states of
            `memory_spec.dtype`).
        """
        return self._zero_memory(batch_size, memory_length, start)

    def _zero_memory(self, batch_size, memory_length, start, **lengths):
        """`initial_memory`, checked; `lengths`: the compressed memory's
        (`MemorySpec.zeros`'s), already checked."""
        batch_size = check_positive_int("batch_size", batch_size)
        if memory_length is None:
            memory_length = self.memory_length
        memory_length = check_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        start = check_memory_start(start)
        return self.memory_spec.zeros(
            batch_size,
            memory_length,
            valid_length=memory_length if start == "zeros" else 0,
            **lengths,
        )

    def check_memory(self, memory, batch_size=None):
        """Raises a `ValueError` if `memory` does not fit this backbone."""
        if not isinstance(memory, dict) or set(memory) != set(self.memory_keys):
            got = sorted(memory) if isinstance(memory, dict) else type(memory)
            raise ValueError(
                f"`memory` must be a dict with keys {list(self.memory_keys)} "
                f"(see `initial_memory()`). Received: {got}"
            )
        shape = self._check_states_shape(memory, "memory", "M", batch_size)
        dtype = dtype_name(memory["memory"])
        if "float" not in dtype:
            raise TypeError(
                "`memory['memory']` must be a float tensor (of the "
                "backbone's `memory_dtype`; other floats are cast). Received "
                f"dtype {dtype}. Build it with "
                "`backbone.initial_memory(batch_size)`."
            )
        valid_shape = tuple(memory["valid_length"].shape)
        if len(valid_shape) != 1 or (
            shape[0] is not None
            and valid_shape[0] is not None
            and valid_shape[0] != shape[0]
        ):
            raise ValueError(
                "`memory['valid_length']` must have shape (batch,) = "
                f"({shape[0]},). Received shape {valid_shape}."
            )
        valid_dtype = dtype_name(memory["valid_length"])
        if "int" not in valid_dtype:
            raise TypeError(
                "`memory['valid_length']` must hold integers (int32), the "
                f"number of valid memory slots. Received dtype {valid_dtype}."
            )
        valid_length = memory["valid_length"]
        if is_concrete(valid_length) and shape[2] is not None:
            values = np.asarray(ops.convert_to_numpy(valid_length))
            if values.size and (values.min() < 0 or values.max() > shape[2]):
                raise ValueError(
                    "`memory['valid_length']` must lie in [0, M] for a "
                    f"memory of M={shape[2]} slots. Received values in "
                    f"[{values.min()}, {values.max()}]. Pass the "
                    "`valid_length` returned with the memory."
                )

    def _check_states_shape(self, memory, key, length_name, batch_size):
        shape = tuple(memory[key].shape)
        expected = (batch_size, self.num_layers, length_name, self.hidden_dim)
        ok = len(shape) == 4
        ok = ok and shape[1] == self.num_layers and shape[3] == self.hidden_dim
        if ok and batch_size is not None and shape[0] is not None:
            ok = shape[0] == batch_size
        if not ok:
            raise ValueError(
                f"`memory['{key}']` must have shape (batch, num_layers, "
                f"{length_name}, hidden_dim) = {expected}. Received shape "
                f"{shape}. Build it with `backbone.initial_memory(batch_size)`."
            )
        return shape

    def call_with_memory(self, token_ids, memory=None, training=False):
        """Runs one segment and returns its output and the next memory.

        Args:
            token_ids: int tensor `(batch, T)`.
            memory: dict from `initial_memory()` or from the previous call;
                `None` starts with an empty memory of the default length.
            training: bool. Dropout is active only when True.

        Returns:
            A tuple `(sequence_output, new_memory)`.
        """
        token_ids = check_token_ids(token_ids, self.vocabulary_size)
        batch_size = token_ids.shape[0]
        if memory is None:
            memory = self.initial_memory(batch_size)
        self.check_memory(memory, batch_size)
        outputs = self(
            {
                "token_ids": ops.cast(token_ids, "int32"),
                **self.memory_spec.cast(memory),
            },
            training=training,
        )
        return outputs["sequence_output"], self.memory_spec.select(outputs)


def check_memory_start(start):
    """Checks the `start` of `initial_memory`."""
    if start not in MEMORY_STARTS:
        raise ValueError(
            "`start` must be 'empty' (no valid slot: the authors' PyTorch "
            "code) or 'zeros' (memory_length zero vectors that are attended "
            "to: the authors' TensorFlow code and HuggingFace). Received: "
            f"start={start!r}"
        )
    return start
