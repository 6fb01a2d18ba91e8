"""Pieces of any length (issue 53 item 5; docs/design.md, "Pieces of
any length"): the time of `call_with_memory` and `score` over 30 pieces
of random lengths against 30 pieces of one length, with the pieces
padded to bucket lengths (`pad_to_bucket=True`) and not. Each new length
compiles again on JAX (every operation of `call_with_memory`) and on JAX
and TensorFlow (the compiled step of `score`); the buckets bound that.

Prints one JSON line per mode: seconds, and the ratio of random to one
length, measured back to back in one process (the bucketed runs first,
so the others find no bucket compiled that they would not have).

    KERAS_BACKEND=jax python -m benchmarks.streaming_pieces
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402


def tiny_lm(memory_length):
    from keras_txl.models import TransformerXLBackbone
    from keras_txl.models import TransformerXLCausalLM

    keras.utils.set_random_seed(0)
    backbone = TransformerXLBackbone(
        vocabulary_size=100,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        head_dim=16,
        intermediate_dim=64,
        memory_length=memory_length,
    )
    return TransformerXLCausalLM(backbone)


def seconds(lm, call, lengths, pad, rng):
    """Wall time of `call` ("call_with_memory": a stream carrying its
    memory; "score": independent texts) over pieces of `lengths`."""
    memory = None
    start = time.perf_counter()
    for length in lengths:
        ids = rng.integers(0, 100, (1, int(length)))
        if call == "call_with_memory":
            _, memory = lm.call_with_memory(ids, memory, pad_to_bucket=pad)
        else:
            lm.score(ids, segment_length=64, pad_to_bucket=pad)
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pieces", type=int, default=30)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--memory-length", type=int, default=32)
    args = parser.parse_args(argv)
    lm = tiny_lm(args.memory_length)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, args.max_length + 1, args.pieces)
    fixed = [args.max_length] * args.pieces
    for call in ("call_with_memory", "score"):
        for pad in (True, False):
            seconds(lm, call, fixed[:1], pad, rng)  # its one length, warm
            one = seconds(lm, call, fixed, pad, rng)
            random = seconds(lm, call, lengths, pad, rng)
            common.emit(
                {
                    "benchmark": "streaming_pieces",
                    "call": call,
                    "pad_to_bucket": pad,
                    "pieces": args.pieces,
                    "max_length": args.max_length,
                    "one_length_s": round(one, 3),
                    "random_lengths_s": round(random, 3),
                    "ratio": round(random / one, 2),
                    **common.backend_versions(),
                    **common.machine_info(),
                }
            )


if __name__ == "__main__":
    main()
