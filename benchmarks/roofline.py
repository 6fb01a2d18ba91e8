"""Matmul throughput of this machine, per backend and dtype: the roofline
that model FLOP utilisation (MFU) is measured against.

Times `a @ b` compiled the way the backend runs a model (`jax.jit`,
`tf.function` without XLA, eager torch) at the shapes of the reference
model's largest matmuls and at a large square, and reports the best. Run
one backend per process:

    KERAS_BACKEND=tensorflow PYTHONPATH=. python -m benchmarks.roofline
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402

# (rows, inner, columns): the feed-forward matmul of the reference model
# (batch * T = 2048 rows), the fused K/V projection over T + M = 256 keys,
# and a square one.
SHAPES = ((2048, 256, 1024), (4096, 256, 512), (1024, 1024, 1024))


def _compiled_matmul(dtype):
    """(function, to_backend, sync) for the current backend."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        return (
            jax.jit(jnp.matmul),
            lambda x: jnp.asarray(x, dtype),
            jax.block_until_ready,
        )
    if backend == "tensorflow":
        import tensorflow as tf

        return (
            tf.function(tf.matmul, jit_compile=False),
            lambda x: tf.cast(tf.constant(x), dtype),
            lambda y: y.numpy(),
        )
    import torch

    torch_dtype = getattr(torch, dtype)
    return (
        torch.matmul,
        lambda x: torch.tensor(x).to(torch_dtype),
        lambda y: y,
    )


def matmul_throughput(dtype, shape, seconds=1.0):
    """GFLOP/s of `(m, k) @ (k, n)`: best wall time of several rounds, and
    the same work per process CPU-second x cores."""
    matmul, convert, sync = _compiled_matmul(dtype)
    m, k, n = shape
    rng = np.random.default_rng(0)
    a = convert(rng.standard_normal((m, k)).astype("float32"))
    b = convert(rng.standard_normal((k, n)).astype("float32"))
    sync(matmul(a, b))
    flops = 2.0 * m * k * n
    calls = max(
        1, int(0.1 * seconds / max(_time_one(matmul, a, b, sync), 1e-6))
    )
    best_wall, best_cpu = float("inf"), float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            out = matmul(a, b)
        sync(out)
        best_wall = min(best_wall, (time.perf_counter() - wall) / calls)
        best_cpu = min(best_cpu, (time.process_time() - cpu) / calls)
    cores = os.cpu_count() or 1
    return {
        "gflops_per_s": flops / best_wall / 1e9,
        "gflops_per_cpu_s_x_cores": flops / max(best_cpu, 1e-9) / 1e9 * cores,
    }


def _time_one(matmul, a, b, sync):
    start = time.perf_counter()
    sync(matmul(a, b))
    return time.perf_counter() - start


def peak(dtype, seconds=1.0, shapes=SHAPES):
    """Best throughput over `shapes`, with the per-shape numbers."""
    per_shape = {
        "x".join(map(str, shape)): matmul_throughput(dtype, shape, seconds)
        for shape in shapes
    }
    best = max(per_shape.values(), key=lambda r: r["gflops_per_s"])
    return {**best, "per_shape": per_shape}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--dtypes", default="float32,bfloat16", help="comma separated"
    )
    parser.add_argument("--seconds", type=float, default=1.5)
    args = parser.parse_args(argv)
    for dtype in args.dtypes.split(","):
        common.emit(
            {
                "benchmark": "roofline",
                "dtype": dtype,
                **peak(dtype, args.seconds),
                **common.backend_versions(),
                **common.machine_info(),
            }
        )


if __name__ == "__main__":
    main()
