"""Before/after of the attention's speed changes, measured side by side.

`original` is the first implementation of `RelativeMultiHeadAttention`
(commit 5972056 of this repository): scores laid out (batch, heads, T, K)
through `einsum("bqnh,bknh->bnqk")` and `einsum("bqnh,knh->bnqk")`, the
relative shift as pad + reshape + strided slice, K and V from two
projections, the 1/sqrt(d) scale on the scores. `current` is the layer as
shipped. Both have the same weights and compute the same function.

Two measurements, each interleaved round by round so that both variants
see the same machine load:

1. `shift`: forward + backward of the relative shift alone on a
   (heads, batch, T, K) score tensor of the reference preset: the original
   pad + strided slice, `relative_shift` (pad + slice) and the attention's
   `_shift_padded` (the zero column written by the position matmul).
2. `model`: `train_on_batch` and `test_on_batch` of the whole language
   model (reference preset) with each attention class.

Times are process CPU time (the work done, robust to other processes on the
machine) and wall time. Prints one JSON line per variant.

    KERAS_BACKEND=tensorflow PYTHONPATH=. \
        python -m benchmarks.attention_variants
"""

import argparse
import math
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from benchmarks import common  # noqa: E402
from keras_txl.layers import relative_multi_head_attention as attention  # noqa: E402,E501
from keras_txl.layers import transformer_xl_block  # noqa: E402


def original_relative_shift(scores):
    """The first shift: pad, reshape, strided slice, reshape."""
    batch, heads, query_length, key_length = ops.shape(scores)
    padded = ops.pad(scores, [[0, 0], [0, 0], [0, 0], [1, 0]])
    padded = ops.reshape(padded, (batch, heads, key_length + 1, query_length))
    shifted = padded[:, :, 1:, :]
    return ops.reshape(shifted, (batch, heads, query_length, key_length))


class OriginalAttention(attention.RelativeMultiHeadAttention):
    """`RelativeMultiHeadAttention.call` as first written (same weights)."""

    def call(
        self,
        query,
        position_embedding,
        memory=None,
        memory_valid_length=None,
        attention_mask=None,
        use_causal_mask=True,
        return_attention_scores=False,
        training=None,
    ):
        query = ops.cast(query, self.compute_dtype)
        if memory is None:
            context = query
        else:
            memory = ops.cast(memory, self.compute_dtype)
            context = ops.concatenate([memory, query], axis=1)
        query_length = ops.shape(query)[1]
        key_length = ops.shape(context)[1]
        q = self.query_dense(query)  # (batch, T, heads, head_dim)
        k = self.key_dense(context)  # (batch, K, heads, head_dim)
        v = self.value_dense(context)  # (batch, K, heads, head_dim)
        r = self.position_dense(
            ops.cast(position_embedding, self.compute_dtype)
        )  # (K, heads, head_dim)
        content_bias = ops.cast(self.content_bias, q.dtype)
        position_bias = ops.cast(self.position_bias, q.dtype)
        content_scores = ops.einsum("bqnh,bknh->bnqk", q + content_bias, k)
        position_scores = ops.einsum("bqnh,knh->bnqk", q + position_bias, r)
        position_scores = original_relative_shift(position_scores)
        scores = ops.cast(content_scores, "float32") + ops.cast(
            position_scores, "float32"
        )  # (batch, heads, T, K)
        scores = scores * (1.0 / math.sqrt(self.head_dim))
        allowed = self._mask(
            query_length,
            key_length,
            memory_valid_length,
            attention_mask,
            use_causal_mask,
        )[:, None]  # (batch or 1, 1, T, K)
        scores = ops.where(allowed, scores, attention._MASK_VALUE)
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        dropped = self.dropout_layer(probs, training=training)
        attended = ops.einsum("bnqk,bknh->bqnh", dropped, v)
        output = self.output_dense(attended)  # (batch, T, output_dim)
        if return_attention_scores:
            return output, probs
        return output


VARIANTS = {
    "original": OriginalAttention,
    "current": attention.RelativeMultiHeadAttention,
}


def _backward_timer(fn, array):
    """A callable running forward + backward of sum(fn(x)^2) on the current
    backend, compiled as the backend runs models."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        grad = jax.jit(jax.grad(lambda x: ops.sum(ops.square(fn(x)))))
        x = ops.convert_to_tensor(array)
        return lambda: jax.block_until_ready(grad(x))
    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.constant(array)

        @tf.function(jit_compile=False)
        def grad():
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(tf.square(fn(x)))
            return tape.gradient(loss, x)

        return lambda: grad().numpy()
    import torch

    x = torch.tensor(array, requires_grad=True)

    def grad():
        (g,) = torch.autograd.grad(torch.sum(fn(x) ** 2), [x])
        return g

    return grad


def interleave_rounds(runners, rounds, calls):
    """Per runner, the CPU and wall seconds per call of every round,
    the runners measured in alternation: `(cpu, wall)`, dicts of lists."""
    cpu = {name: [] for name in runners}
    wall = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            c, w = time.process_time(), time.perf_counter()
            for _ in range(calls):
                run()
            cpu[name].append((time.process_time() - c) / calls)
            wall[name].append((time.perf_counter() - w) / calls)
    return cpu, wall


def interleave(runners, rounds, calls):
    """Median CPU and wall seconds per call of each runner, measured in
    alternation (`interleave_rounds`)."""
    cpu, wall = interleave_rounds(runners, rounds, calls)
    return {
        name: (float(np.median(cpu[name])), float(np.median(wall[name])))
        for name in runners
    }


def interleave_training(models, x, y, rounds, calls):
    """`interleave` of `train_on_batch` of each model (a dict), on
    ordered segments `x`, `y` taken in turn (after the first two, which
    the caller's warm-up used)."""
    position = {"i": 2}

    def step(lm):
        def run():
            i = position["i"] % len(x)
            position["i"] += 1
            lm.train_on_batch(x[i], y[i])

        return run

    return interleave(
        {name: step(lm) for name, lm in models.items()}, rounds, calls
    )


def emit_training_steps(timings, baseline, tokens, fields):
    """One RESULT line per variant of `interleave_training`'s `timings`:
    CPU and wall ms per step, tokens per CPU-second x cores, and the CPU
    time as a ratio to `baseline`'s, with `fields` added."""
    cores = os.cpu_count() or 1
    for name, (cpu, wall) in timings.items():
        common.emit(
            {
                **fields,
                "variant": name,
                "cpu_ms_per_step": 1000 * cpu,
                "wall_ms_per_step": 1000 * wall,
                "tokens_per_cpu_s_x_cores": tokens / cpu * cores,
                f"cpu_time_vs_{baseline.replace(' ', '_')}": (
                    cpu / timings[baseline][0]
                ),
            }
        )


def shift_benchmark(preset, rounds):
    heads, batch = preset["num_heads"], preset["batch_size"]
    t = preset["segment_length"]
    k = t + preset["memory_length"]
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((heads, batch, t, k)).astype("float32")
    padded = np.concatenate([np.zeros_like(scores[..., :1]), scores], -1)
    runners = {
        "original pad + strided slice": _backward_timer(
            original_relative_shift, scores
        ),
        "relative_shift (pad + slice)": _backward_timer(
            attention.relative_shift, scores
        ),
        "attention (_shift_padded)": _backward_timer(
            lambda p: attention._shift_padded(p, k), padded
        ),
        "identity (floor)": _backward_timer(lambda s: s, scores),
    }
    for run in runners.values():
        run()
    return interleave(runners, rounds, calls=5)


def model_benchmark(preset, dtype, jit, dropout, rounds):
    from benchmarks.train_eval import build_model

    batch, length = preset["batch_size"], preset["segment_length"]
    x, y = common.ordered_segments(common.byte_corpus(), batch, length)
    models = {}
    for name, cls in VARIANTS.items():
        transformer_xl_block.RelativeMultiHeadAttention = cls
        try:
            lm = build_model(preset, dtype, dropout, jit, 1)
            for i in range(2):  # compile both functions
                lm.train_on_batch(x[i], y[i])
                lm.test_on_batch(x[i], y[i])
        finally:
            transformer_xl_block.RelativeMultiHeadAttention = VARIANTS[
                "current"
            ]
        models[name] = lm
    position = {"i": 2}

    def step(lm, train):
        def run():
            i = position["i"] % len(x)
            position["i"] += 1
            if train:
                lm.train_on_batch(x[i], y[i])
            else:
                lm.test_on_batch(x[i], y[i])

        return run

    runners = {}
    for name, lm in models.items():
        runners[(name, "train")] = step(lm, True)
        runners[(name, "eval")] = step(lm, False)
    return interleave(runners, rounds, calls=3)


def main(argv=None):
    parser = common.add_common_args(
        argparse.ArgumentParser(description=__doc__)
    )
    parser.add_argument("--jit", default="auto")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--what", default="shift,model", help="shift and/or model"
    )
    args = parser.parse_args(argv)
    from benchmarks.train_eval import parse_jit

    preset = common.PRESETS[args.preset]
    tokens = preset["batch_size"] * preset["segment_length"]
    cores = os.cpu_count() or 1
    base = {
        "benchmark": "attention_variants",
        "preset": args.preset,
        **common.backend_versions(),
        **common.machine_info(),
    }
    if "shift" in args.what:
        for name, (cpu, wall) in shift_benchmark(preset, args.rounds).items():
            common.emit(
                {
                    **base,
                    "part": "shift",
                    "variant": name,
                    "dtype": "float32",
                    "cpu_ms": 1000 * cpu,
                    "wall_ms": 1000 * wall,
                }
            )
    if "model" in args.what:
        timings = model_benchmark(
            preset, args.dtype, parse_jit(args.jit), args.dropout, args.rounds
        )
        for (name, phase), (cpu, wall) in timings.items():
            common.emit(
                {
                    **base,
                    "part": "model",
                    "variant": name,
                    "phase": phase,
                    "dtype": args.dtype,
                    "jit_compile": args.jit,
                    "dropout": args.dropout,
                    "cpu_ms_per_step": 1000 * cpu,
                    "wall_ms_per_step": 1000 * wall,
                    "tokens_per_cpu_s_x_cores": tokens / cpu * cores,
                    "tokens_per_s": tokens / wall,
                }
            )


if __name__ == "__main__":
    main()
