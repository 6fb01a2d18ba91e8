"""Under mixed precision the memory is kept in the compute dtype, end to
end: backbone outputs, the state `fit` carries, checkpoints, generation
and the SavedModel signatures. It loses nothing: the states stored are
layer outputs already computed in that dtype, so a float32 memory holds
the same values in twice the bytes."""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_txl.models import CompressiveTransformerXLBackbone
from keras_txl.models import TransformerXLBackbone
from keras_txl.training.step_history import StepHistory
from keras_txl.training.training_checkpoint import TrainingCheckpoint
from tests.test_case import dtype_name
from tests.test_case import to_numpy
from tests.tiny_models import PLAIN_LM
from tests.tiny_models import tiny_lm

T = 4


# The plain tests' tiny LM (2 layers, width 8, M=4) under mixed bfloat16.
_lm = functools.partial(tiny_lm, dtype="mixed_bfloat16", **PLAIN_LM)


def _tokens(segments=3, batch=2):
    rng = np.random.default_rng(1)
    return rng.integers(0, 20, (batch, segments * T)).astype("int32")


def _run(lm, tokens):
    """Logits and memories of each segment, the memory carried."""
    memory = None
    for s in range(tokens.shape[1] // T):
        logits, memory = lm.call_with_memory(
            tokens[:, s * T : (s + 1) * T], memory
        )
        yield to_numpy(logits), memory


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "policy, expected",
    [
        ("mixed_bfloat16", "bfloat16"),
        ("mixed_float16", "float16"),
        ("float32", "float32"),
    ],
)
def test_memory_is_in_the_compute_dtype(policy, expected):
    lm = _lm(
        dtype=policy,
        backbone_class=CompressiveTransformerXLBackbone,
        compressed_memory_length=2,
        compression_rate=2,
    )
    backbone = lm.backbone
    assert backbone.memory_spec.dtype == expected
    memory = backbone.initial_memory(2)
    assert dtype_name(memory["memory"]) == expected
    assert dtype_name(memory["compressed_memory"]) == expected
    for logits, memory in _run(lm, _tokens()):
        assert logits.dtype == np.float32  # logits stay float32
        assert np.isfinite(logits).all()
    assert dtype_name(memory["memory"]) == expected
    assert dtype_name(memory["compressed_memory"]) == expected
    assert dtype_name(memory["valid_length"]) == "int32"
    # The state carried by fit/evaluate/predict too.
    lm.build_memory(2)
    state = lm.memory_state
    assert dtype_name(state.memory) == expected
    assert dtype_name(state.compressed_memory) == expected


@pytest.mark.torch_ok
def test_half_the_bytes_and_the_same_numbers_as_a_float32_memory():
    """`memory_dtype="float32"` (the old behaviour) holds the same values:
    the logits of every segment are identical."""
    tokens = _tokens()
    half = _lm()
    full = _lm(memory_dtype="float32")
    full.set_weights(half.get_weights())
    for (a, memory_a), (b, memory_b) in zip(
        _run(half, tokens), _run(full, tokens)
    ):
        np.testing.assert_array_equal(a, b)
        states_a = to_numpy(keras.ops.cast(memory_a["memory"], "float32"))
        np.testing.assert_array_equal(states_a, to_numpy(memory_b["memory"]))
    assert dtype_name(memory_b["memory"]) == "float32"
    assert (
        to_numpy(memory_a["memory"]).nbytes * 2
        == to_numpy(memory_b["memory"]).nbytes
    )


@pytest.mark.torch_ok
def test_memory_dtype_is_validated_and_saved():
    with pytest.raises(ValueError, match="memory_dtype.*Received: .*int32"):
        _lm(memory_dtype="int32")
    backbone = _lm(memory_dtype="float32").backbone
    config = backbone.get_config()
    assert config["memory_dtype"] == "float32"
    restored = TransformerXLBackbone.from_config(config)
    assert restored.memory_spec.dtype == "float32"
    assert TransformerXLBackbone.from_config(
        {**config, "memory_dtype": None}
    ).memory_spec.dtype == ("bfloat16")


def test_checkpoint_restores_a_bfloat16_memory_exactly(tmp_path):
    lm = _lm()
    lm.compile(optimizer="adam")
    tokens = np.random.default_rng(0).integers(0, 20, (3, 2, T))
    tokens = tokens.astype("int32")
    history = StepHistory(tokens_per_step=2 * T)
    checkpoint = TrainingCheckpoint(tmp_path / "checkpoint", history)
    lm.fit(
        tf.data.Dataset.from_tensor_slices((tokens, tokens)),
        callbacks=[history, checkpoint],
        verbose=0,
    )
    carried = lm.memory_state.read()
    assert dtype_name(carried["memory"]) == "bfloat16"
    resumed = _lm()
    resumed.compile(optimizer="adam")
    TrainingCheckpoint.restore(resumed, tmp_path / "checkpoint", batch_size=2)
    restored = resumed.memory_state.read()
    assert dtype_name(restored["memory"]) == "bfloat16"
    for key in carried:
        np.testing.assert_array_equal(
            to_numpy(keras.ops.cast(carried[key], "float32")),
            to_numpy(keras.ops.cast(restored[key], "float32")),
        )
    assert to_numpy(restored["valid_length"]).tolist() == [4, 4]


def test_generate_under_mixed_precision():
    lm = _lm()
    prompt = {
        "token_ids": np.array([[3, 4, 5, 0, 0, 0]], "int32"),
        "padding_mask": np.array([[1, 1, 1, 0, 0, 0]], bool),
    }
    out = lm.generate(prompt, max_length=6, stop_token_ids=None)
    ids = to_numpy(out["token_ids"])
    # The float32 model of the same weights picks the same greedy tokens
    # (its top-1 logit leads the next by more than bfloat16's error here).
    plain = tiny_lm(**PLAIN_LM)
    plain.set_weights(lm.get_weights())
    expected = plain.generate(prompt, max_length=6, stop_token_ids=None)
    assert ids.tolist() == to_numpy(expected["token_ids"]).tolist()
    assert ids[0, :3].tolist() == [3, 4, 5]
