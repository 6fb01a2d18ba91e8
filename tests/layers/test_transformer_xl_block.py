import numpy as np
import pytest

from keras_txl.layers import RelativePositionEmbedding
from keras_txl.layers import TransformerXLBlock
from tests.test_case import run_layer_round_trip
from tests.test_case import to_numpy


@pytest.mark.parametrize("pre_norm", [False, True])
def test_round_trip(pre_norm):
    run_layer_round_trip(
        TransformerXLBlock,
        {
            "num_heads": 2,
            "head_dim": 4,
            "intermediate_dim": 16,
            "dropout": 0.1,
            "pre_norm": pre_norm,
        },
        [
            np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32"),
            np.random.default_rng(1).normal(size=(3, 8)).astype("float32"),
        ],
    )


def test_pre_norm_normalizes_memory_and_query_alike():
    # With pre-norm the attention reads LayerNorm(concat(memory, x)): a
    # memory scaled by a constant gives the same output.
    block = TransformerXLBlock(
        num_heads=2, head_dim=4, intermediate_dim=16, pre_norm=True
    )
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 3, 8)).astype("float32")
    memory = rng.normal(size=(1, 2, 8)).astype("float32")
    r = RelativePositionEmbedding(8)(x, memory)
    a = to_numpy(block(x, r, memory=memory))
    b = to_numpy(block(x, r, memory=memory * 10.0))
    np.testing.assert_allclose(a, b, atol=1e-4)
    # Control: the output does read the memory. Another memory (or none)
    # of the same scale must change it, so a block ignoring memory fails.
    other = rng.normal(size=(1, 2, 8)).astype("float32")
    c = to_numpy(block(x, r, memory=other))
    assert np.abs(a - c).max() > 1e-2
    none = to_numpy(block(x, RelativePositionEmbedding(8)(x), memory=None))
    assert np.abs(a - none).max() > 1e-2


def test_dropout_is_off_outside_training():
    block = TransformerXLBlock(
        num_heads=2, head_dim=4, intermediate_dim=16, dropout=0.5
    )
    x = np.random.default_rng(0).normal(size=(1, 3, 8)).astype("float32")
    r = RelativePositionEmbedding(8)(x)
    np.testing.assert_allclose(
        to_numpy(block(x, r)), to_numpy(block(x, r)), atol=0
    )
    assert not np.allclose(
        to_numpy(block(x, r, training=True)), to_numpy(block(x, r))
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"intermediate_dim": 0}, "intermediate_dim"),
        ({"attention_dropout": -0.1}, "attention_dropout"),
        ({"layer_norm_epsilon": 0}, "layer_norm_epsilon"),
        ({"pre_norm": 1}, "pre_norm"),
    ],
)
def test_invalid_arguments(kwargs, match):
    args = {"num_heads": 2, "head_dim": 4, "intermediate_dim": 8}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        TransformerXLBlock(**args)


@pytest.mark.torch_ok
@pytest.mark.parametrize("pre_norm", [False, True])
def test_cached_key_values_give_the_same_output(pre_norm):
    # `key_values()` normalizes the states first with pre-norm, as the
    # call does.
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 3, 8)).astype("float32")
    memory = 3.0 * rng.normal(size=(2, 5, 8)).astype("float32")
    position = RelativePositionEmbedding(8)(x, memory)
    block = TransformerXLBlock(
        num_heads=2, head_dim=4, intermediate_dim=16, pre_norm=pre_norm
    )
    expected = block(x, position, memory=memory)
    got = block(
        x,
        None,
        key_values=block.key_values(np.concatenate([memory, x], axis=1)),
        position_keys=block.position_keys(position),
    )
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), atol=1e-5)
