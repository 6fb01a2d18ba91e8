"""The carried memory's variables (`MemoryState`); `MemoryReset`
(`memory_reset.py`) resets them where the ordered text restarts."""

import keras
from keras import ops

from keras_txl.models.memory_spec import COMPRESSED_KEYS
from keras_txl.models.memory_spec import MemorySpec
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

    Under several replicas each replica carries the memory of its own rows
    (its own streams of text):

    - TensorFlow (`tf.distribute`): the variables are sync-on-read, so each
      replica holds and updates its own copy, built with the PER-REPLICA
      batch size (build under `strategy.scope()`). Read from outside the
      replicas, they give replica 0's copy; `strategy.
      experimental_local_results(state.memory.value)` gives every copy.
    - JAX (`keras.distribution`): the variables hold the GLOBAL batch,
      sharded along the distribution's batch axis like the input batches,
      so each device keeps the rows it is fed. A `LayoutMap` entry for
      `".*memory_state/memory"` (see
      `TransformerXLBackbone.get_layout_map`) overrides that layout.

    Args:
        num_layers: int. Number of layers whose inputs are kept.
        memory_length: int >= 0. Number of slots `M`.
        hidden_dim: int. Width of the states.
        compressed_memory_length: int >= 0. Slots `Mc` of a compressed
            memory (`keras_txl.layers.CompressiveMemory`) kept alongside;
            0 (default) keeps none.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.
            Its `dtype` is the dtype of the states (default `"float32"`);
            a `TransformerXLCausalLM` passes its backbone's memory dtype.

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
        # What the state holds: the keys, shapes and dtypes of a memory.
        self.memory_spec = MemorySpec(
            self.num_layers,
            self.hidden_dim,
            self.memory_length,
            self.compressed_memory_length,
            dtype=self.compute_dtype,
        )
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
                "The carried memory (kept between batches) already exists for "
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
        spec = self.memory_spec
        # One variable per key of the memory: `self.memory`,
        # `self.valid_length` (and the compressed memory's).
        for name, shape in spec.shapes(self.batch_size).items():
            setattr(
                self,
                name,
                self._state_variable(name, shape, spec.dtype_of(name)),
            )
        self.built = True

    def _state_variables(self):
        return {name: getattr(self, name) for name in self.memory_spec.keys}

    def _state_variable(self, name, shape, dtype):
        with keras.name_scope(self.name, caller=self):
            return keras.Variable(
                initializer="zeros",
                shape=shape,
                dtype=dtype,
                trainable=False,
                autocast=False,
                # One copy per replica under `tf.distribute`, each updated
                # by its own replica; read from outside: replica 0's copy
                # (`"none"` cannot be read in the symbolic build).
                synchronization="on_read",
                aggregation="only_first_replica",
                layout=self._state_layout(name, shape),
                name=name,
            )

    def _state_layout(self, name, shape):
        """Sharding of a state variable under a JAX `keras.distribution`:
        the `LayoutMap` entry for its path, else the layout of a data batch
        (rows split along the batch axis of the device mesh)."""
        if keras.backend.backend() != "jax":
            return None
        distribution = keras.distribution.distribution()
        if distribution is None:
            return None
        layout = distribution.get_tensor_layout(f"{self.path}/{name}")
        if layout is not None:
            return layout
        mesh = distribution.device_mesh
        shards = mesh.shape[mesh.axis_names.index(distribution.batch_dim_name)]
        if shape[0] % shards:
            raise ValueError(
                f"The carried memory (kept between batches) has {shape[0]} "
                f"rows (the global batch size), which the {shards} devices of "
                f"the mesh axis '{distribution.batch_dim_name}' cannot "
                "share evenly. Use a global batch size that is a multiple "
                f"of {shards}."
            )
        return distribution.get_data_layout(shape)

    def check_batch_size(self, batch_size):
        """Raises a `ValueError` unless the state exists and `batch_size`
        (if not `None`) is its batch size."""
        if not self.has_state:
            raise ValueError(
                "The carried memory (kept between batches) has no batch size "
                "yet. "
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
            "The carried memory (kept between batches) was built for batch "
            f"size {self.batch_size}: every batch must have {self.batch_size} "
            "rows. An ordered-segment pipeline keeps the batch size fixed "
            "(the batch axis is the streams of text): drop the remainder "
            "(`drop_remainder=True`), or use `call_with_memory` with an "
            "explicit memory. Under `tf.distribute` each replica sees the "
            "per-replica batch (global batch / replicas): build the memory "
            "with it (`keras_txl.distribute` does)."
        )

    def read(self, batch_size=None):
        """The held memory as `{"memory", "valid_length"}` tensors (and
        `"compressed_memory"`, `"compressed_valid_length"` when
        `compressed_memory_length > 0`)."""
        self.check_batch_size(batch_size)
        # Copies, so that torch's autograd does not see the in-place
        # `assign` of `write` on a tensor it saved.
        return {
            name: ops.copy(variable.value)
            for name, variable in self._state_variables().items()
        }

    def write(self, memory):
        """Stores the memory dict of `read()`'s keys for the next call. A
        dict without the compressed memory's keys empties the compressed
        memory (still consistent: it may be empty at any time)."""
        for name, variable in self._state_variables().items():
            if name in memory:
                variable.assign(ops.cast(memory[name], variable.dtype))
            elif name in COMPRESSED_KEYS:
                variable.assign(ops.zeros_like(variable.value))
            else:
                raise KeyError(
                    f"The memory dict lacks '{name}': write a dict with the "
                    f"keys {list(self.memory_spec.keys)}, as `read()` returns "
                    "(the compressed memory's may be left out). Received the "
                    f"keys {sorted(memory)}."
                )

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
