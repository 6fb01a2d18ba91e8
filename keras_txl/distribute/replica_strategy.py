import contextlib
import weakref

import keras
import numpy as np

from keras_txl.utils import processes
from keras_txl.utils.validation import check_positive_int


class ReplicaStrategy:
    """One training setup over several replicas, on TensorFlow or JAX.

    Wraps the engine's own object (`native`): a `tf.distribute.Strategy`
    (`MirroredStrategy`, `MultiWorkerMirroredStrategy`, `TPUStrategy`, or
    the default strategy for `"none"`) or a `keras.distribution.
    DataParallel` (JAX). Make it with `keras_txl.distribute.make_strategy`.

    Transformer-XL carries a memory from batch to batch: row `b` of batch
    `i + 1` continues row `b` of batch `i`. Under data parallelism each
    replica must therefore get the SAME rows of every global batch and keep
    the memory of those rows. This class makes sure of it:

    - `build_memory(model, global_batch_size)` creates the carried memory
      with the right batch: per replica on TensorFlow (each replica holds
      its own sync-on-read copy), global on JAX (one array sharded along
      the batch axis, each device holding its rows).
    - `distribute_dataset(dataset)` checks that the global batch is static
      and splits evenly, and makes every host read the same global
      batches: Keras then gives replica `r` rows `[r * b, (r + 1) * b)`
      of every global batch (`b` = per-replica batch) on one host, and on
      several hosts a fixed set of rows to each replica.

    Args:
        name: str. A strategy name of `keras_txl.distribute.make_strategy`,
            or a name of your own for your own distribution.
        native: the engine's strategy or distribution (`None` for `"none"`
            outside TensorFlow).
        num_replicas: int. Replicas in sync (devices along the batch axis).

    Example:

    >>> from keras_txl.distribute import make_strategy
    >>> strategy = make_strategy("none")
    >>> strategy.num_replicas, strategy.per_replica_batch_size(8)
    (1, 8)
    """

    def __init__(self, name, native, num_replicas):
        self.name = name
        self.native = native
        self.num_replicas = check_positive_int("num_replicas", num_replicas)
        self.backend = keras.backend.backend()

    @classmethod
    def for_distribution(cls, distribution, name="jax-model-parallel"):
        """Wraps your own JAX `keras.distribution.Distribution` (e.g.
        `ModelParallel` with `TransformerXLBackbone.get_layout_map`); the
        replicas are the devices along its batch axis."""
        mesh = distribution.device_mesh
        axis = mesh.axis_names.index(distribution.batch_dim_name)
        return cls(name, distribution, mesh.shape[axis])

    def __repr__(self):
        return (
            f"ReplicaStrategy(name={self.name!r}, backend={self.backend!r}, "
            f"num_replicas={self.num_replicas})"
        )

    @contextlib.contextmanager
    def scope(self):
        """Context in which to build, compile and `fit` the model."""
        if self.native is None:
            yield self
            return
        with self.native.scope():
            yield self

    def per_replica_batch_size(self, global_batch_size):
        """`global_batch_size // num_replicas`; raises if it does not
        divide."""
        global_batch_size = check_positive_int(
            "global_batch_size", global_batch_size
        )
        if global_batch_size % self.num_replicas:
            raise ValueError(
                f"The global batch size ({global_batch_size}) must be a "
                f"multiple of the number of replicas ({self.num_replicas}, "
                f"strategy {self.name!r}): every replica carries the memory "
                f"of the same number of streams of text. Use a global batch "
                f"of {self.nearest_multiples(global_batch_size)}."
            )
        return global_batch_size // self.num_replicas

    def nearest_multiples(self, rows):
        """The multiples of `num_replicas` on either side of `rows`, in
        words (`"2 or 4"`; `"2"` when the lower one is 0): the batches to
        suggest for one that the replicas do not divide.

        >>> ReplicaStrategy("mine", None, 2).nearest_multiples(3)
        '2 or 4'
        """
        low = rows // self.num_replicas * self.num_replicas
        high = low + self.num_replicas
        return f"{low} or {high}" if low else f"{high}"

    def memory_batch_size(self, global_batch_size):
        """Batch size of the memory variables: per replica on TensorFlow,
        the global batch on JAX (sharded along the batch axis)."""
        per_replica = self.per_replica_batch_size(global_batch_size)
        if self.backend == "tensorflow":
            return per_replica
        return global_batch_size

    def build_memory(self, model, global_batch_size):
        """Creates `model`'s carried memory for `global_batch_size` streams.

        Call it in `scope()` after building and compiling the model and
        before `fit`: it also makes the optimizer clip the gradient summed
        over the replicas (see `clip_after_all_reduce`). Raises a
        `ValueError` if the batch does not split evenly, or if the memory
        already exists for another batch size.
        """
        batch_size = self.memory_batch_size(global_batch_size)
        state = model.memory_state
        if state.has_state and state.batch_size != batch_size:
            raise ValueError(
                "The model's carried memory already exists for batch size "
                f"{state.batch_size}, but a global batch of "
                f"{global_batch_size} over {self.num_replicas} replicas "
                f"({self.backend}) needs {batch_size}. Build the model "
                "under `strategy.scope()` and call `build_memory` before "
                "any call of the model."
            )
        with self.scope():
            model.build_memory(batch_size)
        self.clip_after_all_reduce(getattr(model, "optimizer", None))

    def clip_after_all_reduce(self, optimizer):
        """Makes `optimizer` clip the gradient of the global batch.

        Keras 3's TensorFlow optimizers clip (`global_clipnorm`,
        `clipnorm`, `clipvalue`) inside each replica, before the gradients
        are summed over the replicas: each replica's share is clipped, not
        the gradient, so with 2 replicas a global norm clip of 0.25 acts
        like one of about 0.5. This sums the gradients first, clips the
        sum as Keras would on one device, and hands each replica `1 /
        num_replicas` of it, which Keras's own sum then makes the clipped
        gradient (`_apply_after_all_reduce`: the one Keras method this
        library replaces on an instance, with its reason). A no-op on
        JAX (the step computes the gradient of the global batch), on one
        replica and for an optimizer
        that does not clip. `build_memory` calls it on the model's
        optimizer.

        Args:
            optimizer: a `keras.optimizers.Optimizer` or `None`.

        Returns:
            `optimizer`.
        """
        clips = optimizer is not None and any(
            getattr(optimizer, name, None)
            for name in ("clipnorm", "global_clipnorm", "clipvalue")
        )
        if (
            not clips
            or self.backend != "tensorflow"
            or self.num_replicas == 1
            or optimizer in _CLIPPING_AFTER_ALL_REDUCE
        ):
            return optimizer
        _apply_after_all_reduce(optimizer)
        return optimizer

    def distribute_dataset(self, dataset):
        """Checks a `tf.data` dataset of global batches and prepares it to
        be split between the replicas, each always getting the same rows.

        Pass the result to `model.fit`. Keras then splits each global batch
        (TensorFlow: `strategy.experimental_distribute_dataset`; JAX: the
        distribution's data layout) into contiguous blocks of rows, block
        `r` to replica `r`, at every step; on several hosts, each host
        takes its own blocks, always the same. TensorFlow's `AUTO`
        sharding would give each worker other FILES on a file-based
        pipeline (so other streams at every step): this sets the `DATA`
        policy, under which every worker reads the same global batches
        and keeps its rows.

        Args:
            dataset: `tf.data.Dataset` of batches with a static batch
                dimension (`batch(..., drop_remainder=True)`); elements
                `(inputs, targets)` or any nest of tensors.

        Returns:
            The dataset, checked (and with `DATA` sharding on TensorFlow).
        """
        global_batch_size = static_batch_size(dataset)
        self.per_replica_batch_size(global_batch_size)
        if self.backend != "tensorflow":
            return dataset
        import tensorflow as tf

        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        return dataset.with_options(options)

    def replica_memory(self, model):
        """The memory that each replica of this process holds, as numpy.

        Returns:
            A list, one memory dict per local replica (the keys of
            `model.memory_state.memory_spec`):
            in replica order on TensorFlow, in row order on JAX (the
            replica fed rows `[r * b, (r + 1) * b)` comes `r`-th).
        """
        state = model.memory_state
        if not state.has_state:
            raise ValueError(
                "The model has no carried memory yet: call "
                "`strategy.build_memory(model, global_batch_size)` first."
            )
        parts = {
            name: self._local_values(getattr(state, name).value)
            for name in state.memory_spec.keys
        }
        replicas = len(parts["memory"])
        return [
            {name: values[r] for name, values in parts.items()}
            for r in range(replicas)
        ]

    def global_memory(self, model):
        """The memory of every row of the global batch, rows in order, as
        a dict of numpy arrays (the keys of
        `model.memory_state.memory_spec`), on every process.

        Of TensorFlow workers it is a collective (`strategy.gather` over
        every worker's replicas): each worker must call it at the same
        point. On one host it is the replicas' memories of
        `replica_memory`, concatenated (several JAX processes save their
        shards with Orbax instead: `TrainingCheckpoint`).
        """
        spec = model.memory_state.memory_spec
        if processes.process_count() > 1 and self.backend == "tensorflow":
            state = model.memory_state
            variables = [getattr(state, key) for key in spec.keys]
            rows = processes.gather_rows(self.native, variables)
            return dict(zip(spec.keys, rows))
        replicas = self.replica_memory(model)
        return {
            key: np.concatenate([r[key] for r in replicas]) for key in spec.keys
        }

    def write_memory(self, model, memory):
        """Sets the memory of every row, each replica's rows on it: the
        inverse of `replica_memory` (one host).

        Args:
            model: a model whose memory `build_memory` created.
            memory: memory dict of arrays of the global batch,
                rows in order (the replicas' memories of `replica_memory`,
                concatenated).
        """
        state = model.memory_state
        if not state.has_state:
            raise ValueError(
                "The model has no carried memory yet: call "
                "`strategy.build_memory(model, global_batch_size)` first."
            )
        if self.backend != "tensorflow" or not self._splits_rows():
            state.write(memory)  # JAX: sharded along the batch like data
            return
        import tensorflow as tf

        # In a `tf.function`: `run` is slow (and warns) eagerly.
        tf.function(lambda v: self.native.run(state.write, args=(v,)))(
            self.distribute_rows(memory)
        )

    def distribute_rows(self, values):
        """Puts each replica's rows of `values` on it, as training's data.

        Args:
            values: a nest (dict, tuple, list) of arrays of the global
                batch, rows first, in order; `None` leaves stay `None`.

        Returns:
            The nest placed: on TensorFlow, per-replica values (replica
            `r` holding rows `[r * b, (r + 1) * b)`) to pass to `run`; on
            JAX, arrays laid out along the batch axis by the
            distribution's `get_data_layout`, each device holding its
            rows; unchanged on one device. Raises a `ValueError` if the
            rows do not split evenly.

        On several processes every process passes the same global
        `values` and places only its own share: the rows of its replicas
        (TensorFlow's `replica_id_in_sync_group` counts the replicas of
        every worker; JAX's `jax.make_array_from_callback` asks each
        process for the rows of its devices).
        """
        leaves = [v for v in keras.tree.flatten(values) if v is not None]
        for rows in {int(v.shape[0]) for v in leaves}:
            self.per_replica_batch_size(rows)
        if not self._splits_rows():
            return values
        if self.backend != "tensorflow":
            return _map_arrays(self._laid_out_on_batch, values)

        def rows_of(context):
            replica = context.replica_id_in_sync_group

            def rows(value):
                value = np.asarray(value)
                size = value.shape[0] // self.num_replicas
                return value[replica * size : (replica + 1) * size]

            return _map_arrays(rows, values)

        return self.native.experimental_distribute_values_from_function(rows_of)

    def run(self, function, args):
        """`function(*args)` on every replica, each on its rows: `args`
        from `distribute_rows` (or results of an earlier `run`).

        TensorFlow: `strategy.run` (call it inside a `tf.function`);
        JAX: `function(*args)`, which a `jax.jit` function spreads over
        the devices that its arguments' layouts name. Returns what
        `function` returns: per-replica values on TensorFlow (put
        together by `gather_rows`), arrays laid out along the batch on
        JAX.
        """
        if self.backend == "tensorflow" and self._splits_rows():
            return self.native.run(function, args=tuple(args))
        return function(*args)

    def gather_rows(self, values):
        """The rows of every replica, in order: the inverse of
        `distribute_rows`, for results of `run`.

        Returns:
            The nest with each per-replica value made one tensor of the
            global batch (TensorFlow: its replicas' results concatenated,
            replica 0 first); JAX arrays as they are (one array of every
            row already, laid out along the batch). On several processes
            a collective (every process calls it) that gives every
            process every row, as numpy: `strategy.gather` on TensorFlow
            and `process_allgather` on JAX (`keras_txl.utils.processes`,
            as the checkpoint's `global_memory`).
        """
        if not self._splits_rows():
            return values
        if processes.process_count() > 1:
            if self.backend == "tensorflow":
                return processes.gather_replicas(self.native, values)
            return processes.gather_arrays(values)
        if self.backend != "tensorflow":
            return values
        import tensorflow as tf

        def whole(value):
            parts = self.native.experimental_local_results(value)
            return tf.concat(parts, axis=0)

        return _map_arrays(whole, values)

    def _splits_rows(self):
        """Whether each replica gets its own rows (a strategy of several
        replicas, or JAX's distribution)."""
        if self.native is None:
            return False
        return self.backend != "tensorflow" or self.num_replicas > 1

    def _laid_out_on_batch(self, value):
        layout = self.native.get_data_layout(tuple(value.shape))
        if processes.process_count() == 1:
            return keras.distribution.distribute_tensor(value, layout)
        # Devices of other processes too: this process puts the rows of
        # its own devices (the indices JAX asks for), of the global batch
        # that every process holds, and the others theirs.
        import jax

        value = np.asarray(value)
        return jax.make_array_from_callback(
            value.shape, layout.backend_layout, lambda index: value[index]
        )

    def _local_values(self, value):
        if self.backend == "tensorflow":
            if self.native is None:
                return [np.asarray(value)]
            return [
                np.asarray(v)
                for v in self.native.experimental_local_results(value)
            ]
        shards = getattr(value, "addressable_shards", None)
        if not shards:
            return [np.asarray(value)]
        blocks = {}
        for shard in shards:
            start = shard.index[0].start or 0
            data = np.asarray(shard.data)
            if data.shape[1:] != tuple(value.shape[1:]):
                # Rows split along other axes too (model parallelism).
                stop = start + data.shape[0]
                data = np.asarray(value[start:stop])
            blocks.setdefault(start, data)
        return [blocks[start] for start in sorted(blocks)]


def _map_arrays(function, values):
    """`keras.tree.map_structure(function, values)`, `None` kept."""
    return keras.tree.map_structure(
        lambda value: None if value is None else function(value), values
    )


def static_batch_size(dataset):
    """The static batch size of a `tf.data` dataset of batches, or a
    `ValueError` saying how to get one."""
    import tensorflow as tf

    if not isinstance(dataset, tf.data.Dataset):
        raise ValueError(
            "`dataset` must be a `tf.data.Dataset` of global batches. "
            f"Received: {type(dataset).__name__}"
        )
    sizes = {
        spec.shape[0] if spec.shape.rank else None
        for spec in tf.nest.flatten(dataset.element_spec)
    }
    if len(sizes) != 1 or None in sizes:
        raise ValueError(
            "Each replica carries the memory of a fixed set of rows, so "
            "the batches must have one static batch size. Received "
            f"element_spec={dataset.element_spec}. Batch with "
            "`drop_remainder=True` (as `keras_txl.data.segment_dataset` "
            "does)."
        )
    return sizes.pop()


# The optimizers `clip_after_all_reduce` has readied (a weak set: an
# optimizer is not kept alive, nor marked, by it).
_CLIPPING_AFTER_ALL_REDUCE = weakref.WeakSet()


def _apply_after_all_reduce(optimizer):
    """Wraps `optimizer.apply`, on this instance, to clip the gradient
    summed over the replicas.

    An isolated workaround, listed in CONTRIBUTING.md ("Private APIs"):
    Keras 3's `Optimizer.apply` clips (`_clip_gradients`) before its
    TensorFlow update step sums the replicas' gradients, and offers no
    hook between the two nor a way to skip its sum (keras-team/keras#19308,
    open; the order goes back to tf.keras, tensorflow/tensorflow#33929).
    The optimizer is the user's, of any class, already compiled into the
    model, so a subclass cannot stand in for it; `apply` is its public
    method and the wrapper calls it. Pinned by
    `tests/distribute/test_two_devices.py::test_two_replicas_follow_the_
    single_device_loss_curve` (clipped at 0.25: a per-replica clip would
    leave the one-device curve).
    """
    apply = optimizer.apply

    def apply_summed(grads, trainable_variables=None):
        # Keras's public `apply`, on the clipped share of the summed
        # gradient: Keras's own clip then finds it within bounds.
        return apply(_clip_summed(optimizer, grads), trainable_variables)

    optimizer.apply = apply_summed
    _CLIPPING_AFTER_ALL_REDUCE.add(optimizer)


def _clip_summed(optimizer, grads):
    """`grads` of one replica, made `1 / replicas` of the clipped sum over
    the replicas; as they are outside a replica context or on one."""
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return grads
    present = [tf.convert_to_tensor(g) for g in grads if g is not None]
    summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
    grads = [None if g is None else next(summed) for g in grads]
    # Keras's clipping, in its order of precedence.
    if optimizer.clipnorm and optimizer.clipnorm > 0:
        grads = [
            None if g is None else tf.clip_by_norm(g, optimizer.clipnorm)
            for g in grads
        ]
    elif optimizer.global_clipnorm and optimizer.global_clipnorm > 0:
        present = [g for g in grads if g is not None]
        norm = tf.linalg.global_norm(present)
        clip = tf.cast(optimizer.global_clipnorm, norm.dtype)
        scale = clip * tf.minimum(1.0 / norm, 1.0 / clip) + (norm - norm)
        grads = [
            None if g is None else g * tf.cast(scale, g.dtype) for g in grads
        ]
    elif optimizer.clipvalue and optimizer.clipvalue > 0:
        value = optimizer.clipvalue
        grads = [
            None if g is None else tf.clip_by_value(g, -value, value)
            for g in grads
        ]
    share = 1.0 / context.num_replicas_in_sync
    return [None if g is None else g * share for g in grads]
