"""Latency of `keras-txl generate` on JAX, cold against warm
(docs/benchmarks.md, "CLI latency"):

    PYTHONPATH=. python -m benchmarks.cli_latency [--repeats 2]

A tiny run (`keras-txl train --size tiny`, two steps), then
`keras-txl generate RUN --prompt "The " --max-length 200`, each in a new
process of the real console script: cold with an empty
`$XDG_CACHE_HOME` (nothing compiled on disk), then warm with the cache
the cold run left (`keras_txl/app/compilation_cache.py`). Prints one
JSON line: cold_s and warm_s (median wall seconds of each process), and
warm_over_cold, the ratio of the two measured in this run.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import common

SCRIPT = os.path.join(os.path.dirname(sys.executable), "keras-txl")
TINY = (
    "--size tiny --steps 2 --segment-length 8 --batch-size 2 "
    "--memory-length 8 --eval-memory-length 8 --steps-per-epoch 2 --dropout 0 "
    "--valid-tokens 32 --sample-tokens 0"
).split()
# The variables of the test session's or the user's own JAX cache.
CACHE_VARIABLES = (
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    "KERAS_TXL_JAX_CACHE",
)


def _command(argv, env, folder):
    start = time.perf_counter()
    result = subprocess.run(
        [SCRIPT, *argv], env=env, cwd=folder, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"keras-txl {argv}: {result.stderr[-2000:]}")
    return seconds


def measure(repeats, max_length=200):
    folder = tempfile.mkdtemp(prefix="keras_txl_cli_latency_")
    try:
        env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=common.ROOT)
        for name in CACHE_VARIABLES:
            env.pop(name, None)
        env["XDG_CACHE_HOME"] = os.path.join(folder, "unused")
        train_s = _command(["train", "--output", "run", *TINY], env, folder)
        generate = [
            "generate",
            "run",
            "--prompt",
            "The ",
            "--max-length",
            str(max_length),
        ]
        cold, warm = [], []
        for repeat in range(repeats):
            env["XDG_CACHE_HOME"] = os.path.join(folder, f"cache{repeat}")
            cold.append(_command(generate, env, folder))
            warm.append(_command(generate, env, folder))
            common.log(
                f"repeat {repeat}: cold {cold[-1]:.2f} s, warm {warm[-1]:.2f} s"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    cold_s, warm_s = statistics.median(cold), statistics.median(warm)
    return {
        "benchmark": "cli_latency",
        "backend": "jax",
        "command": " ".join(["keras-txl", *generate]),
        "train_s": train_s,
        "repeats": repeats,
        "cold_runs_s": cold,
        "warm_runs_s": warm,
        "cold_s": cold_s,
        "warm_s": warm_s,
        "warm_over_cold": warm_s / cold_s,
        "machine": common.machine_info(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=200)
    args = parser.parse_args(argv)
    common.emit(measure(args.repeats, args.max_length))


if __name__ == "__main__":
    main()
