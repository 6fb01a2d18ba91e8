"""Time and bytes of a training step: what the stop-gradient saves.

`measure_step_cost` times `train_on_batch` of an `UnrolledSegmentsLM` on
random tokens and measures its peak resident bytes, in a fresh process (so that
one configuration's allocations and compilation do not count for the
next):

- `seconds_per_step`: median wall time of the steps after two warm-up
  steps (which compile);
- `peak_rss_increase_bytes` (Linux): how far the resident set size (RSS) of
  the process rose above its level before the timed steps (the kernel's peak
  counter is reset after the warm-up, `/proc/self/clear_refs`);
- `xla_temp_bytes` (JAX only): the temporary buffers XLA assigns to the
  compiled forward and backward pass (loss and gradients), the activation
  bytes of one step as the compiler lays it out. The same number on every
  run of the same configuration.
"""

import json
import os
import statistics
import subprocess
import sys
import time

import keras
import numpy as np

_PROC = "/proc/self"


def _status_bytes(field):
    """`VmRSS` or `VmHWM` of this process in bytes, or None."""
    try:
        with open(os.path.join(_PROC, "status")) as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_peak():
    try:
        with open(os.path.join(_PROC, "clear_refs"), "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def _xla_temp_bytes(model, inputs, targets):
    """Temporary memory of the compiled loss-and-gradients (JAX)."""
    import jax

    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def loss_fn(trainable, non_trainable, x, y):
        logits, non_trainable = model.stateless_call(
            trainable, non_trainable, x, training=True
        )
        loss = keras.losses.sparse_categorical_crossentropy(
            y, logits, from_logits=True
        )
        return keras.ops.mean(loss), non_trainable

    grad_fn = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
    compiled = grad_fn.lower(trainable, non_trainable, inputs, targets)
    analysis = compiled.compile().memory_analysis()
    if analysis is None:
        return None
    return int(analysis.temp_size_in_bytes)


def _measure(
    backbone_config, batch_size, segment_length, segments_per_step, steps, seed
):
    from keras_txl.ablation.ablation_transformer_xl_backbone import (
        AblationTransformerXLBackbone,
    )
    from keras_txl.ablation.unrolled_segments_lm import UnrolledSegmentsLM
    from keras_txl.models import TransformerXLCausalLM
    from keras_txl.training import transformer_xl_optimizer

    keras.utils.set_random_seed(seed)
    backbone = AblationTransformerXLBackbone(**backbone_config)
    model = UnrolledSegmentsLM(
        TransformerXLCausalLM(backbone), segment_length=segment_length
    )
    model.compile(
        optimizer=transformer_xl_optimizer(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(seed)
    shape = (batch_size, segments_per_step * segment_length)
    vocabulary = backbone_config["vocabulary_size"]
    inputs = rng.integers(0, vocabulary, shape).astype("int32")
    targets = rng.integers(0, vocabulary, shape).astype("int32")
    for _ in range(2):  # Compiles.
        model.train_on_batch(inputs, targets)
    reset = _reset_peak()
    before = _status_bytes("VmRSS")
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        model.train_on_batch(inputs, targets)
        times.append(time.perf_counter() - start)
    peak = _status_bytes("VmHWM")
    increase = None
    if reset and peak is not None and before is not None:
        increase = max(0, peak - before)
    xla = None
    if keras.config.backend() == "jax":
        xla = _xla_temp_bytes(model, inputs, targets)
    return {
        "seconds_per_step": statistics.median(times),
        "peak_rss_increase_bytes": increase,
        "xla_temp_bytes": xla,
        "tokens_per_step": int(np.prod(shape)),
        "segments_per_step": segments_per_step,
    }


def measure_step_cost(
    backbone_config,
    batch_size,
    segment_length,
    segments_per_step,
    steps=20,
    seed=0,
    isolate=True,
):
    """Time and peak RSS of one training step (see the module docs).

    Args:
        backbone_config: dict of `AblationTransformerXLBackbone` arguments.
        batch_size: int. Rows per batch.
        segment_length: int. `T`.
        segments_per_step: int. `k`: each row holds `k * T` tokens.
        steps: int. Timed steps (after two warm-up steps).
        seed: int. Seed of the weights and of the random tokens.
        isolate: bool. Measure in a fresh process (default). `False`
            measures here (faster; the memory numbers then include what
            earlier work left allocated).

    Returns:
        dict with `seconds_per_step`, `peak_rss_increase_bytes`,
        `xla_temp_bytes` (None where not measurable), `tokens_per_step`
        and `segments_per_step`.
    """
    args = {
        "backbone_config": dict(backbone_config),
        "batch_size": batch_size,
        "segment_length": segment_length,
        "segments_per_step": segments_per_step,
        "steps": steps,
        "seed": seed,
    }
    if not isolate:
        return _measure(**args)
    # A fresh interpreter (not multiprocessing, which re-imports the
    # caller's main script); the environment (KERAS_BACKEND) is inherited.
    result = subprocess.run(
        [sys.executable, "-m", "keras_txl.ablation.cost", json.dumps(args)],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    if result.returncode:
        raise RuntimeError(
            "Measuring the cost of a training step failed:\n"
            + result.stderr[-2000:]
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(_measure(**json.loads(sys.argv[1]))))
