import keras
from keras import ops

from keras_txl.utils.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_txl")
class MemoryState(keras.layers.Layer):
    """Keeps a Transformer-XL memory between calls of `fit`, `evaluate` and
    `predict`.

    `model.fit` feeds one batch at a time; for recurrence across batches the
    memory of batch `i` must reach batch `i + 1`. This layer holds it in
    non-trainable variables, updated with `assign` inside `call`: the one
    pattern that Keras 3 carries through `fit`, `evaluate` and `predict` on
    JAX, TensorFlow and PyTorch alike (the `stateful=True` pattern of Keras
    RNNs drops its updates on JAX).

    The state has a fixed shape, hence a fixed batch size: `build(batch)`
    creates it and `read()` refuses another batch size. It is activations,
    not parameters: it is never saved with the model's weights, so a saved
    model loads into a model of any batch size.

    Args:
        num_layers: int. Number of layers whose inputs are kept.
        memory_length: int >= 0. Number of slots `M`.
        hidden_dim: int. Width of the states.
        compressed_memory_length: int >= 0. Slots `Mc` of a compressed
            memory (`keras_txl.layers.CompressiveMemory`) kept alongside;
            0 (default) keeps none.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Example:

    >>> state = MemoryState(num_layers=2, memory_length=3, hidden_dim=4)
    >>> state.build(batch_size=5)
    >>> tuple(state.read(batch_size=5)["memory"].shape)
    (5, 2, 3, 4)
    """

    def __init__(
        self,
        num_layers,
        memory_length,
        hidden_dim,
        compressed_memory_length=0,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "float32")
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.num_layers = check_positive_int("num_layers", num_layers)
        self.memory_length = check_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        self.hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        self.compressed_memory_length = check_positive_int(
            "compressed_memory_length",
            compressed_memory_length,
            allow_zero=True,
        )
        self.batch_size = None

    @property
    def has_state(self):
        """Whether the state variables exist (a batch size is known)."""
        return self.batch_size is not None

    def build(self, batch_size=None):
        if isinstance(batch_size, (tuple, list)):
            batch_size = batch_size[0]
        if self.has_state or batch_size is None:
            self.built = True
            return
        self.batch_size = check_positive_int("batch_size", batch_size)
        shape = (
            self.batch_size,
            self.num_layers,
            self.memory_length,
            self.hidden_dim,
        )
        states = [("memory", shape), ("valid_length", shape[:1])]
        if self.compressed_memory_length:
            compressed = shape[:2] + (self.compressed_memory_length,)
            states += [
                ("compressed_memory", compressed + shape[3:]),
                ("compressed_valid_length", shape[:1]),
            ]
        for name, state_shape in states:
            variable = self.add_weight(
                name=name,
                shape=state_shape,
                initializer="zeros",
                dtype="int32" if "valid" in name else "float32",
                trainable=False,
                autocast=False,
            )
            setattr(self, name, variable)
        self.built = True

    def _state_variables(self):
        names = ["memory", "valid_length"]
        if self.compressed_memory_length:
            names += ["compressed_memory", "compressed_valid_length"]
        return {name: getattr(self, name) for name in names}

    def _check_batch(self, batch_size):
        if not self.has_state:
            raise ValueError(
                "The memory carried between batches has no batch size yet. "
                "A model that carries memory from batch to batch needs a "
                "fixed batch size: feed batches of a static shape (for "
                "example `keras_txl.data.segment_dataset`, which drops the "
                "remainder), or call `model.build_memory(batch_size)` "
                "before `fit`."
            )
        if batch_size is not None and batch_size != self.batch_size:
            raise ValueError(
                "The memory carried between batches was built for batch "
                f"size {self.batch_size}, but a batch of size {batch_size} "
                "came in. An ordered-segment pipeline keeps the batch size "
                "fixed (the batch axis is the streams of text): drop the "
                "remainder (`drop_remainder=True`), or use "
                "`call_with_memory` with an explicit memory."
            )

    def read(self, batch_size=None):
        """The held memory as `{"memory", "valid_length"}` tensors (and
        `"compressed_memory"`, `"compressed_valid_length"` when
        `compressed_memory_length > 0`)."""
        self._check_batch(batch_size)
        # Copies, so that torch's autograd does not see the in-place
        # `assign` of `write` on a tensor it saved.
        return {
            name: ops.copy(variable.value)
            for name, variable in self._state_variables().items()
        }

    def write(self, memory):
        """Stores the memory dict of `read()`'s keys for the next call."""
        for name, variable in self._state_variables().items():
            variable.assign(ops.cast(memory[name], variable.dtype))

    def reset(self):
        """Forgets everything: the next segment starts with no context."""
        if self.has_state:
            for variable in self._state_variables().values():
                variable.assign(ops.zeros_like(variable.value))

    def save_own_variables(self, store):
        # Activations, not parameters: never saved (see the class docs).
        pass

    def load_own_variables(self, store):
        pass

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_layers": self.num_layers,
                "memory_length": self.memory_length,
                "hidden_dim": self.hidden_dim,
                "compressed_memory_length": self.compressed_memory_length,
            }
        )
        return config
