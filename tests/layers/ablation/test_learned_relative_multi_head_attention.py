import numpy as np
import pytest

from keras_txl.layers.ablation import LearnedRelativeMultiHeadAttention
from tests.test_case import run_layer_round_trip
from tests.test_case import to_numpy


def _layer(max_distance, value_embeddings=True, same_length=False):
    rng = np.random.default_rng(0)
    layer = LearnedRelativeMultiHeadAttention(
        num_heads=2,
        head_dim=4,
        max_distance=max_distance,
        value_embeddings=value_embeddings,
        same_length=same_length,
    )
    layer.build((None, None, 8))
    for var in layer.weights:
        var.assign(rng.normal(scale=0.5, size=var.shape).astype("float32"))
    return layer


def _reference(layer, x, memory, valid):
    """Loop by loop: Shaw et al. (2018) with clipped distances."""
    wq, wk, wv, wo = (
        to_numpy(d.kernel)
        for d in (
            layer.query_dense,
            layer.key_dense,
            layer.value_dense,
            layer.output_dense,
        )
    )
    D = layer.max_distance
    if D is not None:
        ak = to_numpy(layer.key_distance_embeddings)
        av = (
            to_numpy(layer.value_distance_embeddings)
            if layer.value_embeddings
            else np.zeros_like(ak)
        )
    b, T, _ = x.shape
    M = memory.shape[1]
    context = np.concatenate([memory, x], 1)
    out = np.zeros((b, T, 8))
    for bi in range(b):
        q = np.einsum("td,dnh->tnh", x[bi], wq)
        k = np.einsum("kd,dnh->knh", context[bi], wk)
        v = np.einsum("kd,dnh->knh", context[bi], wv)
        for n in range(2):
            for i in range(T):
                keys = [
                    j
                    for j in range(M + T)
                    if j <= M + i
                    and j >= M - valid[bi]
                    and not (layer.same_length and j <= i)
                ]
                scores, values = [], []
                for j in keys:
                    a = 0 if D is None else min(M + i - j, D)
                    key, value = k[j, n], v[j, n]
                    if D is not None:
                        key, value = key + ak[a], value + av[a]
                    scores.append(q[i, n] @ key / 2.0)  # sqrt(head_dim)
                    values.append(value)
                p = np.exp(np.array(scores) - max(scores))
                p /= p.sum()
                out[bi, i] += (p @ np.array(values)) @ wo[n]
    return out


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "T, M, valid, max_distance, value_embeddings, same_length",
    [
        (3, 5, [5, 2], 2, True, False),  # distances up to 7 clip at 2
        (3, 5, [5, 2], 10, False, False),  # no clipping, keys only
        (4, 3, [3, 1], 1, True, True),
        (3, 4, [4, 4], None, True, False),  # no position terms
    ],
)
def test_matches_loop_by_loop_definition(
    T, M, valid, max_distance, value_embeddings, same_length
):
    layer = _layer(max_distance, value_embeddings, same_length)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, T, 8)).astype("float32")
    memory = rng.normal(size=(2, M, 8)).astype("float32")
    valid = np.array(valid, "int32")
    out = layer(x, None, memory=memory, memory_valid_length=valid)
    np.testing.assert_allclose(
        to_numpy(out), _reference(layer, x, memory, valid), atol=1e-4
    )


@pytest.mark.parametrize("max_distance, changes", [(1, False), (8, True)])
def test_keys_beyond_the_clipping_distance_share_one_position(
    max_distance, changes
):
    # Query 0 sits at key position M = 6: memory slots 0..4 lie at
    # distances 6..2, all >= the clipping distance 1. Shuffling their
    # order then cannot change what query 0 computes; with distinct
    # embeddings per distance (max_distance=8) it does.
    layer = _layer(max_distance)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1, 1, 8)).astype("float32")
    memory = rng.normal(size=(1, 6, 8)).astype("float32")
    shuffled = memory.copy()
    shuffled[:, :5] = memory[:, [3, 0, 4, 1, 2]]
    a = to_numpy(layer(x, None, memory=memory))
    b = to_numpy(layer(x, None, memory=shuffled))
    assert (np.abs(a - b).max() > 1e-4) == changes


def test_round_trip():
    run_layer_round_trip(
        LearnedRelativeMultiHeadAttention,
        {"num_heads": 2, "head_dim": 4, "max_distance": 3, "dropout": 0.1},
        [np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")],
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_distance": -1}, "max_distance"),
        ({"max_distance": 2.5}, "max_distance"),
        ({"value_embeddings": "yes"}, "value_embeddings"),
        ({"dropout": 1.0}, "dropout"),
    ],
)
def test_invalid_arguments(kwargs, match):
    args = {"num_heads": 2, "head_dim": 4, "max_distance": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        LearnedRelativeMultiHeadAttention(**args)
