"""Generation (docs/benchmarks.md, "Running"):

- `context`: per context length n, one new token on a memory of n slots
  against recomputing the n-token context, and `lm.generate()` end to
  end and its loop alone (minus the same prompt with one new token).
- `length`: `lm.generate()` as a user calls it (greedy, batch 1, a
  `--prompt`-token prompt) per number of new tokens; each length's cost
  per token over the shortest's (flat: near 1).
- `profile`: the sampler loop's cost per new token (257 new tokens minus
  1, over 256), then the instructions of each while-loop body in the
  optimized HLO (`--xla_dump_to` in a child).

Best of `--repeats` after a compiling call, on the process CPU clock by
default (`--clock wall`).
"""

import argparse
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402

PROFILED_TOKENS = 256
# The integer options of every subcommand, with their defaults.
MODEL_ARGS = (
    ("num-layers", 4),
    ("hidden-dim", 256),
    ("num-heads", 8),
    ("prompt", 64),
    ("repeats", 3),
)


def make_lm(args):
    """A greedy causal LM of the command's size (a memory of 128)."""
    from keras_txl.models import TransformerXLCausalLM

    keras.utils.set_random_seed(0)
    size = dict(model_fields(args), memory_length=128)
    size.update(head_dim=args.hidden_dim // args.num_heads)
    size.update(intermediate_dim=4 * args.hidden_dim)
    lm = TransformerXLCausalLM(common.make_backbone(size))
    lm.build()
    lm.compile(sampler="greedy")
    return lm


def model_fields(args):
    return {
        "num_layers": args.num_layers,
        "hidden_dim": args.hidden_dim,
        "num_heads": args.num_heads,
        "vocabulary_size": 256,
    }


def prompt_inputs(prompt, new_tokens, rng):
    """`generate()`'s inputs for batch 1: `prompt` random byte ids, then
    `new_tokens` slots to fill."""
    length = prompt + new_tokens
    return {
        "token_ids": rng.randint(0, 256, (1, length)).astype("int32"),
        "padding_mask": np.arange(length)[None] < prompt,
    }


def timed(fn, repeats, by=0):
    """`(wall, cpu)` seconds of the fastest of `repeats` calls of `fn()`
    by wall (`by=0`) or CPU time (`by=1`: the process's, all its
    threads), after one call that compiles."""

    def call():
        keras.tree.map_structure(keras.ops.convert_to_numpy, fn())

    call()
    best = None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if best is None or (wall, cpu)[by] < best[by]:
            best = (wall, cpu)
    return best


def generate_call(lm, inputs, memory_length=None):
    return lambda: lm.generate(
        inputs, stop_token_ids=None, memory_length=memory_length
    )["token_ids"]


# === Memory against recomputing the context ===


def context(args):
    pick = 1 if args.clock == "cpu" else 0
    lm = make_lm(args)
    backbone, rng = lm.backbone, np.random.RandomState(0)

    def seconds(fn):
        return timed(fn, args.repeats, by=pick)[pick]

    def memory_step(token, memory, valid_length):
        hidden, new_memory = lm._generate_segment(
            token, {"memory": memory, "valid_length": valid_length}
        )
        return lm.compute_logits(hidden)[:, -1], new_memory

    def recompute_step(prefix):
        empty = backbone.initial_memory(1, memory_length=0)
        keys = ("memory", "valid_length")
        outputs = backbone({"token_ids": prefix, **{k: empty[k] for k in keys}})
        return lm.compute_logits(outputs["sequence_output"][:, -1:])[:, -1]

    step_fn = common.compiled(memory_step, lm, xla=True)[0]
    full_fn = common.compiled(recompute_step, lm, xla=True)[0]
    rows = []
    for n in args.contexts:
        tokens = rng.randint(0, 256, size=(1, n)).astype("int32")
        memory = rng.normal(size=(1, args.num_layers, n, args.hidden_dim))
        memory, valid = np.asarray(memory, "float32"), np.array([n], "int32")
        step_s = seconds(lambda: step_fn(tokens[:, :1], memory, valid))
        full_s = seconds(lambda: full_fn(tokens))
        prompt = n - args.new_tokens

        def generate(length):
            inputs = {
                "token_ids": tokens[:, :length],
                "padding_mask": np.arange(length)[None] < prompt,
            }
            return generate_call(lm, inputs, memory_length=n)

        new, generate_s = args.new_tokens, seconds(generate(n))
        loop_s = (generate_s - seconds(generate(prompt + 1))) / (new - 1)
        row = dict(context=n, memory_step_tokens_per_s=1.0 / step_s)
        row.update(recompute_step_tokens_per_s=1.0 / full_s)
        row.update(generate_tokens_per_s=new / generate_s)
        row.update(generate_loop_tokens_per_s=1.0 / loop_s)
        row.update(memory_over_recompute=full_s / step_s)
        row.update(generate_loop_over_recompute=full_s / loop_s)
        row.update(generate_over_recompute=full_s * new / generate_s)
        rows.append(row)
        common.log(rows[-1])
    result = {
        "benchmark": "generation",
        "backend": keras.config.backend(),
        "model": dict(model_fields(args), batch_size=1),
        "clock": args.clock,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "new_tokens": args.new_tokens,
        "repeats": args.repeats,
        "rows": rows,
    }
    common.emit(result)
    if args.png:
        plot_context(rows, args.png, result["backend"], args.clock)


def plot_context(rows, path, backend, clock):
    contexts = [row["context"] for row in rows]
    figure, axis = common.axes(1, 6)
    series = [
        ([row[key] for row in rows], "o-", label)
        for key, label in [
            ("memory_step_tokens_per_s", "memory: one step of 1 token"),
            ("generate_loop_tokens_per_s", "memory: lm.generate, new tokens"),
            ("generate_tokens_per_s", "memory: lm.generate, prompt included"),
            ("recompute_step_tokens_per_s", "recompute the context per token"),
        ]
    ]
    seconds = "CPU second" if clock == "cpu" else "second"
    ylabel = f"tokens per {seconds} (batch 1)"
    common.lines(axis, contexts, series, "context length (tokens)", ylabel, 1)
    axis.set_title(f"Transformer-XL generation ({backend}, CPU)")
    axis.grid(True, which="both", alpha=0.3)
    common.save_figure(figure, path)


# === Cost per token against the number of new tokens ===


def length(args):
    lm = make_lm(args)
    rng, rows = np.random.RandomState(0), []
    for new in args.new_tokens:
        inputs = prompt_inputs(args.prompt, new, rng)
        call = generate_call(lm, inputs, args.memory_length)
        wall, cpu = timed(call, args.repeats)
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
        common.log(rows[-1])
    for row in rows:
        row["cost_ratio_to_first"] = (
            row["ms_per_token"] / rows[0]["ms_per_token"]
        )
    common.emit(
        {
            "benchmark": "generation_length",
            "backend": keras.config.backend(),
            "model": dict(model_fields(args), memory_length=128),
            "prompt": args.prompt,
            "generate_memory_length": args.memory_length,
            "clock": args.clock,
            "repeats": args.repeats,
            "rows": rows,
        }
    )


# === What XLA runs for one token ===


def loop_bodies(hlo_text):
    """`[(body name, Counter of its instructions' opcodes)]` for each
    while loop of an optimized HLO module's text."""
    computations, current = {}, None
    for line in hlo_text.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if head:
            current = computations.setdefault(head.group(1), [])
        elif current is not None and line.startswith("  "):
            current.append(line)
    bodies = []
    for lines in computations.values():
        for line in lines:
            body = re.search(r" while\(.*body=%?([\w.\-]+)", line)
            if body:
                opcodes = collections.Counter(
                    m.group(1)
                    for m in (
                        re.search(r"= .*?\s([a-z][\w\-]*)\(", x)
                        for x in computations.get(body.group(1), [])
                    )
                    if m
                )
                bodies.append((body.group(1), opcodes))
    return bodies


def dump_counts(argv):
    """Runs this module in a child with `--xla_dump_to` (XLA reads its
    flags once per process) and summarizes the largest module's loops."""
    with tempfile.TemporaryDirectory() as folder:
        flags = os.environ.get("XLA_FLAGS", "")
        flags += f" --xla_dump_to={folder} --xla_dump_hlo_as_text"
        subprocess.run(
            [sys.executable, "-m", "benchmarks.generation", *argv],
            env=dict(os.environ, XLA_FLAGS=flags),
            check=True,
            capture_output=True,
        )
        modules = glob.glob(f"{folder}/*after_optimizations.txt")
        with open(max(modules, key=os.path.getsize)) as f:
            text = f.read()
    keys = ("fusion", "dot", "copy", "dynamic-update-slice")
    return {
        # Inside fused computations too (a fusion may hold a dot).
        "module_dots": len(re.findall(r" dot\(", text)),
        "module_instructions": len(re.findall(r"^\s+%?\S+ = ", text, re.M)),
        "while_bodies": [
            {
                "instructions": sum(c.values()),
                **{k: c.get(k, 0) for k in keys},
            }
            for _, c in loop_bodies(text)
        ],
    }


def profile(args, argv):
    lm = make_lm(args)

    def call(new_tokens):  # the same prompt for both lengths
        inputs = prompt_inputs(
            args.prompt, new_tokens, np.random.RandomState(0)
        )
        return generate_call(lm, inputs)

    if args.compile_only:
        return call(PROFILED_TOKENS + 1)()
    one = timed(call(1), args.repeats)
    many = timed(call(PROFILED_TOKENS + 1), args.repeats)
    wall, cpu = ((m - o) / PROFILED_TOKENS for m, o in zip(many, one))
    row = {
        "benchmark": "generation_profile",
        "backend": keras.backend.backend(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "loop_ms_per_token_wall": 1000 * wall,
        "loop_ms_per_token_cpu": 1000 * cpu,
        "tokens_per_s": 1 / wall,
        "load": os.getloadavg()[0],
    }
    if not args.no_dump:
        row.update(dump_counts(argv + ["--compile-only"]))
    common.emit(row)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    ctx, size, prof = map(commands.add_parser, ("context", "length", "profile"))
    contexts, lengths = [128, 256, 512, 1024, 2048], [64, 256, 1024, 2048]
    ctx.add_argument("--contexts", type=int, nargs="+", default=contexts)
    ctx.add_argument("--new-tokens", type=int, default=32)
    ctx.add_argument("--png", default=None)
    size.add_argument("--new-tokens", type=int, nargs="+", default=lengths)
    size.add_argument("--memory-length", type=int, help="generate()'s")
    prof.add_argument("--compile-only", action="store_true")
    prof.add_argument("--no-dump", action="store_true")
    for sub in (ctx, size, prof):
        add = sub.add_argument
        for name, default in MODEL_ARGS:
            add(f"--{name}", type=int, default=default)
        add("--clock", choices=["cpu", "wall"], default="cpu")
    ctx.set_defaults(hidden_dim=128, num_heads=4, repeats=5)
    prof.set_defaults(repeats=5)
    return parser.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.command == "profile":
        return profile(args, argv)
    {"context": context, "length": length}[args.command](args)


if __name__ == "__main__":
    main()
