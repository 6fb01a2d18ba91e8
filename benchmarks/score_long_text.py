"""`TransformerXLCausalLM.score` on texts of 10 k, 100 k and 1 M tokens:
tokens per second and peak memory, which stay flat with the length (the
memory is fixed, each segment costs the same).

Each length runs in a fresh child process (peak resident memory is a
per-process high-water mark): one stream, `scoring_mode="loss"`, segments
of `--segment-length` with a memory of `--memory-length`, random byte ids.
The first segment's compilation is timed apart (a warm-up on 4 segments).
Prints one JSON line per length, then the ratios of the longest to the
shortest (1.0 = flat).

    KERAS_BACKEND=jax PYTHONPATH=. python -m benchmarks.score_long_text
"""

import argparse
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from benchmarks import common  # noqa: E402


def child(args):
    import numpy as np

    from keras_txl.models import TransformerXLCausalLM

    preset = dict(common.PRESETS[args.preset])
    lm = TransformerXLCausalLM(common.make_backbone(preset))
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
            "benchmark": "score_long_text",
            "preset": args.preset,
            "tokens": args.tokens,
            "segment_length": args.segment_length,
            "memory_length": args.memory_length,
            "seconds": seconds,
            "tokens_per_second": args.tokens / seconds,
            "peak_rss_mib": common.peak_rss_mib(),
            "rss_before_mib": rss_before,
            "mean_loss": float(np.mean(losses)),
            **common.backend_versions(),
            **common.machine_info(),
        }
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--preset", default="small", choices=sorted(common.PRESETS)
    )
    parser.add_argument(
        "--lengths", default="10000,100000,1000000", help="comma-separated"
    )
    parser.add_argument("--segment-length", type=int, default=64)
    parser.add_argument("--memory-length", type=int, default=64)
    parser.add_argument("--tokens", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tokens is not None:
        return child(args)
    rows = []
    for tokens in map(int, args.lengths.split(",")):
        command = [sys.executable, "-m", "benchmarks.score_long_text"]
        command += ["--tokens", str(tokens), "--preset", args.preset]
        command += ["--segment-length", str(args.segment_length)]
        command += ["--memory-length", str(args.memory_length)]
        result = subprocess.run(
            command, capture_output=True, text=True, check=False
        )
        if result.returncode:
            common.log(result.stderr[-3000:])
            raise SystemExit(result.returncode)
        (row,) = common.parse_results(result.stdout)
        print(result.stdout.strip(), flush=True)
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


if __name__ == "__main__":
    main()
