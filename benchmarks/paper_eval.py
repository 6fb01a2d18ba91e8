"""Evaluation at the paper's wt103 settings (T 128, M 1,600, clamp 1,000,
same_length; reference size, batch 10, fp32) against the authors' code,
each configuration in a child process of its own (its own peak RSS):

- `plain`: the backbone's graph on the carried hidden states (what
  `evaluate` and `score` run);
- `kv_reuse`: `call_with_key_value_cache` (what `generate()` runs): the
  memory's keys and values carried, a segment projects only its T rows;
- the authors' `MemTransformerLM` in eval mode (`peers.py --what
  paper_eval` under `--peer-python`).

From a full memory of random states, `--warmup` segments, then
`--segments` timed; a `paper_eval_summary` line with the ratios.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# The paper's wt103 evaluation: tgt_len, mem_len, clamp_len, same_length.
PAPER = dict(segment_length=128, memory_length=1600, clamp_length=1000)
MODES = ("plain", "kv_reuse")
MODEL_KEYS = "num_layers hidden_dim num_heads head_dim intermediate_dim".split()
MODEL_KEYS += ["vocabulary_size"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--child", choices=MODES, help=argparse.SUPPRESS)
    add("--backends", default="tensorflow,jax")
    add("--modes", default=",".join(MODES))
    add("--batch-size", type=int, default=10)
    add("--segments", type=int, default=6)
    add("--warmup", type=int, default=2)
    add("--memory-length", type=int, default=PAPER["memory_length"])
    add("--quick", action="store_true", help="batch 2, 1 + 2 segments")
    add("--peer-python", metavar="PYTHON")
    add("--authors-code", metavar="DIR")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_size, args.segments, args.warmup = 2, 2, 1
    return args


# === One configuration (child process) ===


def build(batch_size, memory_length):
    """The reference-size causal LM at the paper's evaluation settings."""
    from benchmarks import common
    from keras_txl.models import TransformerXLCausalLM

    size = common.BENCHMARK_SIZES["reference"]
    backbone = common.make_backbone(
        dict(size, memory_length=memory_length),
        clamp_length=PAPER["clamp_length"],
        same_length=True,
    )
    lm = TransformerXLCausalLM(backbone)
    lm.build()  # the output layer's weights
    return lm, size


def _nll_sum(lm, hidden, targets):
    from keras import ops

    logits = lm.compute_logits(hidden)  # (batch, T, vocab) float32
    log_probs = ops.log_softmax(logits, axis=-1)
    picked = ops.take_along_axis(
        log_probs, ops.expand_dims(targets, -1), axis=-1
    )  # (batch, T, 1)
    return -ops.sum(picked)


def step_functions(lm, segment_length, memory_length):
    """`{mode: fn(token_ids, targets, state) -> (nll_sum, state)}`:
    the two ways of evaluating a segment, uncompiled."""
    backbone = lm.backbone

    def plain(token_ids, targets, state):
        from keras import ops

        token_ids = ops.convert_to_tensor(token_ids)
        out = backbone(
            {
                "token_ids": token_ids,
                "memory": state["memory"],
                "valid_length": state["valid_length"],
            }
        )
        new = {"memory": out["memory"], "valid_length": out["valid_length"]}
        return _nll_sum(lm, out["sequence_output"], targets), new

    def kv_reuse(token_ids, targets, state):
        _, hidden, cache = lm.call_with_key_value_cache(token_ids, state)
        return _nll_sum(lm, hidden, targets), cache

    return {"plain": plain, "kv_reuse": kv_reuse}


def initial_state(lm, mode, batch_size, memory_length, seed=0):
    """A full memory of random states (`plain`), or its keys and values
    (`kv_reuse`): the steady state of a long text."""
    import numpy as np
    from keras import ops

    backbone = lm.backbone
    rng = np.random.default_rng(seed)
    states = rng.standard_normal(
        (batch_size, backbone.num_layers, memory_length, backbone.hidden_dim)
    ).astype("float32")
    memory = {
        "memory": ops.convert_to_tensor(states),
        "valid_length": ops.convert_to_tensor(
            np.full((batch_size,), memory_length, "int32")
        ),
    }
    if mode == "kv_reuse":
        return lm.key_value_cache(memory)
    return memory


def run_child(args):
    import numpy as np

    from benchmarks import common

    lm, size = build(args.batch_size, args.memory_length)
    t, b, m = PAPER["segment_length"], args.batch_size, args.memory_length
    fn = step_functions(lm, t, m)[args.child]
    step, sync = common.compiled(fn, lm)
    state = initial_state(lm, args.child, b, m)
    rng = np.random.default_rng(1)
    tokens = rng.integers(
        0, size["vocabulary_size"], (args.warmup + args.segments, b, t + 1)
    ).astype("int32")
    baseline_rss = common.current_rss_mib()
    for i in range(args.warmup):
        nll, state = step(tokens[i, :, :-1], tokens[i, :, 1:], state)
    sync(nll)
    after_compile_rss = common.current_rss_mib()
    wall, cpu = time.perf_counter(), time.process_time()
    total = 0.0
    for i in range(args.warmup, args.warmup + args.segments):
        nll, state = step(tokens[i, :, :-1], tokens[i, :, 1:], state)
        total += float(np.asarray(nll))  # the loss, as evaluation sums it
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    count = b * t * args.segments
    cores = os.cpu_count() or 1
    dims = dict(size, batch_size=b, segment_length=t, memory_length=m)
    common.emit(
        {
            "benchmark": "paper_eval",
            "implementation": "keras_txl",
            "mode": args.child,
            "tokens_per_s": count / wall,
            "tokens_per_cpu_s_x_cores": count / max(cpu, 1e-9) * cores,
            "ms_per_segment": 1000 * wall / args.segments,
            "mean_nll": total / count,
            "peak_rss_mib": common.peak_rss_mib(),
            "rss_before_first_call_mib": baseline_rss,
            "peak_rss_delta_mib": common.peak_rss_mib() - baseline_rss,
            "rss_after_compile_mib": after_compile_rss,
            "forward_mflop_per_token": common.forward_flops_per_token(**dims)
            / 1e6,
            "batch_size": b,
            "segments": args.segments,
            "warmup": args.warmup,
            **PAPER,
            "memory_length": m,
            "same_length": True,
            "model": {k: size[k] for k in MODEL_KEYS},
            **common.backend_versions(),
            **common.machine_info(),
        }
    )


# === The pass (parent process) ===


def run(module, argv, backend, python=None):
    """One configuration in a child process: its RESULT lines, or an
    error line."""
    from benchmarks import common

    results, error, command = common.run_module(
        module, argv, backend, python=python
    )
    if error or not results:
        return [{"benchmark": "paper_eval", "error": error, "command": command}]
    return results


def summary(results):
    """Ratios of the pass: each keras-txl configuration over the authors'
    code (tokens/s, and peak RSS), and kv_reuse over plain."""
    results = [r for r in results if "error" not in r]
    authors = [r for r in results if r.get("implementation") == "authors"]
    authors = authors[:1]
    ours = [r for r in results if r.get("implementation") == "keras_txl"]
    keys = ("tokens_per_s", "tokens_per_cpu_s_x_cores", "peak_rss_delta_mib")
    out = {"benchmark": "paper_eval_summary", "rows": []}

    def over(r, base, name):  # r's rates over base's, wall and CPU
        wall, cpu = (r[k] / base[k] for k in keys[:2])
        return {f"{name}_wall": wall, f"{name}_cpu": cpu}

    for r in ours:
        row = {k: r[k] for k in ("backend", "mode", *keys)}
        for a in authors:
            row.update(over(r, a, "x_authors"))
            row["rss_over_authors"] = r[keys[2]] / max(a[keys[2]], 1e-9)
        same = (r["backend"], "plain")
        plain = [p for p in ours if (p["backend"], p["mode"]) == same]
        if r["mode"] == "kv_reuse" and plain:
            row.update(over(r, plain[0], "kv_reuse_over_plain"))
        out["rows"].append(row)
    for a in authors:
        out.update({f"authors_{k}": a[k] for k in keys})
    if not authors:
        out["authors"] = "not measured (no --peer-python/--authors-code)"
    return out


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        run_child(args)
        return
    from benchmarks import common

    if bool(args.peer_python) != bool(args.authors_code):
        raise SystemExit(
            "paper_eval: pass both --peer-python and --authors-code (the "
            "authors' code runs under the peer's Python), or neither"
        )
    results = []
    lengths = ["--segments", args.segments, "--warmup", args.warmup]
    child = ["--batch-size", args.batch_size, *lengths]
    child += ["--memory-length", args.memory_length]
    for backend in [b for b in args.backends.split(",") if b]:
        for mode in [m for m in args.modes.split(",") if m]:
            results += run("paper_eval", ["--child", mode, *child], backend)
    if args.peer_python:
        peer = ["--what", "paper_eval", "--authors-code", args.authors_code]
        peer += ["--paper-batch", args.batch_size]
        peer += ["--paper-mem-len", args.memory_length, "--steps"] + lengths[1:]
        results += run("peers", peer, "peer", python=args.peer_python)
    for r in results:
        common.emit(r)
    common.emit(summary(results))


if __name__ == "__main__":
    main()
