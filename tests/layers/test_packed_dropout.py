import keras
import numpy as np
import pytest

from keras_txl.layers.packed_dropout import PackedDropout
from tests.test_case import run_layer_round_trip
from tests.test_case import to_numpy

# 2**20 decisions: the kept fraction's standard deviation is below 5e-4.
SHAPE = (4, 8, 128, 256)


def _kept(layer, shape=SHAPE):
    out = to_numpy(layer(np.ones(shape, "float32"), training=True))
    return out != 0, out


@pytest.mark.torch_ok
@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_keeps_the_rounded_probability_and_the_expectation(rate):
    layer = PackedDropout(rate, seed=1)
    kept, out = _kept(layer)
    p = layer.keep_probability
    packed = round((1 - rate) * 2048) / 2048
    per_element = keras.backend.backend() in ("jax", "torch")
    assert p == (1 - rate if per_element else packed)
    assert abs(p - (1 - rate)) <= 0.01 * min(rate, 1 - rate)
    sigma = np.sqrt(p * (1 - p) / kept.size)
    assert abs(kept.mean() - p) < 5 * sigma
    # Kept elements are scaled by the exact inverse: E[out] = input.
    np.testing.assert_allclose(out[kept], 1 / p, rtol=1e-6)
    assert abs(out.mean() - 1.0) < 5 * sigma / p


@pytest.mark.torch_ok
def test_the_two_decisions_of_a_draw_are_independent():
    # Decisions i and i + size / 2 come from the same random number.
    kept, _ = _kept(PackedDropout(0.5, seed=2), (2**20,))
    first, second = kept[: 2**19], kept[2**19 :]
    assert abs(np.corrcoef(first, second)[0, 1]) < 0.01
    both = (first & second).mean()
    assert abs(both - 0.25) < 5 * np.sqrt(0.25 * 0.75 / 2**19)


@pytest.mark.torch_ok
def test_seeded_streams_repeat_and_advance():
    a, b = PackedDropout(0.3, seed=7), PackedDropout(0.3, seed=7)
    first_a, _ = _kept(a, (64, 64))
    first_b, _ = _kept(b, (64, 64))
    np.testing.assert_array_equal(first_a, first_b)
    second_a, _ = _kept(a, (64, 64))
    assert (second_a != first_a).mean() > 0.2


@pytest.mark.torch_ok
def test_noise_shape_shares_decisions_and_odd_sizes_work():
    layer = PackedDropout(0.5, noise_shape=(None, 1, 7), seed=3)
    _, out = _kept(layer, (3, 5, 7))  # 21 decisions: an odd count
    np.testing.assert_array_equal(out, np.broadcast_to(out[:, :1], out.shape))
    assert set(np.unique(out)) <= {0.0, 2.0}


@pytest.mark.torch_ok
def test_inference_and_rate_zero_are_the_identity():
    x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    np.testing.assert_array_equal(to_numpy(PackedDropout(0.5)(x)), x)
    np.testing.assert_array_equal(
        to_numpy(PackedDropout(0.0)(x, training=True)), x
    )


@pytest.mark.torch_ok
@pytest.mark.parametrize("rate", [0.01, 0.999])
def test_rates_that_would_round_far_draw_per_element(rate):
    """0.01 would become 20 / 2048 = 0.00977 (2.3% off): Keras's
    per-element dropout instead, with the exact rate."""
    layer = PackedDropout(rate, seed=4)
    assert layer.keep_probability == 1 - rate
    kept, out = _kept(layer)
    p = 1 - rate
    assert abs(kept.mean() - p) < 5 * np.sqrt(p * (1 - p) / kept.size)
    np.testing.assert_allclose(out[kept], 1 / p, rtol=1e-6)


def test_rate_one_drops_everything():
    _, out = _kept(PackedDropout(1.0), (8, 8))
    assert not out.any()


def test_state_is_kerass_seed_generator_state():
    """The random state is the variable `keras.layers.Dropout` has, at the
    same name, so a training checkpoint written before this layer
    replaced Keras's (its `random_states`, found by that path) restores
    into it, and the state advances once per call as Keras's."""

    def variables(dropout_class):
        inputs = keras.Input((4,))
        layer = dropout_class(0.2, seed=5, name="drop")
        keras.Model(inputs, layer(inputs))
        start = to_numpy(layer.seed_generator.state).copy()
        layer(np.ones((2, 4), "float32"), training=True)
        names = [v.path.split("/")[-1] for v in layer.variables]
        return names, start, to_numpy(layer.seed_generator.state)

    keras_paths, keras_start, keras_after = variables(keras.layers.Dropout)
    paths, start, after = variables(PackedDropout)
    assert paths == keras_paths == ["seed_generator_state"]
    np.testing.assert_array_equal(start, keras_start)
    np.testing.assert_array_equal(after, keras_after)


def test_round_trip():
    run_layer_round_trip(
        PackedDropout,
        {"rate": 0.25, "noise_shape": (None, 1, 6), "seed": 9},
        [np.ones((2, 3, 6), "float32")],
    )
