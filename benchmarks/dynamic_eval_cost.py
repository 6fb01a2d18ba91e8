"""Cost per token of dynamic evaluation (Krause et al., 2019) beside static
evaluation, measured in the same run.

Both score the same bytes of tinyshakespeare, one stream (the paper's
dynamic evaluation), segments of the preset's length, its memory carried:

- static: `keras_txl.training.dynamic_evaluation` with no step
  (`learning_rate=0`: a compiled forward pass per segment, what
  `keras-txl evaluate --dynamic` prints beside the dynamic number);
- dynamic: the same function with steps, a forward and backward pass per
  segment and the element-wise update ("sgd" and "rms", a step after
  every segment).

Each is run once on two segments first (compiling), then timed on the
whole text `--repeats` times, the three interleaved so that they share
the machine's load; the best time of each counts. Prints one JSON line
per method with the milliseconds per token and `ratio_to_static`
(dynamic over static, the number to compare between machines).

    KERAS_BACKEND=jax PYTHONPATH=. python -m benchmarks.dynamic_eval_cost
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from benchmarks import common  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="reference", choices=common.PRESETS)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import keras

    from keras_txl.models import TransformerXLCausalLM
    from keras_txl.training import dynamic_evaluation

    preset = common.PRESETS[args.preset]
    length = preset["segment_length"]
    keras.utils.set_random_seed(0)
    lm = TransformerXLCausalLM(common.make_backbone(preset))
    ids = common.byte_corpus(args.tokens + 1)
    settings = {
        "static": dict(learning_rate=0.0),
        "sgd": dict(learning_rate=args.learning_rate, method="sgd"),
        "rms": dict(learning_rate=args.learning_rate, method="rms"),
    }
    for kwargs in settings.values():  # Compiles.
        dynamic_evaluation(lm, ids[: 2 * length + 1], length, **kwargs)
    seconds = {name: [] for name in settings}
    results = {}
    for _ in range(args.repeats):  # Interleaved: the same load for each.
        for name, kwargs in settings.items():
            start = time.perf_counter()
            results[name] = dynamic_evaluation(lm, ids, length, **kwargs)
            seconds[name].append(time.perf_counter() - start)
    best = {name: min(times) for name, times in seconds.items()}
    tokens = results["static"]["tokens"]
    for method in ("sgd", "rms"):
        common.emit(
            {
                "benchmark": "dynamic_eval_cost",
                "preset": args.preset,
                "segment_length": length,
                "memory_length": preset["memory_length"],
                "tokens": tokens,
                "repeats": args.repeats,
                "method": method,
                "learning_rate": args.learning_rate,
                "static_ms_per_token": 1000 * best["static"] / tokens,
                "dynamic_ms_per_token": 1000 * best[method] / tokens,
                "ratio_to_static": best[method] / best["static"],
                "static_bits_per_token": results["static"][
                    "bits_per_character"
                ],
                "dynamic_bits_per_token": results[method]["bits_per_character"],
                **common.backend_versions(),
                **common.machine_info(),
            }
        )


if __name__ == "__main__":
    main()
