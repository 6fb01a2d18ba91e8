"""JAX attention core: layouts of its products, measured side by side.

The core of `RelativeMultiHeadAttention` (the scores of eq. 4 of Dai et
al., the masked float32 softmax, dropout, probabilities x values) run
forward and backward under `jax.jit` at the reference size (batch 16,
8 heads x 32, T = M = 128), with the projected queries, keys, values and
position keys as inputs. Each variant is first checked equal to
`current` (the library's layout) to 1e-5 without dropout, then all are
timed interleaved, round by round, in one process so that every variant
sees the same machine load (`benchmarks.attention_variants.interleave_rounds`):

- `current`: the library's `_compute_attention`, heads first (heads,
  batch, T, head_dim), the position product one (batch * T, head_dim) x
  (head_dim, K + 1) matmul per head, the shift one slice
  (`_shift_padded`);
- `folded`: heads folded into the batch, one contiguous (heads * batch,
  T, head_dim) layout and 3-D batched products;
- `batch_first`: (batch, heads, T, head_dim), the layout of the
  projections' output without a transpose; the position product an
  einsum against keys shared by the batch;
- `one_product`: the content and position terms in ONE batched product
  per (head, example): queries `[q + u, q + v]` (T, 2 head_dim) against
  the block matrix `[[K, 0], [0, R]]` (2 head_dim, 2K + 1): twice the
  multiply-adds (half are zeros), inner dimension 64 instead of 32;
- `packed_dropout`: `current` with two 16-bit dropout decisions per
  32-bit threefry number instead of `jax.random.bernoulli`'s one (a
  different random stream: equal to `current` without dropout only);
- `randint_dropout`: the same with `jax.random.randint` (as
  `keras.random.randint` calls it): two 15-bit decisions per draw in
  [0, 2**30), a form a layer could write in `keras.random`/`keras.ops`;
- `dot_product_attention`: `jax.nn.dot_product_attention` (XLA
  implementation) on (batch, T, heads, head_dim), the content term
  inside it and the shifted position term passed as `bias`. It takes no
  dropout, so it is timed only with `--dropout 0`.

Prints one JSON line per variant: process CPU and wall ms per forward +
backward (medians over rounds), the spread of the CPU times, and the
ratio of each to `current`'s CPU time in the same run.

    PYTHONPATH=. python -m benchmarks.attention_layouts [--dropout 0.1]
"""

import argparse
import math
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.attention_variants import interleave_rounds  # noqa: E402
from keras_txl.layers.relative_multi_head_attention import _shift_padded  # noqa: E402

MASK_VALUE = -1e9


def _allowed(t, k):
    i = jnp.arange(t)[:, None]
    j = jnp.arange(k)[None, :]
    return j <= i + (k - t)  # (T, K), causal over memory + segment


def _dropout(probs, rate, key):
    if rate == 0.0:
        return probs
    keep = jax.random.bernoulli(key, 1.0 - rate, probs.shape)
    return jnp.where(keep, probs / (1.0 - rate), 0.0)


def _packed_dropout(probs, rate, key):
    """Dropout with two 16-bit decisions per 32-bit random number: half
    the threefry work of `jax.random.bernoulli` (keep probability
    rounded to a multiple of 2**-16)."""
    if rate == 0.0:
        return probs
    size = probs.size
    bits = jax.random.bits(key, ((size + 1) // 2,), jnp.uint32)
    halves = jnp.concatenate([bits >> 16, bits & 0xFFFF])[:size]
    threshold = round((1.0 - rate) * 65536)
    keep = (halves < threshold).reshape(probs.shape)
    return jnp.where(keep, probs / (1.0 - rate), 0.0)


def _randint_dropout(probs, rate, key):
    """Dropout from `jax.random.randint` (what `keras.random.randint`
    calls), two 15-bit decisions per 30-bit draw: expressible in
    `keras.random` and `keras.ops` (keep probability rounded to a
    multiple of 2**-15)."""
    if rate == 0.0:
        return probs
    size = probs.size
    draws = jax.random.randint(key, ((size + 1) // 2,), 0, 1 << 30)
    halves = jnp.concatenate([draws >> 15, draws & 0x7FFF])[:size]
    threshold = round((1.0 - rate) * 32768)
    keep = (halves < threshold).reshape(probs.shape)
    return jnp.where(keep, probs / (1.0 - rate), 0.0)


def _softmax(scores, allowed):
    return jax.nn.softmax(jnp.where(allowed, scores, MASK_VALUE), axis=-1)


def current(q, k, v, r, u, w, rate, key, dropout=_dropout):
    """Heads first: q (n, b, T, h), k/v (n, b, K, h), r (n, h, K + 1)."""
    n, b, t, h = q.shape
    kl = k.shape[2]
    scale = 1.0 / math.sqrt(h)
    cq = (q + u[:, None, None, :]) * scale
    pq = (q + w[:, None, None, :]) * scale
    ac = jnp.matmul(cq, jnp.swapaxes(k, -1, -2))  # (n, b, T, K)
    bd = jnp.matmul(pq.reshape(n, b * t, h), r)  # (n, b*T, K+1)
    bd = _shift_padded(bd.reshape(n, b, t, kl + 1), kl)
    probs = _softmax(ac + bd, _allowed(t, kl))
    return jnp.matmul(dropout(probs, rate, key), v)  # (n, b, T, h)


def packed_dropout(q, k, v, r, u, w, rate, key):
    """`current` with `_packed_dropout`."""
    return current(q, k, v, r, u, w, rate, key, dropout=_packed_dropout)


def randint_dropout(q, k, v, r, u, w, rate, key):
    """`current` with `_randint_dropout`."""
    return current(q, k, v, r, u, w, rate, key, dropout=_randint_dropout)


def folded(q, k, v, r, u, w, rate, key):
    """(n * b, T, h): heads folded into one contiguous batch axis."""
    n, b, t, h = q.shape
    kl = k.shape[2]
    scale = 1.0 / math.sqrt(h)
    q3 = q.reshape(n * b, t, h)
    cq = (q3 + jnp.repeat(u, b, axis=0)[:, None, :]) * scale
    pq = (q3 + jnp.repeat(w, b, axis=0)[:, None, :]) * scale
    ac = jax.lax.dot_general(
        cq, k.reshape(n * b, kl, h), (((2,), (2,)), ((0,), (0,)))
    )  # (n*b, T, K)
    bd = jnp.matmul(pq.reshape(n, b * t, h), r)  # (n, b*T, K+1)
    bd = _shift_padded(bd.reshape(n * b, t, kl + 1), kl)
    probs = _softmax(ac + bd, _allowed(t, kl))
    out = jnp.matmul(_dropout(probs, rate, key), v.reshape(n * b, kl, h))
    return out.reshape(n, b, t, h)


def batch_first(q, k, v, r, u, w, rate, key):
    """(b, n, T, h) in, (b, n, T, h) out."""
    b, n, t, h = q.shape
    kl = k.shape[2]
    scale = 1.0 / math.sqrt(h)
    cq = (q + u[None, :, None, :]) * scale
    pq = (q + w[None, :, None, :]) * scale
    ac = jnp.matmul(cq, jnp.swapaxes(k, -1, -2))  # (b, n, T, K)
    bd = jnp.einsum("bnth,nhk->bntk", pq, r)  # (b, n, T, K+1)
    bd = _shift_padded(bd, kl)
    probs = _softmax(ac + bd, _allowed(t, kl))
    return jnp.matmul(_dropout(probs, rate, key), v)


def one_product(q, k, v, r, u, w, rate, key):
    """Heads first; [q+u, q+v] x [[K^T, 0], [0, R]] in one product."""
    n, b, t, h = q.shape
    kl = k.shape[2]
    scale = 1.0 / math.sqrt(h)
    cq = (q + u[:, None, None, :]) * scale
    pq = (q + w[:, None, None, :]) * scale
    both = jnp.concatenate([cq, pq], axis=-1)  # (n, b, T, 2h)
    kt = jnp.swapaxes(k, -1, -2)  # (n, b, h, K)
    rb = jnp.broadcast_to(r[:, None], (n, b, h, kl + 1))
    top = jnp.concatenate([kt, jnp.zeros_like(rb)], axis=-1)
    bottom = jnp.concatenate([jnp.zeros_like(kt), rb], axis=-1)
    blocks = jnp.concatenate([top, bottom], axis=-2)  # (n, b, 2h, 2K+1)
    s = jnp.matmul(both, blocks)  # (n, b, T, 2K+1)
    ac = s[..., :kl]
    bd = _shift_padded(s[..., kl:], kl)
    probs = _softmax(ac + bd, _allowed(t, kl))
    return jnp.matmul(_dropout(probs, rate, key), v)


def dot_product_attention(q, k, v, r, u, w, rate, key):
    """(b, T, n, h) in and out; the position term as `bias`."""
    if rate:
        raise ValueError("dot_product_attention takes no dropout")
    b, t, n, h = q.shape
    kl = k.shape[1]
    scale = 1.0 / math.sqrt(h)
    pq = (q + w[None, None]) * scale  # (b, T, n, h)
    bd = jnp.einsum("btnh,nhk->bntk", pq, r)  # (b, n, T, K+1)
    bd = _shift_padded(bd, kl)  # (b, n, T, K)
    return jax.nn.dot_product_attention(
        q + u[None, None],
        k,
        v,
        bias=bd,
        mask=_allowed(t, kl)[None, None],
        scale=scale,
        implementation="xla",
    )


# Each variant's input layout from the heads-first one, and its output
# back to heads first.
LAYOUTS = {
    "current": (lambda x: x, lambda y: y),
    "folded": (lambda x: x, lambda y: y),
    "batch_first": (
        lambda x: jnp.swapaxes(x, 0, 1),
        lambda y: jnp.swapaxes(y, 0, 1),
    ),
    "one_product": (lambda x: x, lambda y: y),
    "packed_dropout": (lambda x: x, lambda y: y),
    "randint_dropout": (lambda x: x, lambda y: y),
    "dot_product_attention": (
        lambda x: jnp.transpose(x, (1, 2, 0, 3)),
        lambda y: jnp.transpose(y, (2, 0, 1, 3)),
    ),
}
VARIANTS = {
    "current": current,
    "folded": folded,
    "batch_first": batch_first,
    "one_product": one_product,
    "packed_dropout": packed_dropout,
    "randint_dropout": randint_dropout,
    "dot_product_attention": dot_product_attention,
}


def inputs(batch, heads, head_dim, t, m, seed=0):
    """Heads-first arrays: q, k, v, r, u, w, and the output cotangent."""
    kl = t + m
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return jnp.asarray(rng.standard_normal(shape).astype("float32"))

    r = normal(heads, head_dim, kl + 1).at[:, :, 0].set(0.0)
    return (
        normal(heads, batch, t, head_dim),
        normal(heads, batch, kl, head_dim),
        normal(heads, batch, kl, head_dim),
        r,
        normal(heads, head_dim),
        normal(heads, head_dim),
        normal(heads, batch, t, head_dim),
    )


def forward_backward(name, rate):
    """A jitted (q, k, v, r, u, w, cotangent, key) -> (out, grads) in the
    variant's own layout; out and grads of q, k, v, r, u, w."""
    fn = VARIANTS[name]
    to, _ = LAYOUTS[name]

    def loss(q, k, v, r, u, w, cot, key):
        return jnp.sum(fn(q, k, v, r, u, w, rate, key) * cot)

    grad = jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4, 5))
    return jax.jit(grad), to


def max_difference(name, data):
    """Largest |difference| of the loss and the gradients of `name` from
    `current`'s, without dropout, relative to each tensor's scale."""
    key = jax.random.key(0)
    results = {}
    for variant in ("current", name):
        step, to = forward_backward(variant, 0.0)
        q, k, v, r, u, w, cot = data
        loss, grads = step(to(q), to(k), to(v), r, u, w, to(cot), key)
        back = LAYOUTS[variant][1]
        grads = [back(g) for g in grads[:3]] + list(grads[3:])
        results[variant] = [loss] + grads
    worst = 0.0
    for a, b in zip(results["current"], results[name]):
        a, b = np.asarray(a), np.asarray(b)
        scale = max(1.0, float(np.max(np.abs(a))))
        worst = max(worst, float(np.max(np.abs(a - b))) / scale)
    return worst


def runner(name, data, rate):
    step, to = forward_backward(name, rate)
    q, k, v, r, u, w, cot = data
    args = (to(q), to(k), to(v), r, u, w, to(cot))
    state = {"key": jax.random.key(1)}

    def run():
        state["key"], key = jax.random.split(state["key"])
        jax.block_until_ready(step(*args, key))

    run()  # compile
    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--memory", type=int, default=128)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS
    )
    args = parser.parse_args(argv)
    data = inputs(
        args.batch, args.heads, args.head_dim, args.length, args.memory
    )
    names = ["current"] + [n for n in args.variants if n != "current"]
    if args.dropout:
        names = [n for n in names if n != "dot_product_attention"]
    differences = {name: max_difference(name, data) for name in names}
    for name, difference in differences.items():
        if difference > 1e-5:
            raise SystemExit(
                f"{name} differs from current by {difference:.2e} (> 1e-5)"
            )
    runners = {name: runner(name, data, args.dropout) for name in names}
    cpu, wall = interleave_rounds(runners, args.rounds, args.calls)
    base = float(np.median(cpu["current"]))
    for name in names:
        c = np.asarray(cpu[name])
        common.emit(
            {
                "benchmark": "attention_layouts",
                "variant": name,
                "batch": args.batch,
                "heads": args.heads,
                "head_dim": args.head_dim,
                "length": args.length,
                "memory": args.memory,
                "dropout": args.dropout,
                "cpu_ms": 1000 * float(np.median(c)),
                "cpu_ms_min": 1000 * float(c.min()),
                "cpu_ms_max": 1000 * float(c.max()),
                "wall_ms": 1000 * float(np.median(wall[name])),
                "cpu_vs_current": float(np.median(c)) / base,
                "max_difference": differences[name],
                "rounds": args.rounds,
            }
        )


if __name__ == "__main__":
    main()
