"""Runs the benchmark suite, one subprocess per backend and configuration,
and writes the tables into `docs/benchmarks.md`.

    PYTHONPATH=. python -m benchmarks.run_all            # ~15 min, 2 cores
    PYTHONPATH=. python -m benchmarks.run_all --quick    # ~5 min
    PYTHONPATH=. python -m benchmarks.run_all --parity   # + bf16 vs fp32 bpc
    PYTHONPATH=. python -m benchmarks.run_all --gpu      # GPU pass, < 8 min
    PYTHONPATH=. python -m benchmarks.run_all \
        --peer-python PEERS/venv/bin/python --authors-code PEERS/transformer-xl

The peers (the authors' PyTorch code, HuggingFace's TransfoXL) run in the
same pass, each in its own environment: `benchmarks/peers.py` under the
Python given by `--peer-python` (never a dependency of keras-txl). The
goals are ratios to them; without `--peer-python` the tables say "not
measured".

Every result is also saved as JSON (`--json`, default
`benchmarks/results/latest.json`); plots go to `docs/images/`. The tables
are written between the `<!-- run_all:begin -->` and `<!-- run_all:end -->`
markers of the document, leaving the rest of it as it is.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

from benchmarks import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- run_all:begin -->", "<!-- run_all:end -->"

# Goals at the reference preset, as multiples of the peers measured in the
# same pass (benchmarks/peers.py): the authors' fp32 PyTorch training and
# evaluation, HuggingFace's TransfoXL greedy generation.
GOAL_FP32_MFU = 0.60
GOAL_BF16_TRAIN_X = 3.0  # mixed bf16 training vs the authors' training
GOAL_JAX_TRAIN_X = 2.0  # JAX fp32 training vs the authors' training
GOAL_EVAL_X = 3.0  # evaluation vs the authors' evaluation
GOAL_GENERATE_X = 3.0  # generate() vs HuggingFace's, on each backend
NOT_MEASURED = "not measured"
# The generation setting of the peers' comparison (issue 16): batch 1, a
# prompt of 64 tokens, 256 new, memory 128; and the lengths of the
# flatness check.
GENERATE_NEW_TOKENS = 256
GENERATE_LENGTHS = ("64", "256", "1024", "2048")


def job(backend, module, *args, timeout=900, python=None):
    return {
        "backend": backend,
        "module": module,
        "args": list(args),
        "timeout": timeout,
        "python": python,
    }


def peer_jobs(peer_python, authors_code, quick):
    """The peers' job: benchmarks/peers.py under `peer_python`."""
    if not peer_python:
        return []
    args = ["--steps", "3", "--repeats", "1"] if quick else []
    if authors_code:
        args += ["--authors-code", authors_code]
    return [job("peer", "peers", *args, timeout=1800, python=peer_python)]


def suite(
    quick,
    parity,
    backends,
    variants=False,
    peer_python=None,
    authors_code=None,
):
    steps = ["--steps", "8", "--eval-steps", "8"] if quick else []
    seconds = ["--seconds", "0.5"] if quick else []
    roofline_seconds = ["--roofline-seconds", "0.5"] if quick else []
    jobs = []
    for backend in backends:
        jobs.append(job(backend, "roofline", *seconds, timeout=300))
    train = "train_eval"
    if "tensorflow" in backends:
        jobs += [
            job("tensorflow", train, "--dtype", "float32", *steps),
            job("tensorflow", train, "--dtype", "mixed_bfloat16", *steps),
        ]
        if not quick:
            jobs += [
                job("tensorflow", train, "--dtype", "float32", "--jit", "true"),
                job(
                    "tensorflow",
                    train,
                    "--dtype",
                    "mixed_bfloat16",
                    "--steps-per-execution",
                    "4",
                ),
                job(
                    "tensorflow",
                    train,
                    "--dtype",
                    "mixed_bfloat16",
                    "--dropout",
                    "0.0",
                ),
                job("tensorflow", train, "--preset", "small"),
                job(
                    "tensorflow",
                    train,
                    "--preset",
                    "base",
                    "--dtype",
                    "mixed_bfloat16",
                    "--steps",
                    "4",
                    "--eval-steps",
                    "6",
                    "--warmup",
                    "2",
                ),
            ]
    if "jax" in backends:
        jobs.append(job("jax", train, "--dtype", "float32", *steps))
        if not quick:
            jobs += [
                job("jax", train, "--dtype", "mixed_bfloat16"),
                # What dropout's random numbers cost JAX (threefry on CPU).
                job("jax", train, "--dtype", "float32", "--dropout", "0.0"),
                job("jax", train, "--preset", "small"),
            ]
    if "torch" in backends:
        torch_steps = ["--steps", "4", "--eval-steps", "6", "--warmup", "2"]
        jobs.append(job("torch", train, "--preset", "small", *roofline_seconds))
        if not quick:
            jobs.append(job("torch", train, "--dtype", "float32", *torch_steps))
    table9 = "eval_speed"
    lengths = "128,256,512" if quick else "128,256,512,1024,2048"
    images = os.path.join(ROOT, "docs", "images")
    jobs.append(
        job(
            "tensorflow",
            table9,
            "--lengths",
            lengths,
            "--plot",
            os.path.join(images, "eval_speed.png"),
        )
    )
    contexts = "128 512" if quick else "128 256 512 1024 2048"
    jobs.append(
        job(
            "jax",
            "generation",
            "--contexts",
            *contexts.split(),
            "--png",
            os.path.join(images, "generation.png"),
        )
    )
    lengths = ("64", "256") if quick else GENERATE_LENGTHS
    for backend in backends:
        if backend in ("jax", "tensorflow"):
            jobs.append(
                job(backend, "generation_length", "--new-tokens", *lengths)
            )
    # The profiles behind the goals that are not met: TensorFlow's
    # generation loop against JAX's (same HLO, per-token time), and what
    # the dropout's random numbers cost a JAX training step.
    for backend in backends:
        if backend in ("jax", "tensorflow"):
            jobs.append(job(backend, "generation_profile"))
    if "jax" in backends and not quick:
        jobs.append(job("jax", "packed_dropout"))
    jobs += peer_jobs(peer_python, authors_code, quick)
    # Evaluation at the paper's wt103 settings (T 128, M 1,600, clamp
    # 1,000, same_length), keras-txl on both backends and the authors'
    # code, each configuration in a child process of its own.
    paper = ["--quick"] if quick else []
    if peer_python and authors_code:
        paper += ["--peer-python", peer_python, "--authors-code", authors_code]
    jobs.append(job("tensorflow", "paper_eval", *paper, timeout=2400))
    growth = ["--plot", os.path.join(images, "cost_growth.png")]
    if quick:
        growth += [
            "--memories",
            "0,256,1024",
            "--segments",
            "64,128,256",
            "--rss-memories",
            "",
        ]
    jobs.append(job("tensorflow", "cost_growth", *growth))
    if parity:
        jobs.append(job("tensorflow", "precision_parity", timeout=5400))
    if variants:
        ab = "attention_variants"
        if "tensorflow" in backends:
            jobs += [
                job("tensorflow", ab, "--dtype", "float32"),
                job(
                    "tensorflow",
                    ab,
                    "--dtype",
                    "mixed_bfloat16",
                    "--what",
                    "model",
                ),
            ]
        if "jax" in backends:
            jobs.append(job("jax", ab, "--dtype", "float32"))
    return jobs


def run_job(spec, log):
    env = dict(os.environ)
    env["KERAS_BACKEND"] = spec["backend"]
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if spec.get("python"):
        # A peer: its own interpreter, a script path (not the package).
        script = os.path.join(ROOT, "benchmarks", f"{spec['module']}.py")
        command = [spec["python"], script]
        env.pop("PYTHONPATH")
    else:
        command = [sys.executable, "-m", f"benchmarks.{spec['module']}"]
    command += spec["args"]
    log(f"$ KERAS_BACKEND={spec['backend']} " + " ".join(command[1:]))
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=spec["timeout"],
        )
    except subprocess.TimeoutExpired:
        log(f"  timed out after {spec['timeout']} s")
        return [{"error": "timeout", **spec}]
    results = common.parse_results(done.stdout)
    log(f"  {len(results)} result(s) in {time.perf_counter() - start:.0f} s")
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        log("  failed: " + " | ".join(tail))
        results.append({"error": "\n".join(tail), **spec})
    for result in results:
        result["command"] = f"KERAS_BACKEND={spec['backend']} " + " ".join(
            ["python"] + command[1:]
        )
    return results


# === Tables ===


def _fmt(value, digits=0):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _pct(value):
    return "-" if value is None else f"{100 * value:.0f}%"


def roofline_table(results):
    rows = [r for r in results if r.get("benchmark") == "roofline"]
    lines = [
        "| backend | dtype | matmul GFLOP/s (best, wall) | GFLOP per "
        "CPU-s x cores | per shape (wall) |",
        "|---|---|---:|---:|---|",
    ]
    for r in rows:
        shapes = ", ".join(
            f"{k}: {v['gflops_per_s']:.0f}" for k, v in r["per_shape"].items()
        )
        lines.append(
            f"| {r['backend']} | {r['dtype']} | {_fmt(r['gflops_per_s'])} | "
            f"{_fmt(r['gflops_per_cpu_s_x_cores'])} | {shapes} |"
        )
    return "\n".join(lines)


def _config(r):
    jit = r.get("jit_compile")
    resolved = r.get("resolved_jit_compile")
    label = f"jit={jit}"
    if jit == "auto":
        label += f" ({'XLA' if resolved else 'no XLA'})"
    if r.get("backend") == "jax":
        label = "jit"
    if r.get("steps_per_execution", 1) != 1:
        label += f", spe={r['steps_per_execution']}"
    if r.get("dropout") != 0.1:
        label += f", dropout={r.get('dropout')}"
    return label


def throughput_table(results):
    rows = [r for r in results if r.get("benchmark") == "train_eval"]
    lines = [
        "| backend | preset | dtype | config | phase | tokens/s (wall) | "
        "tokens per CPU-s x cores | MFU (wall) | MFU (CPU) | step ms "
        "(median / max) | peak RSS MiB | load |",
        "|---|---|---|---|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['backend']} | {r['preset']} | {r['dtype']} | "
            f"{_config(r)} | {r['phase']} | {_fmt(r['tokens_per_s'])} | "
            f"{_fmt(r['tokens_per_cpu_s_x_cores'])} | {_pct(r.get('mfu'))} | "
            f"{_pct(r.get('mfu_cpu'))} | "
            f"{_fmt(r['median_execution_ms'])} / "
            f"{_fmt(r['max_execution_ms'])} | {_fmt(r['peak_rss_mib'])} | "
            f"{r['loadavg_1min']:.1f} |"
        )
    return "\n".join(lines)


def _best(rows, key):
    rows = [r for r in rows if r.get(key) is not None]
    return max(rows, key=lambda r: r[key]) if rows else None


def peer_row(results, peer, phase):
    """The result of a peer (`authors_pytorch`, `huggingface_transfo_xl`)
    in a phase, or `None` when it was not measured."""
    rows = [
        r
        for r in results
        if r.get("benchmark") == "peer"
        and r.get("peer") == peer
        and r.get("phase") == phase
    ]
    return rows[-1] if rows else None


def generation_rows(results, new_tokens=GENERATE_NEW_TOKENS):
    """keras-txl `generate()` at the peers' setting, one per backend:
    `{"backend", "tokens_per_s", "tokens_per_cpu_s_x_cores"}`."""
    out = []
    for r in results:
        if r.get("benchmark") != "generation_length":
            continue
        for row in r["rows"]:
            if row["new_tokens"] == new_tokens:
                out.append(dict(row, backend=r["backend"]))
    return out


def goals_table(results):
    rows = [
        r
        for r in results
        if r.get("benchmark") == "train_eval" and r.get("preset") == "reference"
    ]

    def pick(phase, dtype=None, backend=None):
        # Training counts with the peer's dropout (0.1) only: the rows
        # without dropout measure what it costs.
        return [
            r
            for r in rows
            if r["phase"] == phase
            and (dtype is None or r["dtype"] == dtype)
            and (backend is None or r["backend"] == backend)
            and (phase != "train" or r.get("dropout") == 0.1)
        ]

    lines = [
        "| goal (reference preset) | target | keras-txl best: wall / "
        "CPU-normalized | peer, same pass: wall / CPU-normalized | "
        "ratio: wall / CPU | met (wall / CPU) | by |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    best_fp32 = (_best(pick("train", "float32"), "mfu"), None)
    if best_fp32[0] is None:
        lines.append(
            f"| fp32 training, MFU vs fp32 matmul | "
            f"{_pct(GOAL_FP32_MFU)} | - | - | - | - | - |"
        )
    else:
        wall = best_fp32[0]["mfu"]
        cpu_row = _best(pick("train", "float32"), "mfu_cpu")
        met = "yes" if wall >= GOAL_FP32_MFU else "no"
        met += " / yes" if cpu_row["mfu_cpu"] >= GOAL_FP32_MFU else " / no"
        lines.append(
            f"| fp32 training, MFU vs fp32 matmul | {_pct(GOAL_FP32_MFU)} "
            f"| {_pct(wall)} / {_pct(cpu_row['mfu_cpu'])} | (no peer) | - "
            f"| {met} | {cpu_row['backend']} {_config(cpu_row)} |"
        )

    def line(name, target, candidates, peer):
        best_wall = _best(candidates, "tokens_per_s")
        best_cpu = _best(candidates, "tokens_per_cpu_s_x_cores")
        goal = f"{target:g}x the peer"
        if best_wall is None:
            lines.append(f"| {name} | {goal} | not run | - | - | - | - |")
            return
        ours = (
            f"{_fmt(best_wall['tokens_per_s'])} / "
            f"{_fmt(best_cpu['tokens_per_cpu_s_x_cores'])}"
        )
        if peer is None:
            lines.append(
                f"| {name} | {goal} | {ours} | {NOT_MEASURED} | - | - | - |"
            )
            return
        wall = best_wall["tokens_per_s"] / peer["tokens_per_s"]
        cpu = (
            best_cpu["tokens_per_cpu_s_x_cores"]
            / peer["tokens_per_cpu_s_x_cores"]
        )
        met = f"{'yes' if wall >= target else 'no'} / "
        met += "yes" if cpu >= target else "no"
        by = best_cpu["backend"]
        if "dtype" in best_cpu:
            by += f" {best_cpu['dtype']} {_config(best_cpu)}"
        if "mode" in best_cpu:
            by += f" {best_cpu['mode']}"
        lines.append(
            f"| {name} | {goal} | {ours} | {_fmt(peer['tokens_per_s'])} / "
            f"{_fmt(peer['tokens_per_cpu_s_x_cores'])} | {wall:.2f}x / "
            f"{cpu:.2f}x | {met} | {by} |"
        )

    authors_train = peer_row(results, "authors_pytorch", "train")
    authors_eval = peer_row(results, "authors_pytorch", "eval")
    hf_generate = peer_row(results, "huggingface_transfo_xl", "generate")
    line(
        "mixed bf16 training vs the authors' fp32 PyTorch",
        GOAL_BF16_TRAIN_X,
        pick("train", "mixed_bfloat16"),
        authors_train,
    )
    line(
        "JAX fp32 training vs the authors' fp32 PyTorch",
        GOAL_JAX_TRAIN_X,
        pick("train", "float32", "jax"),
        authors_train,
    )
    line(
        "evaluation vs the authors' PyTorch",
        GOAL_EVAL_X,
        pick("eval"),
        authors_eval,
    )
    paper = [
        r
        for r in results
        if r.get("benchmark") == "paper_eval" and "error" not in r
    ]
    line(
        "evaluation at the paper's wt103 settings (T 128, M 1,600, clamp "
        "1,000, same_length) vs the authors' PyTorch",
        GOAL_EVAL_X,
        [r for r in paper if r.get("implementation") == "keras_txl"],
        next((r for r in paper if r.get("implementation") == "authors"), None),
    )
    generated = generation_rows(results)
    for backend in ("jax", "tensorflow"):
        line(
            f"`generate()` on {backend} vs HuggingFace's TransfoXL "
            f"(batch 1, 64-token prompt, {GENERATE_NEW_TOKENS} new, "
            "memory 128)",
            GOAL_GENERATE_X,
            [r for r in generated if r["backend"] == backend],
            hf_generate,
        )
    return "\n".join(lines)


def peers_table(results):
    rows = [r for r in results if r.get("benchmark") == "peer"]
    names = {
        "authors_pytorch": "authors' PyTorch (kimiyoung/transformer-xl)",
        "huggingface_transfo_xl": "HuggingFace TransfoXLLMHeadModel",
    }
    lines = [
        "| peer | phase | tokens/s (wall) | tokens per CPU-s x cores | "
        "versions |",
        "|---|---|---:|---:|---|",
    ]
    for peer in names:
        for phase in ("train", "eval", "generate"):
            r = peer_row(rows, peer, phase)
            if r is None:
                if (peer == "authors_pytorch") == (phase != "generate"):
                    lines.append(
                        f"| {names[peer]} | {phase} | {NOT_MEASURED} | - | - |"
                    )
                continue
            versions = f"torch {r.get('torch', '?')}"
            if "transformers" in r:
                versions += f", transformers {r['transformers']}"
            lines.append(
                f"| {names[peer]} | {phase} | {_fmt(r['tokens_per_s'])} | "
                f"{_fmt(r['tokens_per_cpu_s_x_cores'])} | {versions} |"
            )
    return "\n".join(lines)


def paper_eval_table(results):
    rows = [r for r in results if r.get("benchmark") == "paper_eval_summary"]
    if not rows:
        return "(not run)"
    summary = rows[-1]
    runs = {
        (r["backend"], r["mode"]): r
        for r in results
        if r.get("benchmark") == "paper_eval" and "error" not in r
    }
    first = next(iter(runs.values()), {})
    lines = [
        f"Reference size, batch {first.get('batch_size', '?')}, T = "
        f"{first.get('segment_length', '?')}, M = "
        f"{first.get('memory_length', '?')}, clamp "
        f"{first.get('clamp_length', '?')}, same_length, fp32; "
        f"{first.get('segments', '?')} timed segments from a full memory. "
        "Peak memory: the growth of the child process's peak RSS from "
        "before the first segment.",
        "",
        "| implementation | tokens/s (wall) | tokens per CPU-s x cores | "
        "x authors (wall / CPU) | kv_reuse / plain (wall / CPU) | peak "
        "RSS growth MiB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    authors = runs.get(("torch", "authors_eval"))
    if authors is not None:
        lines.append(
            f"| authors' PyTorch, eval mode | {_fmt(authors['tokens_per_s'])}"
            f" | {_fmt(authors['tokens_per_cpu_s_x_cores'])} | 1x | - | "
            f"{_fmt(authors['peak_rss_delta_mib'])} |"
        )
    for r in summary["rows"]:
        ratio = "-"
        if "x_authors_wall" in r:
            ratio = f"{r['x_authors_wall']:.2f}x / {r['x_authors_cpu']:.2f}x"
        reuse = "-"
        if "kv_reuse_over_plain_wall" in r:
            reuse = (
                f"{r['kv_reuse_over_plain_wall']:.2f}x / "
                f"{r['kv_reuse_over_plain_cpu']:.2f}x"
            )
        lines.append(
            f"| keras-txl {r['backend']}, {r['mode']} | "
            f"{_fmt(r['tokens_per_s'])} | "
            f"{_fmt(r['tokens_per_cpu_s_x_cores'])} | {ratio} | {reuse} | "
            f"{_fmt(r['peak_rss_delta_mib'])} |"
        )
    return "\n".join(lines)


def generation_length_table(results):
    rows = [r for r in results if r.get("benchmark") == "generation_length"]
    if not rows:
        return "(not run)"
    lines = [
        "| backend | new tokens | ms per token (CPU) | tokens/s (wall) | "
        "tokens per CPU-s x cores | cost per token / at 64 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for row in r["rows"]:
            lines.append(
                f"| {r['backend']} | {row['new_tokens']} | "
                f"{row['ms_per_token']:.2f} | {_fmt(row['tokens_per_s'])} | "
                f"{_fmt(row['tokens_per_cpu_s_x_cores'])} | "
                f"{row['cost_ratio_to_first']:.2f}x |"
            )
    return "\n".join(lines)


def limits_table(results):
    """The profiles of `generation_profile` and `packed_dropout`."""
    lines = []
    generation = [
        r for r in results if r.get("benchmark") == "generation_profile"
    ]
    if generation:
        lines += [
            "`generate()`'s sampler loop, per new token (batch 1, memory "
            "128; `benchmarks/generation_profile.py`), and the optimized "
            "HLO XLA runs for it:",
            "",
            "| backend | ms per token (CPU) | ms per token (wall) | "
            "dots in the module | instructions in the module | "
            "instructions per while-loop body | load |",
            "|---|---:|---:|---:|---:|---|---:|",
        ]
        for r in generation:
            bodies = ", ".join(
                str(b["instructions"]) for b in r.get("while_bodies", [])
            )
            lines.append(
                f"| {r['backend']} | {r['loop_ms_per_token_cpu']:.2f} | "
                f"{r['loop_ms_per_token_wall']:.2f} | "
                f"{r.get('module_dots', '-')} | "
                f"{r.get('module_instructions', '-')} | {bodies} | "
                f"{r['load']:.1f} |"
            )
    dropout = [r for r in results if r.get("benchmark") == "packed_dropout"]
    if dropout:
        lines += [
            "",
            "A JAX training step at the reference preset with each "
            "dropout (`benchmarks/packed_dropout.py`, interleaved in one "
            "process):",
            "",
            "| dropout | CPU ms per step | tokens per CPU-s x cores | "
            "CPU time / Keras's `Dropout` |",
            "|---|---:|---:|---:|",
        ]
        for r in dropout:
            lines.append(
                f"| {r['variant']} | {r['cpu_ms_per_step']:.0f} | "
                f"{_fmt(r['tokens_per_cpu_s_x_cores'])} | "
                f"{r['cpu_time_vs_keras_dropout']:.2f} |"
            )
    return "\n".join(lines) or "(not run)"


def table9(results):
    rows = [r for r in results if r.get("benchmark") == "eval_speed"]
    if not rows:
        return "(not run)"
    lines = [
        "| attention length L | TXL (T, M) | TXL ms/token | vanilla "
        "ms/token | speedup (wall) | speedup (CPU time) | FLOP ratio |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['attention_length']} | ({r['segment_length']}, "
            f"{r['memory_length']}) | {_fmt(r['txl_ms_per_token'], 3)} | "
            f"{_fmt(r['vanilla_ms_per_token'], 1)} | {_fmt(r['speedup'])}x | "
            f"{_fmt(r['speedup_cpu_time'])}x | {_fmt(r['flop_ratio'])}x |"
        )
    return "\n".join(lines)


def generation_table(results):
    rows = [r for r in results if r.get("benchmark") == "generation"]
    if not rows:
        return "(not run)"
    result = rows[-1]
    clock = "CPU-second" if result["clock"] == "cpu" else "second"
    lines = [
        f"{result['backend']}, batch 1, {result['model']['num_layers']} "
        f"layers, hidden {result['model']['hidden_dim']}; tokens per "
        f"{clock}; best of {result['repeats']} after a compiling call.",
        "",
        "| context | memory: one step | `lm.generate` (new tokens) | "
        "recompute the context | memory / recompute | generate / "
        "recompute |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['context']} | {_fmt(r['memory_step_tokens_per_s'])} | "
            f"{_fmt(r['generate_loop_tokens_per_s'])} | "
            f"{_fmt(r['recompute_step_tokens_per_s'])} | "
            f"{_fmt(r['memory_over_recompute'], 1)}x | "
            f"{_fmt(r['generate_loop_over_recompute'], 1)}x |"
        )
    return "\n".join(lines)


def growth_tables(results):
    rows = [r for r in results if r.get("benchmark") == "cost_growth"]
    if not rows:
        return "(not run)"
    lines = [
        "| sweep | T | M | ms per segment (wall) | CPU ms per segment |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r["sweep"] in ("memory", "segment"):
            lines.append(
                f"| {r['sweep']} | {r['segment_length']} | "
                f"{r['memory_length']} | {_fmt(1000 * r['seconds'], 1)} | "
                f"{_fmt(1000 * r['cpu_seconds'], 1)} |"
            )
    fit = [r for r in rows if r["sweep"] == "fit"]
    if fit:
        f = fit[0]
        lines += [
            "",
            f"Fit of CPU time per segment = a·T + b·T·(T + M): "
            f"a = {1e6 * f['a_cpu_seconds_per_token']:.1f} µs per token, "
            f"b = {1e9 * f['b_cpu_seconds_per_token_key']:.2f} ns per "
            f"(query, key) pair, R² = {f['r2']:.3f} "
            f"(on wall time: R² = {f['r2_wall']:.3f}).",
        ]
    rss = [r for r in rows if r["sweep"] == "rss"]
    if rss:
        lines += [
            "",
            "| M | carried memory B·L·M·d (MiB) | one layer's scores "
            "h·B·T·(T+M) (MiB) | peak RSS (MiB) |",
            "|---:|---:|---:|---:|",
        ]
        for r in rss:
            lines.append(
                f"| {r['memory_length']} | {_fmt(r['state_mib'], 1)} | "
                f"{_fmt(r['one_layer_scores_mib'], 1)} | "
                f"{_fmt(r['peak_rss_mib'])} |"
            )
    return "\n".join(lines)


def variants_table(results):
    rows = [r for r in results if r.get("benchmark") == "attention_variants"]
    if not rows:
        return "(not run in this pass: `--variants`)"
    lines = [
        "| backend | dtype | phase | original: tokens per CPU-s x cores | "
        "current | change |",
        "|---|---|---|---:|---:|---:|",
    ]
    models = [r for r in rows if r["part"] == "model"]
    for r in models:
        if r["variant"] != "original":
            continue
        new = [
            n
            for n in models
            if n["variant"] == "current"
            and (n["backend"], n["dtype"], n["phase"])
            == (r["backend"], r["dtype"], r["phase"])
        ]
        if not new:
            continue
        before = r["tokens_per_cpu_s_x_cores"]
        after = new[0]["tokens_per_cpu_s_x_cores"]
        lines.append(
            f"| {r['backend']} | {r['dtype']} | {r['phase']} | "
            f"{_fmt(before)} | {_fmt(after)} | "
            f"{100 * (after / before - 1):+.0f}% |"
        )
    shifts = [r for r in rows if r["part"] == "shift"]
    if shifts:
        lines += [
            "",
            "| backend | relative shift, forward + backward | CPU ms | "
            "wall ms |",
            "|---|---|---:|---:|",
        ]
        for r in shifts:
            lines.append(
                f"| {r['backend']} | {r['variant']} | {r['cpu_ms']:.1f} | "
                f"{r['wall_ms']:.1f} |"
            )
    return "\n".join(lines)


def parity_table(results):
    rows = [r for r in results if r.get("benchmark") == "precision_parity"]
    if not rows:
        return "(not run in this pass: `--parity`)"
    lines = [
        "| dtype | steps | val bpc | train tokens/s |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        if "val_bpc" in r:
            lines.append(
                f"| {r['dtype']} | {r['steps']} | {r['val_bpc']:.4f} | "
                f"{_fmt(r['train_tokens_per_s'])} |"
            )
        else:
            lines.append(
                f"| {r['dtype']} | {r['steps']} | relative difference "
                f"{100 * r['relative_val_bpc_difference']:+.2f}% | |"
            )
    return "\n".join(lines)


def render(results, started, wall_seconds, argv):
    machine = common.machine_info()
    errors = [r for r in results if "error" in r]
    commands = sorted({r["command"] for r in results if "command" in r})
    parts = [
        BEGIN,
        f"Generated by `PYTHONPATH=. python -m benchmarks.run_all "
        f"{' '.join(argv)}`".rstrip()
        + f" on {started} ({wall_seconds / 60:.0f} min), "
        f"{machine.get('cpu', '?')}, {machine['cpus']} cores, "
        f"avx512_bf16={machine.get('avx512_bf16')}. `load` is the 1-minute "
        "load average when the result was taken: above 2, other processes "
        "shared the cores and the wall-clock numbers are low; the "
        "CPU-normalized columns (tokens per CPU-second of the benchmark "
        "process x cores) estimate what the cores give when not shared.",
        "",
        "### Goals",
        "",
        goals_table(results),
        "",
        "### What limits the goals not met",
        "",
        limits_table(results),
        "",
        "### Peers, measured in the same pass (`benchmarks/peers.py`)",
        "",
        peers_table(results),
        "",
        "### Matmul roofline",
        "",
        roofline_table(results),
        "",
        "### Training and evaluation through `fit` / `evaluate`",
        "",
        throughput_table(results),
        "",
        "### Evaluation speed: memory reuse vs a vanilla sliding window "
        "(Table 9)",
        "",
        table9(results),
        "",
        "![eval speed](images/eval_speed.png)",
        "",
        "### Generation: memory reuse vs recomputing the context",
        "",
        generation_table(results),
        "",
        "![generation](images/generation.png)",
        "",
        "### `generate()` cost per new token against the number of new "
        "tokens (default memory: the model's, 128; 64-token prompt)",
        "",
        generation_length_table(results),
        "",
        "### Evaluation at the paper's wt103 settings "
        "(`benchmarks/paper_eval.py`)",
        "",
        paper_eval_table(results),
        "",
        "### Cost growth",
        "",
        growth_tables(results),
        "",
        "![cost growth](images/cost_growth.png)",
        "",
        "### Before / after of the attention changes (same process, "
        "interleaved)",
        "",
        variants_table(results),
        "",
        "### Mixed bfloat16 vs float32, validation bpc at equal steps",
        "",
        parity_table(results),
    ]
    if errors:
        parts += ["", "### Failures", ""]
        parts += [
            f"- `{e.get('module')}` on {e.get('backend')}: {e['error']}"
            for e in errors
        ]
    parts += ["", "<details><summary>Commands</summary>", ""]
    parts += [f"    {c}" for c in commands]
    parts += ["", "</details>", END]
    return "\n".join(parts)


def write_doc(path, block):
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + block + tail
    else:
        text = (text or "# Benchmarks\n") + "\n## Measured tables\n\n"
        text += block + "\n"
    with open(path, "w") as f:
        f.write(text)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="run the GPU pass instead (benchmarks/gpu_pass.py: NVIDIA's "
        "base size, JAX and TensorFlow, fp32 and mixed bf16, MFU beside "
        "NVIDIA's numbers); with --quick, its CPU smoke run",
    )
    parser.add_argument("--parity", action="store_true")
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also the before/after of the attention (attention_variants)",
    )
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument(
        "--peer-python",
        metavar="PYTHON",
        help="Python of an environment with torch and transformers that "
        "runs benchmarks/peers.py (the peers' own environment; "
        "tools/fixtures/README.md); without it the peers are not measured",
    )
    parser.add_argument(
        "--authors-code",
        metavar="DIR",
        help="kimiyoung/transformer-xl (or its pytorch/ folder), for the "
        "authors' training and evaluation speed",
    )
    parser.add_argument(
        "--json",
        default=os.path.join(ROOT, "benchmarks", "results", "latest.json"),
    )
    parser.add_argument(
        "--doc", default=os.path.join(ROOT, "docs", "benchmarks.md")
    )
    parser.add_argument(
        "--include",
        default="",
        help="comma-separated JSON files of results (lists of RESULT "
        "objects, or run_all outputs) to add to the tables, e.g. a "
        "separate --parity run",
    )
    parser.add_argument(
        "--from-json",
        default=None,
        help="only re-render the document from saved results",
    )
    args = parser.parse_args(argv)
    if args.gpu:
        from benchmarks import gpu_pass

        gpu_pass.main(["--quick"] if args.quick else [])
        return
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    start = time.perf_counter()
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        results, started, elapsed = (
            saved["results"],
            saved["started"],
            saved["wall_seconds"],
        )
        argv = saved["argv"]
    else:
        results = []
        for spec in suite(
            args.quick,
            args.parity,
            args.backends.split(","),
            args.variants,
            peer_python=args.peer_python,
            authors_code=args.authors_code,
        ):
            results += run_job(spec, common.log)
        elapsed = time.perf_counter() - start
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(
                {
                    "started": started,
                    "wall_seconds": elapsed,
                    "argv": argv,
                    "results": results,
                },
                f,
                indent=1,
            )
    for path in [p for p in args.include.split(",") if p]:
        with open(path) as f:
            extra = json.load(f)
        results += extra["results"] if isinstance(extra, dict) else extra
    write_doc(args.doc, render(results, started, elapsed, argv))
    common.log(f"wrote {args.doc}")
    print(json.dumps({"results": len(results), "minutes": elapsed / 60}))


if __name__ == "__main__":
    main()
