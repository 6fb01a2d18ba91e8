"""`TransformerXLBackbone.get_layout_map`: the weights and the carried
memory of a Transformer-XL laid out on a device mesh, for
`keras.distribution.ModelParallel` (JAX)."""

import keras


def check_mesh_axes(device_mesh, *names):
    """Raises a `ValueError` unless each name (`None` aside) is an axis of
    `device_mesh`."""
    if not isinstance(device_mesh, keras.distribution.DeviceMesh):
        raise ValueError(
            "`device_mesh` must be a `keras.distribution.DeviceMesh`. "
            f"Received: {type(device_mesh).__name__}"
        )
    for name in names:
        if name is not None and name not in device_mesh.axis_names:
            raise ValueError(
                f"Mesh axis {name!r} is not an axis of the device mesh "
                f"{tuple(device_mesh.axis_names)}."
            )


def add_memory_layouts(layout_map, batch_dim_name, hidden_dim_name=None):
    """The carried memory `(batch, num_layers, M, hidden)` split along its
    batch like the data (and its hidden axis along `hidden_dim_name`)."""
    layout_map[".*memory_state/memory"] = (
        batch_dim_name,
        None,
        None,
        hidden_dim_name,
    )
    layout_map[".*memory_state/valid_length"] = (batch_dim_name,)
    return layout_map


def transformer_xl_layout_map(device_mesh, model_dim, data_dim):
    """`TransformerXLBackbone.get_layout_map` (see there)."""
    check_mesh_axes(device_mesh, model_dim, data_dim)
    layout_map = keras.distribution.LayoutMap(device_mesh)
    # Vocabulary rows across the model axis, the hidden axis across the
    # data axis (keras-hub's Gemma and Llama layouts); the untied output
    # layer of the task likewise.
    layout_map["token_embedding/embeddings"] = (model_dim, data_dim)
    layout_map[".*output_kernel"] = (data_dim, model_dim)
    layout_map[".*output_bias"] = (model_dim,)
    block = r"transformer_layer_\d+/"
    # Attention: heads across the model axis. Kernels (hidden, heads,
    # head_dim), (heads, head_dim, hidden) for the output.
    layout_map[block + "attention/(query|key|value|position)/kernel"] = (
        data_dim,
        model_dim,
        None,
    )
    layout_map[block + "attention/attention_output/kernel"] = (
        model_dim,
        None,
        data_dim,
    )
    layout_map[block + "attention/(content|position)_bias"] = (
        model_dim,
        None,
    )
    # Feed-forward: the inner axis across the model axis.
    layout_map[block + "intermediate/kernel"] = (data_dim, model_dim)
    layout_map[block + "intermediate/bias"] = (model_dim,)
    layout_map[block + "output/kernel"] = (model_dim, data_dim)
    return add_memory_layouts(layout_map, data_dim)
