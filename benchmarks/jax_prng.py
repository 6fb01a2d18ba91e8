"""JAX training step: the PRNG behind dropout, measured side by side.

docs/benchmarks.md names threefry (JAX's default PRNG, computed in XLA
ops) among the costs of a JAX training step on XLA:CPU: dropout draws a
random number per activation. This benchmark builds one
reference-preset model per variant of the random bits behind Keras's
JAX `dropout` (patched in while the model's train step is traced: each
compiled step keeps its own) and runs their `train_on_batch`
interleaved, round by round, so that every variant sees the same machine
load (`benchmarks.attention_variants.interleave`):

- `threefry`: Keras as shipped (`jax.random.bernoulli` on the seed
  generator's raw uint32[2] key: threefry2x32 in XLA ops);
- `rbg`, `unsafe_rbg`: the same key data, doubled, wrapped as a key of
  that implementation (XLA's RngBitGenerator for the bits);
- `packed16`: threefry bits, two 16-bit keep decisions per 32-bit
  number (keep probability rounded to a multiple of 2**-16): half the
  threefry work (`benchmarks/attention_layouts.py`'s `packed_dropout`);
- `no dropout`: dropout 0, the bound of what the bits can save.

The models' `PackedDropout` layers are made Keras's `Dropout` first
(`benchmarks.packed_dropout.with_keras_dropout`), which the variants
patch. Keras's seed generator hands JAX raw threefry keys, so a process-wide
`jax_default_prng_impl` cannot switch Keras's dropout; the variants only
measure what a cheaper generator would give. Inference (and so the
conformance tests) draws no random numbers. Prints one RESULT line per
variant: process CPU time and wall time per step, and the CPU-time ratio
to `threefry`.

    KERAS_BACKEND=jax PYTHONPATH=. python -m benchmarks.jax_prng
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.attention_variants import emit_training_steps  # noqa: E402
from benchmarks.attention_variants import interleave_training  # noqa: E402

VARIANTS = ("threefry", "rbg", "unsafe_rbg", "packed16", "no dropout")


def dropout_with(impl):
    """Keras's JAX `dropout` with the random bits of `impl`."""
    import jax.numpy as jnp
    from keras.src.backend.jax import random as jax_random

    def dropout(inputs, rate, noise_shape=None, seed=None):
        if rate == 0.0:
            return inputs
        seed = jax_random.jax_draw_seed(seed)  # raw uint32[2]
        key = jax.random.wrap_key_data(jnp.tile(seed, 2), impl=impl)
        keep = 1.0 - rate
        shape = jax_random._get_concrete_noise_shape(inputs, noise_shape)
        mask = jax.random.bernoulli(key, p=keep, shape=shape)
        mask = jnp.broadcast_to(mask, inputs.shape)
        return jax.lax.select(mask, inputs / keep, jnp.zeros_like(inputs))

    return dropout


def packed16_dropout(inputs, rate, noise_shape=None, seed=None):
    """Keras's JAX `dropout` with two 16-bit decisions per threefry
    number."""
    import jax.numpy as jnp
    from keras.src.backend.jax import random as jax_random

    from benchmarks.attention_layouts import _packed_dropout

    if rate == 0.0:
        return inputs
    seed = jax_random.jax_draw_seed(seed)  # raw uint32[2]
    key = jax.random.wrap_key_data(seed, impl="threefry2x32")
    shape = jax_random._get_concrete_noise_shape(inputs, noise_shape)
    kept = _packed_dropout(jnp.ones(shape, inputs.dtype), rate, key)
    return inputs * jnp.broadcast_to(kept, inputs.shape)


def main(argv=None):
    parser = common.add_common_args(
        argparse.ArgumentParser(description=__doc__.split("\n")[0])
    )
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS
    )
    args = parser.parse_args(argv)
    from benchmarks.packed_dropout import with_keras_dropout
    from benchmarks.train_eval import build_model

    preset = common.PRESETS[args.preset]
    batch, length = preset["batch_size"], preset["segment_length"]
    x, y = common.ordered_segments(common.byte_corpus(), batch, length)
    from keras.src import backend

    shipped = backend.random.dropout
    models = {}
    for name in ["threefry"] + [v for v in args.variants if v != "threefry"]:
        rate = 0.0 if name == "no dropout" else args.dropout
        if name in ("rbg", "unsafe_rbg"):
            backend.random.dropout = dropout_with(name)
        if name == "packed16":
            backend.random.dropout = packed16_dropout
        try:
            lm = build_model(preset, args.dtype, rate, True, 1)
            lm(x[0])  # builds every layer
            with_keras_dropout(lm)  # the variants patch Keras's dropout
            for i in range(2):  # trace and compile with these bits
                lm.train_on_batch(x[i], y[i])
        finally:
            backend.random.dropout = shipped
        models[name] = lm
    timings = interleave_training(models, x, y, args.rounds, args.calls)
    emit_training_steps(
        timings,
        "threefry",
        batch * length,
        {
            "benchmark": "jax_prng",
            "preset": args.preset,
            "dtype": args.dtype,
            "dropout": args.dropout,
            "rounds": args.rounds,
        },
    )


if __name__ == "__main__":
    main()
