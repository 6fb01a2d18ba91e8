"""Where a `TransformerXLBackbone`'s weights and the carried memory lie
on a device mesh: the layout map of `TransformerXLBackbone.get_layout_map`
(its documentation is there) and the check that a layout splits no
vocabulary axis unevenly, which the backbone and the task run as they
make their vocabulary-sized weights."""

import math

import keras


def transformer_xl_layout_map(
    device_mesh,
    model_parallel_dim_name="model",
    data_parallel_dim_name="batch",
    vocabulary_size=None,
):
    """`TransformerXLBackbone.get_layout_map(...)`: see there."""
    model, data = model_parallel_dim_name, data_parallel_dim_name
    if not isinstance(device_mesh, keras.distribution.DeviceMesh):
        raise ValueError(
            "`device_mesh` must be a `keras.distribution.DeviceMesh`. "
            f"Received: {type(device_mesh).__name__}"
        )
    for name in (model, data):
        if name not in device_mesh.axis_names:
            raise ValueError(
                f"Mesh axis {name!r} is not an axis of the device mesh "
                f"{tuple(device_mesh.axis_names)}."
            )
    vocab = model
    if vocabulary_size is not None:
        size = dict(zip(device_mesh.axis_names, device_mesh.shape))
        if int(vocabulary_size) % size[model]:
            vocab = None  # replicated: it does not divide the axis
    block = r"transformer_layer_\d+/attention/"
    axes = {
        "token_embedding/embeddings": (vocab, data),
        ".*output_kernel": (data, vocab),
        ".*output_bias": (vocab,),
        # Attention kernels (hidden, heads, head_dim), its output
        # (heads, head_dim, hidden), the biases u, v (heads, head_dim).
        block + "(query|key|value|position)/kernel": (data, model, None),
        block + "attention_output/kernel": (model, None, data),
        block + "(content|position)_bias": (model, None),
        r"transformer_layer_\d+/intermediate/kernel": (data, model),
        r"transformer_layer_\d+/intermediate/bias": (model,),
        r"transformer_layer_\d+/output/kernel": (model, data),
        # The carried memory (batch, L, M, hidden) and its lengths,
        # split along the batch like the data.
        ".*memory_state/memory": (data, None, None, None),
        ".*memory_state/valid_length": (data,),
    }
    layout_map = keras.distribution.LayoutMap(device_mesh)
    for path, path_axes in axes.items():
        layout_map[path] = path_axes
    return layout_map


def check_vocabulary_layout(path, vocabulary_size, axis):
    """Raises if the active distribution would split the vocabulary axis
    `axis` of the weight at `path` unevenly: JAX refuses such a split
    with its own error, deep inside the weight's creation, that does not
    say how to lay the model out. A mesh axis that divides the vocabulary
    passes, as does a layout that keeps the vocabulary axis whole."""
    distribution = keras.distribution.distribution()
    layout = distribution and distribution.get_tensor_layout(path)
    if not isinstance(layout, keras.distribution.TensorLayout):
        return
    names = layout.axes[axis] if axis < len(layout.axes) else None
    names = (names,) if isinstance(names, str) else tuple(names or ())
    mesh = layout.device_mesh or distribution.device_mesh
    sizes = dict(zip(mesh.axis_names, mesh.shape))
    shards = math.prod(sizes[name] for name in names)
    if vocabulary_size % shards:
        raise ValueError(
            f"The layout of `{path}` splits its vocabulary axis of "
            f"{vocabulary_size} tokens over the mesh axis "
            f"{' x '.join(map(repr, names))} of "
            f"{shards} devices, which does not divide it. Lay the "
            "vocabulary axis out whole: pass the vocabulary to "
            "`TransformerXLBackbone.get_layout_map(mesh, "
            f"vocabulary_size={vocabulary_size})`, or use a mesh axis "
            f"whose size divides {vocabulary_size}."
        )
