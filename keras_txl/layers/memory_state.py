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
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Example:

    >>> state = MemoryState(num_layers=2, memory_length=3, hidden_dim=4)
    >>> state.build(batch_size=5)
    >>> tuple(state.read(batch_size=5)["memory"].shape)
    (5, 2, 3, 4)
    """

    def __init__(self, num_layers, memory_length, hidden_dim, **kwargs):
        kwargs.setdefault("dtype", "float32")
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.num_layers = check_positive_int("num_layers", num_layers)
        self.memory_length = check_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        self.hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        self.batch_size = None

    @property
    def has_state(self):
        """Whether the state variables exist (a batch size is known)."""
        return self.batch_size is not None

    def build(self, batch_size=None):
        if isinstance(batch_size, (tuple, list)):
            batch_size = batch_size[0]
        if self.has_state and batch_size not in (None, self.batch_size):
            raise ValueError(
                "The memory carried between batches already exists for "
                f"batch size {self.batch_size}; it cannot be rebuilt for "
                f"batch_size={batch_size}. Build the model for the batch "
                "size of your data once (a new model, or "
                "`keras.saving.load_model` of a saved one, has no memory "
                "yet), or use `call_with_memory` with an explicit memory."
            )
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
        self.memory = self.add_weight(
            name="memory",
            shape=shape,
            initializer="zeros",
            dtype="float32",
            trainable=False,
            autocast=False,
        )
        self.valid_length = self.add_weight(
            name="valid_length",
            shape=(self.batch_size,),
            initializer="zeros",
            dtype="int32",
            trainable=False,
            autocast=False,
        )
        self.built = True

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
                f"{self.batch_size_message()} Received a batch of size "
                f"{batch_size}."
            )

    def batch_size_message(self):
        """What a batch of another size than the state's is told."""
        return (
            "The memory carried between batches was built for batch size "
            f"{self.batch_size}: every batch must have {self.batch_size} "
            "rows. An ordered-segment pipeline keeps the batch size fixed "
            "(the batch axis is the streams of text): drop the remainder "
            "(`drop_remainder=True`), or use `call_with_memory` with an "
            "explicit memory."
        )

    def read(self, batch_size=None):
        """The held memory as `{"memory", "valid_length"}` tensors."""
        self._check_batch(batch_size)
        # Copies, so that torch's autograd does not see the in-place
        # `assign` of `write` on a tensor it saved.
        return {
            "memory": ops.copy(self.memory.value),
            "valid_length": ops.copy(self.valid_length.value),
        }

    def write(self, memory):
        """Stores `{"memory", "valid_length"}` for the next call."""
        self.memory.assign(ops.cast(memory["memory"], "float32"))
        self.valid_length.assign(ops.cast(memory["valid_length"], "int32"))

    def reset(self):
        """Forgets everything: the next segment starts with no context."""
        if self.has_state:
            self.memory.assign(ops.zeros_like(self.memory.value))
            self.valid_length.assign(ops.zeros_like(self.valid_length.value))

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
            }
        )
        return config
