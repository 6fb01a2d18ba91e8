import numpy as np
import pytest
from keras import ops

from keras_txl.layers import MemoryCache
from keras_txl.layers.ablation import DifferentiableMemoryCache
from tests.test_case import gradients
from tests.test_case import to_numpy


@pytest.mark.torch_ok
def test_same_memory_as_memory_cache_but_gradients_flow():
    rng = np.random.default_rng(0)
    memory = rng.normal(size=(2, 3, 5, 4)).astype("float32")
    states = rng.normal(size=(2, 3, 2, 4)).astype("float32")
    valid = np.array([5, 1], "int32")
    weights = ops.convert_to_tensor(
        rng.normal(size=(2, 3, 5, 4)).astype("float32")
    )
    expected = MemoryCache()(memory, valid, states)
    got = DifferentiableMemoryCache()(memory, valid, states)
    np.testing.assert_array_equal(to_numpy(got[0]), to_numpy(expected[0]))
    np.testing.assert_array_equal(to_numpy(got[1]), [5, 3])

    def loss(cache):
        return lambda m, s: ops.sum(cache(m, valid, s)[0] * weights)

    stopped = gradients(loss(MemoryCache()), [memory, states])
    flowing = gradients(loss(DifferentiableMemoryCache()), [memory, states])
    assert all(np.all(g == 0) for g in stopped)
    # The last 3 old slots and both new states reach the new memory.
    np.testing.assert_allclose(
        flowing[0][:, :, 2:], to_numpy(weights)[:, :, :3]
    )
    np.testing.assert_array_equal(flowing[0][:, :, :2], 0.0)
    np.testing.assert_allclose(flowing[1], to_numpy(weights)[:, :, 3:])


def test_config_and_fixed_length():
    cache = DifferentiableMemoryCache(name="cache")
    clone = DifferentiableMemoryCache.from_config(cache.get_config())
    assert clone.get_config() == cache.get_config()
    with pytest.raises(ValueError, match="memory_length"):
        DifferentiableMemoryCache(memory_length=4)
