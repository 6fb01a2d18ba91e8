"""Checks run before `quantize()` changes anything in a keras-txl model."""

import contextlib
import warnings

import keras

# Keras's modes that these models compute correctly after `quantize()`:
# the `Dense`, `EinsumDense` and `Embedding` layers quantize their own
# weights and every layer of keras-txl reads them through their calls.
SUPPORTED_MODES = ("int8", "int4", "float8")

# The other modes of Keras, and why they are refused.
_REFUSED_MODES = {
    "gptq": (
        "GPTQ calibrates each block by calling it on the previous block's "
        "outputs alone, and a Transformer-XL block also needs the relative "
        "position embeddings and its memory"
    ),
    "awq": (
        "AWQ calibrates each block by calling it on the previous block's "
        "outputs alone, and a Transformer-XL block also needs the relative "
        "position embeddings and its memory"
    ),
}


def check_quantize(model, mode, config):
    """Raises a `ValueError` if `model.quantize(mode, config=config)`
    cannot give correct numbers, before any layer is changed.

    Keras quantizes a model layer by layer and checks each layer only when
    it reaches it, so a refusal half-way leaves some layers quantized. This
    runs every check first: the mode, then Keras's own checks of each
    layer that would be quantized (built, not yet quantized, a compute
    dtype that the mode supports).

    Args:
        model: a `TransformerXLBackbone`.
        mode: str or `None`, the `mode` given to `quantize`.
        config: a `keras.quantizers.QuantizationConfig` or `None`.

    Returns:
        The mode (from `config` when `mode` is `None`).
    """
    if mode is None and config is not None:
        mode = getattr(config, "mode", None)
    if mode in _REFUSED_MODES:
        raise ValueError(
            f"keras-txl models do not support quantize(mode={mode!r}): "
            f"{_REFUSED_MODES[mode]}. Use one of {list(SUPPORTED_MODES)}."
        )
    if mode not in SUPPORTED_MODES:
        raise ValueError(
            "`mode` must be one of the quantization modes "
            f"{list(SUPPORTED_MODES)}. Received: mode={mode!r}"
        )
    for layer in model._flatten_layers():
        if isinstance(
            layer,
            (
                keras.layers.Dense,
                keras.layers.EinsumDense,
                keras.layers.Embedding,
            ),
        ):
            # Keras's per-layer check (built, not quantized yet, dtype),
            # for all layers before any of them changes.
            layer._check_quantize_args(mode, layer.compute_dtype)
    return mode


@contextlib.contextmanager
def quiet_layer_skips():
    """Hides the warning `keras.Model.quantize` writes for each layer it
    leaves as is (one without weights, "does not have a `quantize` method
    implemented"; an `Embedding` under `"float8"`, "Invalid quantization
    mode"): 21 to 35 lines per model that say what the docstring of
    `TransformerXLBackbone.quantize` says once. Other warnings show."""
    with warnings.catch_warnings():
        for message in (
            r"Layer .* does not have a `quantize` method implemented",
            r"Invalid quantization mode",
        ):
            warnings.filterwarnings("ignore", message, UserWarning)
        yield
