"""`quantize()` on the backbone and the LM: numbers close to the float
model's, or a refusal before any layer changes."""

import functools

import keras
import numpy as np
import pytest

from tests.test_case import to_numpy
from tests.tiny_models import tiny_lm

# Largest |quantized - float| of the logits, relative to the largest
# |float logit|, on this tiny random model (measured: int8 0.005 to 0.02,
# float8 up to 0.07; int4 with 16-wide rows 0.22 on JAX, 0.35 on
# TensorFlow, 0.21 on torch for this seed, 0.15 to 0.35 over seeds 0-5;
# reading the int8 kernels as floats gave ~3000).
_TOLERANCE = {"int8": 0.05, "int4": 0.4, "float8": 0.15}
# The share of the 16 positions whose top-1 token the quantized model
# keeps (measured for int4: 0.81 on JAX, 0.94 on TensorFlow and torch;
# 0.75 to 1.0 over seeds 0-5). A model whose logits lost their order
# would keep about 1/30.
_TOP1 = {"int8": 0.9, "int4": 0.7, "float8": 0.8}


_lm = functools.partial(
    tiny_lm,
    vocabulary_size=30,
    hidden_dim=16,
    memory_length=5,
    initializer_range=0.2,
)


def _two_segments(lm, tokens):
    """Logits of two segments, the second attending to the first."""
    first, memory = lm.call_with_memory(tokens[:, :4])
    second, memory = lm.call_with_memory(tokens[:, 4:], memory)
    return (
        np.concatenate([to_numpy(first), to_numpy(second)], axis=1),
        to_numpy(memory["memory"]),
    )


def _quantized_layers(model):
    return [
        layer.path
        for layer in model._flatten_layers()
        if layer.quantization_mode is not None
    ]


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "mode, tie_weights",
    [("int8", True), ("int8", False), ("int4", True), ("float8", True)],
)
def test_quantized_lm_logits_close_to_float(mode, tie_weights):
    lm = _lm(tie_weights=tie_weights)
    tokens = np.random.default_rng(0).integers(0, 30, size=(2, 8))
    reference, reference_memory = _two_segments(lm, tokens)

    lm.quantize(mode)  # an unbuilt LM: its carried memory has no state

    attention = lm.backbone.transformer_layers[0].attention
    assert attention.query_dense.quantization_mode == mode
    assert attention.position_dense.quantization_mode == mode
    logits, memory = _two_segments(lm, tokens)
    scale = np.abs(reference).max()
    error = np.abs(logits - reference).max() / scale
    assert error < _TOLERANCE[mode], error
    kept = np.mean(logits.argmax(-1) == reference.argmax(-1))
    assert kept >= _TOP1[mode], kept
    assert not np.allclose(logits, reference, atol=1e-7)  # it did change
    memory_error = np.abs(memory - reference_memory).max()
    assert memory_error < _TOLERANCE[mode] * np.abs(reference_memory).max()


def test_quantized_lm_saves_loads_and_generates(tmp_path):
    lm = _lm()
    lm.quantize("int8")
    tokens = np.random.default_rng(1).integers(0, 30, size=(2, 8))
    logits, _ = _two_segments(lm, tokens)
    path = tmp_path / "quantized.keras"
    lm.save(path)
    restored = keras.saving.load_model(path)
    assert _quantized_layers(restored.backbone)
    np.testing.assert_allclose(_two_segments(restored, tokens)[0], logits)

    lm.compile(sampler="greedy")
    prompt = {
        "token_ids": np.array([[3, 4, 0, 0, 0]]),
        "padding_mask": np.array([[1, 1, 0, 0, 0]], dtype=bool),
    }
    out = lm.generate(prompt, stop_token_ids=None)["token_ids"]
    # Greedy: each new token is the argmax of the quantized logits of the
    # whole prefix, recomputed here without the generation loop.
    for position in range(2, 5):
        step, _ = lm.call_with_memory(out[:, :position])
        assert out[0, position] == np.argmax(to_numpy(step)[0, -1])


@pytest.mark.parametrize("mode", ["gptq", "awq", "int2"])
def test_unsupported_modes_refused_before_any_change(mode):
    lm = _lm()
    lm.build()
    config = None
    if mode == "gptq":
        config = keras.quantizers.GPTQConfig(
            dataset=["a b"], tokenizer=lambda text: [[1, 2]]
        )
    elif mode == "awq":
        config = keras.quantizers.AWQConfig(
            dataset=["a b"], tokenizer=lambda text: [[1, 2]]
        )
    with pytest.raises(ValueError, match=mode if config else "mode"):
        if config is None:
            lm.quantize(mode)
        else:
            lm.quantize(config=config)
    assert _quantized_layers(lm) == []


def test_int8_under_float16_refused_before_any_change():
    # Keras's check (its `quantize` wrapper runs it before any override of
    # `quantize`, on the task first): keras-txl has none of its own.
    lm = _lm(dtype="mixed_float16")
    with pytest.raises(ValueError, match="float16"):
        lm.quantize("int8")
    assert _quantized_layers(lm) == []


def test_quantizing_twice_refused():
    lm = _lm()
    lm.backbone.quantize("int8")
    with pytest.raises(ValueError, match="already quantized"):
        lm.quantize("int4")
    modes = {
        layer.quantization_mode
        for layer in lm.backbone._flatten_layers()
        if layer.quantization_mode
    }
    assert modes == {"int8"}
