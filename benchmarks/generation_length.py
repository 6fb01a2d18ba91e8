"""Generation cost per new token against the number of new tokens.

`lm.generate()` as a user calls it (greedy, batch 1, a prompt of
`--prompt` tokens, the model's default memory), for each number of new
tokens `n` in `--new-tokens`, all in one process: seconds per new token
of the whole call (prompt and compilation excluded: each length is called
once to compile, then timed), and the ratio of each length's per-token
cost to the shortest one's. A flat cost gives ratios near 1; a memory that
grows with `max_length` gives ratios that grow with `n`.

The model is the issue's comparison setting: 4 layers, hidden 256, 8
heads of 32, intermediate 1024, memory 128, a byte vocabulary; random
weights (the cost does not depend on them; greedy decoding makes the work
deterministic).

Each length is timed by the fastest of `--repeats` calls; the cost per
token (and its ratios) is on the process's CPU clock by default (`--clock
wall` for elapsed time). Tokens/s are given on both: `tokens_per_s`
(wall) and `tokens_per_cpu_s_x_cores` (what the cores give when not
shared). On a machine shared with other jobs, compare ratios measured in
the same run.

Usage:
    KERAS_BACKEND=jax python -m benchmarks.generation_length \\
        [--new-tokens 64 256 1024 2048] [--memory-length M]
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_txl.models import TransformerXLBackbone  # noqa: E402
from keras_txl.models import TransformerXLCausalLM  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--new-tokens", type=int, nargs="+", default=[64, 256, 1024, 2048]
    )
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--hidden-dim", type=int, default=256)
    parser.add_argument("--num-heads", type=int, default=8)
    parser.add_argument("--model-memory", type=int, default=128)
    parser.add_argument(
        "--memory-length",
        type=int,
        default=None,
        help="memory_length of generate() (default: the model's own)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    return parser.parse_args(argv)


def make_lm(args):
    keras.utils.set_random_seed(0)
    backbone = TransformerXLBackbone(
        vocabulary_size=256,
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        hidden_dim=args.hidden_dim,
        head_dim=args.hidden_dim // args.num_heads,
        intermediate_dim=4 * args.hidden_dim,
        memory_length=args.model_memory,
        dropout=0.0,
    )
    lm = TransformerXLCausalLM(backbone)
    lm.build()
    lm.compile(sampler="greedy")
    return lm


def seconds_per_call(lm, inputs, memory_length, repeats):
    """`(wall, cpu)` seconds of the fastest (wall) of `repeats` calls of
    `lm.generate(inputs)`, after one call that compiles; `cpu` is the
    process's CPU time (all its threads)."""

    def call():
        out = lm.generate(
            inputs, stop_token_ids=None, memory_length=memory_length
        )
        return np.asarray(out["token_ids"])

    call()
    best = None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if best is None or wall < best[0]:
            best = (wall, cpu)
    return best


def prompt_inputs(prompt, new_tokens, rng):
    """`generate()`'s inputs for batch 1: `prompt` random byte ids, then
    `new_tokens` slots to fill."""
    length = prompt + new_tokens
    return {
        "token_ids": rng.randint(0, 256, (1, length)).astype("int32"),
        "padding_mask": np.arange(length)[None] < prompt,
    }


def main(argv=None):
    args = parse_args(argv)
    lm = make_lm(args)
    rng = np.random.RandomState(0)
    rows = []
    for new in args.new_tokens:
        inputs = prompt_inputs(args.prompt, new, rng)
        wall, cpu = seconds_per_call(
            lm, inputs, args.memory_length, args.repeats
        )
        seconds = cpu if args.clock == "cpu" else wall
        rows.append(
            {
                "new_tokens": new,
                "seconds": seconds,
                "ms_per_token": 1000.0 * seconds / new,
                "tokens_per_s": new / wall,
                "tokens_per_cpu_s_x_cores": new / cpu * (os.cpu_count() or 1),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr)
    first = rows[0]["ms_per_token"]
    for row in rows:
        row["cost_ratio_to_first"] = row["ms_per_token"] / first
    result = {
        "benchmark": "generation_length",
        "backend": keras.config.backend(),
        "model": {
            "num_layers": args.num_layers,
            "hidden_dim": args.hidden_dim,
            "num_heads": args.num_heads,
            "memory_length": args.model_memory,
            "vocabulary_size": 256,
        },
        "prompt": args.prompt,
        "generate_memory_length": args.memory_length,
        "clock": args.clock,
        "repeats": args.repeats,
        "rows": rows,
    }
    print("RESULT " + json.dumps(result))
    return result


if __name__ == "__main__":
    main()
