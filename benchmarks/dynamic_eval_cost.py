"""Cost per token of dynamic evaluation (Krause et al., 2019) beside static
evaluation, measured in the same run.

Both score the same bytes of tinyshakespeare, one stream (the paper's
dynamic evaluation), segments of the preset's length, its memory carried:

- static: a compiled forward pass per segment (`predict_on_batch` on the
  explicit memory), the targets' log-probabilities picked on the host;
- dynamic: `keras_txl.training.dynamic_evaluation`, a forward and
  backward pass per segment and the element-wise update ("sgd" and
  "rms", a step after every segment).

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

import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402


def static_seconds(lm, ids, segment_length):
    """Wall seconds and mean loss of the static pass over `ids`."""
    from keras import ops

    streams = ids[None, :]
    memory = lm.backbone.initial_memory(1)
    total, count = 0.0, 0
    start = time.perf_counter()
    for t in range(0, streams.shape[1] - 1, segment_length):
        end = min(t + segment_length, streams.shape[1] - 1)
        outputs = lm.predict_on_batch(
            {"token_ids": streams[:, t:end], **memory}
        )
        memory = {key: outputs[key] for key in ("memory", "valid_length")}
        logits = ops.convert_to_numpy(outputs["logits"])[0]  # (T, V)
        logits = logits - logits.max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        targets = streams[0, t + 1 : end + 1]
        total -= float(log_probs[np.arange(end - t), targets].sum())
        count += end - t
    return time.perf_counter() - start, total / count


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
    static_seconds(lm, warm, length)
    seconds, static_loss = static_seconds(lm, ids, length)
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
                "static_bits_per_token": static_loss / np.log(2.0),
                "dynamic_bits_per_token": result["bits_per_character"],
            }
        )


if __name__ == "__main__":
    main()
