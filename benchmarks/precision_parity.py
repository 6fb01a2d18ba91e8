"""Does mixed bfloat16 train as well as float32? Validation bits per
character after the same number of steps.

Trains the reference model on tinyshakespeare (bytes, the first 90% for
training, the last 10% for validation) with `model.fit` on ordered
segments, memory carried, once per dtype policy from the same seed, then
evaluates the validation bpc with `model.evaluate` (memory carried over the
whole validation text). Under a mixed policy the trained weights are also
evaluated with the memory kept in float32 (`memory_dtype="float32"`)
beside the default, the compute dtype: bpc and cache bytes of each. Prints
one JSON line per policy and one with the relative difference.

    KERAS_BACKEND=tensorflow PYTHONPATH=. python -m benchmarks.precision_parity
"""

import argparse
import math
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.train_eval import parse_jit  # noqa: E402


def train_and_validate(preset, dtype, steps, learning_rate, dropout, jit):
    from keras_txl.models import TransformerXLCausalLM

    keras.utils.set_random_seed(0)
    batch, length = preset["batch_size"], preset["segment_length"]
    tokens = common.byte_corpus()
    split = int(0.9 * len(tokens))
    x, y = common.ordered_segments(tokens[:split], batch, length)
    val_x, val_y = common.ordered_segments(tokens[split:], batch, length)
    backbone = common.make_backbone(preset, dtype, dropout)
    lm = TransformerXLCausalLM(backbone)
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0,
        decay_steps=steps,
        warmup_target=learning_rate,
        warmup_steps=max(1, steps // 10),
    )
    lm.compile(
        optimizer=keras.optimizers.Adam(schedule, clipnorm=0.25),
        jit_compile=jit,
    )
    repeat = -(-steps // len(x))
    start = time.perf_counter()
    history = lm.fit(
        common.to_dataset(x, y, repeat=repeat),
        epochs=1,
        steps_per_epoch=steps,
        verbose=0,
    )
    train_seconds = time.perf_counter() - start
    lm.reset_memory()
    loss = _validation_loss(lm, val_x, val_y)
    memory = {}
    if backbone.dtype_policy.name.startswith("mixed_"):
        # The same weights, the memory kept in float32.
        float32_memory = TransformerXLCausalLM(
            type(backbone).from_config(
                {**backbone.get_config(), "memory_dtype": "float32"}
            )
        )
        float32_memory.compile(jit_compile=jit)
        float32_memory.build()
        for mine, trained in zip(
            float32_memory.trainable_variables, lm.trainable_variables
        ):
            mine.assign(trained)
        memory = {
            "memory_dtype": backbone.memory_spec.dtype,
            "cache_bytes_per_stream": _cache_bytes(lm, preset),
            "float32_memory_val_bpc": _validation_loss(
                float32_memory, val_x, val_y
            )
            / math.log(2.0),
            "float32_memory_cache_bytes_per_stream": _cache_bytes(
                float32_memory, preset
            ),
        }
    return {
        **memory,
        "val_bpc": loss / math.log(2.0),
        "final_train_bpc": history.history["loss"][-1] / math.log(2.0),
        "train_seconds": train_seconds,
        "train_tokens_per_s": steps * batch * length / train_seconds,
        "val_tokens": int(val_x.size),
    }


def _validation_loss(lm, val_x, val_y):
    loss = lm.evaluate(common.to_dataset(val_x, val_y), verbose=0)
    return loss[0] if isinstance(loss, (list, tuple)) else loss


def _cache_bytes(lm, preset):
    """Bytes of one stream's memory (all layers) in the model's memory
    dtype."""
    memory = lm.backbone.initial_memory(1, preset["memory_length"])
    return int(keras.ops.convert_to_numpy(memory["memory"]).nbytes)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="reference", choices=common.PRESETS)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--jit", default="auto")
    parser.add_argument("--dtypes", default="float32,mixed_bfloat16")
    args = parser.parse_args(argv)
    preset = common.PRESETS[args.preset]
    results = {}
    for dtype in args.dtypes.split(","):
        results[dtype] = train_and_validate(
            preset,
            dtype,
            args.steps,
            args.learning_rate,
            args.dropout,
            parse_jit(args.jit),
        )
        common.emit(
            {
                "benchmark": "precision_parity",
                "preset": args.preset,
                "dtype": dtype,
                "steps": args.steps,
                **results[dtype],
                **common.backend_versions(),
                **common.machine_info(),
            }
        )
    if len(results) == 2:
        (name_a, a), (name_b, b) = results.items()
        common.emit(
            {
                "benchmark": "precision_parity",
                "dtype": f"{name_b} vs {name_a}",
                "steps": args.steps,
                "relative_val_bpc_difference": (b["val_bpc"] - a["val_bpc"])
                / a["val_bpc"],
                **common.backend_versions(),
            }
        )


if __name__ == "__main__":
    main()
