"""A slow, loop-by-loop numpy Transformer-XL attention: the definition that
the fast layer is checked against."""

import numpy as np


def sinusoid(distances, dim):
    inv = 1.0 / (10000 ** (np.arange(0, dim, 2, dtype="float64") / dim))
    angle = np.outer(distances.astype("float64"), inv)
    return np.concatenate([np.sin(angle), np.cos(angle)], -1)


def reference_attention(
    x, memory, valid, wq, wk, wv, wr, wo, u, v, same_length=False, clamp=None
):
    """x (b, T, d), memory (b, M, d), valid (b,), weights as the layer's
    kernels: wq/wk/wv/wr (d, n, h), wo (n, h, d), u/v (n, h)."""
    b, T, _ = x.shape
    M = memory.shape[1]
    K = M + T
    n, h = u.shape
    context = np.concatenate([memory, x], 1)
    out = np.zeros((b, T, wo.shape[-1]))
    for bi in range(b):
        q = np.einsum("td,dnh->tnh", x[bi], wq)
        k = np.einsum("kd,dnh->knh", context[bi], wk)
        val = np.einsum("kd,dnh->knh", context[bi], wv)
        for head in range(n):
            for i in range(T):
                scores = np.full(K, -np.inf)
                for j in range(K):
                    if j > M + i or j < M - valid[bi]:
                        continue  # future key, or empty memory slot
                    if same_length and j <= i:
                        continue
                    dist = M + i - j
                    if clamp is not None:
                        dist = min(dist, clamp)
                    r = sinusoid(np.array([dist]), x.shape[-1])[0] @ wr[:, head]
                    scores[j] = (q[i, head] + u[head]) @ k[j, head] + (
                        q[i, head] + v[head]
                    ) @ r
                scores = scores / np.sqrt(h)
                p = np.exp(scores - scores.max())
                p = p / p.sum()
                out[bi, i] += np.einsum("k,kh,hd->d", p, val[:, head], wo[head])
    return out
