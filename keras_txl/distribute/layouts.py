import keras

from keras_txl.models.layout_map import add_memory_layouts
from keras_txl.models.layout_map import check_mesh_axes


def memory_layout_map(
    device_mesh, layout_map=None, batch_dim_name=None, hidden_dim_name=None
):
    """`LayoutMap` entries that shard the carried memory along the batch.

    For `keras.distribution.ModelParallel` (JAX): the memory carried
    between batches, `(batch, num_layers, M, hidden_dim)`, is split along
    its batch axis like the input batches, so each data-parallel group of
    devices keeps the memory of the streams it trains on; optionally the
    hidden axis is split too (e.g. along the mesh axis that shards the
    dense kernels). Without such an entry `MemoryState` already shards the
    batch axis; these entries make the layout explicit and let you add the
    hidden axis.

    Args:
        device_mesh: `keras.distribution.DeviceMesh`.
        layout_map: `keras.distribution.LayoutMap` to add the entries to,
            or `None` for a new one on `device_mesh`.
        batch_dim_name: str or `None`. Mesh axis of the batch (the
            distribution's `batch_dim_name`); `None`: the mesh's first axis.
        hidden_dim_name: str or `None`. Mesh axis to split the hidden
            dimension along; `None` keeps it whole.

    Returns:
        The `LayoutMap`, with keys `".*memory_state/memory"` and
        `".*memory_state/valid_length"`.

    Example:

    >>> import keras
    >>> mesh = keras.distribution.DeviceMesh(
    ...     (1, 1), ("batch", "model"), keras.distribution.list_devices()[:1]
    ... )
    >>> layouts = memory_layout_map(mesh, hidden_dim_name="model")
    >>> layouts[".*memory_state/memory"].axes
    ('batch', None, None, 'model')
    """
    if layout_map is None:
        layout_map = keras.distribution.LayoutMap(device_mesh)
    batch = batch_dim_name or device_mesh.axis_names[0]
    check_mesh_axes(device_mesh, batch, hidden_dim_name)
    return add_memory_layouts(layout_map, batch, hidden_dim_name)
