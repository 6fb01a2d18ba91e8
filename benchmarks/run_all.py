"""Runs the benchmark suite, one child process per backend and
configuration (the peers under `--peer-python`, their own environment),
saves the results as JSON and writes the tables between the markers of
docs/benchmarks.md; `--render-only` writes them again from the JSON. The
tables are data (`SECTIONS`), written by `common.section`. Commands and
timings: docs/benchmarks.md.
"""

import argparse
import collections
import datetime
import json
import os
import sys
import time

from benchmarks import common
from benchmarks import goals

fmt, pct, kind, nested = common.fmt, common.pct, common.kind, common.nested
config, size_of = common.config, common.size_of
ROOT = common.ROOT
BEGIN, END = "<!-- run_all:begin -->", "<!-- run_all:end -->"
IMAGES = os.path.join(ROOT, "docs", "images")

# The lengths of the flatness check of generate().
GENERATE_LENGTHS = ("64", "256", "1024", "2048")
# The scripts of benchmarks/ that the suite does not run, and why; each
# runs alone (docs/benchmarks.md, "Running"). `--gpu` runs
# `throughput gpu` instead of the suite.
RUN_ALONE = {
    "litert": "needs a trained run folder (`--preset RUN_DIR`)",
    "long_document_classification": "trains two classifiers (minutes); "
    "its results are docs/results.md's",
}


def job(backend, module, *args, timeout=900, python=None):
    """A child process of the pass: {backend, module, args, timeout,
    python}."""
    return dict(locals(), args=list(args))


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

    f32, bf16 = ["--dtype", "float32"], ["--dtype", "mixed_bfloat16"]
    short = ["--steps", "4", "--eval-steps", "6", "--warmup", "2"]
    roofline = ["--roofline-seconds", "0.5"] if quick else []
    fits = {
        "tensorflow": [f32 + steps, bf16 + steps],
        "jax": [f32 + steps],
        "torch": [["--size", "small", *roofline]],
    }
    if not quick:
        fits["tensorflow"] += [
            [*f32, "--jit", "true"],
            [*bf16, "--steps-per-execution", "4"],
            [*bf16, "--dropout", "0.0"],
            ["--size", "small"],
            ["--size", "base", *bf16, *short],
        ]
        # Without dropout: what its random numbers cost JAX (threefry).
        fits["jax"] += [bf16, [*f32, "--dropout", "0.0"], ["--size", "small"]]
        fits["torch"].append(f32 + short)
    jobs += [
        job(backend, "throughput", "fit", *args)
        for backend in ("tensorflow", "jax", "torch")
        if backend in backends
        for args in fits[backend]
    ]
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
    # Pieces of any length, padded to bucket lengths and not, where a new
    # length compiles again (docs/design.md, "Pieces of any length").
    pieces = ["--pieces", "4", "--max-length", "16"] if quick else []
    jobs += [
        job(backend, "streaming_pieces", *pieces, timeout=1200)
        for backend in compiled
    ]
    # The three serving files in one TensorFlow process (docs/serving.md;
    # the litert and onnx extras).
    serving = ["--sizes", "tiny", "--segments", "6", "--tokens", "6"]
    serving = serving if quick else []
    jobs.append(job("tensorflow", "serving_runtimes", *serving, timeout=1200))
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
    options = dict(timeout=spec["timeout"], python=spec["python"])
    results, error, command = common.run_module(
        spec["module"], spec["args"], spec["backend"], **options
    )
    common.log(
        f"  {len(results)} result(s) in {time.perf_counter() - start:.0f} s"
    )
    if error:
        results.append({"error": error, **spec})
    for result in results:
        result["command"] = command
    return results


# === The cells and rows of the tables that are more than a key ===


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


kv_over_plain = common.cell(
    "kv_reuse_over_plain_wall / kv_reuse_over_plain_cpu:.2f:x", {}
)


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


PAPER_INTRO = (
    "Reference size, batch {batch_size}, T = {segment_length}, M = "
    "{memory_length}, clamp {clamp_length}, same_length, fp32; {segments} "
    "timed segments from a full memory. Peak RSS: the growth of the "
    "child process's peak RSS from before the first segment."
)


def paper_intro(results):
    runs = [r for r in kind("paper_eval")(results) if "error" not in r]
    first = collections.defaultdict(lambda: "?", runs[0] if runs else {})
    return PAPER_INTRO.format_map(first)


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
    models = kind("attention_variants", part="model")(results)
    current = {
        (n["backend"], n["dtype"], n["phase"]): n["tokens_per_cpu_s_x_cores"]
        for n in reversed(models)  # the first of each, as before
        if n["variant"] == "current"
    }
    rows = []
    for r in [m for m in models if m["variant"] == "original"]:
        after = current.get((r["backend"], r["dtype"], r["phase"]))
        if after is not None:
            change = after / r["tokens_per_cpu_s_x_cores"] - 1
            rows.append(dict(r, after=after, change=f"{change:+.0%}"))
    return rows


# === The sections, in the order of the document ===


def declare(title, *tables, **extra):
    """A section: its title, tables (see `common.table`; one table's
    `rows, columns[, intro]` alone), and `image`, `empty` (the text when
    no table has rows)."""
    if len(tables) > 1 and isinstance(tables[1], str):
        tables = [tables]
    return dict(title=title, tables=tables, **extra)


PROFILE_INTRO = (
    "`generate()`'s sampler loop, per new token (batch 1, memory 128; "
    "`python -m benchmarks.generation profile`), and the optimized HLO "
    "XLA runs for it:"
)
DROPOUT_INTRO = (
    "A JAX training step at the reference size with each dropout (`python "
    "-m benchmarks.ab dropout`, interleaved in one process):"
)
SECTIONS = [
    declare(
        "Goals",
        goals.goal_rows,
        """
goal (reference size) | goal
target | target | r
keras-txl best: wall / CPU-normalized | ours | r
peer, same pass: wall / CPU-normalized | peer | r
ratio: wall / CPU | ratio | r
met (wall / CPU) | met
by | by""",
    ),
    declare(
        "What limits the goals not met",
        (
            kind("generation_profile"),
            """
backend | backend
ms per token (CPU) | loop_ms_per_token_cpu:.2f | r
ms per token (wall) | loop_ms_per_token_wall:.2f | r
dots in the module | module_dots | r
instructions in the module | module_instructions | r
instructions per while-loop body | loop_bodies()
load | load:.1f | r""",
            PROFILE_INTRO,
        ),
        (
            kind("packed_dropout"),
            """
dropout | variant
CPU ms per step | cpu_ms_per_step:.0f | r
tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
CPU time / Keras's `Dropout` | cpu_time_vs_keras_dropout:.2f | r""",
            DROPOUT_INTRO,
        ),
    ),
    declare(
        "Peers, measured in the same pass (`benchmarks/peers.py`)",
        goals.peer_rows,
        """
peer | name
phase | phase
tokens/s (wall) | tokens_per_s | r
tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
versions | versions()""",
    ),
    declare(
        "Matmul roofline",
        kind("roofline"),
        """
backend | backend
dtype | dtype
matmul GFLOP/s (best, wall) | gflops_per_s | r
GFLOP per CPU-s x cores | gflops_per_cpu_s_x_cores | r
per shape (wall) | shapes()""",
    ),
    declare(
        "Training and evaluation through `fit` / `evaluate`",
        kind("train_eval"),
        """
backend | backend
size | size_of()
dtype | dtype
config | config()
phase | phase
tokens/s (wall) | tokens_per_s | r
tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
MFU (wall) | mfu:% | r
MFU (CPU) | mfu_cpu:% | r
step ms (median / max) | median_execution_ms / max_execution_ms
peak RSS MiB | peak_rss_mib | r
load | loadavg_1min:.1f | r""",
    ),
    declare(
        "Evaluation speed: memory reuse vs a vanilla sliding window (Table 9)",
        kind("eval_speed"),
        """
attention length L | attention_length | r
TXL (T, M) | segment_and_memory()
TXL ms/token | txl_ms_per_token:3 | r
vanilla ms/token | vanilla_ms_per_token:1 | r
speedup (wall) | speedup:0:x | r
speedup (CPU time) | speedup_cpu_time:0:x | r
FLOP ratio | flop_ratio:0:x | r""",
        image="![eval speed](images/eval_speed.png)",
    ),
    declare(
        "Generation: memory reuse vs recomputing the context",
        nested("generation", last=True),
        """
context | context | r
memory: one step | memory_step_tokens_per_s | r
`lm.generate` (new tokens) | generate_loop_tokens_per_s | r
recompute the context | recompute_step_tokens_per_s | r
memory / recompute | memory_over_recompute:1:x | r
generate / recompute | generate_loop_over_recompute:1:x | r""",
        generation_intro,
        image="![generation](images/generation.png)",
    ),
    declare(
        "`generate()` cost per new token against the number of new tokens "
        "(default memory: the model's, 128; 64-token prompt)",
        nested("generation_length"),
        """
backend | backend
new tokens | new_tokens | r
ms per token (CPU) | ms_per_token:.2f | r
tokens/s (wall) | tokens_per_s | r
tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
cost per token / at 64 | cost_ratio_to_first:.2f:x | r""",
    ),
    declare(
        "Evaluation at the paper's wt103 settings (`benchmarks/paper_eval.py`)",
        paper_rows,
        """
implementation | name
tokens/s (wall) | tokens_per_s | r
tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
x authors (wall / CPU) | x_authors() | r
kv_reuse / plain (wall / CPU) | kv_over_plain() | r
peak RSS growth MiB | peak_rss_delta_mib | r""",
        paper_intro,
    ),
    declare(
        "Cost growth",
        (
            sweep("memory", "segment"),
            """
sweep | sweep
T | segment_length | r
M | memory_length | r
ms per segment (wall) | wall_ms() | r
CPU ms per segment | cpu_ms() | r""",
        ),
        growth_fit,
        (
            sweep("rss"),
            """
M | memory_length | r
carried memory B·L·M·d (MiB) | state_mib:1 | r
one layer's scores h·B·T·(T+M) (MiB) | one_layer_scores_mib:1 | r
peak RSS (MiB) | peak_rss_mib | r""",
        ),
        image="![cost growth](images/cost_growth.png)",
    ),
    declare(
        "Before / after of the attention changes (same process, interleaved)",
        (
            variant_rows,
            """
backend | backend
dtype | dtype
phase | phase
original: tokens per CPU-s x cores | tokens_per_cpu_s_x_cores | r
current | after | r
change | change | r""",
        ),
        (
            kind("attention_variants", part="shift"),
            """
backend | backend
relative shift, forward + backward | variant
CPU ms | cpu_ms:.1f | r
wall ms | wall_ms:.1f | r""",
        ),
        empty="(not run in this pass: `--variants`)",
    ),
    declare(
        "Pieces of any length: bucketed and not "
        "(`benchmarks/streaming_pieces.py`)",
        kind("streaming_pieces"),
        """
backend | backend
call | call
pad_to_bucket | pad_to_bucket
pieces | pieces | r
one length (s) | one_length_s:.2f | r
random lengths 1 to max (s) | random_lengths_s:.2f | r
random / one | ratio:.1f:x | r
load | loadavg_1min:.1f | r""",
    ),
    declare(
        "SavedModel, LiteRT and ONNX Runtime, batch 1 "
        "(`benchmarks/serving_runtimes.py`)",
        kind("serving_runtimes"),
        """
size | size
file | runtime
MB | size_mb:.2f | r
ms / segment | ms_per_segment:.1f | r
ms / token | ms_per_token:.2f | r
segment / SavedModel | segment_ratio:.2f:x | r
token / SavedModel | token_ratio:.2f:x | r
load | loadavg_1min:.1f | r""",
    ),
    declare(
        "Mixed bfloat16 vs float32, validation bpc at equal steps",
        kind("precision_parity"),
        """
dtype | dtype
steps | steps | r
val bpc | parity_bpc() | r
train tokens/s | parity_rate() | r""",
        empty="(not run in this pass; `--include "
        "benchmarks/results/studies.json` adds the stored run)",
    ),
]


def section(spec, results):
    """A section's markdown, its cells by the functions of this module."""
    return common.section(spec, results, globals())


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
    common.write_text(path, text)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__)
    flag = parser.add_argument
    flag("--quick", action="store_true", help="fewer, shorter runs")
    flag("--gpu", action="store_true", help="the GPU pass instead")
    flag("--variants", action="store_true", help="+ attention A/B")
    flag("--backends", default="tensorflow,jax,torch")
    flag("--peer-python", metavar="PYTHON", help="runs benchmarks/peers.py")
    flag("--authors-code", metavar="DIR", help="kimiyoung/transformer-xl")
    results = os.path.join(ROOT, "benchmarks", "results")
    flag("--json", default=os.path.join(results, "latest.json"))
    flag("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    flag("--include", default="", help="more result files, comma-separated")
    flag("--render-only", action="store_true", help="the tables from --json")
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
        saved = dict(started=started, wall_seconds=elapsed, argv=argv)
        saved = json.dumps(dict(saved, results=results), indent=1)
        common.write_text(args.json, saved)
    for path in [p for p in args.include.split(",") if p]:
        with open(path) as f:
            extra = json.load(f)
        results += extra["results"] if isinstance(extra, dict) else extra
    write_doc(args.doc, render(results, started, elapsed, argv))
    common.log(f"wrote {args.doc}")
    print(json.dumps({"results": len(results), "minutes": elapsed / 60}))


if __name__ == "__main__":
    main()
