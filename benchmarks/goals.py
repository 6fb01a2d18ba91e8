"""The goals of docs/benchmarks.md: keras-txl's speed as multiples of the
peers' (measured in the same pass by `benchmarks/peers.py`), and the
tables of `run_all` that show them (`goal_rows`) and the peers' own
numbers (`peer_rows`). Reads results only: runs no model."""

import statistics

from benchmarks import common

# Goals at the reference size, as multiples of the peers measured in the
# same pass: the authors' fp32 PyTorch training and
# evaluation, HuggingFace's TransfoXL greedy generation.
GOAL_FP32_MFU = 0.60
GOAL_BF16_TRAIN_X = 3.0  # mixed bf16 training vs the authors' training
GOAL_JAX_TRAIN_X = 2.0  # JAX fp32 training vs the authors' training
GOAL_EVAL_X = 3.0  # evaluation vs the authors' evaluation
GOAL_GENERATE_X = 3.0  # generate() vs HuggingFace's, on each backend
NOT_MEASURED = "not measured"
# The generation setting of the comparison (issue 16): batch 1, a prompt
# of 64 tokens, 256 new, memory 128.
GENERATE_NEW_TOKENS = 256


def best(rows, key):
    rows = [r for r in rows if r.get(key) is not None]
    return max(rows, key=lambda r: r[key]) if rows else None


def peer_row(results, peer, phase):
    """The result of a peer (`authors_pytorch`, `huggingface_transfo_xl`)
    in a phase, or `None` when it was not measured."""
    rows = common.kind("peer", peer=peer, phase=phase)(results)
    return rows[-1] if rows else None


def goal(name, target, candidates, peer):
    """A goal's row: the best of `candidates` (wall and CPU-normalized
    tokens/s) over `peer`'s, against `target`."""

    def rates(wall, cpu):
        wall, cpu = wall["tokens_per_s"], cpu["tokens_per_cpu_s_x_cores"]
        return f"{common.fmt(wall)} / {common.fmt(cpu)}"

    row = {"goal": name, "target": f"{target:g}x the peer"}
    wall = best(candidates, "tokens_per_s")
    if wall is None:
        return dict(row, ours="not run")
    cpu = best(candidates, "tokens_per_cpu_s_x_cores")
    row["ours"] = rates(wall, cpu)
    if peer is None:
        return dict(row, peer=NOT_MEASURED)
    x_wall = wall["tokens_per_s"] / peer["tokens_per_s"]
    x_cpu = cpu["tokens_per_cpu_s_x_cores"] / peer["tokens_per_cpu_s_x_cores"]
    by = cpu["backend"]
    if "dtype" in cpu:
        by += f" {cpu['dtype']} {common.config(cpu)}"
    if "mode" in cpu:
        by += f" {cpu['mode']}"
    met = ["yes" if x >= target else "no" for x in (x_wall, x_cpu)]
    return dict(
        row,
        peer=rates(peer, peer),
        ratio=f"{x_wall:.2f}x / {x_cpu:.2f}x",
        met=" / ".join(met),
        by=by,
    )


def goal_rows(results):
    fits = [
        r
        for r in common.kind("train_eval")(results)
        if common.size_of(r) == "reference"
    ]

    def pick(phase, dtype=None, backend=None):
        # Training counts with the peer's dropout (0.1) only: the rows
        # without dropout measure what it costs.
        return [
            r
            for r in fits
            if r["phase"] == phase
            and dtype in (None, r["dtype"])
            and backend in (None, r["backend"])
            and (phase != "train" or r.get("dropout") == 0.1)
        ]

    row = {"goal": "fp32 training, MFU vs fp32 matmul"}
    row["target"] = common.pct(GOAL_FP32_MFU)
    wall = best(pick("train", "float32"), "mfu")
    if wall is not None:
        cpu = best(pick("train", "float32"), "mfu_cpu")
        met = [v >= GOAL_FP32_MFU for v in (wall["mfu"], cpu["mfu_cpu"])]
        row.update(
            ours=f"{common.pct(wall['mfu'])} / {common.pct(cpu['mfu_cpu'])}",
            peer="(no peer)",
            met=" / ".join("yes" if m else "no" for m in met),
            by=f"{cpu['backend']} {common.config(cpu)}",
        )
    authors = peer_row(results, "authors_pytorch", "train")
    paper = [r for r in common.kind("paper_eval")(results) if "error" not in r]
    paper_peer = [r for r in paper if r.get("implementation") == "authors"]
    rows = [
        row,
        goal(
            "mixed bf16 training vs the authors' fp32 PyTorch",
            GOAL_BF16_TRAIN_X,
            pick("train", "mixed_bfloat16"),
            authors,
        ),
        goal(
            "JAX fp32 training vs the authors' fp32 PyTorch",
            GOAL_JAX_TRAIN_X,
            pick("train", "float32", "jax"),
            authors,
        ),
        goal(
            "evaluation vs the authors' PyTorch",
            GOAL_EVAL_X,
            pick("eval"),
            peer_row(results, "authors_pytorch", "eval"),
        ),
        goal(
            "evaluation at the paper's wt103 settings (T 128, M 1,600, "
            "clamp 1,000, same_length) vs the authors' PyTorch",
            GOAL_EVAL_X,
            [r for r in paper if r.get("implementation") == "keras_txl"],
            (paper_peer or [None])[0],
        ),
    ]
    generated = [
        r
        for r in common.nested("generation_length")(results)
        if r["new_tokens"] == GENERATE_NEW_TOKENS
    ]
    hf = peer_row(results, "huggingface_transfo_xl", "generate")
    for backend in ("jax", "tensorflow"):
        name = (
            f"`generate()` on {backend} vs HuggingFace's TransfoXL (batch "
            f"1, 64-token prompt, {GENERATE_NEW_TOKENS} new, memory 128)"
        )
        ours = [r for r in generated if r["backend"] == backend]
        rows.append(goal(name, GOAL_GENERATE_X, ours, hf))
    return rows


PEER_NAMES = {
    "authors_pytorch": "authors' PyTorch (kimiyoung/transformer-xl)",
    "huggingface_transfo_xl": "HuggingFace TransfoXLLMHeadModel",
}


def peer_rows(results):
    """One row per (peer, phase) it runs; "not measured" for the authors'
    training and evaluation when they were not run."""
    rows = []
    for peer, phase in (
        ("authors_pytorch", "train"),
        ("authors_pytorch", "eval"),
        ("huggingface_transfo_xl", "generate"),
    ):
        r = peer_row(results, peer, phase)
        if r is None and peer == "authors_pytorch":
            r = {"tokens_per_s": NOT_MEASURED}
        if r is not None:
            rows.append(dict(r, name=PEER_NAMES[peer], phase=phase))
    return rows


# === The goals in rounds (`run_all --goals N`) ===

# (goal, keras-txl's results in a round, the peer's phase), each goal's
# rates taken from the rows of one round only.
ROUND_GOALS = (
    (
        "JAX fp32 training vs the authors' fp32 PyTorch",
        GOAL_JAX_TRAIN_X,
        dict(benchmark="train_eval", backend="jax", phase="train"),
        ("authors_pytorch", "train"),
    ),
    (
        "TensorFlow fp32 training vs the authors' fp32 PyTorch",
        GOAL_JAX_TRAIN_X,
        dict(benchmark="train_eval", backend="tensorflow", phase="train"),
        ("authors_pytorch", "train"),
    ),
    (
        f"TensorFlow `generate()` vs HuggingFace's TransfoXL (batch 1, "
        f"64-token prompt, {GENERATE_NEW_TOKENS} new, memory 128)",
        GOAL_GENERATE_X,
        dict(benchmark="generation_length", backend="tensorflow"),
        ("huggingface_transfo_xl", "generate"),
    ),
)
RATES = ("tokens_per_s", "tokens_per_cpu_s_x_cores")


def _ours(results, match):
    """keras-txl's row of `match` in `results` (one round), or None."""
    if match["benchmark"] == "generation_length":
        rows = [
            r
            for r in common.nested("generation_length")(results)
            if r["backend"] == match["backend"]
            and r["new_tokens"] == GENERATE_NEW_TOKENS
        ]
    else:
        rows = [
            r
            for r in common.kind(match["benchmark"])(results)
            if r.get("backend") == match["backend"]
            and r.get("phase") == match["phase"]
            and r.get("dtype") == "float32"
            and r.get("dropout") == 0.1
        ]
    return rows[-1] if rows else None


def spread(values, digits=2):
    """`median [min-max]` of `values`."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:,.{digits}f} [{low:,.{digits}f}-{high:,.{digits}f}]"


def round_rows(results):
    """One row per goal of `ROUND_GOALS`: keras-txl's rate over the peer's
    of the same round (wall / CPU-normalized), median [min-max] over the
    rounds of `run_all --goals`, and the rates' medians."""
    rounds = sorted({r["round"] for r in results if "round" in r})
    rows = []
    for name, target, match, (peer, phase) in ROUND_GOALS:
        ratios = {rate: [] for rate in RATES}
        ours_rates, peer_rates = [], []
        for n in rounds:
            this = [r for r in results if r.get("round") == n]
            ours, theirs = _ours(this, match), peer_row(this, peer, phase)
            if ours is None or theirs is None:
                continue
            for rate in RATES:
                ratios[rate].append(ours[rate] / theirs[rate])
            ours_rates.append(ours["tokens_per_s"])
            peer_rates.append(theirs["tokens_per_s"])
        row = {"goal": name, "target": f"{target:g}x", "rounds": 0}
        loads = [r["load"] for r in results if "load" in r and "round" in r]
        if loads:
            row["load"] = f"{min(loads):.1f}-{max(loads):.1f}"
        if ours_rates:
            wall, cpu = ratios["tokens_per_s"], ratios[RATES[1]]
            row.update(
                rounds=len(wall),
                ours=spread(ours_rates, 0),
                peer=spread(peer_rates, 0),
                wall=spread(wall),
                cpu=spread(cpu),
                met="yes" if statistics.median(wall) >= target else "no",
            )
        rows.append(row)
    return rows


ROUND_COLUMNS = """
goal (reference size) | goal
target | target | r
rounds | rounds | r
keras-txl tokens/s (wall) | ours | r
peer tokens/s (wall) | peer | r
ratio, wall | wall | r
ratio, CPU-normalized | cpu | r
met (median, wall) | met
load (1-min, at the jobs' starts) | load | r"""
