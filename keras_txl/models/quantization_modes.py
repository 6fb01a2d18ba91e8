"""Which Keras quantization modes a keras-txl model computes correctly,
checked before any layer changes (`TransformerXLBackbone.quantize`)."""

# Keras's quantization modes that these models compute correctly: the
# `Dense`, `EinsumDense` and `Embedding` layers quantize their own weights
# and every layer here reads them through their calls. GPTQ and AWQ
# calibrate a block on the previous block's outputs alone, and a
# Transformer-XL block also needs its memory and position embeddings.
QUANTIZATION_MODES = ("int8", "int4", "float8")


def check_quantize(model, mode, config):
    """Raises a `ValueError` if `model.quantize(mode, config=config)`
    cannot give correct numbers, before any layer changes (Keras checks a
    layer only when it reaches it, so a refusal half-way would leave some
    layers quantized). Returns the mode (from `config` when `mode` is
    `None`)."""
    if mode is None and config is not None:
        mode = getattr(config, "mode", None)
    if mode in ("gptq", "awq"):
        raise ValueError(
            f"keras-txl models do not support quantize(mode={mode!r}): it "
            "calibrates each block on the previous block's outputs alone, "
            "and a Transformer-XL block also needs its memory and the "
            f"relative position embeddings. Use one of {QUANTIZATION_MODES}."
        )
    if mode not in QUANTIZATION_MODES:
        raise ValueError(
            f"`mode` must be one of {list(QUANTIZATION_MODES)}. Received: "
            f"mode={mode!r}"
        )
    if model.quantization_mode is not None or any(
        weight.path.endswith(("kernel_scale", "embeddings_scale"))
        for weight in model.weights
    ):
        raise ValueError(
            f"{model.name} is already quantized. Quantize a float model "
            f"once. Received: mode={mode!r}"
        )
    if mode == "int8" and model.compute_dtype == "float16":
        raise ValueError(
            "quantize(mode='int8') does not work well with the compute "
            "dtype float16: load the model under 'mixed_bfloat16' or "
            "'mixed_float16' first."
        )
    return mode
