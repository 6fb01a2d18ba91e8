"""LoRA (Hu et al., 2021) on a Transformer-XL, keras-hub's way: low-rank
updates of chosen projections train, every other weight is frozen, and
`save_lora_weights` holds everything that training changed."""

# The layers LoRA can target, by name, in every `TransformerXLBlock`.
LORA_TARGETS = {
    "query": "attention: query projection (a default target)",
    "value": "attention: value projection (a default target)",
    "key": "attention: key projection",
    "position": "attention: projection of the relative position embeddings",
    "attention_output": "attention: output projection",
    "intermediate": "feed-forward: first layer",
    "output": "feed-forward: second layer",
}
DEFAULT_LORA_TARGETS = ("query", "value")


def check_lora_targets(backbone, target_layer_names):
    """The names, checked: each must name a layer of `backbone` that LoRA
    can adapt."""
    if isinstance(target_layer_names, str):
        target_layer_names = [target_layer_names]
    names = list(target_layer_names)
    present = {
        layer.name
        for layer in backbone._flatten_layers(include_self=False)
        if hasattr(layer, "enable_lora") and layer.weights
    }
    unknown = [name for name in names if name not in present]
    if unknown or not names:
        raise ValueError(
            "`target_layer_names` must name layers that LoRA can adapt: "
            f"{', '.join(sorted(present & set(LORA_TARGETS)))}. Received: "
            f"{target_layer_names!r}"
        )
    return names


def freeze_all_but_lora(model):
    """Makes every variable of `model` but the LoRA kernels
    non-trainable (keras-hub's `enable_lora` leaves the bias of a Dense
    target, and a task's output layer, trainable; neither is saved by
    `save_lora_weights`)."""
    lora = set()
    for layer in model._flatten_layers(include_self=True):
        if getattr(layer, "lora_enabled", False):
            lora.add(id(layer.lora_kernel_a))
            lora.add(id(layer.lora_kernel_b))
    for variable in model.variables:
        if variable.trainable and id(variable) not in lora:
            variable.trainable = False


def lora_targets_in_file(backbone, filepath):
    """The names of the layers whose LoRA kernels `filepath` holds (a
    `save_lora_weights` file identifies them by their index among the
    backbone's layers with weights)."""
    import h5py

    with h5py.File(filepath, "r") as file:
        group = file["lora"] if "lora" in file else None
        keys = list(group) if group is not None else []
    indices = [int(key) for key in keys if key.isdigit()]
    layers = [
        layer
        for layer in backbone._flatten_layers(include_self=False)
        if layer.weights
    ]
    if not indices or max(indices) >= len(layers):
        raise ValueError(
            f"{filepath} holds no LoRA weights of this backbone. Save them "
            "with `save_lora_weights` from a model of the same config."
        )
    return sorted({layers[index].name for index in indices})
