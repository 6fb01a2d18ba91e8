"""Throughput (docs/benchmarks.md, "Running"):

- `fit`: `model.fit` / `model.evaluate` on ordered byte segments, the
  memory carried from batch to batch; tokens/s (wall, and per CPU-second
  x cores), MFU (the FLOP count of `common.py` over the `roofline`
  measured in the same process), step times, peak RSS.
- `roofline`: `a @ b` compiled as the backend runs a model, at the
  reference model's largest matmul shapes and a square; the best.
- `gpu`: NVIDIA's base size (`common.PEER_SIZES`), JAX and TensorFlow,
  fp32 and mixed bf16, one child per backend; MFU against the GPU's
  dense peak, beside NVIDIA's A100 numbers (a byte vocabulary: the
  transformer body only). Without a GPU it stops, unless `--allow-cpu`
  or `--quick` (micro size, eager, 2 steps: a smoke run).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from benchmarks import common  # noqa: E402

# (rows, inner, columns): the feed-forward matmul of the reference model
# (batch * T = 2048 rows), the fused K/V projection over T + M = 256 keys,
# and a square one.
SHAPES = ((2048, 256, 1024), (4096, 256, 512), (1024, 1024, 1024))

# Dense (no sparsity) tensor-core peaks, TFLOP/s, from NVIDIA's data
# sheets: (name fragment, bf16, tf32). The first fragment found in the
# device name wins (so "H100 PCIe" before "H100").
PEAK_TFLOPS = (
    ("H200", 989.4, 494.7),
    ("H100 PCIe", 756.0, 378.0),
    ("H100", 989.4, 494.7),  # SXM
    ("A100", 312.0, 156.0),
    ("L40S", 362.1, 183.0),
    ("L4", 121.0, 60.0),
)
# NVIDIA DeepLearningExamples, TransformerXL READMEs (PyTorch/ and
# TensorFlow/LanguageModeling/Transformer-XL), "Training performance:
# NVIDIA DGX A100 (8x A100 40GB)", base model, 1 GPU: tokens/s.
NVIDIA_A100_BASE = (
    {
        "framework": "PyTorch (pytorch-20.06 container)",
        "batch_per_gpu": 32,
        "tf32_tokens_per_s": 41527,
        "mixed_tokens_per_s": 59961,
    },
    {
        "framework": "TensorFlow 1 (tensorflow:20.06-tf1)",
        "batch_per_gpu": 16,
        "tf32_tokens_per_s": 34244,
        "mixed_tokens_per_s": 36455,
    },
)
NVIDIA_SOURCE = (
    "NVIDIA DeepLearningExamples, PyTorch/ and TensorFlow/"
    "LanguageModeling/Transformer-XL/README.md, training performance "
    "on DGX A100 (A100 40GB), base model, 1 GPU"
)


# === Roofline ===


def _compiled_matmul(dtype):
    """(function, to_backend, sync) for the current backend."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        convert = lambda x: jnp.asarray(x, dtype)  # noqa: E731
        return jax.jit(jnp.matmul), convert, jax.block_until_ready
    if backend == "tensorflow":
        import tensorflow as tf

        convert = lambda x: tf.cast(tf.constant(x), dtype)  # noqa: E731
        matmul = tf.function(tf.matmul, jit_compile=False)
        return matmul, convert, lambda y: y.numpy()
    import torch

    convert = lambda x: torch.tensor(x).to(getattr(torch, dtype))  # noqa
    return torch.matmul, convert, lambda y: y


def matmul_throughput(dtype, shape, seconds=1.0):
    """GFLOP/s of `(m, k) @ (k, n)`: best wall time of several rounds, and
    the same work per process CPU-second x cores."""
    import numpy as np

    matmul, convert, sync = _compiled_matmul(dtype)
    m, k, n = shape
    rng = np.random.default_rng(0)
    a = convert(rng.standard_normal((m, k)).astype("float32"))
    b = convert(rng.standard_normal((k, n)).astype("float32"))
    sync(matmul(a, b))
    start = time.perf_counter()
    sync(matmul(a, b))
    one = max(time.perf_counter() - start, 1e-6)
    calls = max(1, int(0.1 * seconds / one))
    best_wall, best_cpu = float("inf"), float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            out = matmul(a, b)
        sync(out)
        best_wall = min(best_wall, (time.perf_counter() - wall) / calls)
        best_cpu = min(best_cpu, (time.process_time() - cpu) / calls)
    flops, cores = 2.0 * m * k * n, os.cpu_count() or 1
    return {
        "gflops_per_s": flops / best_wall / 1e9,
        "gflops_per_cpu_s_x_cores": flops / max(best_cpu, 1e-9) / 1e9 * cores,
    }


def peak(dtype, seconds=1.0, shapes=SHAPES):
    """Best throughput over `shapes`, with the per-shape numbers."""
    per_shape = {
        "x".join(map(str, shape)): matmul_throughput(dtype, shape, seconds)
        for shape in shapes
    }
    best = max(per_shape.values(), key=lambda r: r["gflops_per_s"])
    return {**best, "per_shape": per_shape}


def roofline(args):
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


# === fit / evaluate ===


def step_clock():
    """A Keras callback that notes the wall and CPU time at the end of
    every (train or test) batch. Reading the loss forces the step to
    finish (JAX dispatches asynchronously)."""
    import keras

    class StepClock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times, self.cpu, self.steps = [], [], []

        def on_train_batch_end(self, batch, logs=None):
            if logs and "loss" in logs:
                float(logs["loss"])
            self.times.append(time.perf_counter())
            t = os.times()
            self.cpu.append(t.user + t.system)
            self.steps.append(batch)

        on_test_batch_end = on_train_batch_end

        def step_stats(self, warmup):
            """Median and largest wall ms of one execution after warmup:
            a recompilation between segments shows as a large maximum."""
            times = sorted(
                t1 - t0
                for s, t0, t1 in zip(self.steps, self.times, self.times[1:])
                if s + 1 >= warmup
            )
            return 1000 * times[len(times) // 2], 1000 * times[-1]

        def rates(self, warmup):
            """(steps per wall second, steps per process-CPU second) after
            the first `warmup` steps (compilation)."""
            rows = [
                row
                for row in zip(self.steps, self.times, self.cpu)
                if row[0] + 1 > warmup
            ]
            if len(rows) < 2:
                raise ValueError(
                    f"Too few timed steps ({len(rows)}) after "
                    f"warmup={warmup}: raise --steps."
                )
            (s0, t0, c0), (s1, t1, c1) = rows[0], rows[-1]
            return (s1 - s0) / (t1 - t0), (s1 - s0) / max(c1 - c0, 1e-9)

    return StepClock()


def build_model(size, dtype, dropout, jit_compile, steps_per_execution):
    import keras

    from keras_txl.models import TransformerXLCausalLM

    lm = TransformerXLCausalLM(common.make_backbone(size, dtype, dropout))
    lm.compile(
        optimizer=keras.optimizers.Adam(2.5e-4, clipnorm=0.25),
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )
    return lm


def parse_jit(value):
    return {"auto": "auto", "true": True, "false": False}[value.lower()]


def timed_phases(lm, size, phases, warmup, spe=1):
    """Runs `fit` then `evaluate` (the `phases` asked, `{phase: steps}`)
    on ordered byte segments, each timed by a step clock after `warmup`
    steps. Yields `(phase, clock, steps, flops_per_token, start)`."""
    batch, length = size["batch_size"], size["segment_length"]
    total = {p: warmup + s + -(warmup + s) % spe for p, s in phases.items()}
    need = max(total.values())
    # Just the bytes the steps read (a whole corpus in short segments
    # takes longer to slice than a few steps to run).
    tokens = common.byte_corpus(max_bytes=batch * (need * length + 1) + 1)
    x, y = common.segment_arrays(tokens, batch, length)
    dataset = common.to_dataset(x, y, repeat=-(-need // len(x)))
    for phase, steps in total.items():
        clock, start = step_clock(), time.perf_counter()
        if phase == "train":
            flops = common.training_flops_per_token(**size)
            lm.fit(
                dataset,
                epochs=1,
                steps_per_epoch=steps,
                callbacks=[clock],
                verbose=0,
            )
        else:
            flops = common.forward_flops_per_token(**size)
            lm.reset_memory()
            lm.evaluate(dataset, steps=steps, callbacks=[clock], verbose=0)
        yield phase, clock, steps, flops, start


def fit(args):
    size = dict(common.BENCHMARK_SIZES[args.size])
    tokens_per_step = size["batch_size"] * size["segment_length"]
    rss_start = common.current_rss_mib()
    spe = args.steps_per_execution
    warmup = max(args.warmup, 2 * spe)
    matmul_dtype = "float32" if args.dtype == "float32" else "bfloat16"
    best = None
    if args.roofline_seconds > 0:
        best = peak(matmul_dtype, args.roofline_seconds)
    lm = build_model(size, args.dtype, args.dropout, parse_jit(args.jit), spe)
    base = {
        "benchmark": "train_eval",
        "size": args.size,
        "dtype": args.dtype,
        "jit_compile": args.jit,
        "steps_per_execution": spe,
        "dropout": args.dropout,
        "tokens_per_step": tokens_per_step,
        **common.backend_versions(),
        **common.machine_info(),
    }
    cores = os.cpu_count() or 1
    phases = {"train": args.steps, "eval": args.eval_steps}
    if args.mode != "both":
        phases = {args.mode: phases[args.mode]}
    for phase, clock, steps, flops, start in timed_phases(
        lm, size, phases, warmup, spe
    ):
        steps_s, steps_cpu_s = clock.rates(warmup)
        tokens_s = steps_s * tokens_per_step
        tokens_cpu_s = steps_cpu_s * tokens_per_step * cores
        median_ms, max_ms = clock.step_stats(warmup)
        utilisation = {}
        if best is not None:
            # Achieved model FLOP/s over the matmul throughput measured in
            # this process, in wall time and in CPU time (the latter holds
            # when other processes share the cores).
            peak_wall = best["gflops_per_s"]
            peak_cpu = best["gflops_per_cpu_s_x_cores"]
            utilisation = {
                "matmul_dtype": matmul_dtype,
                "matmul_gflops_per_s": peak_wall,
                "matmul_gflops_per_cpu_s_x_cores": peak_cpu,
                "mfu": tokens_s * flops / 1e9 / peak_wall,
                "mfu_cpu": tokens_cpu_s * flops / 1e9 / peak_cpu,
            }
        common.emit(
            {
                **utilisation,
                **base,
                "phase": phase,
                "resolved_jit_compile": bool(lm.jit_compile),
                "timed_steps": steps - warmup,
                "tokens_per_s": tokens_s,
                # What the steps would reach with all cores to themselves.
                "tokens_per_cpu_s_x_cores": tokens_cpu_s,
                "cpu_share": steps_s / steps_cpu_s / cores,
                "step_ms": 1000.0 / steps_s,
                "median_execution_ms": median_ms,
                "max_execution_ms": max_ms,
                "flops_per_token": flops,
                "gflops_per_s": tokens_s * flops / 1e9,
                "first_steps_s": clock.times[0] - start,
                "wall_s": time.perf_counter() - start,
                "peak_rss_mib": common.peak_rss_mib(),
                "rss_start_mib": rss_start,
            }
        )


# === The GPU pass ===


def gpu_name():
    """The first NVIDIA GPU's name (`nvidia-smi`), or None."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = done.stdout.strip().splitlines()
    return names[0].strip() if done.returncode == 0 and names else None


def peak_tflops(device, dtype):
    """The dense peak of `device` for `dtype` (bf16 for mixed/bfloat16,
    TF32 for float32), TFLOP/s, or None for a device not in the table."""
    for fragment, bf16, tf32 in PEAK_TFLOPS:
        if device and fragment.lower() in device.lower():
            return tf32 if dtype == "float32" else bf16
    return None


def gpu_worker(args):
    """One backend, every dtype, in this process."""
    import keras

    size = dict({**common.BENCHMARK_SIZES, **common.PEER_SIZES}[args.size])
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        devices = [f"{d.platform}:{d.device_kind}" for d in jax.devices()]
    else:
        import tensorflow as tf

        devices = [d.name for d in tf.config.list_logical_devices()]
    tokens_per_step = size["batch_size"] * size["segment_length"]
    for dtype in args.dtypes.split(","):
        lm = build_model(size, dtype, 0.1, "auto", 1)
        lm.run_eagerly = args.size == "micro"  # --quick: no compilation
        phases = {"train": args.steps, "eval": args.eval_steps}
        for phase, clock, steps, flops, start in timed_phases(
            lm, size, phases, args.warmup
        ):
            tokens_s = clock.rates(args.warmup)[0] * tokens_per_step
            common.emit(
                {
                    "benchmark": "gpu_pass",
                    "size": args.size,
                    "dtype": dtype,
                    "phase": phase,
                    "tokens_per_s": tokens_s,
                    "flops_per_token": flops,
                    "tflops_per_s": tokens_s * flops / 1e12,
                    "timed_steps": steps - args.warmup,
                    "first_steps_s": clock.times[0] - start,
                    "resolved_jit_compile": bool(lm.jit_compile),
                    "tokens_per_step": tokens_per_step,
                    "model": size,
                    "devices": devices,
                    **common.backend_versions(),
                }
            )


def add_mfu(results, device):
    for r in results:
        if "error" in r:
            continue
        peak = peak_tflops(device, r["dtype"])
        r["device"] = device
        r["peak_tflops"] = peak
        r["peak_kind"] = "tf32" if r["dtype"] == "float32" else "bf16"
        r["mfu"] = None if peak is None else r["tflops_per_s"] / peak
    return results


def gpu_markdown(results, device, started, argv):
    batch = next(
        (r["model"]["batch_size"] for r in results if "model" in r), "?"
    )
    lines = [
        f"GPU pass, {started}, device: {device or 'none (CPU)'}; "
        f"`python -m benchmarks.throughput {' '.join(argv)}`".rstrip(),
        "",
        "| backend | dtype | phase | tokens/s | model TFLOP/s | MFU "
        "(vs dense peak) | NVIDIA A100 base, 1 GPU (PyTorch / TF1) |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['backend']} | failed: {r['error']} | | | | | |")
            continue
        nvidia = "-"
        if r["phase"] == "train":
            kind = "tf32" if r["dtype"] == "float32" else "mixed"
            key = f"{kind}_tokens_per_s"
            nvidia = " / ".join(f"{n[key]:,}" for n in NVIDIA_A100_BASE)
        mfu = "-"
        if r["mfu"] is not None:
            mfu = f"{100 * r['mfu']:.1f}% of {r['peak_tflops']:g} "
            mfu += f"({r['peak_kind']})"
        lines.append(
            f"| {r['backend']} | {r['dtype']} | {r['phase']} | "
            f"{r['tokens_per_s']:,.0f} | {r['tflops_per_s']:.2f} | {mfu} | "
            f"{nvidia} |"
        )
    lines += [
        "",
        f"NVIDIA's numbers: {NVIDIA_SOURCE} (batch 32 per GPU for PyTorch, "
        "16 for TensorFlow; WikiText-103 vocabulary with an adaptive "
        "softmax). keras-txl: the same body, a byte vocabulary, batch "
        f"{batch}.",
    ]
    return "\n".join(lines)


def gpu(args, argv):
    if args.quick:
        args.size, args.steps, args.eval_steps, args.warmup = "micro", 2, 2, 1
    if args.worker:
        return gpu_worker(args)
    device = gpu_name()
    if device is None and not (args.quick or args.allow_cpu):
        raise SystemExit(
            "gpu pass: no NVIDIA GPU found (nvidia-smi); run it on a GPU "
            "machine, or pass --quick (a CPU smoke run) or --allow-cpu "
            "(the full sizes on the CPU, slow)"
        )
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    worker = ["gpu", "--worker", "--size", args.size, "--dtypes", args.dtypes]
    worker += ["--steps", args.steps, "--eval-steps", args.eval_steps]
    worker += ["--warmup", args.warmup]
    results = []
    for backend in [b for b in args.backends.split(",") if b]:
        rows, error, _ = common.run_module(
            "throughput", worker, backend, timeout=args.timeout
        )
        results += rows
        if error:
            results.append(
                {"benchmark": "gpu_pass", "backend": backend, "error": error}
            )
    results = add_mfu(results, device)
    for r in results:
        common.emit(r)
    text = gpu_markdown(results, device, started, argv)
    out = {
        "benchmark": "gpu_pass_summary",
        "device": device,
        "started": started,
        "argv": argv,
        "results": results,
        "nvidia_a100_base": list(NVIDIA_A100_BASE),
        "nvidia_source": NVIDIA_SOURCE,
        "peak_tflops_table": [list(p) for p in PEAK_TFLOPS],
    }
    common.write_text(args.json, json.dumps(out, indent=1) + "\n")
    if args.markdown:
        common.write_text(args.markdown, text + "\n")
    print(text)
    failed = [r for r in results if "error" in r]
    if failed:
        raise SystemExit(f"gpu pass: {len(failed)} backend(s) failed")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = common.add_common_args(commands.add_parser("fit"))
    gpu = commands.add_parser("gpu", help="the GPU pass")
    for sub, steps in ((one, 20), (gpu, 30)):
        sub.add_argument("--steps", type=int, default=steps)
        sub.add_argument("--eval-steps", type=int, default=20)
        sub.add_argument("--warmup", type=int, default=3)
    add = one.add_argument
    add("--jit", default="auto", help="auto | true | false")
    add("--steps-per-execution", type=int, default=1)
    add("--dropout", type=float, default=0.1)
    add("--mode", default="both", choices=["train", "eval", "both"])
    add("--roofline-seconds", type=float, default=1.0, help="0: no MFU")
    top = commands.add_parser("roofline", help="matmul GFLOP/s")
    top.add_argument("--dtypes", default="float32,bfloat16")
    top.add_argument("--seconds", type=float, default=1.5)
    add = gpu.add_argument
    add("--backends", default="jax,tensorflow")
    add("--dtypes", default="float32,mixed_bfloat16")
    add("--size", default="nvidia_base")
    add("--quick", action="store_true", help="a CPU smoke run")
    add("--allow-cpu", action="store_true", help="full sizes on the CPU")
    results = os.path.join(common.ROOT, "benchmarks", "results")
    add("--json", default=os.path.join(results, "gpu.json"))
    add("--markdown", default=None, help="also write the table")
    add("--worker", action="store_true", help=argparse.SUPPRESS)
    add("--timeout", type=int, default=235, help="seconds per backend")
    return parser.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.command == "gpu":
        return gpu(args, argv)
    {"fit": fit, "roofline": roofline}[args.command](args)


if __name__ == "__main__":
    main()
