"""The results of `run_ablation` as markdown tables and PNG pictures."""

import math
import os

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
            "the resident memory is in the JSON):",
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


def _plot(series, xlabel, path):
    """One PNG of lines `{label: (x, y)}` of validation or training bpc."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4), dpi=100)
    for label, (x, y) in series.items():
        axes.plot(x, y, marker="o" if len(x) < 30 else None, label=label)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("bits per character")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
    return path


def save_plots(results, directory):
    """Writes the pictures of a `run_ablation` result as PNG files.

    - `ablation_training.png`: training bits per character of every
      variant (first seed, moving average);
    - `ablation_memory_sweep.png`: validation bits per character against
      the training memory length, evaluated with it and with the long one;
    - `ablation_context.png`: validation bits per character against the
      exact context length (the RECL measurements, first seed).

    Args:
        results: the dict `run_ablation` returns.
        directory: where to write (created if needed).

    Returns:
        The list of paths written.
    """
    os.makedirs(directory, exist_ok=True)
    training = {}
    for name in results["valid_bpc"]:
        bits = np.asarray(results["training"][name][0]["loss_curve"])
        bits = bits / math.log(2.0)
        window = max(1, len(bits) // 20)
        smooth = np.convolve(bits, np.ones(window) / window, mode="valid")
        training[name] = (np.arange(window, len(bits) + 1), smooth)
    paths = [
        _plot(
            training,
            "training step",
            os.path.join(directory, "ablation_training.png"),
        )
    ]
    sweep = results["memory_sweep"]
    lengths = sweep["memory_lengths"]
    long_memory = sweep["long_memory_length"]
    paths.append(
        _plot(
            {
                f"evaluated with {label}": (
                    lengths,
                    [sweep[key][str(m)] for m in lengths],
                )
                for key, label in (
                    ("valid_bpc", "M"),
                    ("valid_bpc_long", f"M = {long_memory}"),
                )
            },
            "training memory length M (tokens)",
            os.path.join(directory, "ablation_memory_sweep.png"),
        )
    )
    by_context = results["recl"]["bpc_by_context"]
    if by_context:
        series = {}
        for name, values in by_context[0].items():
            contexts = sorted(int(c) for c in values)
            series[name] = (contexts, [values[str(c)] for c in contexts])
        paths.append(
            _plot(
                series,
                "context length (tokens)",
                os.path.join(directory, "ablation_context.png"),
            )
        )
    return paths
