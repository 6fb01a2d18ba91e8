"""Training step time of `AdaptiveSoftmax` against a full softmax.

One Keras `train_on_batch` step (forward, backward, SGD update) of the
output layer alone, on fixed hidden states: a `Dense(vocabulary_size)` with
`SparseCategoricalCrossentropy(from_logits=True)` against an
`AdaptiveSoftmax` trained on its per-cluster NLL. Targets follow a Zipf
law (exponent 1) over the vocabulary, most frequent ids first, as adaptive
softmax assumes. Prints one JSON object; `ratio` is full / adaptive (above
1: adaptive is faster).

    KERAS_BACKEND=jax python benchmarks/adaptive_softmax.py
"""

import argparse
import json
import os
import time

import keras
import numpy as np

from keras_txl.layers import AdaptiveSoftmax


def _zipf_targets(rng, vocabulary_size, shape):
    weights = 1.0 / np.arange(1, vocabulary_size + 1)
    return rng.choice(
        vocabulary_size, size=shape, p=weights / weights.sum()
    ).astype("int32")


def _full_model(hidden_dim, vocabulary_size):
    hidden = keras.Input((None, hidden_dim))
    logits = keras.layers.Dense(vocabulary_size)(hidden)
    model = keras.Model(hidden, logits)
    model.compile(
        optimizer="sgd",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def _adaptive_model(
    hidden_dim, vocabulary_size, cutoffs, div_val, tail_capacity
):
    hidden = keras.Input((None, hidden_dim))
    targets = keras.Input((None,), dtype="int32")
    nll = AdaptiveSoftmax(
        vocabulary_size,
        cutoffs=cutoffs,
        div_val=div_val,
        embedding_dim=hidden_dim,
        tail_capacity=tail_capacity,
    )(hidden, targets)
    model = keras.Model([hidden, targets], nll)
    # The model's output is already the per-token loss.
    model.compile(optimizer="sgd", loss=lambda y_true, y_pred: y_pred)
    return model


def _step_seconds(runs, steps):
    """Median seconds of one step of each run, `(model, x, y)`. Steps of
    the runs alternate, so that the load of a shared machine weighs on
    each alike."""
    for model, x, y in runs:
        for _ in range(2):  # compile and warm up
            model.train_on_batch(x, y)
    times = [[] for _ in runs]
    for _ in range(steps):
        for (model, x, y), run_times in zip(runs, times):
            start = time.perf_counter()
            model.train_on_batch(x, y)
            run_times.append(time.perf_counter() - start)
    return [float(np.median(t)) for t in times]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocabulary-size", type=int, default=32000)
    parser.add_argument("--hidden-dim", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--cutoffs", type=int, nargs="*", default=[2000, 8000])
    parser.add_argument("--div-vals", type=int, nargs="*", default=[1, 4])
    parser.add_argument(
        "--tail-capacities",
        type=float,
        nargs="*",
        default=[0.0, 0.2],
        help="`tail_capacity` values to time; 0 means None (every token)",
    )
    parser.add_argument("--steps", type=int, default=7)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.sequence_length)
    hidden = rng.normal(size=shape + (args.hidden_dim,)).astype("float32")
    targets = _zipf_targets(rng, args.vocabulary_size, shape)
    full = _full_model(args.hidden_dim, args.vocabulary_size)
    runs = [(full, hidden, targets)]
    names = []
    for div_val in args.div_vals:
        for capacity in args.tail_capacities:
            model = _adaptive_model(
                args.hidden_dim,
                args.vocabulary_size,
                args.cutoffs,
                div_val,
                capacity or None,
            )
            runs.append((model, [hidden, targets], np.zeros(shape, "float32")))
            names.append(f"div_val={div_val},tail_capacity={capacity or None}")
    full_seconds, *seconds = _step_seconds(runs, args.steps)
    adaptive = {
        name: {
            "step_ms": round(s * 1e3, 1),
            "ratio": round(full_seconds / s, 2),
        }
        for name, s in zip(names, seconds)
    }
    bounds = [0] + args.cutoffs + [args.vocabulary_size]
    share = [
        float(np.mean((targets >= a) & (targets < b)))
        for a, b in zip(bounds[:-1], bounds[1:])
    ]
    print(
        json.dumps(
            {
                "backend": keras.backend.backend(),
                "cpu_count": os.cpu_count(),
                "vocabulary_size": args.vocabulary_size,
                "hidden_dim": args.hidden_dim,
                "tokens": args.batch_size * args.sequence_length,
                "cutoffs": args.cutoffs,
                "target_share_per_cluster": [round(s, 3) for s in share],
                "full_softmax_step_ms": round(full_seconds * 1e3, 1),
                "adaptive_softmax": adaptive,
                "ratio_is": "full step time / adaptive step time",
            }
        )
    )


if __name__ == "__main__":
    main()
