import numpy as np
import pytest
from keras import ops

from keras_txl.layers.relative_multi_head_attention import _shift_padded
from keras_txl.layers.relative_multi_head_attention import relative_shift
from tests.test_case import gradients
from tests.test_case import to_numpy


@pytest.mark.torch_ok
@pytest.mark.parametrize("T, M", [(1, 0), (3, 0), (3, 5), (4, 4), (5, 2)])
def test_relative_shift_aligns_distances(T, M):
    K = M + T
    rng = np.random.default_rng(T * 10 + M)
    scores = rng.normal(size=(2, 3, T, K)).astype("float32")
    shifted = to_numpy(relative_shift(scores))
    for i in range(T):
        for j in range(K):
            if j <= M + i:  # the causal region, where the result is defined
                # row k of the position scores holds distance K - 1 - k;
                # the distance of query i (at M + i) to key j is M + i - j.
                k = K - 1 - (M + i - j)
                assert shifted[0, 1, i, j] == scores[0, 1, i, k]


def _source_index(T, K, shift):
    """Which input entry each output entry of `shift` reads (-1: the zero
    pad), found by shifting the (1-based) indices themselves."""
    index = np.arange(1, T * K + 1, dtype="float32").reshape(1, 1, T, K)
    return to_numpy(shift(index)).astype("int64").reshape(T, K) - 1


@pytest.mark.torch_ok
@pytest.mark.parametrize("leading, T, M", [((2,), 1, 0), ((2, 3, 2), 3, 5)])
def test_shift_of_padded_scores_equals_relative_shift(leading, T, M):
    # The attention's matmul writes the zero column itself (a zero row in
    # front of the position embeddings); `_shift_padded` must then give
    # exactly what `relative_shift` gives on the unpadded scores.
    K = M + T
    rng = np.random.default_rng(T + M + len(leading))
    scores = rng.normal(size=leading + (T, K)).astype("float32")
    padded = np.concatenate([np.zeros(leading + (T, 1), "float32"), scores], -1)
    expected = to_numpy(relative_shift(scores.reshape((-1, 1, T, K))))
    got = to_numpy(_shift_padded(padded, K))
    assert got.shape == leading + (T, K)
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


@pytest.mark.torch_ok
@pytest.mark.parametrize("T, M", [(3, 0), (5, 2)])
def test_relative_shift_gradient_routes_each_entry_back(T, M):
    # The shift only moves entries, so d sum(w * shift(s)) / ds adds each
    # w[i, j] onto the entry that output (i, j) read. TensorFlow's gradient
    # of a strided slice was the slow path this shift avoids; check that
    # the gradient of the fast path is still this routing on every backend.
    K = M + T
    rng = np.random.default_rng(7 * T + M)
    scores = rng.normal(size=(1, 1, T, K)).astype("float32")
    weights = rng.normal(size=(1, 1, T, K)).astype("float32")
    (grad,) = gradients(
        lambda s: ops.sum(relative_shift(s) * ops.convert_to_tensor(weights)),
        [scores],
    )
    source = _source_index(T, K, relative_shift)
    expected = np.zeros(T * K, "float64")
    for (i, j), k in np.ndenumerate(source):
        if k >= 0:
            expected[k] += weights[0, 0, i, j]
    np.testing.assert_allclose(grad.reshape(-1), expected, rtol=1e-6, atol=1e-6)
