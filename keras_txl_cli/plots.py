"""Pictures of a run (matplotlib, Agg backend, PNG).

matplotlib is the optional `plot` extra: without it every function here
raises `MissingExtraError` (one line naming the extra), and the commands
that draw pictures skip them with that line."""

import math
import os

import numpy as np

from keras_txl.utils.missing_extra_error import import_extra


def _pyplot():
    matplotlib = import_extra("matplotlib", "plot", "Drawing a picture")
    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def plot_training_curve(train_loss, path, title="Training"):
    """Training bits per token at every step, and a moving average.

    Args:
        train_loss: list of per-step losses (nats per token).
        path: the PNG to write.
        title: the figure's title.
    """
    pyplot = _pyplot()
    bits = np.asarray(train_loss, dtype="float64") / math.log(2.0)
    steps = np.arange(1, len(bits) + 1)
    window = max(1, len(bits) // 20)
    smooth = np.convolve(bits, np.ones(window) / window, mode="valid")
    figure, axes = pyplot.subplots(figsize=(6, 3.5), dpi=100)
    axes.plot(steps, bits, color="0.75", linewidth=0.8, label="each step")
    axes.plot(
        steps[window - 1 :], smooth, color="C0", label=f"mean of {window}"
    )
    axes.set_xlabel("step")
    axes.set_ylabel("training bits per character")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    _save(figure, path)
    pyplot.close(figure)


def plot_bpc_vs_memory(table, path, segment_length, training_memory_length):
    """Validation bits per character against the evaluation memory length.

    Args:
        table: list of dicts with `memory_length` and `bits_per_character`
            (from `evaluate_bpc`).
        path: the PNG to write.
        segment_length: int. `T`, for the title.
        training_memory_length: int. Marked with a vertical line.
    """
    pyplot = _pyplot()
    rows = sorted(table, key=lambda row: row["memory_length"])
    lengths = [row["memory_length"] for row in rows]
    bpc = [row["bits_per_character"] for row in rows]
    figure, axes = pyplot.subplots(figsize=(6, 3.5), dpi=100)
    axes.plot(lengths, bpc, marker="o")
    axes.axvline(
        training_memory_length,
        color="0.6",
        linestyle="--",
        label=f"training memory ({training_memory_length})",
    )
    axes.set_xlabel("evaluation memory length (tokens)")
    axes.set_ylabel("validation bits per character")
    axes.set_title(f"Validation, segments of {segment_length} tokens")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    _save(figure, path)
    pyplot.close(figure)


def plot_lines(series, xlabel, path):
    """One PNG of lines `{label: (x, y)}` in bits per character (the
    pictures of `keras-txl ablate`).

    Args:
        series: dict `{label: (x, y)}`.
        xlabel: the x axis's label.
        path: the PNG to write.

    Returns:
        `path`.
    """
    pyplot = _pyplot()
    figure, axes = pyplot.subplots(figsize=(7, 4), dpi=100)
    for label, (x, y) in series.items():
        axes.plot(x, y, marker="o" if len(x) < 30 else None, label=label)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("bits per character")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    _save(figure, path)
    pyplot.close(figure)
    return path


def _save(figure, path):
    path = os.fspath(path)
    temporary = f"{path}.tmp-{os.getpid()}.png"
    figure.savefig(temporary)
    os.replace(temporary, path)
