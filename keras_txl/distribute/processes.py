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
