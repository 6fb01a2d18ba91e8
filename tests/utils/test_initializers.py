import keras
import numpy as np
import pytest

from keras_txl.layers import RelativeMultiHeadAttention
from keras_txl.utils.initializers import fresh_initializer


def _kernels(kernel_initializer):
    """The query, key and value kernels of a small attention layer."""
    layer = RelativeMultiHeadAttention(
        num_heads=2, head_dim=4, kernel_initializer=kernel_initializer
    )
    layer.build((None, None, 8), (None, 8))
    dense = (layer.query_dense, layer.key_dense, layer.value_dense)
    return [keras.ops.convert_to_numpy(d.kernel) for d in dense]


def _distinct(arrays):
    return all(
        not np.array_equal(a, b)
        for i, a in enumerate(arrays)
        for b in arrays[i + 1 :]
    )


@pytest.mark.torch_ok
def test_what_a_seed_means_for_the_weights_of_one_layer():
    # No seed: each weight a seed of its own, the whole repeated by
    # keras.utils.set_random_seed.
    keras.utils.set_random_seed(1)
    unseeded = _kernels(keras.initializers.RandomNormal())
    assert _distinct(unseeded)
    keras.utils.set_random_seed(1)
    for a, b in zip(unseeded, _kernels(keras.initializers.RandomNormal())):
        np.testing.assert_array_equal(a, b)

    # A SeedGenerator: each weight the generator's next draw, the same
    # model again from a generator of the same seed.
    def generated():
        seed = keras.random.SeedGenerator(5)
        return _kernels(keras.initializers.RandomNormal(seed=seed))

    drawn = generated()
    assert _distinct(drawn)
    for a, b in zip(drawn, generated()):
        np.testing.assert_array_equal(a, b)

    # An integer: Keras's meaning, the same values at every call.
    seeded = _kernels(keras.initializers.RandomNormal(seed=5))
    for kernel in seeded[1:]:
        np.testing.assert_array_equal(kernel, seeded[0])

    # What is not a Keras initializer is left to Keras.
    assert fresh_initializer("glorot_uniform") == "glorot_uniform"
