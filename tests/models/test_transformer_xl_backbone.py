import functools

import keras
import numpy as np
import pytest

from keras_txl.models import TransformerXLBackbone
from tests.test_case import to_numpy
from tests.tiny_models import PAPER_BACKBONE
from tests.tiny_models import tiny_backbone

_backbone = functools.partial(tiny_backbone, **PAPER_BACKBONE)

# The tests below read 12 tokens of batch 2 in segments with a memory of
# 12: on JAX each new shape compiles every eager op of the backbone again
# (about 2.5 CPU-seconds a shape), and tests of the same shapes share them.
B, TOTAL = 2, 12


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "T, clamp, pre_norm",
    [(4, None, False), (3, None, True), (6, 3, False)],
)
def test_segments_with_long_memory_equal_one_full_pass(T, clamp, pre_norm):
    """The invariant of recurrence: with a memory long enough to hold all
    earlier tokens, reading k segments one after another computes exactly
    what one pass over the whole sequence computes (3, 4 and 2 segments of
    the same 12 tokens: one full pass of one shape; batch 1 is
    `test_memory_holds_layer_inputs_fifo`'s)."""
    backbone = _backbone(
        memory_length=TOTAL, clamp_length=clamp, pre_norm=pre_norm
    )
    tokens = np.random.default_rng(T).integers(0, 30, (B, TOTAL))
    full, _ = backbone.call_with_memory(
        tokens, backbone.initial_memory(B, memory_length=0)
    )
    memory = backbone.initial_memory(B)
    outputs = []
    for s in range(TOTAL // T):
        out, memory = backbone.call_with_memory(
            tokens[:, s * T : (s + 1) * T], memory
        )
        outputs.append(to_numpy(out))
    np.testing.assert_allclose(
        np.concatenate(outputs, 1), to_numpy(full), atol=1e-4
    )


def test_empty_memory_equals_no_memory():
    backbone = _backbone()
    tokens = np.random.default_rng(0).integers(0, 30, (B, 4))
    with_slots, _ = backbone.call_with_memory(
        tokens, backbone.initial_memory(B, memory_length=TOTAL)
    )
    without, _ = backbone.call_with_memory(
        tokens, backbone.initial_memory(B, memory_length=0)
    )
    np.testing.assert_allclose(
        to_numpy(with_slots), to_numpy(without), atol=1e-5
    )


def test_memory_changes_the_output():
    backbone = _backbone(memory_length=TOTAL)
    rng = np.random.default_rng(1)
    first, second = rng.integers(0, 30, (2, B, 4))
    _, memory = backbone.call_with_memory(first)
    with_memory, _ = backbone.call_with_memory(second, memory)
    without, _ = backbone.call_with_memory(second)
    assert np.abs(to_numpy(with_memory) - to_numpy(without)).max() > 1e-3


def test_memory_holds_layer_inputs_fifo():
    backbone = _backbone(memory_length=6)
    tokens = np.random.default_rng(2).integers(0, 30, (1, 8))
    _, memory = backbone.call_with_memory(tokens[:, :4])
    _, memory = backbone.call_with_memory(tokens[:, 4:], memory)
    # Entry 0 is the embedding output (scaled by sqrt(hidden_dim)).
    table = to_numpy(backbone.token_embedding.embeddings) * 4.0
    np.testing.assert_allclose(
        to_numpy(memory["memory"])[0, 0], table[tokens[0, 2:]], atol=1e-5
    )
    # Entry 1 is block 0's output, the same as block 0 run once on all 8
    # tokens (causal, no memory): positions 2, 3 from the first segment,
    # 4 to 7 from the second, which read the first through the memory.
    x = table[tokens]  # (1, 8, hidden)
    position = backbone.position_embedding(x)  # (8, hidden)
    layer_1 = to_numpy(backbone.transformer_layers[0](x, position))
    np.testing.assert_allclose(
        to_numpy(memory["memory"])[0, 1], layer_1[0, 2:], atol=1e-4
    )
    assert int(to_numpy(memory["valid_length"])[0]) == 6


def test_evaluation_memory_may_differ_from_training():
    backbone = _backbone(memory_length=4)
    tokens = np.random.default_rng(3).integers(0, 30, (2, 3))
    memory = backbone.initial_memory(2, memory_length=12)
    for _ in range(3):
        out, memory = backbone.call_with_memory(tokens, memory)
    assert tuple(memory["memory"].shape) == (2, 2, 12, 16)
    np.testing.assert_array_equal(to_numpy(memory["valid_length"]), [9, 9])


def test_config_round_trip_and_save(tmp_path):
    backbone = _backbone(clamp_length=5, same_length=True, dropout=0.1)
    clone = TransformerXLBackbone.from_config(backbone.get_config())
    assert clone.get_config() == backbone.get_config()
    tokens = np.random.default_rng(4).integers(0, 30, (2, 4))
    expected, _ = backbone.call_with_memory(tokens)
    path = str(tmp_path / "backbone.keras")
    backbone.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    got, _ = loaded.call_with_memory(tokens)
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), atol=1e-6)


@pytest.mark.parametrize(
    "tokens, error, match",
    [
        (np.array([[1, 2, 30]]), ValueError, r"\[0, vocabulary_size=30\)"),
        (np.array([[-1, 2, 3]]), ValueError, "vocabulary_size"),
        (np.array([[1.0, 2.0]]), TypeError, "integer token ids"),
        (np.array([1, 2, 3]), ValueError, "rank 2"),
    ],
)
def test_bad_token_ids_are_refused(tokens, error, match):
    with pytest.raises(error, match=match):
        _backbone().call_with_memory(tokens)


@pytest.mark.parametrize(
    "shape, match",
    [
        ((3, 2, 4, 16), "batch"),
        ((2, 3, 4, 16), "num_layers"),
        ((2, 2, 4, 15), "hidden_dim"),
        ((2, 4, 16), "shape"),
    ],
)
def test_bad_memory_is_refused(shape, match):
    memory = {
        "memory": np.zeros(shape, "float32"),
        "valid_length": np.zeros((shape[0],), "int32"),
    }
    with pytest.raises(ValueError, match=match):
        _backbone().call_with_memory(np.zeros((2, 3), "int32"), memory)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"vocabulary_size": 0}, "vocabulary_size"),
        ({"hidden_dim": 15}, "even"),
        ({"memory_length": -1}, "memory_length"),
        ({"dropout": 1.5}, "dropout"),
        ({"clamp_length": 0}, "clamp_length"),
        ({"num_layers": 2.0}, "num_layers"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _backbone(**kwargs)
