"""The processes of one JAX run on several hosts (`jax.distributed`), and
the arrays they save together with Orbax.

A run on `P` processes (`KERAS_DISTRIBUTION_*`, a TPU pod slice) holds
arrays that no process holds whole: the carried memory is sharded along
the batch, process `p` keeping the rows of its replicas. `save_arrays` and
`restore_arrays` are Orbax's (`orbax.checkpoint.StandardCheckpointer`):
every process writes its own shards into one folder, the primary process
commits it (an atomic rename), and a restore reads, on each process, the
rows of its devices under the layout of the run that restores, which may
have another number of processes or devices (elastic resume).

`TrainingCheckpoint` calls these; with one process nothing here runs.
"""

import contextlib

import numpy as np

from keras_txl.utils.missing_extra_error import import_extra


def process_count():
    """Processes of this run: `jax.process_count()` on JAX, else 1."""
    import keras

    if keras.backend.backend() != "jax":
        return 1
    import jax

    return jax.process_count()


def is_primary():
    """Whether this process writes the run's files (JAX process 0)."""
    if process_count() == 1:
        return True
    import jax

    return jax.process_index() == 0


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
    from jax.experimental import multihost_utils

    values = multihost_utils.process_allgather(np.int32(value))
    return int(np.max(values))


def barrier(name):
    """Waits until every process reached the barrier `name`."""
    if process_count() == 1:
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
    """A process of a run on several JAX processes stopped (killed,
    preempted) and the others cannot go on: its message says how to
    resume. A `ConnectionError`, so an `OSError`."""


@contextlib.contextmanager
def peer_errors(resume):
    """Turns JAX's errors about a lost process (a missed heartbeat, a
    barrier or collective that failed) into a `PeerLostError` whose
    message ends with `resume` (how to continue the run)."""
    try:
        yield
    except Exception as error:
        text = " ".join(str(error).split())
        lost = process_count() > 1 and any(
            mark in text
            for mark in ("heartbeat", "barrier", "UNAVAILABLE", "Gloo")
        )
        if not lost:
            raise
        raise PeerLostError(
            "a process of this run was lost, so this one stops "
            f"({type(error).__name__}: {text[:240]}). {resume}"
        ) from error
