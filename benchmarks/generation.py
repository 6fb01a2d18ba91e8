"""Generation speed: reusing the memory vs recomputing the context.

For each context length `n`, on one small model (4 layers, 128 wide,
byte vocabulary), measured in the same run:

- `memory_step`: one new token as `TransformerXLCausalLM.generate` makes
  it: a single-token step that attends to a memory of `n` slots (the
  function the generation loop runs, compiled).
- `recompute_step`: one new token by running the whole context of `n`
  tokens with an empty memory (what a model without memory or cache does
  at every step), compiled.
- `generate`: `lm.generate()` end to end (greedy, memory of `n`): a prompt
  of `n - new_tokens` tokens, then `new_tokens` new ones; tokens/s counts
  the new tokens only, so the prompt's cost is in it.
- `generate_loop`: the new tokens alone inside `lm.generate()`: the time
  of the run above minus that of the same prompt with one new token,
  over `new_tokens - 1`.

Times are the best of `--repeats` runs after a warm-up run (compilation),
on the process's CPU clock by default (`--clock wall` for elapsed time):
on a machine shared with other jobs both are the estimates least disturbed
by them. For one-thread numbers under JAX, set
`XLA_FLAGS="--xla_cpu_multi_thread_eigen=false"`.

Prints one JSON object (the table and the ratios memory/recompute) and
writes a PNG of tokens/s against the context length.

Usage:
    KERAS_BACKEND=jax python benchmarks/generation.py \\
        [--contexts 128 256 512 1024 2048] [--png generation.png]
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


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--contexts", type=int, nargs="+", default=[128, 256, 512, 1024, 2048]
    )
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        default="cpu",
        help="cpu: this process's CPU time (all its threads), the least "
        "disturbed by other processes on a shared machine; wall: elapsed",
    )
    parser.add_argument("--png", default="generation.png")
    return parser.parse_args()


def compiled(lm, fn):
    """`fn(*tensors)` compiled for the backend, reading `lm`'s weights."""
    backend = keras.config.backend()
    if backend == "jax":
        import jax

        variables = lm.trainable_variables + lm.non_trainable_variables

        @jax.jit
        def run(values, *args):
            mapping = zip(variables, values)
            with keras.StatelessScope(state_mapping=mapping):
                return fn(*args)

        values = [v.value for v in variables]
        return lambda *args: run(values, *args)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    import torch

    def run(*args):
        with torch.no_grad():
            return fn(*args)

    return run


def best_seconds(fn, repeats, clock):
    """Best time of `fn()` on `clock` after one warm-up call (compilation)."""
    keras.tree.map_structure(keras.ops.convert_to_numpy, fn())
    times = []
    for _ in range(repeats):
        start = clock()
        keras.tree.map_structure(keras.ops.convert_to_numpy, fn())
        times.append(clock() - start)
    return min(times)


def main():
    args = parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    keras.utils.set_random_seed(0)
    backbone = TransformerXLBackbone(
        vocabulary_size=256,
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        hidden_dim=args.hidden_dim,
        head_dim=args.hidden_dim // args.num_heads,
        intermediate_dim=4 * args.hidden_dim,
        memory_length=128,
    )
    lm = TransformerXLCausalLM(backbone)
    lm.build()
    lm.compile(sampler="greedy")
    rng = np.random.RandomState(0)

    def memory_step(token, memory, valid_length):
        hidden, new_memory = lm._generate_segment(
            token, {"memory": memory, "valid_length": valid_length}
        )
        return lm.compute_logits(hidden)[:, -1], new_memory

    def recompute_step(prefix):
        empty = backbone.initial_memory(1, memory_length=0)
        outputs = backbone(
            {
                "token_ids": prefix,
                "memory": empty["memory"],
                "valid_length": empty["valid_length"],
            }
        )
        return lm.compute_logits(outputs["sequence_output"][:, -1:])[:, -1]

    step_fn = compiled(lm, memory_step)
    full_fn = compiled(lm, recompute_step)
    rows = []
    for context in args.contexts:
        tokens = rng.randint(0, 256, size=(1, context)).astype("int32")
        memory = np.asarray(
            rng.normal(size=(1, args.num_layers, context, args.hidden_dim)),
            "float32",
        )
        valid = np.array([context], "int32")
        token = tokens[:, :1]
        step_s = best_seconds(
            lambda: step_fn(token, memory, valid), args.repeats, clock
        )
        full_s = best_seconds(lambda: full_fn(tokens), args.repeats, clock)
        prompt_length = context - args.new_tokens

        def generate(max_length):
            inputs = {
                "token_ids": tokens[:, :max_length],
                "padding_mask": np.arange(max_length)[None] < prompt_length,
            }
            return lambda: lm.generate(
                inputs, stop_token_ids=None, memory_length=context
            )["token_ids"]

        generate_s = best_seconds(generate(context), args.repeats, clock)
        one_token_s = best_seconds(
            generate(prompt_length + 1), args.repeats, clock
        )
        loop_s = (generate_s - one_token_s) / (args.new_tokens - 1)
        rows.append(
            {
                "context": context,
                "memory_step_tokens_per_s": 1.0 / step_s,
                "recompute_step_tokens_per_s": 1.0 / full_s,
                "generate_tokens_per_s": args.new_tokens / generate_s,
                "generate_loop_tokens_per_s": 1.0 / loop_s,
                "memory_over_recompute": full_s / step_s,
                "generate_loop_over_recompute": full_s / loop_s,
                "generate_over_recompute": (
                    full_s * args.new_tokens / generate_s
                ),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr)

    result = {
        "backend": keras.config.backend(),
        "model": {
            "num_layers": args.num_layers,
            "hidden_dim": args.hidden_dim,
            "num_heads": args.num_heads,
            "vocabulary_size": 256,
            "batch_size": 1,
        },
        "clock": args.clock,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "new_tokens": args.new_tokens,
        "repeats": args.repeats,
        "rows": rows,
    }
    print(json.dumps(result, indent=1))
    # One line for `benchmarks.run_all`'s table.
    print("RESULT " + json.dumps({"benchmark": "generation", **result}))
    plot(rows, args.png, result["backend"], args.clock)


def plot(rows, path, backend, clock):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    contexts = [row["context"] for row in rows]
    figure, axis = plt.subplots(figsize=(6, 4))
    for key, label in [
        ("memory_step_tokens_per_s", "memory: one step of 1 token"),
        ("generate_loop_tokens_per_s", "memory: lm.generate, new tokens"),
        ("generate_tokens_per_s", "memory: lm.generate, prompt included"),
        ("recompute_step_tokens_per_s", "recompute the context per token"),
    ]:
        axis.plot(contexts, [row[key] for row in rows], "o-", label=label)
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xlabel("context length (tokens)")
    seconds = "CPU second" if clock == "cpu" else "second"
    axis.set_ylabel(f"tokens per {seconds} (batch 1)")
    axis.set_title(f"Transformer-XL generation ({backend}, CPU)")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
