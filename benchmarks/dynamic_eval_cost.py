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

Each is run once on a few segments first (compiling), then timed on the
whole text. Prints one JSON line per method with the milliseconds per
token and `ratio_to_static` (dynamic over static, the number to compare
between machines: both sides share the machine's load).

    KERAS_BACKEND=jax PYTHONPATH=. python -m benchmarks.dynamic_eval_cost
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from benchmarks import common  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small", choices=common.PRESETS)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    args = parser.parse_args()

    import keras

    from keras_txl.models import TransformerXLCausalLM
    from keras_txl.training import dynamic_evaluation

    preset = common.PRESETS[args.preset]
    length = preset["segment_length"]
    keras.utils.set_random_seed(0)
    lm = TransformerXLCausalLM(common.make_backbone(preset))
    ids = common.byte_corpus(args.tokens + 1)
    warm = ids[: 4 * length + 1]
    dynamic_evaluation(lm, warm, length, learning_rate=0.0)
    start = time.perf_counter()
    static = dynamic_evaluation(lm, ids, length, learning_rate=0.0)
    seconds = time.perf_counter() - start
    base = {
        "benchmark": "dynamic_eval_cost",
        "preset": args.preset,
        "segment_length": length,
        "memory_length": preset["memory_length"],
        "tokens": len(ids) - 1,
        "static_ms_per_token": 1000 * seconds / (len(ids) - 1),
        **common.backend_versions(),
        **common.machine_info(),
    }
    for method in ("sgd", "rms"):
        kwargs = dict(learning_rate=args.learning_rate, method=method)
        dynamic_evaluation(lm, warm, length, **kwargs)
        start = time.perf_counter()
        result = dynamic_evaluation(lm, ids, length, **kwargs)
        dynamic = time.perf_counter() - start
        common.emit(
            {
                **base,
                "method": method,
                "learning_rate": args.learning_rate,
                "dynamic_ms_per_token": 1000 * dynamic / result["tokens"],
                "ratio_to_static": dynamic / seconds,
                "static_bits_per_token": static["bits_per_character"],
                "dynamic_bits_per_token": result["bits_per_character"],
            }
        )


if __name__ == "__main__":
    main()
