import numpy as np
import pytest

from keras_txl.layers import RelativePositionEmbedding
from tests.layers.reference import sinusoid
from tests.test_case import run_layer_round_trip
from tests.test_case import to_numpy


@pytest.mark.torch_ok
def test_rows_are_distances_from_far_to_near():
    layer = RelativePositionEmbedding(hidden_dim=6)
    x = np.zeros((2, 3, 6), "float32")
    memory = np.zeros((2, 4, 6), "float32")
    out = to_numpy(layer(x, memory))
    np.testing.assert_allclose(
        out, sinusoid(np.arange(6, -1, -1), 6), atol=1e-6
    )


def test_clamp_length_repeats_the_clamped_distance():
    layer = RelativePositionEmbedding(hidden_dim=4, clamp_length=2)
    out = to_numpy(layer(np.zeros((1, 5, 4), "float32")))
    np.testing.assert_allclose(
        out, sinusoid(np.array([2, 2, 2, 1, 0]), 4), atol=1e-6
    )


def test_no_memory_gives_segment_length_rows():
    out = RelativePositionEmbedding(hidden_dim=8)(np.zeros((1, 5, 8)))
    assert tuple(out.shape) == (5, 8)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"hidden_dim": 7}, "even"),
        ({"hidden_dim": 0}, "hidden_dim"),
        ({"hidden_dim": 8, "clamp_length": 0}, "clamp_length"),
        ({"hidden_dim": 8, "clamp_length": 2.5}, "clamp_length"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RelativePositionEmbedding(**kwargs)


def test_round_trip():
    run_layer_round_trip(
        RelativePositionEmbedding,
        {"hidden_dim": 8, "clamp_length": 3},
        [np.zeros((2, 3, 8), "float32"), np.zeros((2, 4, 8), "float32")],
    )
