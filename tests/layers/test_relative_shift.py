import numpy as np
import pytest

from keras_txl.layers import relative_shift
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
