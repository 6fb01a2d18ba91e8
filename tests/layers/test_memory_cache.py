import numpy as np
import pytest
from keras import ops

from keras_txl.layers import MemoryCache
from tests.test_case import gradients
from tests.test_case import run_layer_round_trip
from tests.test_case import to_numpy


@pytest.mark.torch_ok
def test_fifo_keeps_the_last_states_most_recent_last():
    cache = MemoryCache()
    memory = np.zeros((1, 4, 1), "float32")
    valid = np.zeros((1,), "int32")
    seen = []
    for step in range(3):
        states = np.arange(step * 3, step * 3 + 3, dtype="float32")
        seen.extend(states)
        memory, valid = cache(memory, valid, states.reshape(1, 3, 1))
        n = min(len(seen), 4)
        assert int(to_numpy(valid)[0]) == n
        np.testing.assert_array_equal(
            to_numpy(memory)[0, 4 - n :, 0], seen[-n:]
        )


def test_valid_length_is_per_example_and_capped():
    cache = MemoryCache()
    memory = np.zeros((3, 2, 5, 4), "float32")  # (batch, layers, M, dim)
    states = np.ones((3, 2, 2, 4), "float32")
    _, valid = cache(memory, np.array([0, 3, 5], "int32"), states)
    np.testing.assert_array_equal(to_numpy(valid), [2, 5, 5])


def test_longer_target_length_pads_in_front():
    cache = MemoryCache(memory_length=6)
    memory, valid = cache(
        np.full((1, 2, 1), 7.0, "float32"),
        np.array([2], "int32"),
        np.full((1, 3, 1), 9.0, "float32"),
    )
    np.testing.assert_array_equal(to_numpy(memory)[0, :, 0], [0, 7, 7, 9, 9, 9])
    assert int(to_numpy(valid)[0]) == 5


def test_zero_length_memory_stays_empty():
    cache = MemoryCache()
    memory, valid = cache(
        np.zeros((2, 0, 3), "float32"),
        np.zeros((2,), "int32"),
        np.ones((2, 4, 3), "float32"),
    )
    assert tuple(memory.shape) == (2, 0, 3)
    np.testing.assert_array_equal(to_numpy(valid), [0, 0])


@pytest.mark.torch_ok
def test_gradient_is_stopped():
    cache = MemoryCache()
    valid = np.zeros((1,), "int32")

    def loss(memory, states):
        new_memory, _ = cache(memory, valid, states)
        return ops.sum(new_memory**2)

    grads = gradients(
        loss, [np.ones((1, 3, 2), "float32"), np.ones((1, 2, 2), "float32")]
    )
    for g in grads:
        np.testing.assert_array_equal(g, 0.0)


@pytest.mark.torch_ok
@pytest.mark.parametrize("memory_length", [None, 0, 3, 9])
def test_token_count_appends_only_each_rows_tokens(memory_length):
    # A segment padded at its end: each row's new memory is the one of
    # its first `token_count` states alone, slot for slot (a gather).
    cache = MemoryCache(memory_length=memory_length)
    rng = np.random.default_rng(0)
    memory = rng.normal(size=(3, 2, 4, 5)).astype("float32")
    valid = np.array([0, 2, 4], "int32")
    states = rng.normal(size=(3, 2, 6, 5)).astype("float32")
    counts = np.array([6, 1, 3], "int32")
    new, new_valid = cache(memory, valid, states, token_count=counts)
    for row, count in enumerate(counts):
        one, one_valid = cache(
            memory[row : row + 1],
            valid[row : row + 1],
            states[row : row + 1, :, :count],
        )
        np.testing.assert_array_equal(to_numpy(new)[row], to_numpy(one)[0])
        assert to_numpy(new_valid)[row] == to_numpy(one_valid)[0]


def test_mismatched_width_is_refused():
    with pytest.raises(ValueError, match="last dimension"):
        MemoryCache()(
            np.zeros((1, 2, 3), "float32"),
            np.zeros((1,), "int32"),
            np.zeros((1, 2, 4), "float32"),
        )


def test_invalid_memory_length():
    with pytest.raises(ValueError, match="memory_length"):
        MemoryCache(memory_length=-1)


def test_round_trip():
    run_layer_round_trip(
        MemoryCache,
        {"memory_length": 4},
        [
            np.zeros((2, 3, 5), "float32"),
            np.zeros((2,), "int32"),
            np.ones((2, 2, 5), "float32"),
        ],
    )
