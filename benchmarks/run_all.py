"""Runs the benchmark suite, one subprocess per backend and configuration,
and writes the tables into `docs/benchmarks.md`.

    PYTHONPATH=. python -m benchmarks.run_all            # ~15 min, 2 cores
    PYTHONPATH=. python -m benchmarks.run_all --quick    # ~5 min
    PYTHONPATH=. python -m benchmarks.run_all --variants # + attention A/B
    PYTHONPATH=. python -m benchmarks.run_all --gpu      # GPU pass, < 8 min
    PYTHONPATH=. python -m benchmarks.run_all --render-only  # no run
    PYTHONPATH=. python -m benchmarks.run_all \
        --peer-python PEERS/venv/bin/python --authors-code PEERS/transformer-xl

The peers (the authors' PyTorch code, HuggingFace's TransfoXL) run in the
same pass, each in its own environment: `benchmarks/peers.py` under the
Python given by `--peer-python` (never a dependency of keras-txl). The
goals are ratios to them; without `--peer-python` the tables say "not
measured".

Every result is saved as JSON (`--json`, default
`benchmarks/results/latest.json`); plots go to `docs/images/`. The tables
are written between the `<!-- run_all:begin -->` and `<!-- run_all:end -->`
markers of the document, leaving the rest of it as it is.
`--render-only` writes them again from the saved JSON (and `--include`)
without running anything. Tables are data (`SECTIONS`): a title and
tables of columns, each cell a key of the result or a function of it,
written by one function (`table`).
"""

import argparse
import datetime
import json
import os
import sys
import time

from benchmarks import common

ROOT = common.ROOT
BEGIN, END = "<!-- run_all:begin -->", "<!-- run_all:end -->"
IMAGES = os.path.join(ROOT, "docs", "images")

# Goals at the reference size, as multiples of the peers measured in the
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


def suite(quick, backends, variants=False, peer_python=None, authors_code=None):
    steps = ["--steps", "8", "--eval-steps", "8"] if quick else []
    seconds = ["--seconds", "0.5"] if quick else []
    jobs = [
        job(backend, "throughput", "roofline", *seconds, timeout=300)
        for backend in backends
    ]

    def fit(backend, *args):
        return job(backend, "throughput", "fit", *args)

    bf16 = ["--dtype", "mixed_bfloat16"]
    short = ["--steps", "4", "--eval-steps", "6", "--warmup", "2"]
    if "tensorflow" in backends:
        jobs += [
            fit("tensorflow", "--dtype", "float32", *steps),
            fit("tensorflow", *bf16, *steps),
        ]
        if not quick:
            jobs += [
                fit("tensorflow", "--dtype", "float32", "--jit", "true"),
                fit("tensorflow", *bf16, "--steps-per-execution", "4"),
                fit("tensorflow", *bf16, "--dropout", "0.0"),
                fit("tensorflow", "--size", "small"),
                fit("tensorflow", "--size", "base", *bf16, *short),
            ]
    if "jax" in backends:
        jobs.append(fit("jax", "--dtype", "float32", *steps))
        if not quick:
            jobs += [
                fit("jax", *bf16),
                # What dropout's random numbers cost JAX (threefry on CPU).
                fit("jax", "--dtype", "float32", "--dropout", "0.0"),
                fit("jax", "--size", "small"),
            ]
    if "torch" in backends:
        roofline = ["--roofline-seconds", "0.5"] if quick else []
        jobs.append(fit("torch", "--size", "small", *roofline))
        if not quick:
            jobs.append(fit("torch", "--dtype", "float32", *short))
    lengths = "128,256,512" if quick else "128,256,512,1024,2048"
    plot = os.path.join(IMAGES, "eval_speed.png")
    table9 = ["table9", "--lengths", lengths, "--plot", plot]
    jobs.append(job("tensorflow", "long_context", *table9))
    contexts = ("128 512" if quick else "128 256 512 1024 2048").split()
    png = os.path.join(IMAGES, "generation.png")
    context = ["context", "--contexts", *contexts, "--png", png]
    jobs.append(job("jax", "generation", *context))
    new = ("64", "256") if quick else GENERATE_LENGTHS
    compiled = [b for b in backends if b in ("jax", "tensorflow")]
    for backend in compiled:
        jobs.append(job(backend, "generation", "length", "--new-tokens", *new))
    # The profiles behind the goals that are not met: TensorFlow's
    # generation loop against JAX's (same HLO, per-token time), and what
    # the dropout's random numbers cost a JAX training step.
    jobs += [job(backend, "generation", "profile") for backend in compiled]
    if "jax" in backends and not quick:
        jobs.append(job("jax", "ab", "dropout"))
    jobs += peer_jobs(peer_python, authors_code, quick)
    # Evaluation at the paper's wt103 settings (T 128, M 1,600, clamp
    # 1,000, same_length), keras-txl on both backends and the authors'
    # code, each configuration in a child process of its own.
    paper = ["--quick"] if quick else []
    if peer_python and authors_code:
        paper += ["--peer-python", peer_python, "--authors-code", authors_code]
    jobs.append(job("tensorflow", "paper_eval", *paper, timeout=2400))
    growth = ["growth", "--plot", os.path.join(IMAGES, "cost_growth.png")]
    if quick:
        growth += ["--memories", "0,256,1024", "--segments", "64,128,256"]
        growth += ["--rss-memories", ""]
    jobs.append(job("tensorflow", "long_context", *growth))
    if variants:
        if "tensorflow" in backends:
            jobs += [
                job("tensorflow", "ab", "attention", "--dtype", "float32"),
                job("tensorflow", "ab", "attention", *bf16, "--what", "model"),
            ]
        if "jax" in backends:
            jobs.append(job("jax", "ab", "attention", "--dtype", "float32"))
    return jobs


def run_job(spec):
    start = time.perf_counter()
    results, error, command = common.run_module(
        spec["module"],
        spec["args"],
        spec["backend"],
        timeout=spec["timeout"],
        python=spec.get("python"),
    )
    took = time.perf_counter() - start
    common.log(f"  {len(results)} result(s) in {took:.0f} s")
    if error:
        results.append({"error": error, **spec})
    for result in results:
        result["command"] = command
    return results


# === Tables: data, and the one function that writes them ===


def fmt(value, digits=0):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def pct(value):
    return "-" if value is None else f"{100 * value:.0f}%"


def cell(spec):
    """A cell from its text: `name()`, a function of this module applied
    to the row; or `key[.key...][:FORMAT[:SUFFIX]]`, the value at the
    key path, written by `fmt` with FORMAT digits (or, when FORMAT starts
    with ".", `format(value, FORMAT)`), SUFFIX after it."""
    if spec.endswith("()"):
        return globals()[spec[:-2]]
    path, digits, suffix = spec.split(":") + ["0", ""][spec.count(":") :]

    def write(row):
        value = row
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return "-"
        if digits.startswith("."):
            return format(value, digits) + suffix
        return fmt(value, int(digits)) + suffix

    return write


def columns(text):
    """`[(header, cell, right-aligned)]` from lines `header | cell [| r]`
    ("r": a number column)."""
    out = []
    for line in text.strip().splitlines():
        header, spec, *align = [part.strip() for part in line.split(" | ")]
        out.append((header, cell(spec), align == ["r"]))
    return out


def kind(name):
    """The results of benchmark `name`."""
    return lambda results: [r for r in results if r.get("benchmark") == name]


def nested(name, last=False):
    """The rows under "rows" of each result of benchmark `name` (of the
    last one only if `last`), each with its result's backend."""

    def rows(results):
        found = kind(name)(results)
        return [
            dict(row, backend=r.get("backend"))
            for r in (found[-1:] if last else found)
            for row in r["rows"]
        ]

    return rows


def table(spec, results):
    """Markdown of one table `spec`: `columns` (see `columns`), the
    `rows(results)`, an optional `intro(results)` paragraph; or a
    paragraph alone, `{"text": fn(results)}`. `None` when there are no
    rows (no text)."""
    if "text" in spec:
        return spec["text"](results)
    rows = spec["rows"](results)
    if not rows:
        return None
    cols = columns(spec["columns"])
    lines = [spec["intro"](results), ""] if "intro" in spec else []
    lines += [
        "| " + " | ".join(header for header, _, _ in cols) + " |",
        "|" + "|".join("---:" if right else "---" for *_, right in cols) + "|",
    ]
    lines += ["| " + " | ".join(c(r) for _, c, _ in cols) + " |" for r in rows]
    return "\n".join(lines)


def section(spec, results):
    """The tables of a section, or its `empty` text when none has rows."""
    parts = [table(t, results) for t in spec["tables"]]
    parts = [p for p in parts if p is not None]
    return "\n\n".join(parts) if parts else spec.get("empty", "(not run)")


# --- Cells and rows that are more than a key ---


def config(r):
    jit = r.get("jit_compile")
    label = f"jit={jit}"
    if jit == "auto":
        label += f" ({'XLA' if r.get('resolved_jit_compile') else 'no XLA'})"
    if r.get("backend") == "jax":
        label = "jit"
    if r.get("steps_per_execution", 1) != 1:
        label += f", spe={r['steps_per_execution']}"
    if r.get("dropout") != 0.1:
        label += f", dropout={r.get('dropout')}"
    return label


def size_of(r):
    return r.get("size", r.get("preset"))  # "preset": results before #lean


def mfu(r):
    return pct(r.get("mfu"))


def mfu_cpu(r):
    return pct(r.get("mfu_cpu"))


def step_ms(r):
    return f"{fmt(r['median_execution_ms'])} / {fmt(r['max_execution_ms'])}"


def shapes(r):
    return ", ".join(
        f"{k}: {v['gflops_per_s']:.0f}" for k, v in r["per_shape"].items()
    )


def loop_bodies(r):
    return ", ".join(str(b["instructions"]) for b in r.get("while_bodies", []))


def segment_and_memory(r):
    return f"({r['segment_length']}, {r['memory_length']})"


def wall_ms(r):
    return fmt(1000 * r["seconds"], 1)


def cpu_ms(r):
    return fmt(1000 * r["cpu_seconds"], 1)


def x_authors(r):
    if r.get("mode") == "authors_eval":
        return "1x"
    if "x_authors_wall" not in r:
        return "-"
    return f"{r['x_authors_wall']:.2f}x / {r['x_authors_cpu']:.2f}x"


def kv_over_plain(r):
    if "kv_reuse_over_plain_wall" not in r:
        return "-"
    wall, cpu = r["kv_reuse_over_plain_wall"], r["kv_reuse_over_plain_cpu"]
    return f"{wall:.2f}x / {cpu:.2f}x"


def versions(r):
    if "torch" not in r:
        return "-"
    text = f"torch {r['torch']}"
    if "transformers" in r:
        text += f", transformers {r['transformers']}"
    return text


def parity_bpc(r):
    if "val_bpc" in r:
        return f"{r['val_bpc']:.4f}"
    change = 100 * r["relative_val_bpc_difference"]
    return f"relative difference {change:+.2f}%"


def parity_rate(r):
    return fmt(r.get("train_tokens_per_s")) if "val_bpc" in r else ""


def best(rows, key):
    rows = [r for r in rows if r.get(key) is not None]
    return max(rows, key=lambda r: r[key]) if rows else None


def peer_row(results, peer, phase):
    """The result of a peer (`authors_pytorch`, `huggingface_transfo_xl`)
    in a phase, or `None` when it was not measured."""
    rows = [
        r
        for r in kind("peer")(results)
        if r.get("peer") == peer and r.get("phase") == phase
    ]
    return rows[-1] if rows else None


def goal(name, target, candidates, peer):
    """A goal's row: the best of `candidates` (wall and CPU-normalized
    tokens/s) over `peer`'s, against `target`."""
    row = {"goal": name, "target": f"{target:g}x the peer"}
    wall = best(candidates, "tokens_per_s")
    if wall is None:
        return dict(row, ours="not run")
    cpu = best(candidates, "tokens_per_cpu_s_x_cores")
    row["ours"] = (
        f"{fmt(wall['tokens_per_s'])} / {fmt(cpu['tokens_per_cpu_s_x_cores'])}"
    )
    if peer is None:
        return dict(row, peer=NOT_MEASURED)
    x_wall = wall["tokens_per_s"] / peer["tokens_per_s"]
    x_cpu = cpu["tokens_per_cpu_s_x_cores"] / peer["tokens_per_cpu_s_x_cores"]
    by = cpu["backend"]
    if "dtype" in cpu:
        by += f" {cpu['dtype']} {config(cpu)}"
    if "mode" in cpu:
        by += f" {cpu['mode']}"
    met = ["yes" if x >= target else "no" for x in (x_wall, x_cpu)]
    return dict(
        row,
        peer=f"{fmt(peer['tokens_per_s'])} / "
        f"{fmt(peer['tokens_per_cpu_s_x_cores'])}",
        ratio=f"{x_wall:.2f}x / {x_cpu:.2f}x",
        met=" / ".join(met),
        by=by,
    )


def goal_rows(results):
    fits = [r for r in kind("train_eval")(results) if size_of(r) == "reference"]

    def pick(phase, dtype=None, backend=None):
        # Training counts with the peer's dropout (0.1) only: the rows
        # without dropout measure what it costs.
        return [
            r
            for r in fits
            if r["phase"] == phase
            and dtype in (None, r["dtype"])
            and backend in (None, r["backend"])
            and (phase != "train" or r.get("dropout") == 0.1)
        ]

    row = {"goal": "fp32 training, MFU vs fp32 matmul"}
    row["target"] = pct(GOAL_FP32_MFU)
    wall = best(pick("train", "float32"), "mfu")
    if wall is not None:
        cpu = best(pick("train", "float32"), "mfu_cpu")
        met = [v >= GOAL_FP32_MFU for v in (wall["mfu"], cpu["mfu_cpu"])]
        row.update(
            ours=f"{pct(wall['mfu'])} / {pct(cpu['mfu_cpu'])}",
            peer="(no peer)",
            met=" / ".join("yes" if m else "no" for m in met),
            by=f"{cpu['backend']} {config(cpu)}",
        )
    authors = peer_row(results, "authors_pytorch", "train")
    paper = [r for r in kind("paper_eval")(results) if "error" not in r]
    paper_peer = [r for r in paper if r.get("implementation") == "authors"]
    rows = [
        row,
        goal(
            "mixed bf16 training vs the authors' fp32 PyTorch",
            GOAL_BF16_TRAIN_X,
            pick("train", "mixed_bfloat16"),
            authors,
        ),
        goal(
            "JAX fp32 training vs the authors' fp32 PyTorch",
            GOAL_JAX_TRAIN_X,
            pick("train", "float32", "jax"),
            authors,
        ),
        goal(
            "evaluation vs the authors' PyTorch",
            GOAL_EVAL_X,
            pick("eval"),
            peer_row(results, "authors_pytorch", "eval"),
        ),
        goal(
            "evaluation at the paper's wt103 settings (T 128, M 1,600, "
            "clamp 1,000, same_length) vs the authors' PyTorch",
            GOAL_EVAL_X,
            [r for r in paper if r.get("implementation") == "keras_txl"],
            (paper_peer or [None])[0],
        ),
    ]
    generated = [
        r
        for r in nested("generation_length")(results)
        if r["new_tokens"] == GENERATE_NEW_TOKENS
    ]
    hf = peer_row(results, "huggingface_transfo_xl", "generate")
    for backend in ("jax", "tensorflow"):
        name = (
            f"`generate()` on {backend} vs HuggingFace's TransfoXL (batch "
            f"1, 64-token prompt, {GENERATE_NEW_TOKENS} new, memory 128)"
        )
        ours = [r for r in generated if r["backend"] == backend]
        rows.append(goal(name, GOAL_GENERATE_X, ours, hf))
    return rows


PEER_NAMES = {
    "authors_pytorch": "authors' PyTorch (kimiyoung/transformer-xl)",
    "huggingface_transfo_xl": "HuggingFace TransfoXLLMHeadModel",
}


def peer_rows(results):
    """One row per (peer, phase) it runs; "not measured" for the authors'
    training and evaluation when they were not run."""
    rows = []
    for peer, phase in (
        ("authors_pytorch", "train"),
        ("authors_pytorch", "eval"),
        ("huggingface_transfo_xl", "generate"),
    ):
        r = peer_row(results, peer, phase)
        if r is None and peer == "authors_pytorch":
            r = {"tokens_per_s": NOT_MEASURED}
        if r is not None:
            rows.append(dict(r, name=PEER_NAMES[peer], phase=phase))
    return rows


def paper_rows(results):
    """The authors' row (from the runs) and the summary's rows."""
    summaries = kind("paper_eval_summary")(results)
    if not summaries:
        return []
    runs = [r for r in kind("paper_eval")(results) if "error" not in r]
    authors = [r for r in runs if r.get("mode") == "authors_eval"]
    rows = [dict(r, name="authors' PyTorch, eval mode") for r in authors[:1]]
    for r in summaries[-1]["rows"]:
        rows.append(dict(r, name=f"keras-txl {r['backend']}, {r['mode']}"))
    return rows


def paper_intro(results):
    runs = [r for r in kind("paper_eval")(results) if "error" not in r]
    first = runs[0] if runs else {}
    return (
        f"Reference size, batch {first.get('batch_size', '?')}, T = "
        f"{first.get('segment_length', '?')}, M = "
        f"{first.get('memory_length', '?')}, clamp "
        f"{first.get('clamp_length', '?')}, same_length, fp32; "
        f"{first.get('segments', '?')} timed segments from a full memory. "
        "Peak memory: the growth of the child process's peak RSS from "
        "before the first segment."
    )


def generation_intro(results):
    r = kind("generation")(results)[-1]
    clock = "CPU-second" if r["clock"] == "cpu" else "second"
    return (
        f"{r['backend']}, batch 1, {r['model']['num_layers']} layers, "
        f"hidden {r['model']['hidden_dim']}; tokens per {clock}; best of "
        f"{r['repeats']} after a compiling call."
    )


def sweep(*names):
    def rows(results):
        return [r for r in kind("cost_growth")(results) if r["sweep"] in names]

    return rows


def growth_fit(results):
    fits = sweep("fit")(results)
    if not fits:
        return None
    f = fits[0]
    return (
        "Fit of CPU time per segment = a·T + b·T·(T + M): "
        f"a = {1e6 * f['a_cpu_seconds_per_token']:.1f} µs per token, "
        f"b = {1e9 * f['b_cpu_seconds_per_token_key']:.2f} ns per "
        f"(query, key) pair, R² = {f['r2']:.3f} "
        f"(on wall time: R² = {f['r2_wall']:.3f})."
    )


def variant_rows(results):
    """Per (backend, dtype, phase): the original attention's tokens per
    CPU-second x cores, the current one's, and the change."""
    found = kind("attention_variants")(results)
    models = [r for r in found if r["part"] == "model"]
    rows = []
    for r in [m for m in models if m["variant"] == "original"]:
        same = (r["backend"], r["dtype"], r["phase"])
        for n in models:
            if n["variant"] == "current" and same == (
                n["backend"],
                n["dtype"],
                n["phase"],
            ):
                after = n["tokens_per_cpu_s_x_cores"]
                change = after / r["tokens_per_cpu_s_x_cores"] - 1
                rows.append(dict(r, after=after, change=f"{change:+.0%}"))
                break
    return rows


def shift_rows(results):
    found = kind("attention_variants")(results)
    return [r for r in found if r["part"] == "shift"]


# --- The sections, in the order of the document ---

SECTIONS = [
    {
        "title": "Goals",
        "tables": [
            {
                "rows": goal_rows,
                "columns": """
goal (reference size) | goal
target | target | r
keras-txl best: wall / CPU-normalized | ours | r
peer, same pass: wall / CPU-normalized | peer | r
ratio: wall / CPU | ratio | r
met (wall / CPU) | met
by | by""",
            }
        ],
    },
    {
        "title": "What limits the goals not met",
        "tables": [
            {
                "intro": lambda results: (
                    "`generate()`'s sampler loop, "
                    "per new token (batch 1, memory 128; `python -m "
                    "benchmarks.generation profile`), and the optimized HLO "
                    "XLA runs for it:"
                ),
                "rows": kind("generation_profile"),
                "columns": """
backend | backend
ms per token (CPU) | loop_ms_per_token_cpu:.2f | r
ms per token (wall) | loop_ms_per_token_wall:.2f | r
dots in the module | module_dots | r
instructions in the module | module_instructions | r
instructions per while-loop body | loop_bodies()
load | load:.1f | r""",
            },
            {
                "intro": lambda results: (
                    "A JAX training step at the "
                    "reference size with each dropout (`python -m "
                    "benchmarks.ab dropout`, interleaved in one process):"
                ),
                "rows": kind("packed_dropout"),
                "columns": """
dropout | variant
CPU ms per step | cpu_ms_per_step:.0f | r
tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
CPU time / Keras's `Dropout` | cpu_time_vs_keras_dropout:.2f | r""",
            },
        ],
    },
    {
        "title": "Peers, measured in the same pass (`benchmarks/peers.py`)",
        "tables": [
            {
                "rows": peer_rows,
                "columns": """
peer | name
phase | phase
tokens/s (wall) | tokens_per_s | r
tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
versions | versions()""",
            }
        ],
    },
    {
        "title": "Matmul roofline",
        "tables": [
            {
                "rows": kind("roofline"),
                "columns": """
backend | backend
dtype | dtype
matmul GFLOP/s (best, wall) | gflops_per_s | r
GFLOP per CPU-s x cores | gflops_per_cpu_s_x_cores | r
per shape (wall) | shapes()""",
            }
        ],
    },
    {
        "title": "Training and evaluation through `fit` / `evaluate`",
        "tables": [
            {
                "rows": kind("train_eval"),
                "columns": """
backend | backend
size | size_of()
dtype | dtype
config | config()
phase | phase
tokens/s (wall) | tokens_per_s | r
tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
MFU (wall) | mfu() | r
MFU (CPU) | mfu_cpu() | r
step ms (median / max) | step_ms()
peak RSS MiB | peak_rss_mib | r
load | loadavg_1min:.1f | r""",
            }
        ],
    },
    {
        "title": "Evaluation speed: memory reuse vs a vanilla sliding "
        "window (Table 9)",
        "tables": [
            {
                "rows": kind("eval_speed"),
                "columns": """
attention length L | attention_length | r
TXL (T, M) | segment_and_memory()
TXL ms/token | txl_ms_per_token:3 | r
vanilla ms/token | vanilla_ms_per_token:1 | r
speedup (wall) | speedup:0:x | r
speedup (CPU time) | speedup_cpu_time:0:x | r
FLOP ratio | flop_ratio:0:x | r""",
            }
        ],
        "image": "![eval speed](images/eval_speed.png)",
    },
    {
        "title": "Generation: memory reuse vs recomputing the context",
        "tables": [
            {
                "intro": generation_intro,
                "rows": nested("generation", last=True),
                "columns": """
context | context | r
memory: one step | memory_step_tokens_per_s | r
`lm.generate` (new tokens) | generate_loop_tokens_per_s | r
recompute the context | recompute_step_tokens_per_s | r
memory / recompute | memory_over_recompute:1:x | r
generate / recompute | generate_loop_over_recompute:1:x | r""",
            }
        ],
        "image": "![generation](images/generation.png)",
    },
    {
        "title": "`generate()` cost per new token against the number of "
        "new tokens (default memory: the model's, 128; 64-token prompt)",
        "tables": [
            {
                "rows": nested("generation_length"),
                "columns": """
backend | backend
new tokens | new_tokens | r
ms per token (CPU) | ms_per_token:.2f | r
tokens/s (wall) | tokens_per_s | r
tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
cost per token / at 64 | cost_ratio_to_first:.2f:x | r""",
            }
        ],
    },
    {
        "title": "Evaluation at the paper's wt103 settings "
        "(`benchmarks/paper_eval.py`)",
        "tables": [
            {
                "intro": paper_intro,
                "rows": paper_rows,
                "columns": """
implementation | name
tokens/s (wall) | tokens_per_s | r
tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
x authors (wall / CPU) | x_authors() | r
kv_reuse / plain (wall / CPU) | kv_over_plain() | r
peak RSS growth MiB | peak_rss_delta_mib | r""",
            }
        ],
    },
    {
        "title": "Cost growth",
        "tables": [
            {
                "rows": sweep("memory", "segment"),
                "columns": """
sweep | sweep
T | segment_length | r
M | memory_length | r
ms per segment (wall) | wall_ms() | r
CPU ms per segment | cpu_ms() | r""",
            },
            {"text": growth_fit},
            {
                "rows": sweep("rss"),
                "columns": """
M | memory_length | r
carried memory B·L·M·d (MiB) | state_mib:1 | r
one layer's scores h·B·T·(T+M) (MiB) | one_layer_scores_mib:1 | r
peak RSS (MiB) | peak_rss_mib | r""",
            },
        ],
        "image": "![cost growth](images/cost_growth.png)",
    },
    {
        "title": "Before / after of the attention changes (same process, "
        "interleaved)",
        "empty": "(not run in this pass: `--variants`)",
        "tables": [
            {
                "rows": variant_rows,
                "columns": """
backend | backend
dtype | dtype
phase | phase
original: tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
current | after | r
change | change | r""",
            },
            {
                "rows": shift_rows,
                "columns": """
backend | backend
relative shift, forward + backward | variant
CPU ms | cpu_ms:.1f | r
wall ms | wall_ms:.1f | r""",
            },
        ],
    },
    {
        "title": "Mixed bfloat16 vs float32, validation bpc at equal steps",
        "empty": "(not run in this pass; `--include "
        "benchmarks/results/studies.json` adds the stored run)",
        "tables": [
            {
                "rows": kind("precision_parity"),
                "columns": """
dtype | dtype
steps | steps | r
val bpc | parity_bpc() | r
train tokens/s | parity_rate() | r""",
            }
        ],
    },
]


def render(results, started, wall_seconds, argv):
    machine = next((r for r in results if "cpus" in r), {})
    errors = [r for r in results if "error" in r]
    commands = sorted({r["command"] for r in results if "command" in r})
    parts = [
        BEGIN,
        f"Generated by `PYTHONPATH=. python -m benchmarks.run_all "
        f"{' '.join(argv)}`".rstrip()
        + f" on {started} ({wall_seconds / 60:.0f} min), "
        f"{machine.get('cpu', '?')}, {machine.get('cpus', '?')} cores, "
        f"avx512_bf16={machine.get('avx512_bf16')}. `load` is the 1-minute "
        "load average when the result was taken: above 2, other processes "
        "shared the cores and the wall-clock numbers are low; the "
        "CPU-normalized columns (tokens per CPU-second of the benchmark "
        "process x cores) estimate what the cores give when not shared.",
    ]
    for spec in SECTIONS:
        parts += ["", f"### {spec['title']}", "", section(spec, results)]
        if "image" in spec:
            parts += ["", spec["image"]]
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
        text = head + block + rest.split(END, 1)[1]
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
        help="run the GPU pass instead (`benchmarks.throughput gpu`: "
        "NVIDIA's base size, JAX and TensorFlow, fp32 and mixed bf16, MFU "
        "beside NVIDIA's numbers); with --quick, its CPU smoke run",
    )
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also the before/after of the attention (`benchmarks.ab`)",
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
        help="where the pass's results go (--render-only: are read from)",
    )
    parser.add_argument(
        "--doc", default=os.path.join(ROOT, "docs", "benchmarks.md")
    )
    parser.add_argument(
        "--include",
        default="",
        help="comma-separated JSON files of results (lists of RESULT "
        "objects, or run_all outputs) to add to the tables, e.g. "
        "benchmarks/results/studies.json",
    )
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="run nothing: write the tables again from --json",
    )
    args = parser.parse_args(argv)
    if args.gpu:
        from benchmarks import throughput

        throughput.main(["gpu"] + (["--quick"] if args.quick else []))
        return
    if args.render_only:
        with open(args.json) as f:
            saved = json.load(f)
        results, started = saved["results"], saved["started"]
        elapsed, argv = saved["wall_seconds"], saved["argv"]
    else:
        started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
        start, results = time.perf_counter(), []
        for spec in suite(
            args.quick,
            args.backends.split(","),
            args.variants,
            peer_python=args.peer_python,
            authors_code=args.authors_code,
        ):
            results += run_job(spec)
        elapsed = time.perf_counter() - start
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            saved = dict(started=started, wall_seconds=elapsed, argv=argv)
            json.dump(dict(saved, results=results), f, indent=1)
    for path in [p for p in args.include.split(",") if p]:
        with open(path) as f:
            extra = json.load(f)
        results += extra["results"] if isinstance(extra, dict) else extra
    write_doc(args.doc, render(results, started, elapsed, argv))
    common.log(f"wrote {args.doc}")
    print(json.dumps({"results": len(results), "minutes": elapsed / 60}))


if __name__ == "__main__":
    main()
