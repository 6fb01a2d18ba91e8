"""The one way to make a copy of a `TransformerXLCausalLM` for evaluation:
another carried memory length, other evaluation settings of the backbone,
or both.

`TransformerXLCausalLM.with_memory_length` and
`keras_txl.training.evaluation.evaluation_model` (under `evaluate_segments`
and RECL's `context_losses`) both call `evaluation_copy`.
"""

import keras

from keras_txl.utils.validation import check_optional_positive_int


def evaluation_copy(lm, memory_length=None, name=None, **backbone_changes):
    """A model with the weights of `lm`, for evaluation.

    Without `backbone_changes` the copy shares `lm`'s backbone and output
    layer (the same variables: a change of the weights of one shows in the
    other). With them (e.g. `same_length=True`, `clamp_length=None`: the
    evaluation settings that a backbone fixes when it is built) the copy
    has a new backbone of `lm`'s config with those changes, and its own
    variables, which hold a copy of `lm`'s weights (a copy, not the same
    buffers: JAX's `predict` may donate the buffers it reads).

    Either way the copy has its own carried memory, empty, whose batch
    size is set by its first batch, keeps `lm`'s preprocessor, and is
    compiled with the default loss and metrics if `lm` is compiled.

    Args:
        lm: a `TransformerXLCausalLM`.
        memory_length: int >= 0 or `None` (`lm.memory_length`). Length of
            the carried memory.
        name: the copy's name; `None` for `"{lm.name}_copy"`.
        **backbone_changes: backbone arguments to change.

    Returns:
        A `TransformerXLCausalLM`.
    """
    if memory_length is None:
        memory_length = lm.memory_length
    memory_length = check_optional_positive_int(
        "memory_length", memory_length, allow_zero=True
    )
    if not lm.built:
        lm.build()
    backbone = lm.backbone
    if backbone_changes:
        config = {**backbone.get_config(), **backbone_changes}
        backbone = type(backbone).from_config(config)
    adaptive = lm.adaptive_softmax is not None
    copy = type(lm)(
        backbone,
        tie_weights=lm.tie_weights,
        memory_length=memory_length,
        tie_projections=lm.tie_projections if adaptive else None,
        tail_capacity=lm.tail_capacity if adaptive else None,
        cluster_order=lm.cluster_order,
        preprocessor=lm.preprocessor,
        name=f"{lm.name}_copy" if name is None else name,
    )
    if backbone_changes:
        _copy_weights(lm, copy)
    else:
        _share_output_layer(lm, copy)
    if lm.compiled:
        copy.compile()
    return copy


def _share_output_layer(lm, copy):
    """Gives `copy` (on `lm`'s backbone) `lm`'s output variables."""
    if lm.adaptive_softmax is not None:
        # The unbuilt softmax of the constructor leaves the model.
        copy._tracker.untrack(copy.adaptive_softmax)
        copy.adaptive_softmax = lm.adaptive_softmax
    else:
        copy.output_bias = lm.output_bias
        if not lm.tie_weights:
            copy.output_kernel = lm.output_kernel
    copy.built = True


def _copy_weights(lm, copy):
    """Builds `copy`, with LoRA where `lm` has it, and assigns it the
    values of all `lm`'s weights (frozen ones and LoRA kernels too)."""
    copy.build()
    lora_layers = [
        layer
        for layer in lm.backbone._flatten_layers(include_self=False)
        if getattr(layer, "lora_enabled", False)
    ]
    if lora_layers:
        # The copy's backbone comes from the config, which has no LoRA:
        # the same targets and rank give it the same weights.
        copy.enable_lora(
            lora_layers[0].lora_rank,
            sorted({layer.name for layer in lora_layers}),
        )
    # All weights but the carried memory's: the copy's starts empty.
    sources, targets = _model_weights(lm), _model_weights(copy)
    if len(targets) != len(sources) or any(
        tuple(target.shape) != tuple(source.shape)
        for target, source in zip(targets, sources)
    ):
        raise ValueError(
            "The evaluation copy does not have the weights of the model "
            f"({len(targets)} vs {len(sources)}, or their shapes differ)."
        )
    for target, source in zip(targets, sources):
        target.assign(keras.ops.convert_to_numpy(source))


def _model_weights(lm):
    """`lm.weights` without the carried memory's state."""
    carried = {id(weight) for weight in lm.memory_state.weights}
    return [weight for weight in lm.weights if id(weight) not in carried]
