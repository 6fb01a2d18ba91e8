"""The GPU pass: training and evaluation tokens/s and model FLOP
utilisation (MFU) at NVIDIA's Transformer-XL base size, on JAX and
TensorFlow, float32 and mixed bfloat16, beside NVIDIA's published
numbers.

One command on a machine with an NVIDIA GPU (a few minutes: one process
per backend, each compiling two models):

    PYTHONPATH=. python -m benchmarks.gpu_pass

writes `benchmarks/results/gpu_pass.json` and `gpu_pass.md` (the table
for docs/benchmarks.md) and prints one JSON line per measurement. Without
a GPU it stops with a message, unless `--allow-cpu` (the same sizes on
the CPU: slow) or `--quick` (the `micro` size, eagerly, a few steps: what
CI runs to keep the script working; its numbers mean nothing).

The size is NVIDIA's "base" (DeepLearningExamples, TransformerXL,
`run_wt103_base.sh`): 16 layers, d_model 512, 8 heads x 64, d_inner
2,048, T = M = 192, dropout 0.1, batch 32 per GPU (their PyTorch table;
their TensorFlow table uses 16). The vocabulary is bytes (256), not
WikiText-103's 267,735 words under an adaptive softmax: the output layer
is cheaper here, so tokens/s are comparable for the transformer body
only, and MFU counts this model's FLOPs (`common.forward_flops_per_token`,
3x for training). Training runs `fit` with Adam and `clipnorm=0.25`,
evaluation `evaluate`, the memory carried between batches (the public
path, `benchmarks/train_eval.py`'s).

MFU = model FLOP/s / the GPU's dense peak for the dtype: mixed bfloat16
against the bf16 tensor-core peak, float32 against the TF32 peak (JAX and
TensorFlow run float32 matmuls on TF32 tensor cores by default on Ampere
and later). Peaks from `PEAK_TFLOPS`, keyed by the device name.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")

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


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="jax,tensorflow")
    parser.add_argument("--dtypes", default="float32,mixed_bfloat16")
    parser.add_argument("--preset", default="nvidia_base")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--eval-steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the micro size, eagerly, 3 steps: checks that the pass runs "
        "(CI, no GPU); the numbers mean nothing",
    )
    parser.add_argument(
        "--allow-cpu",
        action="store_true",
        help="run the full sizes without a GPU (slow)",
    )
    parser.add_argument(
        "--json", default=os.path.join(RESULTS, "gpu_pass.json")
    )
    parser.add_argument(
        "--markdown", default=os.path.join(RESULTS, "gpu_pass.md")
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--timeout",
        type=int,
        default=235,
        help="seconds per backend (2 backends: under 8 minutes)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.preset, args.steps, args.eval_steps, args.warmup = "micro", 2, 2, 1
    return args


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


# === Worker: one backend, every dtype, in one process ===


def run_worker(args):
    import keras

    from benchmarks import common
    from benchmarks.train_eval import StepClock
    from benchmarks.train_eval import build_model

    preset = dict({**common.PRESETS, **common.PEER_PRESETS}[args.preset])
    batch, length = preset["batch_size"], preset["segment_length"]
    warmup = args.warmup
    need = warmup + max(args.steps, args.eval_steps)
    # Just the bytes the steps read (a whole corpus in short segments
    # takes longer to slice than --quick's steps to run).
    tokens = common.byte_corpus(max_bytes=batch * (need * length + 1) + 1)
    x, y = common.ordered_segments(tokens, batch, length)
    dataset = common.to_dataset(x, y, repeat=-(-need // len(x)))
    devices = [d for d in _devices(keras) if d]
    for dtype in args.dtypes.split(","):
        lm = build_model(preset, dtype, 0.1, "auto", 1)
        if args.preset == "micro":
            lm.run_eagerly = True  # --quick: no compilation to wait for
        for phase, steps in (("train", args.steps), ("eval", args.eval_steps)):
            clock = StepClock()
            start = time.perf_counter()
            if phase == "train":
                flops = common.training_flops_per_token(**preset)
                lm.fit(
                    dataset,
                    epochs=1,
                    steps_per_epoch=warmup + steps,
                    callbacks=[clock],
                    verbose=0,
                )
            else:
                flops = common.forward_flops_per_token(**preset)
                lm.reset_memory()
                lm.evaluate(
                    dataset,
                    steps=warmup + steps,
                    callbacks=[clock],
                    verbose=0,
                )
            steps_s, _ = clock.rates(warmup)
            common.emit(
                {
                    "benchmark": "gpu_pass",
                    "preset": args.preset,
                    "dtype": dtype,
                    "phase": phase,
                    "tokens_per_s": steps_s * batch * length,
                    "flops_per_token": flops,
                    "tflops_per_s": steps_s * batch * length * flops / 1e12,
                    "timed_steps": steps,
                    "first_steps_s": clock.times[0] - start,
                    "resolved_jit_compile": bool(lm.jit_compile),
                    "tokens_per_step": batch * length,
                    "model": preset,
                    "devices": devices,
                    **common.backend_versions(),
                }
            )


def _devices(keras):
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return [f"{d.platform}:{d.device_kind}" for d in jax.devices()]
    if backend == "tensorflow":
        import tensorflow as tf

        return [d.name for d in tf.config.list_logical_devices()]
    return []


# === The pass ===


def run_backend(args, backend, log):
    command = [
        sys.executable,
        "-m",
        "benchmarks.gpu_pass",
        "--worker",
        "--preset",
        args.preset,
        "--dtypes",
        args.dtypes,
        "--steps",
        str(args.steps),
        "--eval-steps",
        str(args.eval_steps),
        "--warmup",
        str(args.warmup),
    ]
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    log(f"$ KERAS_BACKEND={backend} python " + " ".join(command[1:]))
    try:
        done = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
    except subprocess.TimeoutExpired:
        return [
            {"benchmark": "gpu_pass", "backend": backend, "error": "timeout"}
        ]
    results = [
        json.loads(line[len("RESULT ") :])
        for line in done.stdout.splitlines()
        if line.startswith("RESULT ")
    ]
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        log(f"  failed: {tail}")
        results.append(
            {"benchmark": "gpu_pass", "backend": backend, "error": tail}
        )
    return results


def _log(*args):
    print(*args, file=sys.stderr, flush=True)


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


def markdown(results, device, started, argv):
    batch = next(
        (r["model"]["batch_size"] for r in results if "model" in r), "?"
    )
    lines = [
        f"GPU pass, {started}, device: {device or 'none (CPU)'}; "
        f"`python -m benchmarks.gpu_pass {' '.join(argv)}`".rstrip(),
        "",
        "| backend | dtype | phase | tokens/s | model TFLOP/s | MFU "
        "(vs dense peak) | NVIDIA A100 base, 1 GPU (PyTorch / TF1) |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['backend']} | failed: {r['error']} | | | | | |")
            continue
        if r["phase"] == "train":
            key = (
                "tf32_tokens_per_s"
                if r["dtype"] == "float32"
                else "mixed_tokens_per_s"
            )
            nvidia = " / ".join(f"{n[key]:,}" for n in NVIDIA_A100_BASE)
        else:
            nvidia = "-"
        mfu = "-" if r["mfu"] is None else f"{100 * r['mfu']:.1f}% of "
        if r["mfu"] is not None:
            mfu += f"{r['peak_tflops']:g} ({r['peak_kind']})"
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


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        run_worker(args)
        return
    # The parent imports neither keras nor keras-txl (the workers do):
    # seconds saved for --quick.
    device = gpu_name()
    if device is None and not (args.quick or args.allow_cpu):
        raise SystemExit(
            "gpu_pass: no NVIDIA GPU found (nvidia-smi); run it on a GPU "
            "machine, or pass --quick (a CPU smoke run) or --allow-cpu "
            "(the full sizes on the CPU, slow)"
        )
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results = []
    for backend in [b for b in args.backends.split(",") if b]:
        results += run_backend(args, backend, _log)
    results = add_mfu(results, device)
    for r in results:
        print("RESULT " + json.dumps(r, sort_keys=True), flush=True)
    text = markdown(results, device, started, argv)
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
    for path, content in (
        (args.json, json.dumps(out, indent=1)),
        (args.markdown, text),
    ):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            f.write(content + "\n")
    print(text)
    failed = [r for r in results if "error" in r]
    if failed:
        raise SystemExit(f"gpu_pass: {len(failed)} backend(s) failed")


if __name__ == "__main__":
    main()
