"""Training step with `PackedDropout` against Keras's `Dropout`, per backend.

keras-txl's dropouts are `keras_txl.layers.PackedDropout`: one random
integer per two keep decisions instead of one random number per
element. This benchmark builds three reference-preset language models in
one process on the current backend and runs their `train_on_batch`
interleaved, round by round, so that all three see the same machine load
(`benchmarks.attention_variants.interleave`):

- `packed`: the library as shipped;
- `keras dropout`: the same model with every `PackedDropout` turned
  back into the `keras.layers.Dropout` it extends (same rate, same seed
  generator), before its first step;
- `no dropout`: dropout 0, the bound of what any dropout can save.

Prints one RESULT line per variant: process CPU and wall ms per step
(medians over rounds) and the CPU-time ratio to `keras dropout`.

    KERAS_BACKEND=jax PYTHONPATH=. python -m benchmarks.packed_dropout
"""

import argparse

import keras

from benchmarks import common
from benchmarks.attention_variants import emit_training_steps
from benchmarks.attention_variants import interleave_training
from keras_txl.layers.packed_dropout import PackedDropout

VARIANTS = ("keras dropout", "packed", "no dropout")


def with_keras_dropout(model):
    """`model` with each `PackedDropout` made the `keras.layers.Dropout`
    it extends; returns how many were changed."""
    changed = 0
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if type(layer) is PackedDropout:
            layer.__class__ = keras.layers.Dropout
            changed += 1
    return changed


def main(argv=None):
    parser = common.add_common_args(
        argparse.ArgumentParser(description=__doc__.split("\n")[0])
    )
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument(
        "--jit", default="auto", help="auto | true | false (compile())"
    )
    args = parser.parse_args(argv)
    from benchmarks.train_eval import build_model
    from benchmarks.train_eval import parse_jit

    preset = common.PRESETS[args.preset]
    batch, length = preset["batch_size"], preset["segment_length"]
    x, y = common.ordered_segments(common.byte_corpus(), batch, length)
    jit = parse_jit(args.jit)
    models = {}
    for name in VARIANTS:
        rate = 0.0 if name == "no dropout" else args.dropout
        lm = build_model(preset, args.dtype, rate, jit, 1)
        lm(x[0])  # builds every layer
        if name == "keras dropout" and not with_keras_dropout(lm):
            raise RuntimeError("found no PackedDropout to replace")
        for i in range(2):  # trace and compile
            lm.train_on_batch(x[i], y[i])
        models[name] = lm
    timings = interleave_training(models, x, y, args.rounds, args.calls)
    emit_training_steps(
        timings,
        "keras dropout",
        batch * length,
        {
            "benchmark": "packed_dropout",
            "backend": keras.backend.backend(),
            "preset": args.preset,
            "dtype": args.dtype,
            "jit": args.jit,
            "dropout": args.dropout,
            "rounds": args.rounds,
        },
    )


if __name__ == "__main__":
    main()
