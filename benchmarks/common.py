"""Shared pieces of the benchmarks: sizes, FLOP counts, timing, RSS, the
child processes and the compiled calls.

Importing this module imports `keras_txl` and so `keras`, which fixes the
backend: set `KERAS_BACKEND` before importing it.
"""

import json
import os
import platform
import resource
import subprocess
import sys
import time

from keras_txl_cli.sizes import SIZES as MODEL_SIZES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The benchmarks' sizes: a model size of `keras_txl_cli.sizes.SIZES` (the
# one table of model sizes), of the same name, with the segment, memory,
# batch and vocabulary of the measurement. `reference` is the
# configuration of the speed goals: 4 layers, hidden 256, 8 heads x 32,
# intermediate 1024, T = M = 128, batch 16, a byte vocabulary. `base` is
# the paper's 12-layer enwik8 model with shorter segments (the paper's
# T = M = 512 takes minutes a step on 2 CPU cores).
BENCHMARK_SIZES = {
    name: dict(
        MODEL_SIZES[name],
        segment_length=length,
        memory_length=length,
        batch_size=batch,
        vocabulary_size=256,
    )
    for name, length, batch in (
        ("micro", 8, 2),
        ("small", 32, 8),
        ("reference", 128, 16),
        ("base", 256, 8),
    )
}
# NVIDIA's Transformer-XL "base" (DeepLearningExamples, run_wt103_base.sh:
# 16 layers, d_model 512, 8 heads x 64, d_inner 2048, T = M = 192, batch
# 32 per GPU), with a byte vocabulary: the GPU pass (`throughput gpu`).
# A peer's configuration, not one of keras-txl's model sizes: kept out of
# `BENCHMARK_SIZES`, whose names are `keras_txl_cli.sizes.SIZES`'.
PEER_SIZES = {
    "nvidia_base": dict(
        num_layers=16,
        num_heads=8,
        hidden_dim=512,
        head_dim=64,
        intermediate_dim=2048,
        segment_length=192,
        memory_length=192,
        batch_size=32,
        vocabulary_size=256,
    )
}

DATA_PATH = os.path.join(ROOT, "data", "tinyshakespeare.txt")


def forward_flops_per_token(
    num_layers,
    hidden_dim,
    num_heads,
    head_dim,
    intermediate_dim,
    segment_length,
    memory_length,
    vocabulary_size,
    batch_size=1,
    **unused,
):
    """Multiply-adds x 2 of one forward pass, per predicted token: the
    matmuls of each layer (the memory's keys and values re-projected
    every segment), then the output layer; docs/benchmarks.md, "FLOPs per
    token", spells the count out."""
    d, nd, f = hidden_dim, num_heads * head_dim, intermediate_dim
    t, k = segment_length, segment_length + memory_length
    per_layer = (
        2 * d * nd  # query
        + 2 * 2 * d * nd * k / t  # key, value of memory + segment
        + 2 * d * nd * k / (t * batch_size)  # position projection
        + 3 * 2 * nd * k  # content scores, position scores, p @ v
        + 2 * nd * d  # attention output
        + 2 * 2 * d * f  # feed-forward
    )
    return num_layers * per_layer + 2 * d * vocabulary_size


def training_flops_per_token(**size):
    """Forward + backward = 3 x forward (the usual estimate)."""
    return 3 * forward_flops_per_token(**size)


def make_backbone(size, dtype="float32", dropout=0.0, **options):
    """A `TransformerXLBackbone` of a size's dimensions (a `BENCHMARK_SIZES`
    entry); `options` go to its constructor (`clamp_length`,
    `same_length`)."""
    from keras_txl.models import TransformerXLBackbone

    keys = "vocabulary_size num_layers num_heads hidden_dim head_dim".split()
    keys += ["intermediate_dim", "memory_length"]
    return TransformerXLBackbone(
        **{key: size[key] for key in keys},
        dropout=dropout,
        dtype=dtype,
        **options,
    )


def axes(columns, width):
    """A matplotlib figure (no display) of `columns` axes in a row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(1, columns, figsize=(width, 4))


def lines(axis, x, series, xlabel, ylabel, log=False):
    """Plots each `(values, style, label)` of `series` against `x`, with
    labels and a legend; log-log (x in powers of 2) if `log`."""
    for values, style, label in series:
        axis.plot(x, values, style, label=label)
    if log:
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
    axis.set(xlabel=xlabel, ylabel=ylabel)
    axis.legend()


def save_figure(fig, path):
    """Lays out and writes a matplotlib figure, creating its folder."""
    fig.tight_layout()
    folder_of(path)
    fig.savefig(path, dpi=100)


def folder_of(path):
    """Creates the folder of `path`; returns it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    return folder


def write_text(path, text):
    folder_of(path)
    with open(path, "w") as f:
        f.write(text)


def peak_rss_mib():
    """Peak RSS of this process, MiB (Linux: ru_maxrss KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mib():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def machine_info():
    info = dict(python=platform.python_version(), cpus=os.cpu_count())
    info["loadavg_1min"] = os.getloadavg()[0]
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return info
    names = [x for x in text.splitlines() if x.startswith("model name")]
    if names:
        info["cpu"] = names[0].split(":", 1)[1].strip()
    info["avx512_bf16"] = "avx512_bf16" in text
    info["amx"] = "amx_bf16" in text
    return info


def backend_versions():
    import keras

    versions = {"keras": keras.__version__, "backend": keras.backend.backend()}
    name = keras.backend.backend()
    module = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}[name]
    versions[name] = __import__(module).__version__
    return versions


def base_fields(args, name):
    """A result's first fields: benchmark, size, dtype, versions, machine."""
    fields = {"benchmark": name, "size": args.size, "dtype": args.dtype}
    return {**fields, **backend_versions(), **machine_info()}


def emit(result):
    """Prints one JSON line (what `run_all.py` reads)."""
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)


def parse_results(text):
    """The JSON results printed by `emit` in a subprocess's output."""
    out = []
    for line in text.splitlines():
        if line.startswith("RESULT "):
            out.append(json.loads(line[len("RESULT ") :]))
    return out


class Timer:
    """`with Timer() as t: ...; t.seconds`."""

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start


def byte_corpus(max_bytes=None):
    """tinyshakespeare as uint8 byte ids (vocabulary 256)."""
    import numpy as np

    with open(DATA_PATH, "rb") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    if max_bytes is not None:
        data = data[:max_bytes]
    return data.astype("int32")


def segment_arrays(tokens, batch_size, segment_length):
    """(inputs, targets) arrays of ordered segments: row b of batch i + 1
    continues row b of batch i (the layout that memory carrying needs),
    shape (num_batches, batch, T) each."""
    import numpy as np

    stream_length = (len(tokens) - 1) // batch_size
    streams = tokens[: batch_size * stream_length + 1]
    num_batches = stream_length // segment_length
    index = np.arange(batch_size)[None, :, None] * stream_length
    index = index + np.arange(num_batches)[:, None, None] * segment_length
    index = index + np.arange(segment_length)  # (num_batches, batch, T)
    return streams[index], streams[index + 1]


def to_dataset(x, y, repeat=1):
    """An ordered tf.data dataset of fixed-size batches from
    `segment_arrays`."""
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if repeat > 1:
        ds = ds.repeat(repeat)
    return ds.prefetch(2)


def add_common_args(parser):
    parser.add_argument("--size", default="reference", choices=BENCHMARK_SIZES)
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "mixed_bfloat16", "bfloat16"],
    )
    return parser


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def run_module(module, args, backend, timeout=None, python=None):
    """Runs `benchmarks.<module>` in a child process on `backend` (or the
    script under another `python`: a peer's environment). Returns
    `(results, error, command)`: its RESULT lines, the last lines of its
    stderr when it failed (else None), and the command as text."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    if python:
        command = [python, os.path.join(ROOT, "benchmarks", f"{module}.py")]
        env.pop("PYTHONPATH", None)
    else:
        command = [sys.executable, "-m", f"benchmarks.{module}"]
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    command += [str(a) for a in args]
    text = f"KERAS_BACKEND={backend} " + " ".join(["python"] + command[1:])
    log(f"$ {text}")
    try:
        done = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return [], f"timeout after {timeout} s", text
    results = parse_results(done.stdout)
    error = None
    if done.returncode != 0:
        error = "\n".join(done.stderr.strip().splitlines()[-3:])
        log("  failed: " + error.replace("\n", " | "))
    return results, error, text


def compiled(fn, lm, xla=False):
    """`(fn compiled, sync)` the way the backend runs a model: `jax.jit`
    with the weights passed as arguments (not baked in as constants), a
    `tf.function` (with XLA if `xla`), eager torch under `no_grad`;
    `sync(x)` waits for `x`."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        variables = lm.variables
        values = [v.value for v in variables]

        def pure(values, *args):
            with keras.StatelessScope(
                state_mapping=list(zip(variables, values))
            ):
                return fn(*args)

        jitted = jax.jit(pure)
        return lambda *args: jitted(values, *args), jax.block_until_ready
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=xla), lambda x: x
    import torch

    def eager(*args):
        with torch.no_grad():
            return fn(*args)

    return eager, lambda x: x


# === The tables of docs/benchmarks.md: declared as data, one writer ===


def fmt(value, digits=0):
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if isinstance(value, float) else str(value)


def pct(value):
    return "-" if value is None else f"{100 * value:.0f}%"


def cell(spec, names):
    """A cell writer from its text: `name()`, the function `names[name]`
    of the row; or `key[.key...][:FORMAT[:SUFFIX]]`, the value at the key
    path by `fmt` with FORMAT digits (FORMAT ".2f" and the like:
    `format(value, FORMAT)`; "%": `pct`), SUFFIX after it; "a / b" for
    two keys."""
    if spec.endswith("()"):
        return names[spec[:-2]]
    path, digits, suffix = spec.split(":") + ["0", ""][spec.count(":") :]
    if " / " in path:  # "a / b:FORMAT": both, or "-" when neither is there
        cells = [
            cell(":".join([p, digits, suffix]), names)
            for p in path.split(" / ")
        ]

        def pair(row):
            texts = [c(row) for c in cells]
            return "-" if set(texts) == {"-"} else " / ".join(texts)

        return pair

    def write(row):
        value = row
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return "-"
        if digits == "%":
            return pct(value)
        if digits.startswith("."):
            return format(value, digits) + suffix
        return fmt(value, int(digits)) + suffix

    return write


def columns(text, names):
    """`[(header, cell, right-aligned)]` from lines `header | cell [| r]`
    ("r": a number column)."""
    out = []
    for line in text.strip().splitlines():
        header, spec, *align = [part.strip() for part in line.split(" | ")]
        out.append((header, cell(spec, names), align == ["r"]))
    return out


def kind(name, **match):
    """The results of benchmark `name` (with the values of `match`)."""
    match["benchmark"] = name
    return lambda results: [
        r for r in results if all(r.get(k) == v for k, v in match.items())
    ]


def nested(name, last=False):
    """The rows under "rows" of each result of benchmark `name` (of the
    last one only if `last`), each with its result's backend."""

    def rows(results):
        found = kind(name)(results)[-1:] if last else kind(name)(results)
        return [
            dict(row, backend=r.get("backend"))
            for r in found
            for row in r["rows"]
        ]

    return rows


def table(spec, results, names):
    """Markdown of one table: `spec` is `(rows, columns[, intro])`, the
    rows a function of the results, the columns text of `columns`, the
    intro a paragraph (text, or a function of the results); or a
    function of the results alone, a paragraph. `None`: nothing to say."""
    if callable(spec):
        return spec(results)
    rows, text, *intro = spec
    rows = rows(results)
    if not rows:
        return None
    cols = columns(text, names)
    lines = [i if isinstance(i, str) else i(results) for i in intro]
    lines += [""] if intro else []
    lines += [
        "| " + " | ".join(header for header, _, _ in cols) + " |",
        "|" + "|".join("---:" if right else "---" for *_, right in cols) + "|",
    ]
    lines += ["| " + " | ".join(c(r) for _, c, _ in cols) + " |" for r in rows]
    return "\n".join(lines)


def config(r):
    """A `fit` result's configuration, as the tables name it."""
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


def section(spec, results, names):
    """The tables of a section (`{"title", "tables"[, "image", "empty"]}`),
    or its `empty` text when none has anything to say."""
    parts = [table(t, results, names) for t in spec["tables"]]
    parts = [p for p in parts if p is not None]
    return "\n\n".join(parts) if parts else spec.get("empty", "(not run)")
