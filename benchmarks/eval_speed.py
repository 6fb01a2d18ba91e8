"""Evaluation speed: memory reuse against a vanilla sliding window (the
paper's Table 9).

For each attention length `L`, both models give every predicted token `L`
tokens of context:

- Transformer-XL predicts a segment of `T` tokens per forward pass,
  attending to `M = L - T` cached states (the memory) and to the segment.
- The vanilla Transformer of Al-Rfou et al. (2018), as the paper evaluates
  it, recomputes a window of `L` tokens from scratch for every predicted
  token: one forward pass of length `L`, of which only the last position is
  used.

Both sides run the same network (the reference preset's layers) through
`predict_on_batch`, the vanilla side with no memory: the vanilla model's
learned absolute positions cost the same as this relative attention up to
the position term, which the speedup does not hinge on. The vanilla time
per token is the time of one window: it is measured on `--vanilla-reps`
windows, not on a whole text (each window is a full forward pass, so one
window times the number of tokens is the whole-text time). Prints one JSON
line per length and, with `--plot`, a PNG.

    KERAS_BACKEND=tensorflow PYTHONPATH=. python -m benchmarks.eval_speed \
        --plot docs/images/eval_speed.png
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

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


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = [r["attention_length"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(lengths, [r["txl_ms_per_token"] for r in rows], "o-", label="TXL")
    left.plot(
        lengths,
        [r["vanilla_ms_per_token"] for r in rows],
        "s-",
        label="vanilla (window per token)",
    )
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("attention length L")
    left.set_ylabel("ms per predicted token")
    left.legend()
    right.plot(lengths, [r["speedup"] for r in rows], "o-", label="measured")
    right.plot(
        lengths,
        [r["flop_ratio"] for r in rows],
        "--",
        label="FLOP ratio (analytic)",
    )
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("attention length L")
    right.set_ylabel("speedup of memory reuse")
    right.legend()
    backend = rows[0]["backend"]
    fig.suptitle(f"Evaluation speed, {backend}, {rows[0]['dtype']} (CPU)")
    common.save_figure(fig, path)


def main(argv=None):
    parser = common.add_common_args(
        argparse.ArgumentParser(description=__doc__)
    )
    parser.add_argument("--lengths", default="128,256,512,1024,2048")
    parser.add_argument("--segment-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--vanilla-reps", type=int, default=2)
    parser.add_argument("--plot", default=None, help="PNG path")
    args = parser.parse_args(argv)
    preset = dict(common.PRESETS[args.preset])
    backbone = common.make_backbone(preset, args.dtype)
    batch = args.batch_size
    rows = []
    for length in [int(v) for v in args.lengths.split(",")]:
        segment = min(args.segment_length, length // 2)
        memory = length - segment
        txl_wall, txl_cpu = forward_seconds(
            backbone, batch, segment, memory, args.reps
        )
        vanilla_wall, vanilla_cpu = forward_seconds(
            backbone, batch, length, 0, args.vanilla_reps
        )
        dims = dict(preset, batch_size=batch)
        txl_flops = common.forward_flops_per_token(
            **dict(dims, segment_length=segment, memory_length=memory)
        )
        vanilla_flops = length * common.forward_flops_per_token(
            **dict(dims, segment_length=length, memory_length=0)
        )
        txl_per_token = txl_wall / (batch * segment)
        vanilla_per_token = vanilla_wall / batch
        row = {
            "benchmark": "eval_speed",
            "preset": args.preset,
            "dtype": args.dtype,
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
            **common.backend_versions(),
            **common.machine_info(),
        }
        rows.append(row)
        common.emit(row)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
