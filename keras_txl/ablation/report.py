"""The results of `run_ablation` as markdown tables, and the lines of
its pictures (`keras-txl ablate` draws and writes them)."""

import math

import numpy as np

# Variant: (recurrence, encoding, what Dai et al. (2019, Table 6) found).
_ROWS = {
    "recurrence_relative": ("yes", "relative (ours)", "best"),
    "no_recurrence": ("no", "relative (ours)", "worse than with recurrence"),
    "recurrence_absolute": (
        "yes",
        "absolute (sinusoid)",
        "worse: positions confused by recurrence",
    ),
    "recurrence_learned_relative": (
        "yes",
        "learned relative (Shaw)",
        "worse than ours, gains nothing from a longer memory",
    ),
    "no_stop_gradient": (
        "yes, no SG",
        "relative (ours)",
        "(not in the paper; SG is its design)",
    ),
}


def _bpc(values):
    """'mean (a, b)' of per-seed values."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.4f}"
    seeds = ", ".join(f"{v:.4f}" for v in values)
    return f"{np.mean(values):.4f} ({seeds})"


def _seconds(value):
    return "-" if value is None else f"{value:.4f}"


def _megabytes(value):
    return "-" if value is None else f"{value / 2**20:.1f}"


def markdown_report(results):
    """The tables of a `run_ablation` result, as markdown.

    Args:
        results: the dict `run_ablation` returns.

    Returns:
        A markdown string: the variants against the paper's findings, the
        memory sweep, RECL and the cost of backpropagating through the
        memory.

    Example:

    >>> run = dict(train_seconds=3.0, valid_bpc=2.5, valid_bpc_long=2.4,
    ...            train_loss_last=1.7, train_loss_last_std=0.1,
    ...            nonfinite_steps=0, seconds_per_step=0.01)
    >>> results = {
    ...     "config": dict(size="micro", segment_length=4, memory_length=4,
    ...                    long_memory_length=8, steps=2, batch_size=2,
    ...                    segments_per_step=2, tokens_per_step=16,
    ...                    seeds=[0], backend="jax", eval_tokens=64,
    ...                    eval_batch_size=2),
    ...     "valid_bpc": {"recurrence_relative": 2.5},
    ...     "training": {"recurrence_relative": [run], "memory_4": [run]},
    ...     "memory_sweep": {"memory_lengths": [4], "long_memory_length": 8},
    ...     "recl": {"by_ratio": {}},
    ...     "cost": {},
    ... }
    >>> print(markdown_report(results).splitlines()[4])
    | recurrence_relative | yes | relative (ours) | 2.5000 | 2.4000 | 3 | best |
    """
    config = results["config"]
    T, M = config["segment_length"], config["memory_length"]
    long_memory = config["long_memory_length"]
    training = results["training"]
    lines = [
        f"Size `{config.get('size', config.get('preset'))}`, T = {T}, "
        f"M = {M}, "
        f"{config['steps']} steps of {config['batch_size']} x "
        f"{config['segments_per_step']} segments "
        f"({config['tokens_per_step']} tokens), seeds {config['seeds']}, "
        f"backend {config['backend']}. Validation: "
        f"{config['eval_tokens']} characters as "
        f"{config['eval_batch_size']} streams. Bits per character, mean "
        "over seeds (each seed).",
        "",
        f"| variant | recurrence | encoding | valid bpc (M as trained) "
        f"| valid bpc (M = {long_memory}) | train s | Dai et al. (Table 6) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in results["valid_bpc"]:
        recurrence, encoding, paper = _ROWS[name]
        runs = training[name]
        seconds = np.mean([r["train_seconds"] for r in runs])
        lines.append(
            f"| {name} | {recurrence} | {encoding} "
            f"| {_bpc([r['valid_bpc'] for r in runs])} "
            f"| {_bpc([r['valid_bpc_long'] for r in runs])} "
            f"| {seconds:.0f} | {paper} |"
        )
    lines += [
        "",
        "Training (bits per character of the training batches over the "
        "last 10% of steps: mean and standard deviation, first seed; "
        "median seconds per step after two):",
        "",
        "| variant | train bpc | std | non-finite steps | s / step |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in results["valid_bpc"]:
        run = training[name][0]
        bits = 1.0 / math.log(2.0)
        lines.append(
            f"| {name} | {run['train_loss_last'] * bits:.4f} "
            f"| {run['train_loss_last_std'] * bits:.4f} "
            f"| {run['nonfinite_steps']} "
            f"| {_seconds(run['seconds_per_step'])} |"
        )
    sweep = results["memory_sweep"]
    lines += [
        "",
        "Memory sweep (relative encoding, trained and evaluated with M; "
        f"then evaluated with M = {sweep['long_memory_length']}):",
        "",
        f"| M | valid bpc (M) | valid bpc (M = {sweep['long_memory_length']})"
        " |",
        "| --- | --- | --- |",
    ]
    for memory in sweep["memory_lengths"]:
        runs = training[f"memory_{memory}"]
        lines.append(
            f"| {memory} ({memory / T:g} T) "
            f"| {_bpc([r['valid_bpc'] for r in runs])} "
            f"| {_bpc([r['valid_bpc_long'] for r in runs])} |"
        )
    recl = results["recl"]
    if recl["by_ratio"]:
        ratios = list(recl["by_ratio"])
        lines += [
            "",
            f"RECL (Dai et al., appendix C; group {recl['group']}, context "
            f"lengths {recl['contexts']}, threshold 0.01; each seed; "
            f"{recl['contexts'][-1]} means at least that):",
            "",
            "| model | " + " | ".join(f"r = {r}" for r in ratios) + " |",
            "| --- |" + " --- |" * len(ratios),
        ]
        for name in recl["group"]:
            cells = [
                ", ".join(str(v) for v in recl["by_ratio"][r].get(name, []))
                for r in ratios
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    cost = results["cost"]
    if cost:
        lines += [
            "",
            "Cost of a training step (median of timed steps after two "
            "warm-up steps, a fresh process each; XLA temp: the buffers of "
            "the compiled forward and backward pass, JAX only; the rise of "
            "the resident set size is in the JSON):",
            "",
            "| run | segments in the graph | tokens | s / step | "
            "ms / 1k tokens | XLA temp (MiB) |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name, row in cost.items():
            seconds = row["seconds_per_step"]
            per_k = 1e6 * seconds / row["tokens_per_step"]
            lines.append(
                f"| {name} | {row['segments_per_step']} "
                f"| {row['tokens_per_step']} "
                f"| {seconds:.4f} | {per_k:.2f} "
                f"| {_megabytes(row['xla_temp_bytes'])} |"
            )
    return "\n".join(lines) + "\n"


PICTURES = {
    "ablation_training.png": "training step",
    "ablation_memory_sweep.png": "training memory length M (tokens)",
    "ablation_context.png": "context length (tokens)",
}


def picture_series(results):
    """The lines of the pictures of a `run_ablation` result, in bits per
    character:

    - `ablation_training.png`: training bits per character of every
      variant (first seed, moving average);
    - `ablation_memory_sweep.png`: validation bits per character against
      the training memory length, evaluated with it and with the long one;
    - `ablation_context.png`: validation bits per character against the
      exact context length (the RECL measurements, first seed), when RECL
      was measured.

    Args:
        results: the dict `run_ablation` returns.

    Returns:
        dict `{file name: {label: (x, y)}}`; `PICTURES` holds the x-axis
        label of each file.

    Example:

    >>> results = {
    ...     "valid_bpc": {"a": 1.0},
    ...     "training": {"a": [{"loss_curve": [0.7, 0.6, 0.5]}]},
    ...     "memory_sweep": {"memory_lengths": [0, 4],
    ...                      "long_memory_length": 8,
    ...                      "valid_bpc": {"0": 2.0, "4": 1.5},
    ...                      "valid_bpc_long": {"0": 2.0, "4": 1.4}},
    ...     "recl": {"bpc_by_context": []},
    ... }
    >>> sorted(picture_series(results))
    ['ablation_memory_sweep.png', 'ablation_training.png']
    """
    training = {}
    for name in results["valid_bpc"]:
        bits = np.asarray(results["training"][name][0]["loss_curve"])
        bits = bits / math.log(2.0)
        window = max(1, len(bits) // 20)
        smooth = np.convolve(bits, np.ones(window) / window, mode="valid")
        training[name] = (np.arange(window, len(bits) + 1), smooth)
    sweep = results["memory_sweep"]
    lengths = sweep["memory_lengths"]
    long_memory = sweep["long_memory_length"]
    pictures = {
        "ablation_training.png": training,
        "ablation_memory_sweep.png": {
            f"evaluated with {label}": (
                lengths,
                [sweep[key][str(m)] for m in lengths],
            )
            for key, label in (
                ("valid_bpc", "M"),
                ("valid_bpc_long", f"M = {long_memory}"),
            )
        },
    }
    by_context = results["recl"]["bpc_by_context"]
    if by_context:
        series = {}
        for name, values in by_context[0].items():
            contexts = sorted(int(c) for c in values)
            series[name] = (contexts, [values[str(c)] for c in contexts])
        pictures["ablation_context.png"] = series
    return pictures
