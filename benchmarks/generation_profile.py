"""What one generated token costs on this backend, and what XLA runs for it.

`lm.generate()` is one XLA computation on both JAX and TensorFlow: the
prompt's segments, then keras-hub's sampler loop of one-token steps on
the key/value cache, each an `ops.while_loop`. This benchmark measures
the loop's cost per new token the way the peers' table sets it up (batch
1, a 64-token prompt, greedy, the model's memory of 128, the reference
size of `benchmarks/generation_length.py`) as the difference between
`generate()` with 257 and with 1 new token, over 256 (best of
`--repeats`, CPU and wall), so that the prompt, the call and the
compilation are out of it. It then compiles the same call once more
with `--xla_dump_to` and counts the instructions of the optimized HLO
of each while loop's body (fusions, dots, copies): run it on each
backend and compare. Same instruction counts and a different time per
token is the XLA:CPU runtime of that backend, not the model's graph.

Prints one RESULT line.

    KERAS_BACKEND=tensorflow PYTHONPATH=. python -m \\
        benchmarks.generation_profile
"""

import argparse
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from benchmarks import common

NEW = 256


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
        env = dict(
            os.environ,
            XLA_FLAGS=(
                os.environ.get("XLA_FLAGS", "")
                + f" --xla_dump_to={folder} --xla_dump_hlo_as_text"
            ),
        )
        subprocess.run(
            [sys.executable, "-m", __spec__.name, "--compile-only", *argv],
            env=env,
            check=True,
            capture_output=True,
        )
        modules = glob.glob(f"{folder}/*after_optimizations.txt")
        largest = max(modules, key=os.path.getsize)
        with open(largest) as f:
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--no-dump", action="store_true")
    args, rest = parser.parse_known_args(argv)
    import keras

    from benchmarks.generation_length import make_lm
    from benchmarks.generation_length import parse_args
    from benchmarks.generation_length import prompt_inputs
    from benchmarks.generation_length import seconds_per_call

    model_args = parse_args(rest)
    lm = make_lm(model_args)

    def inputs(new_tokens):  # the same prompt for both lengths
        rng = np.random.RandomState(0)
        return prompt_inputs(model_args.prompt, new_tokens, rng)

    if args.compile_only:
        lm.generate(inputs(NEW + 1), stop_token_ids=None)
        return
    one = seconds_per_call(lm, inputs(1), None, args.repeats)
    many = seconds_per_call(lm, inputs(NEW + 1), None, args.repeats)
    wall, cpu = ((m - o) / NEW for m, o in zip(many, one))
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
        row.update(dump_counts(rest))
    common.emit(row)


if __name__ == "__main__":
    main()
