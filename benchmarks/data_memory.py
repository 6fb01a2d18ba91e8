"""Resident memory of the data against corpus size, through the token cache.

For each corpus size (texts generated in a temporary folder by repeating
data/tinyshakespeare.txt with its words shuffled line by line, never
committed), a child process does what `keras-txl train --corpus FILE`
does with its data: `corpus_ids` (the token cache: tokenized in
chunks on the first run, memory-mapped on the next), the ordered segment
datasets, a few `fit` steps of the tiny preset's model, then reads every
training batch once (so every page of the corpus's ids has been touched)
and reports its peak resident memory (`ru_maxrss`). Each size runs twice:
`first` builds the cache, `cached` reads it. The fitted slope of peak RSS
against tokens is the data's cost in bytes per token above the runtime's
own (the intercept).

    KERAS_BACKEND=jax PYTHONPATH=. python -m benchmarks.data_memory \
        --sizes-mb 1 10 100 --plot docs/images/data_memory.png

Prints one JSON line per run, then the fit.
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "data", "tinyshakespeare.txt")


def make_text(path, size_bytes, seed=0):
    """A text of about `size_bytes`: tinyshakespeare's lines, their words
    shuffled, repeated (so the vocabulary stays that of the corpus)."""
    rng = random.Random(seed)
    with open(CORPUS, encoding="utf-8") as file:
        lines = file.read().splitlines()
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size_bytes:
            block = []
            for line in lines:
                words = line.split()
                rng.shuffle(words)
                block.append(" ".join(words) + "\n")
            text = "".join(block)
            out.write(text)
            written += len(text.encode("utf-8"))
    return written


def child(path, cache_dir, steps):
    """The measured run (in its own process)."""
    started = time.perf_counter()
    import keras

    from keras_txl import data
    from keras_txl.app.sizes import build_language_model
    from keras_txl.app.train_config import TrainConfig
    from keras_txl.training.schedules import transformer_xl_optimizer

    runtime_rss = _peak_rss()
    config = TrainConfig(corpus=path, steps=steps, warmup_steps=0).resolved()
    loading = time.perf_counter()
    text = data.load_corpus("builtin", path, 0.1, cache_dir=cache_dir)
    tokenizer = data.make_tokenizer("char", text, cache_dir=cache_dir)
    corpus = data.corpus_ids(tokenizer, text, cache_dir=cache_dir)
    load_seconds = time.perf_counter() - loading
    vocabulary_size = int(corpus.tokenizer.vocabulary_size())
    batch, length = config.batch_size, config.segment_length
    train = data.segment_dataset(
        corpus.train, batch, length, vocabulary_size=vocabulary_size
    )
    lm = build_language_model(config, vocabulary_size)
    lm.compile(optimizer=transformer_xl_optimizer(1e-3, steps, 0))
    lm.fit(train, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
    batches = 0
    for _ in train:  # every page of the training ids is read once
        batches += 1
    del keras
    return {
        "text_bytes": os.path.getsize(path),
        "train_tokens": int(len(corpus.train)),
        "tokens": int(len(corpus.train) + len(corpus.valid)),
        "id_dtype": corpus.train.dtype.name,
        "load_seconds": round(load_seconds, 2),
        "batches_read": batches,
        "runtime_peak_rss_mb": round(runtime_rss / 2**20, 1),
        "peak_rss_mb": round(_peak_rss() / 2**20, 1),
        "seconds": round(time.perf_counter() - started, 1),
    }


def _peak_rss():
    """Peak resident memory of this process in bytes (Linux: KB units)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def fit_line(points):
    """Least-squares `(slope, intercept)` of `(x, y)` points."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    slope = sxy / sxx
    return slope, mean_y - slope * mean_x


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes-mb", type=float, nargs="+", default=[1, 10, 100]
    )
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--plot", help="PNG of peak RSS against tokens")
    parser.add_argument("--json", help="file for the results")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child, steps=args.steps)))
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="keras_txl_data_memory_") as tmp:
        for size in args.sizes_mb:
            path = os.path.join(tmp, f"text_{size:g}mb.txt")
            make_text(path, int(size * 1e6))
            cache = os.path.join(tmp, f"cache_{size:g}")
            for run in ("first", "cached"):
                output = subprocess.run(
                    [sys.executable, "-m", "benchmarks.data_memory"]
                    + ["--steps", str(args.steps), "--child", path, cache],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                row = json.loads(output.stdout.strip().splitlines()[-1])
                row.update(run=run, size_mb=size)
                rows.append(row)
                print(json.dumps(row), flush=True)
    summary = {}
    for run in ("first", "cached"):
        points = [
            (row["train_tokens"], row["peak_rss_mb"] * 2**20)
            for row in rows
            if row["run"] == run
        ]
        if len(points) >= 2:
            slope, intercept = fit_line(points)
            summary[run] = {
                "bytes_per_token": round(slope, 2),
                "intercept_mb": round(intercept / 2**20, 1),
            }
    print(json.dumps({"fit": summary}))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"runs": rows, "fit": summary}, file, indent=1)
    if args.plot:
        _plot(rows, summary, args.plot)
    return 0


def _plot(rows, summary, path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(5, 3.5))
    for run, marker in (("first", "o"), ("cached", "s")):
        points = [
            (row["train_tokens"] / 1e6, row["peak_rss_mb"])
            for row in rows
            if row["run"] == run
        ]
        label = run
        if run in summary:
            label += f" ({summary[run]['bytes_per_token']:.2f} B/token)"
        axes.plot(*zip(*points), marker=marker, label=label)
    axes.set_xlabel("training tokens (millions)")
    axes.set_ylabel("peak resident memory (MB)")
    axes.set_title("keras-txl data: token cache + memmap")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
