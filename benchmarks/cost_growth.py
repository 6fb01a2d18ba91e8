"""How the cost of a segment grows with the memory length M and the segment
length T.

- Time of one evaluation forward pass per segment, against M (T fixed) and
  against T (M fixed), with a least-squares fit of
  `time = a * T + b * T * (T + M)`: the projections and feed-forward
  networks cost O(T) per segment, the attention O(T (T + M)).
- Memory against M: the carried memory holds `batch * L * M * d` floats
  (O(M d L), exact), and the peak resident memory of a process that runs
  one segment at that M (each M in its own subprocess, so that peaks do
  not mask each other). The attention scores of one layer add
  `heads * batch * T * (T + M)` floats while it runs.

    KERAS_BACKEND=tensorflow PYTHONPATH=. python -m benchmarks.cost_growth \
        --plot docs/images/cost_growth.png
"""

import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.eval_speed import forward_seconds  # noqa: E402


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


def rss_probe(preset_name, dtype, batch, segment, memory):
    """Peak RSS of a fresh process that runs one segment at `memory`."""
    preset = common.PRESETS[preset_name]
    backbone = common.make_backbone(preset, dtype)
    before = common.peak_rss_mib()
    forward_seconds(backbone, batch, segment, memory, reps=1)
    return {
        "peak_rss_mib": common.peak_rss_mib(),
        "rss_before_mib": before,
    }


def plot(time_rows, memory_rows, law, path, key="cpu_seconds"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, b, r2 = law
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, sweep, x_key in (
        (axes[0], "memory", "memory_length"),
        (axes[1], "segment", "segment_length"),
    ):
        rows = [r for r in time_rows if r["sweep"] == sweep]
        xs = [r[x_key] for r in rows]
        ax.plot(xs, [1000 * r[key] for r in rows], "o", label="measured")
        fitted = [
            1000
            * (
                a * r["segment_length"]
                + b
                * r["segment_length"]
                * (r["segment_length"] + r["memory_length"])
            )
            for r in rows
        ]
        ax.plot(xs, fitted, "-", label=f"a·T + b·T(T+M), R²={r2:.3f}")
        ax.set_xlabel(x_key.replace("_", " "))
        ax.set_ylabel(f"{key.replace('_', ' ')} per segment (ms)")
        ax.legend()
    fixed = [r for r in time_rows if r["sweep"] == "memory"][0]
    axes[0].set_title(f"T = {fixed['segment_length']}")
    fixed = [r for r in time_rows if r["sweep"] == "segment"][0]
    axes[1].set_title(f"M = {fixed['memory_length']}")
    if memory_rows:
        ms = [r["memory_length"] for r in memory_rows]
        axes[2].plot(
            ms, [r["peak_rss_mib"] for r in memory_rows], "o-", label="peak RSS"
        )
        base = memory_rows[0]["peak_rss_mib"] - memory_rows[0]["state_mib"]
        axes[2].plot(
            ms,
            [base + r["state_mib"] for r in memory_rows],
            "--",
            label="RSS(M=0) + carried memory B·L·M·d",
        )
        axes[2].plot(
            ms,
            [
                base + r["state_mib"] + r["one_layer_scores_mib"]
                for r in memory_rows
            ],
            ":",
            label="... + one layer's scores h·B·T·(T+M)",
        )
        axes[2].set_xlabel("memory length M")
        axes[2].set_ylabel("MiB")
        axes[2].legend()
    fig.suptitle(
        f"Cost growth, {time_rows[0]['backend']}, {time_rows[0]['dtype']}"
    )
    common.save_figure(fig, path)


def main(argv=None):
    parser = common.add_common_args(
        argparse.ArgumentParser(description=__doc__)
    )
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--segment-length", type=int, default=128)
    parser.add_argument("--memory-length", type=int, default=128)
    parser.add_argument("--memories", default="0,128,256,512,1024,2048")
    parser.add_argument("--segments", default="32,64,128,256,512")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--rss-memories",
        default="0,512,2048,4096",
        help="M values of the peak-memory probes ('' to skip)",
    )
    parser.add_argument("--rss-batch-size", type=int, default=16)
    parser.add_argument("--plot", default=None)
    parser.add_argument(
        "--probe", type=int, default=None, help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    preset = dict(common.PRESETS[args.preset])

    if args.probe is not None:  # a subprocess of the memory sweep
        result = rss_probe(
            args.preset,
            args.dtype,
            args.rss_batch_size,
            args.segment_length,
            args.probe,
        )
        print("PROBE " + json.dumps(result), flush=True)
        return

    backbone = common.make_backbone(preset, args.dtype)
    base = {
        "benchmark": "cost_growth",
        "preset": args.preset,
        "dtype": args.dtype,
        **common.backend_versions(),
        **common.machine_info(),
    }
    time_rows = []
    sweeps = [
        ("memory", args.segment_length, int(m))
        for m in args.memories.split(",")
    ] + [
        ("segment", int(t), args.memory_length)
        for t in args.segments.split(",")
    ]
    for sweep, segment, memory in sweeps:
        wall, cpu = forward_seconds(
            backbone, args.batch_size, segment, memory, args.reps
        )
        row = {
            **base,
            "sweep": sweep,
            "batch_size": args.batch_size,
            "segment_length": segment,
            "memory_length": memory,
            "seconds": wall,
            "cpu_seconds": cpu,
        }
        time_rows.append(row)
        common.emit(row)
    # Fitted on process CPU time (the work done, whatever else runs on the
    # machine) and, for comparison, on wall time.
    law = fit_law(time_rows, "cpu_seconds")
    wall_law = fit_law(time_rows, "seconds")
    common.emit(
        {
            **base,
            "sweep": "fit",
            "a_cpu_seconds_per_token": law[0],
            "b_cpu_seconds_per_token_key": law[1],
            "r2": law[2],
            "r2_wall": wall_law[2],
        }
    )

    memory_rows = []
    hidden, layers = preset["hidden_dim"], preset["num_layers"]
    for memory in [int(m) for m in args.rss_memories.split(",") if m]:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.cost_growth"]
            + ["--preset", args.preset, "--dtype", args.dtype]
            + ["--rss-batch-size", str(args.rss_batch_size)]
            + ["--segment-length", str(args.segment_length)]
            + ["--probe", str(memory)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        probe = json.loads(
            [line for line in out.splitlines() if line.startswith("PROBE ")][0][
                len("PROBE ") :
            ]
        )
        state = args.rss_batch_size * layers * memory * hidden * 4 / 2**20
        scores = (
            preset["num_heads"]
            * args.rss_batch_size
            * args.segment_length
            * (args.segment_length + memory)
            * 4
            / 2**20
        )
        row = {
            **base,
            "sweep": "rss",
            "batch_size": args.rss_batch_size,
            "segment_length": args.segment_length,
            "memory_length": memory,
            "state_mib": state,
            "one_layer_scores_mib": scores,
            **probe,
        }
        memory_rows.append(row)
        common.emit(row)
    if args.plot:
        plot(time_rows, memory_rows, law, args.plot)


if __name__ == "__main__":
    main()
