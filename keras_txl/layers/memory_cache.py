import keras
from keras import ops

from keras_txl.utils.validation import check_optional_positive_int


@keras.saving.register_keras_serializable(package="keras_txl")
class MemoryCache(keras.layers.Layer):
    """First-in, first-out memory of hidden states, under stop-gradient.

    The memory of Transformer-XL (Dai et al., 2019, section 3.2): after a
    segment, the new memory is the last `M` states of
    `concat(old_memory, new_states)` along the time axis, with gradients
    stopped, so the next segment attends to it without backpropagating into
    the segment that produced it.

    The memory is explicit: it comes in and goes out as tensors, so that it
    works inside any Keras model, under `jit` and on every backend. Its time
    axis is the second to last one; any leading axes (batch, layers) are
    kept. Slots fill from the end: the valid slots of example `b` are the
    last `valid_length[b]` ones, the most recent last. The others hold zeros
    and must be masked by the reader (`RelativeMultiHeadAttention` does).

    Args:
        memory_length: int or `None`. Length `M` of the new memory. `None`
            (default) keeps the length of the incoming memory. A different
            length lets a model trained with one memory length be evaluated
            with another.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.
            Like any layer, it computes in its dtype policy's compute
            dtype (bfloat16 under `"mixed_bfloat16"`); pass
            `dtype="float32"` to keep a mixed model's memory in float32.

    Call arguments:
        memory: tensor of shape `(batch, ..., M_in, dim)`.
        valid_length: int tensor of shape `(batch,)`, the number of valid
            slots of each example in `memory`.
        new_states: tensor of shape `(batch, ..., T, dim)`: the hidden
            states of the segment just processed.
        token_count: optional int tensor of shape `(batch,)`: how many of
            the `T` states of each example, the first ones, are states of
            tokens; the others (a segment padded at its end to a bucket
            length) never enter the memory. `None` (default): all `T`.
            The new memory of an example is then exactly the one of its
            `token_count` states alone.

    Returns:
        A tuple `(new_memory, new_valid_length)` of shapes
        `(batch, ..., M, dim)` and `(batch,)`, where
        `new_valid_length = min(valid_length + T, M)` (`token_count` for
        `T` when given).

    Example:

    >>> import numpy as np
    >>> cache = MemoryCache()
    >>> memory = np.zeros((2, 4, 3), "float32")
    >>> valid = np.zeros((2,), "int32")
    >>> states = np.ones((2, 3, 3), "float32")
    >>> memory, valid = cache(memory, valid, states)
    >>> tuple(memory.shape), [int(v) for v in valid]
    ((2, 4, 3), [3, 3])
    """

    def __init__(self, memory_length=None, **kwargs):
        super().__init__(**kwargs)
        self.memory_length = check_optional_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        self.built = True

    def call(self, memory, valid_length, new_states, token_count=None):
        memory_shape = tuple(memory.shape)
        states_shape = tuple(new_states.shape)
        if len(memory_shape) != len(states_shape) or (
            memory_shape[-1] is not None
            and states_shape[-1] is not None
            and memory_shape[-1] != states_shape[-1]
        ):
            raise ValueError(
                "`memory` and `new_states` must have the same rank and "
                "the same last dimension (batch, ..., time, dim). Received: "
                f"memory.shape={memory_shape}, "
                f"new_states.shape={states_shape}"
            )
        memory = ops.cast(memory, self.compute_dtype)
        new_states = ops.cast(new_states, self.compute_dtype)
        old_length = ops.shape(memory)[-2]
        segment_length = ops.shape(new_states)[-2]
        target_length = (
            old_length if self.memory_length is None else self.memory_length
        )
        joined = ops.concatenate([memory, new_states], axis=-2)
        if token_count is not None:
            token_count = ops.cast(token_count, "int32")  # (batch,)
            new_memory = self._last_counted(
                joined, old_length, target_length, token_count
            )
            segment_length = token_count
        else:
            joined_length = old_length + segment_length
            if self.memory_length is not None and (
                isinstance(joined_length, int) and joined_length < target_length
            ):
                # Only a longer target than what is held: pad in front
                # (those slots are invalid and masked by `valid_length`).
                pad = [[0, 0]] * (len(memory_shape) - 2)
                pad += [[target_length - joined_length, 0], [0, 0]]
                joined = ops.pad(joined, pad)
                joined_length = target_length
            new_memory = joined[..., joined_length - target_length :, :]
        new_memory = ops.stop_gradient(new_memory)  # (batch, ..., M, dim)
        new_valid_length = ops.minimum(
            ops.cast(valid_length, "int32") + segment_length, target_length
        )  # (batch,)
        return new_memory, ops.stop_gradient(new_valid_length)

    @staticmethod
    def _last_counted(joined, old_length, target_length, token_count):
        """The new memory of `call` with `token_count`: example `b`'s is
        the last `target_length` slots of `joined[b]` cut after its
        `old_length + token_count[b]` first ones, with zero slots in front
        where fewer are held (as `call` pads): a gather, the same values
        as the update of the unpadded segment."""
        if isinstance(target_length, int) and target_length == 0:
            return joined[..., :0, :]  # no slot: nothing to gather
        rank = len(joined.shape)
        # `target_length` zero slots in front: every index below is >= 0.
        pad = [[0, 0]] * (rank - 2) + [[target_length, 0], [0, 0]]
        joined = ops.pad(joined, pad)  # (batch, ..., M + M_in + T, dim)
        # Example b keeps padded slots [end_b, end_b + M), where
        # end_b = M_in + token_count[b] (its last state is at
        # M + M_in + token_count[b] - 1).
        end = old_length + token_count  # (batch,)
        index = end[:, None] + ops.arange(target_length, dtype="int32")
        index = ops.reshape(
            index, (-1,) + (1,) * (rank - 3) + (target_length, 1)
        )  # (batch, 1, ..., M, 1)
        return ops.take_along_axis(joined, index, axis=-2)

    def compute_output_spec(
        self, memory, valid_length, new_states, token_count=None
    ):
        shape = list(memory.shape)
        if self.memory_length is not None:
            shape[-2] = self.memory_length
        return (
            keras.KerasTensor(tuple(shape), dtype=self.compute_dtype),
            keras.KerasTensor(tuple(valid_length.shape), dtype="int32"),
        )

    def get_config(self):
        config = super().get_config()
        config.update({"memory_length": self.memory_length})
        return config
