"""Long context (docs/benchmarks.md, "Running"):

- `table9`: the paper's Table 9. For each attention length L, a
  Transformer-XL segment of T tokens on a memory of L - T states against
  the vanilla model's window of L tokens per predicted token, the same
  network through `predict_on_batch`.
- `growth`: time per segment against M and T, fitted by
  `a * T + b * T * (T + M)`; the peak RSS of a fresh child per M of
  `--rss-memories`, beside the carried memory and one layer's scores.
- `long-text`: `lm.score` of streams of up to 1 M tokens, one child per
  length (peak RSS is per process); the longest over the shortest.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402


def forward_seconds(backbone, batch, length, memory_length, reps):
    """Best wall time and median CPU time of one compiled forward pass over
    `length` tokens with a full memory of `memory_length` slots."""
    rng = np.random.default_rng(length + memory_length)
    inputs = {
        "token_ids": rng.integers(
            0, backbone.vocabulary_size, (batch, length)
        ).astype("int32"),
        "memory": rng.standard_normal(
            (batch, backbone.num_layers, memory_length, backbone.hidden_dim)
        ).astype("float32"),
        "valid_length": np.full((batch,), memory_length, "int32"),
    }
    backbone.predict_on_batch(inputs)  # compiles for this shape
    walls, cpus = [], []
    for _ in range(reps):
        wall, cpu = time.perf_counter(), time.process_time()
        backbone.predict_on_batch(inputs)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), float(np.median(cpus))


# === Table 9 ===


def table9(args):
    size = dict(common.BENCHMARK_SIZES[args.size])
    backbone = common.make_backbone(size, args.dtype)
    batch, rows = args.batch_size, []
    for length in [int(v) for v in args.lengths.split(",")]:
        segment = min(args.segment_length, length // 2)
        memory = length - segment
        txl_wall, txl_cpu = forward_seconds(
            backbone, batch, segment, memory, args.reps
        )
        vanilla_wall, vanilla_cpu = forward_seconds(
            backbone, batch, length, 0, args.vanilla_reps
        )
        dims = dict(size, batch_size=batch)
        txl_flops = common.forward_flops_per_token(
            **dict(dims, segment_length=segment, memory_length=memory)
        )
        vanilla_flops = length * common.forward_flops_per_token(
            **dict(dims, segment_length=length, memory_length=0)
        )
        txl_per_token = txl_wall / (batch * segment)
        vanilla_per_token = vanilla_wall / batch
        row = {
            **common.base_fields(args, "eval_speed"),
            "batch_size": batch,
            "attention_length": length,
            "segment_length": segment,
            "memory_length": memory,
            "txl_ms_per_token": 1000 * txl_per_token,
            "vanilla_ms_per_token": 1000 * vanilla_per_token,
            "speedup": vanilla_per_token / txl_per_token,
            "speedup_cpu_time": (vanilla_cpu / batch)
            / (txl_cpu / (batch * segment)),
            "flop_ratio": vanilla_flops / txl_flops,
            "vanilla_windows_timed": args.vanilla_reps,
        }
        rows.append(row)
        common.emit(row)
    if args.plot:
        plot_table9(rows, args.plot)


def plot_table9(rows, path):
    fig, (left, right) = common.axes(2, 10)
    lengths = [r["attention_length"] for r in rows]
    for axis, keys, label in (
        (left, ("txl_ms_per_token", "vanilla_ms_per_token"), "ms per token"),
        (right, ("speedup", "flop_ratio"), "speedup of memory reuse"),
    ):
        names = dict(txl_ms_per_token="TXL", speedup="measured")
        names.update(vanilla_ms_per_token="vanilla (window per token)")
        names.update(flop_ratio="FLOP ratio (analytic)")
        series = [([r[k] for r in rows], "o-", names[k]) for k in keys]
        common.lines(axis, lengths, series, "attention length L", label, 1)
    backend, dtype = rows[0]["backend"], rows[0]["dtype"]
    fig.suptitle(f"Evaluation speed, {backend}, {dtype} (CPU)")
    common.save_figure(fig, path)


# === Cost growth ===


def fit_law(rows, key="cpu_seconds"):
    """Least squares `rows[key] = a * T + b * T * (T + M)`; returns
    (a, b, r2)."""
    t = np.array([r["segment_length"] for r in rows], "float64")
    m = np.array([r["memory_length"] for r in rows], "float64")
    y = np.array([r[key] for r in rows], "float64")
    design = np.stack([t, t * (t + m)], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
    predicted = design @ np.array([a, b])
    r2 = 1.0 - np.sum((y - predicted) ** 2) / np.sum((y - y.mean()) ** 2)
    return float(a), float(b), float(r2)


def growth(args):
    size = dict(common.BENCHMARK_SIZES[args.size])
    if args.probe is not None:  # a child of the RSS sweep
        backbone = common.make_backbone(size, args.dtype)
        before = common.peak_rss_mib()
        batch, segment = args.rss_batch_size, args.segment_length
        forward_seconds(backbone, batch, segment, args.probe, reps=1)
        common.emit(
            {"peak_rss_mib": common.peak_rss_mib(), "rss_before_mib": before}
        )
        return
    backbone = common.make_backbone(size, args.dtype)
    base = common.base_fields(args, "cost_growth")
    sweeps = [
        ("memory", args.segment_length, int(m))
        for m in args.memories.split(",")
    ] + [
        ("segment", int(t), args.memory_length)
        for t in args.segments.split(",")
    ]
    time_rows = []
    for sweep, segment, memory in sweeps:
        wall, cpu = forward_seconds(
            backbone, args.batch_size, segment, memory, args.reps
        )
        time_rows.append(
            {
                **base,
                "sweep": sweep,
                "batch_size": args.batch_size,
                "segment_length": segment,
                "memory_length": memory,
                "seconds": wall,
                "cpu_seconds": cpu,
            }
        )
        common.emit(time_rows[-1])
    # Fitted on process CPU time (the work done, whatever else runs on the
    # machine) and, for comparison, on wall time.
    law = fit_law(time_rows, "cpu_seconds")
    common.emit(
        {
            **base,
            "sweep": "fit",
            "a_cpu_seconds_per_token": law[0],
            "b_cpu_seconds_per_token_key": law[1],
            "r2": law[2],
            "r2_wall": fit_law(time_rows, "seconds")[2],
        }
    )
    rss_rows = []
    batch, segment = args.rss_batch_size, args.segment_length
    for memory in [int(m) for m in args.rss_memories.split(",") if m]:
        probe = ["growth", "--size", args.size, "--dtype", args.dtype]
        probe += ["--rss-batch-size", batch, "--segment-length", segment]
        (peaks,), error, _ = common.run_module(
            "long_context", probe + ["--probe", memory], keras.backend.backend()
        )
        if error:
            raise SystemExit(error)
        state = batch * size["num_layers"] * memory * size["hidden_dim"]
        scores = size["num_heads"] * batch * segment * (segment + memory)
        rss_rows.append(
            {
                **base,
                "sweep": "rss",
                "batch_size": batch,
                "segment_length": segment,
                "memory_length": memory,
                "state_mib": state * 4 / 2**20,
                "one_layer_scores_mib": scores * 4 / 2**20,
                **peaks,
            }
        )
        common.emit(rss_rows[-1])
    if args.plot:
        plot_growth(time_rows, rss_rows, law, args.plot)


def plot_growth(time_rows, rss_rows, law, path, key="cpu_seconds"):
    a, b, r2 = law
    fig, axes = common.axes(3, 14)
    for axis, sweep, x_key, fixed in (
        (axes[0], "memory", "memory_length", "segment_length"),
        (axes[1], "segment", "segment_length", "memory_length"),
    ):
        rows = [r for r in time_rows if r["sweep"] == sweep]
        xs = [r[x_key] for r in rows]
        axis.plot(xs, [1000 * r[key] for r in rows], "o", label="measured")
        fitted = [
            1000 * t * (a + b * (t + r["memory_length"]))
            for t, r in ((r["segment_length"], r) for r in rows)
        ]
        axis.plot(xs, fitted, "-", label=f"a·T + b·T(T+M), R²={r2:.3f}")
        axis.set_xlabel(x_key.replace("_", " "))
        axis.set_ylabel(f"{key.replace('_', ' ')} per segment (ms)")
        axis.set_title(
            f"{'T' if sweep == 'memory' else 'M'} = {rows[0][fixed]}"
        )
        axis.legend()
    if rss_rows:
        peak = [r["peak_rss_mib"] for r in rss_rows]
        state = [
            peak[0] - rss_rows[0]["state_mib"] + r["state_mib"]
            for r in rss_rows
        ]
        scores = [
            s + r["one_layer_scores_mib"] for s, r in zip(state, rss_rows)
        ]
        series = [(peak, "o-", "peak RSS")]
        series.append((state, "--", "RSS(M=0) + carried memory B·L·M·d"))
        series.append((scores, ":", "... + one layer's scores h·B·T·(T+M)"))
        ms = [r["memory_length"] for r in rss_rows]
        common.lines(axes[2], ms, series, "memory length M", "MiB")
    fig.suptitle(
        f"Cost growth, {time_rows[0]['backend']}, {time_rows[0]['dtype']}"
    )
    common.save_figure(fig, path)


# === Long texts ===


def long_text(args):
    if args.tokens is None:
        rows = []
        for tokens in map(int, args.lengths.split(",")):
            child = ["long-text", "--tokens", tokens, "--size", args.size]
            child += ["--segment-length", args.segment_length]
            child += ["--memory-length", args.memory_length]
            (row,), error, _ = common.run_module(
                "long_context", child, keras.backend.backend()
            )
            if error:
                raise SystemExit(error)
            common.emit(row)
            rows.append(row)
        first, last = rows[0], rows[-1]
        common.emit(
            {
                "benchmark": "score_long_text_flatness",
                "tokens": [first["tokens"], last["tokens"]],
                "time_per_token_ratio": first["tokens_per_second"]
                / last["tokens_per_second"],
                "peak_rss_ratio": last["peak_rss_mib"] / first["peak_rss_mib"],
            }
        )
        return
    from keras_txl.models import TransformerXLCausalLM

    lm = TransformerXLCausalLM(
        common.make_backbone(common.BENCHMARK_SIZES[args.size])
    )
    ids = np.random.default_rng(0).integers(0, 256, (1, args.tokens + 1))
    ids = ids.astype("int32")
    options = dict(
        scoring_mode="loss",
        memory_length=args.memory_length,
        segment_length=args.segment_length,
    )
    warm = 4 * args.segment_length
    lm.score(ids[:, :warm], target_ids=ids[:, 1 : warm + 1], **options)
    rss_before = common.current_rss_mib()
    start = time.perf_counter()
    losses = lm.score(ids[:, :-1], target_ids=ids[:, 1:], **options)
    seconds = time.perf_counter() - start
    assert losses.shape == (1, args.tokens)
    common.emit(
        {
            **common.base_fields(args, "score_long_text"),
            "tokens": args.tokens,
            "segment_length": args.segment_length,
            "memory_length": args.memory_length,
            "seconds": seconds,
            "tokens_per_second": args.tokens / seconds,
            "peak_rss_mib": common.peak_rss_mib(),
            "rss_before_mib": rss_before,
            "mean_loss": float(np.mean(losses)),
        }
    )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    subs = map(commands.add_parser, ("table9", "growth", "long-text"))
    nine, grow, text = map(common.add_common_args, subs)
    for sub, batch, reps in ((nine, 1, 5), (grow, 4, 3)):
        sub.add_argument("--batch-size", type=int, default=batch)
        sub.add_argument("--reps", type=int, default=reps)
        sub.add_argument("--plot", default=None, help="PNG path")
    for sub, length in ((nine, 128), (grow, 128), (text, 64)):
        sub.add_argument("--segment-length", type=int, default=length)
        if sub is not nine:
            sub.add_argument("--memory-length", type=int, default=length)
    nine.add_argument("--lengths", default="128,256,512,1024,2048")
    nine.add_argument("--vanilla-reps", type=int, default=2)
    add = grow.add_argument
    add("--memories", default="0,128,256,512,1024,2048")
    add("--segments", default="32,64,128,256,512")
    add("--rss-memories", default="0,512,2048,4096", help="'': no probes")
    add("--rss-batch-size", type=int, default=16)
    add("--probe", type=int, default=None, help=argparse.SUPPRESS)
    text.set_defaults(size="small")
    text.add_argument("--lengths", default="10000,100000,1000000")
    text.add_argument("--tokens", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    run = {"table9": table9, "growth": growth, "long-text": long_text}
    run[args.command](args)


if __name__ == "__main__":
    main()
