import keras
from keras import ops

from keras_txl.layers.memory_cache import MemoryCache


@keras.saving.register_keras_serializable(package="keras_txl")
class DifferentiableMemoryCache(MemoryCache):
    """`MemoryCache` WITHOUT the stop-gradient: an ablation of the paper's
    SG(.), for backpropagation through the memory.

    The same FIFO update as `MemoryCache` (the new memory is the last `M`
    states of `concat(memory, new_states)`, `M` the length of the incoming
    memory), but gradients flow from the new memory into `memory` and
    `new_states`. Chaining segments with it in one graph backpropagates
    through all of them, as truncated backpropagation through time does:
    what `AblationTransformerXLBackbone(stop_memory_gradient=False)` uses to
    measure what the paper's stop-gradient saves. Not for normal training.

    Args:
        **kwargs: keyword arguments passed to `MemoryCache` (the memory
            keeps the incoming length; `memory_length` must be `None`).

    Call arguments:
        memory: tensor of shape `(batch, ..., M, dim)`.
        valid_length: int tensor of shape `(batch,)`.
        new_states: tensor of shape `(batch, ..., T, dim)`.

    Returns:
        A tuple `(new_memory, new_valid_length)` of shapes
        `(batch, ..., M, dim)` and `(batch,)`.

    Example:

    >>> import numpy as np
    >>> cache = DifferentiableMemoryCache()
    >>> memory = np.zeros((2, 4, 3), "float32")
    >>> states = np.ones((2, 3, 3), "float32")
    >>> memory, valid = cache(memory, np.zeros((2,), "int32"), states)
    >>> tuple(memory.shape), [int(v) for v in valid]
    ((2, 4, 3), [3, 3])
    """

    def __init__(self, memory_length=None, **kwargs):
        if memory_length is not None:
            raise ValueError(
                "`DifferentiableMemoryCache` keeps the length of the "
                "incoming memory; `memory_length` must be None. Received: "
                f"memory_length={memory_length!r}"
            )
        super().__init__(memory_length=None, **kwargs)

    def call(self, memory, valid_length, new_states):
        # Checks the shapes and counts the valid slots.
        _, new_valid_length = super().call(memory, valid_length, new_states)
        joined = ops.concatenate(
            [
                ops.cast(memory, self.compute_dtype),
                ops.cast(new_states, self.compute_dtype),
            ],
            axis=-2,
        )  # (batch, ..., M + T, dim)
        segment_length = ops.shape(new_states)[-2]
        return joined[..., segment_length:, :], new_valid_length
