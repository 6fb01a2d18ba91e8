"""Interleaved A/B in one process, round by round, so that every variant
sees the same load; older code comes from git (`git show COMMIT:PATH`
into a temporary folder, imported), not from copies in the tree.

- `attention`: the first `RelativeMultiHeadAttention` (`--commit`)
  against the shipped one: the relative shift alone (`--what shift`,
  forward + backward) and whole-model train / test steps (`model`).
- `dropout`: a training step with `PackedDropout`, with Keras's
  `Dropout` in its place, and without dropout; on JAX also with JAX's
  own CPU lowering of threefry (a loop) in place of keras-txl's
  unrolled one (`keras_txl/utils/threefry_lowering.py`).

Medians of process CPU and wall time per call; each line has its CPU
time over the baseline's of the same run.
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.throughput import build_model  # noqa: E402
from benchmarks.throughput import parse_jit  # noqa: E402
from keras_txl.layers import relative_multi_head_attention as attention  # noqa: E402,E501
from keras_txl.layers import transformer_xl_block  # noqa: E402
from keras_txl.layers.packed_dropout import PackedDropout  # noqa: E402
from keras_txl.utils.threefry_lowering import unroll_threefry_on_cpu  # noqa: E402,E501

ATTENTION = "keras_txl/layers/relative_multi_head_attention.py"


def module_at(commit, path):
    """The module `path` of this repository as it was at `commit`,
    imported under a name of its own. Its Keras registrations are undone,
    so that the current classes stay the ones saved files load."""
    source = subprocess.run(
        ["git", "show", f"{commit}:{path}"],
        cwd=common.ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    name = f"ab_{commit}_{os.path.basename(path)[:-3]}"
    folder = tempfile.mkdtemp(prefix="ab-")
    file = os.path.join(folder, f"{name}.py")
    with open(file, "w") as f:
        f.write(source)
    registered = keras.saving.get_custom_objects()
    saved = dict(registered)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    registered.clear()
    registered.update(saved)
    return module


def interleave(runners, rounds, calls):
    """Median CPU and wall seconds per call of each runner (a dict of
    callables), the runners measured in alternation, round by round."""
    cpu = {name: [] for name in runners}
    wall = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            c, w = time.process_time(), time.perf_counter()
            for _ in range(calls):
                run()
            cpu[name].append((time.process_time() - c) / calls)
            wall[name].append((time.perf_counter() - w) / calls)
    return {
        name: (float(np.median(cpu[name])), float(np.median(wall[name])))
        for name in runners
    }


def batch_steps(models, x, y, phases=("train",)):
    """`{(name, phase): run}`: a `train_on_batch` / `test_on_batch` of
    each model on the ordered segments `x`, `y`, taken in turn (after the
    first two, which compiled the models)."""
    position = {"i": 2}

    def step(lm, phase):
        def run():
            i = position["i"] % len(x)
            position["i"] += 1
            call = lm.train_on_batch if phase == "train" else lm.test_on_batch
            call(x[i], y[i])

        return run

    return {
        (name, phase): step(lm, phase)
        for name, lm in models.items()
        for phase in phases
    }


def emit_steps(timings, baseline, tokens, fields):
    """One RESULT line per `(variant, phase)` of `timings`: CPU and wall
    ms per step, tokens per second and per CPU-second x cores, the CPU
    time over the baseline variant's in the same phase."""
    cores = os.cpu_count() or 1
    for (name, phase), (cpu, wall) in timings.items():
        ratio = cpu / timings[(baseline, phase)][0]
        common.emit(
            {
                **fields,
                "variant": name,
                "phase": phase,
                "cpu_ms_per_step": 1000 * cpu,
                "wall_ms_per_step": 1000 * wall,
                "tokens_per_s": tokens / wall,
                "tokens_per_cpu_s_x_cores": tokens / cpu * cores,
                f"cpu_time_vs_{baseline.replace(' ', '_')}": ratio,
            }
        )


def segments(size):
    batch, length = size["batch_size"], size["segment_length"]
    return common.segment_arrays(common.byte_corpus(), batch, length)


# === Attention ===


def backward(fn, array):
    """A callable running forward + backward of sum(fn(x)^2) on the current
    backend, compiled as the backend runs models."""
    ops, backend = keras.ops, keras.backend.backend()
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
    return lambda: torch.autograd.grad(torch.sum(fn(x) ** 2), [x])


def shift_runners(old, size):
    heads, batch = size["num_heads"], size["batch_size"]
    t = size["segment_length"]
    k = t + size["memory_length"]
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((batch, heads, t, k)).astype("float32")
    padded = np.concatenate([np.zeros_like(scores[..., :1]), scores], -1)
    return {
        "original pad + strided slice": backward(old.relative_shift, scores),
        "relative_shift (pad + slice)": backward(
            attention.relative_shift, scores
        ),
        "attention (_shift_padded)": backward(
            lambda p: attention._shift_padded(p, k), padded
        ),
        "identity (floor)": backward(lambda s: s, scores),
    }


def compare_attention(args):
    size = common.BENCHMARK_SIZES[args.size]
    old = module_at(args.commit, ATTENTION)
    fields = dict(
        common.base_fields(args, "attention_variants"), commit=args.commit
    )
    if "shift" in args.what:
        runners = shift_runners(old, size)
        for run in runners.values():
            run()
        timings = interleave(runners, args.rounds, calls=5)
        for name, (cpu, wall) in timings.items():
            row = dict(fields, part="shift", variant=name, dtype="float32")
            common.emit(dict(row, cpu_ms=1000 * cpu, wall_ms=1000 * wall))
    if "model" not in args.what:
        return
    x, y = segments(size)
    variants = {
        "original": old.RelativeMultiHeadAttention,
        "current": attention.RelativeMultiHeadAttention,
    }
    models = {}
    for name, cls in variants.items():
        transformer_xl_block.RelativeMultiHeadAttention = cls
        try:
            lm = build_model(
                size, args.dtype, args.dropout, parse_jit(args.jit), 1
            )
            for i in range(2):  # compile both functions
                lm.train_on_batch(x[i], y[i])
                lm.test_on_batch(x[i], y[i])
        finally:
            transformer_xl_block.RelativeMultiHeadAttention = variants[
                "current"
            ]
        models[name] = lm
    runners = batch_steps(models, x, y, ("train", "eval"))
    emit_steps(
        interleave(runners, args.rounds, calls=3),
        "original",
        size["batch_size"] * size["segment_length"],
        dict(fields, part="model", jit_compile=args.jit, dropout=args.dropout),
    )


# === Dropout ===


def with_keras_dropout(model):
    """`model` with each `PackedDropout` made the `keras.layers.Dropout`
    it extends; returns how many were changed."""
    changed = 0
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if type(layer) is PackedDropout:
            layer.__class__ = keras.layers.Dropout
            changed += 1
    return changed


def use_jax_threefry_loop():
    """Registers JAX's own CPU lowering of threefry again (a loop of five
    iterations), which a backbone replaces with unrolled rounds: the
    baseline of that change. JAX keeps the rule private."""
    from jax._src.random import threefry2x32
    from jax.interpreters import mlir

    mlir.register_lowering(
        threefry2x32.threefry2x32_p,
        threefry2x32._threefry2x32_cpu_lowering_rule,
        platform="cpu",
    )


def compare_dropout(args):
    size = common.BENCHMARK_SIZES[args.size]
    x, y = segments(size)
    models = {}
    names = ["keras dropout", "packed", "no dropout"]
    if keras.backend.backend() == "jax":
        names.insert(0, "jax's threefry loop")
    for name in names:
        rate = 0.0 if name == "no dropout" else args.dropout
        lm = build_model(size, args.dtype, rate, parse_jit(args.jit), 1)
        lm(x[0])  # builds every layer
        if name == "keras dropout" and not with_keras_dropout(lm):
            raise RuntimeError("found no PackedDropout to replace")
        if name == "jax's threefry loop":
            use_jax_threefry_loop()  # for this model's compilation only
        for i in range(2):  # trace and compile
            lm.train_on_batch(x[i], y[i])
        if name == "jax's threefry loop":
            unroll_threefry_on_cpu()
        models[name] = lm
    timings = interleave(batch_steps(models, x, y), args.rounds, args.calls)
    emit_steps(
        timings,
        "keras dropout",
        size["batch_size"] * size["segment_length"],
        dict(
            common.base_fields(args, "packed_dropout"),
            jit=args.jit,
            dropout=args.dropout,
            rounds=args.rounds,
        ),
    )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    att, drop = map(commands.add_parser, ("attention", "dropout"))
    for sub, rounds in ((att, 4), (drop, 5)):
        common.add_common_args(sub)
        sub.add_argument("--rounds", type=int, default=rounds)
        sub.add_argument("--jit", default="auto", help="auto | true | false")
        sub.add_argument("--dropout", type=float, default=0.1)
    att.add_argument("--commit", default="5972056")
    att.add_argument("--what", default="shift,model", help="shift, model")
    drop.add_argument("--calls", type=int, default=2)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    run = {"attention": compare_attention, "dropout": compare_dropout}
    run[args.command](args)


if __name__ == "__main__":
    main()
