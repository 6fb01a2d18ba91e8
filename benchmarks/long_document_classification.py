"""Which of two texts a long passage comes from, read with and without
the memory (docs/results.md, "Long documents classified").

`TransformerXLTextClassifier` on character passages of `--segments`
segments of `--segment-length` characters: tinyshakespeare
(`data/tinyshakespeare.txt`) against the built-in corpus (CPython's
documentation, `keras_txl.data.load_corpus("builtin")`). Training
passages come from the first 80% of each text, test passages from the
last 20%. The same model is trained twice from the same weights: with a
memory that holds every earlier segment of a passage, and with none (the
last segment read alone). Prints one JSON object.

    KERAS_BACKEND=jax python -m benchmarks.long_document_classification
"""

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_txl import data  # noqa: E402
from keras_txl.data.tokenization import encode  # noqa: E402
from keras_txl.models import TransformerXLBackbone  # noqa: E402
from keras_txl.models import TransformerXLTextClassifier  # noqa: E402

SHAKESPEARE = (
    Path(__file__).resolve().parents[1] / "data" / "tinyshakespeare.txt"
)


def passages(ids, count, length, rng):
    """`count` passages of `length` ids from random places of `ids`."""
    starts = rng.integers(0, len(ids) - length, count)
    return np.stack([ids[s : s + length] for s in starts])


def split_sets(tokenizer, texts, args):
    """Train and test passages and labels, balanced, from the first 80%
    and the last 20% of each text."""
    rng = np.random.default_rng(args.seed)
    length = args.segments * args.segment_length
    sets = {"train": ([], []), "test": ([], [])}
    for label, text in enumerate(texts):
        ids = np.asarray(encode(tokenizer, text))
        cut = int(0.8 * len(ids))
        for name, part, count in (
            ("train", ids[:cut], args.train_passages // 2),
            ("test", ids[cut:], args.test_passages // 2),
        ):
            sets[name][0].append(passages(part, count, length, rng))
            sets[name][1].append(np.full(count, label, "int32"))
    result = {}
    for name, (x, y) in sets.items():
        # Shuffled here: keras-hub's tasks feed arrays to `fit` through a
        # Grain dataset, which `fit(shuffle=True)` does not shuffle.
        order = rng.permutation(sum(len(part) for part in y))
        x, y = np.concatenate(x).astype("int32"), np.concatenate(y)
        result[name] = (x[order], y[order])
    return result


def accuracy(args, vocabulary_size, sets, memory_length):
    keras.utils.set_random_seed(args.seed)
    backbone = TransformerXLBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=2,
        num_heads=2,
        hidden_dim=args.hidden_dim,
        head_dim=args.hidden_dim // 2,
        intermediate_dim=2 * args.hidden_dim,
        memory_length=(args.segments - 1) * args.segment_length,
    )
    classifier = TransformerXLTextClassifier(
        backbone,
        num_classes=2,
        segment_length=args.segment_length,
        memory_length=memory_length,
        dropout=0.0,
    )
    x, y = sets["train"]
    steps = args.epochs * len(x) // args.batch_size
    schedule = keras.optimizers.schedules.CosineDecay(args.learning_rate, steps)
    classifier.compile(
        optimizer=keras.optimizers.Adam(schedule, global_clipnorm=1.0)
    )
    start = time.perf_counter()
    classifier.fit(
        x, y, batch_size=args.batch_size, epochs=args.epochs, verbose=0
    )
    seconds = time.perf_counter() - start
    x, y = sets["test"]
    result = classifier.evaluate(x, y, batch_size=256, verbose=0)
    return {
        "memory_length": classifier.read_memory_length,
        "test_accuracy": round(float(result[1]), 4),
        "fit_seconds": round(seconds, 1),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--segment-length", type=int, default=16)
    parser.add_argument("--segments", type=int, default=8)
    parser.add_argument("--hidden-dim", type=int, default=32)
    parser.add_argument("--train-passages", type=int, default=2000)
    parser.add_argument("--test-passages", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    builtin, _, _ = data.load_corpus("builtin", valid_fraction=0.0)
    texts = [SHAKESPEARE.read_text(encoding="utf-8"), builtin]
    tokenizer = data.make_tokenizer("char", "".join(texts))
    sets = split_sets(tokenizer, texts, args)
    vocabulary_size = tokenizer.vocabulary_size()
    report = {
        "backend": keras.config.backend(),
        "task": "tinyshakespeare (0) or the built-in corpus (1)",
        "passage_characters": args.segments * args.segment_length,
        **{k: v for k, v in vars(args).items()},
        "with_memory": accuracy(args, vocabulary_size, sets, None),
        "without_memory": accuracy(args, vocabulary_size, sets, 0),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
