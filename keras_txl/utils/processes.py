"""The processes of one run on several hosts: JAX's (`jax.distributed`),
and the arrays they save together with Orbax; TensorFlow's workers of a
`MultiWorkerMirroredStrategy` (`TF_CONFIG`).

A run on `P` processes (`KERAS_DISTRIBUTION_*`, a TPU pod slice) holds
arrays that no process holds whole: the carried memory is sharded along
the batch, process `p` keeping the rows of its replicas. `save_arrays` and
`restore_arrays` are Orbax's (`orbax.checkpoint.StandardCheckpointer`):
every process writes its own shards into one folder, the primary process
commits it (an atomic rename), and a restore reads, on each process, the
rows of its devices under the layout of the run that restores, which may
have another number of processes or devices (elastic resume).

On TensorFlow the workers follow TensorFlow's own multi-worker
conventions: the chief (`strategy.extended.should_checkpoint`) writes,
the others compute with it, and the collectives here (`largest`,
`barrier`, `gather_rows`, `gather_replicas`) are the strategy's
(`strategy.gather`), run in a `tf.function`.

`TrainingCheckpoint` calls these, and `ReplicaStrategy.gather_rows` (the
scores of `score(strategy=)` whole on every process: `gather_replicas`,
`gather_arrays`); with one process nothing here runs.
"""

import contextlib
import weakref

import numpy as np

from keras_txl.utils.missing_extra_error import import_extra


def process_count():
    """Processes of this run: `jax.process_count()` on JAX; on TensorFlow
    the chief and workers of the `MultiWorkerMirroredStrategy` in scope
    or made last (`use_tensorflow_workers`), else 1."""
    import keras

    if keras.backend.backend() == "tensorflow":
        strategy = _tensorflow_workers()
        if strategy is None:
            return 1
        spec = strategy.cluster_resolver.cluster_spec().as_dict()
        return max(1, sum(len(spec.get(j, ())) for j in ("chief", "worker")))
    if keras.backend.backend() != "jax":
        return 1
    import jax

    return jax.process_count()


def is_primary():
    """Whether this process writes the run's files (JAX process 0, the
    TensorFlow chief)."""
    if process_count() == 1:
        return True
    import keras

    if keras.backend.backend() == "tensorflow":
        return bool(_tensorflow_workers().extended.should_checkpoint)
    import jax

    return jax.process_index() == 0


# The `MultiWorkerMirroredStrategy` that `make_strategy("multiworker")`
# made last (a weak reference: it does not keep it alive).
_WORKERS = {"strategy": None}


def use_tensorflow_workers(strategy):
    """Makes `strategy` (a `tf.distribute.MultiWorkerMirroredStrategy`)
    the one whose workers `process_count`, `is_primary`, `largest` and
    `barrier` see outside its scope. `make_strategy` calls it."""
    _WORKERS["strategy"] = weakref.ref(strategy)


def _tensorflow_workers():
    """The `MultiWorkerMirroredStrategy` of this run, or `None`."""
    import tensorflow as tf

    strategy = (
        tf.distribute.get_strategy() if tf.distribute.has_strategy() else None
    )
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        made = _WORKERS["strategy"]
        strategy = None if made is None else made()
    return strategy


def gather_rows(strategy, variables):
    """Every replica's values of the (sync-on-read, one per replica)
    TensorFlow variables `variables`, concatenated along the first axis
    in replica order, as numpy, on every worker: `strategy.gather`, a
    collective (every worker calls it)."""
    import tensorflow as tf

    key = ("gather", id(strategy), *map(id, variables))
    if key not in _COLLECTIVES:

        def gather():
            local = strategy.run(
                lambda: [tf.identity(v.value) for v in variables]
            )
            return _gathered(strategy, local)

        _COLLECTIVES[key] = tf.function(gather)
    return [np.asarray(v) for v in _COLLECTIVES[key]()]


def gather_replicas(strategy, values):
    """Every replica's rows of `values` (a nest of per-replica results of
    `strategy.run`, rows first), each concatenated along the first axis
    in replica order, as numpy, on every worker: the `strategy.gather`
    of `gather_rows`, a collective (every worker calls it)."""
    import tensorflow as tf

    key = ("gather_replicas", id(strategy))
    if key not in _COLLECTIVES:
        _COLLECTIVES[key] = tf.function(
            lambda values: _gathered(strategy, values), reduce_retracing=True
        )
    return tf.nest.map_structure(np.asarray, _COLLECTIVES[key](values))


def _gathered(strategy, values):
    """`strategy.gather(value, axis=0)` of each per-replica leaf of
    `values` (in a `tf.function`)."""
    import tensorflow as tf

    return tf.nest.map_structure(
        lambda value: strategy.gather(value, axis=0), values
    )


def gather_arrays(values):
    """The nest of JAX arrays `values`, each laid out over the devices of
    every process (rows on several processes), as whole numpy arrays on
    every process: `jax.experimental.multihost_utils.process_allgather`
    (also `largest`'s); a collective (every process calls it)."""
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(values, tiled=True)


def _tensorflow_largest(strategy, value):
    import tensorflow as tf

    key = ("largest", id(strategy))
    if key not in _COLLECTIVES:

        def largest_value(x):
            # (`tf.distribute.ReduceOp` has no MAX: gather, then the max.)
            local = strategy.run(lambda: tf.reshape(x, [1]))
            return tf.reduce_max(strategy.gather(local, axis=0))

        _COLLECTIVES[key] = tf.function(largest_value)
    return int(_COLLECTIVES[key](np.int32(value)))


# The `tf.function`s of the TensorFlow collectives, traced once each.
_COLLECTIVES = {}


def broadcast_text(text):
    """`text` of the primary process, on every process (a collective:
    every process calls it)."""
    if process_count() == 1:
        return text
    from jax.experimental import multihost_utils

    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    size = int(multihost_utils.broadcast_one_to_all(np.int32(data.size)))
    padded = np.zeros(size, np.uint8)
    if is_primary():
        padded[:] = data
    return bytes(multihost_utils.broadcast_one_to_all(padded)).decode("utf-8")


def largest(value):
    """The largest of the integers `value` of every process (a
    collective: every process calls it)."""
    if process_count() == 1:
        return int(value)
    import keras

    if keras.backend.backend() == "tensorflow":
        return _tensorflow_largest(_tensorflow_workers(), value)
    return int(np.max(gather_arrays(np.array([value], "int32"))))


def barrier(name):
    """Waits until every process reached the barrier `name`."""
    if process_count() == 1:
        return
    import keras

    if keras.backend.backend() == "tensorflow":
        largest(0)  # a collective: every worker is here
        return
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


def _checkpointer():
    ocp = import_extra(
        "orbax.checkpoint", "jax", "A checkpoint of several JAX processes"
    )
    return ocp.StandardCheckpointer()


def save_arrays(path, tree):
    """Writes the nest of `jax.Array`s `tree` to the folder `path` (which
    must not exist), every process its shards; returns when the folder
    is complete. A collective: every process calls it with its part of
    the same arrays."""
    checkpointer = _checkpointer()
    checkpointer.save(path, tree)
    checkpointer.wait_until_finished()


def restore_arrays(path, like):
    """The arrays of `save_arrays`'s folder `path`, each with the shape,
    dtype and sharding of its counterpart in the nest `like` (arrays or
    `jax.ShapeDtypeStruct`s): each process reads the rows of its devices.
    Raises `ValueError` when a shape differs from the saved one."""
    import jax

    abstract = jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
        like,
    )
    return _checkpointer().restore(path, abstract)


class PeerLostError(ConnectionError):
    """A process of a run on several processes (JAX, TensorFlow) stopped
    (killed, preempted) and the others cannot go on: its message says how to
    resume. A `ConnectionError`, so an `OSError`."""


@contextlib.contextmanager
def peer_errors(resume):
    """Turns the engine's errors about a lost process (JAX: a missed
    heartbeat, a barrier or collective that failed; TensorFlow: a
    collective aborted, its peer unavailable, or the coordination
    service's missed heartbeats) into a `PeerLostError` whose message
    ends with `resume` (how to continue the run)."""
    try:
        yield
    except Exception as error:
        text = " ".join(str(error).split())
        lost = process_count() > 1 and (
            any(
                mark in text
                for mark in ("heartbeat", "barrier", "UNAVAILABLE", "Gloo")
            )
            or type(error).__name__ in _TENSORFLOW_PEER_ERRORS
        )
        if not lost:
            raise
        raise PeerLostError(
            "a process of this run was lost, so this one stops "
            f"({type(error).__name__}: {text[:240]}). {resume}"
        ) from error


# TensorFlow's errors (`tf.errors`) of a collective whose peer is gone:
# its connection closed, or the coordination service's heartbeats
# stopped (TensorFlow's default heartbeat timeout: 10 s).
_TENSORFLOW_PEER_ERRORS = (
    "UnavailableError",
    "AbortedError",
    "CancelledError",
    "DeadlineExceededError",
)
