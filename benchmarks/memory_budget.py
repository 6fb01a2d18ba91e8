"""The memory that one training step needs, measured, next to the
estimate of `keras_txl.distribute.memory_budget`, for a few small
configurations (use KERAS_BACKEND=jax: XLA's memory analysis):

    KERAS_BACKEND=jax PYTHONPATH=. python -m benchmarks.memory_budget [NAME]
"""

from keras_txl.distribute import memory_budget


def measure_train_step_memory(model, inputs, targets):
    """Bytes one training step of a compiled `model` needs, measured.

    JAX: XLA's memory analysis of the compiled step (arguments + outputs -
    donated buffers + temporaries), without running it. TensorFlow: the
    peak bytes allocated on the model's first device during one
    `train_on_batch` (after a first one that builds and traces). Other
    backends: not supported.

    Args:
        model: a compiled `TransformerXLCausalLM` (or any Keras model).
        inputs: a batch of token ids `(batch, T)`, numpy.
        targets: the matching targets.

    Returns:
        int, bytes.
    """
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        model.train_on_batch(inputs, targets)  # builds every variable
        state = tuple(
            [v.value for v in variables]
            for variables in (
                model.trainable_variables,
                model.non_trainable_variables,
                model.optimizer.variables,
                model.metrics_variables,
            )
        )
        step = jax.jit(model.train_step, donate_argnums=0)
        compiled = step.lower(state, (inputs, targets, None)).compile()
        stats = compiled.memory_analysis()
        return int(
            stats.argument_size_in_bytes
            + stats.output_size_in_bytes
            - stats.alias_size_in_bytes
            + stats.temp_size_in_bytes
        )
    if backend == "tensorflow":
        import tensorflow as tf

        device = tf.config.list_logical_devices()[0].name
        model.train_on_batch(inputs, targets)
        tf.config.experimental.reset_memory_stats(device)
        model.train_on_batch(inputs, targets)
        return int(tf.config.experimental.get_memory_info(device)["peak"])
    raise ValueError(
        "`measure_train_step_memory` measures on the jax and tensorflow "
        f"backends. Received: KERAS_BACKEND={backend}"
    )


# Small configurations whose training step XLA measures in seconds on a
# CPU: (name, backbone config, global batch, segment length).
SMALL_CONFIGS = (
    (
        "d64-L2-T64-M64-b8",
        dict(
            vocabulary_size=256,
            num_layers=2,
            num_heads=4,
            hidden_dim=64,
            head_dim=16,
            intermediate_dim=256,
            memory_length=64,
        ),
        8,
        64,
    ),
    (
        "d32-L3-T32-M32-b16",
        dict(
            vocabulary_size=128,
            num_layers=3,
            num_heads=8,
            hidden_dim=32,
            head_dim=8,
            intermediate_dim=64,
            memory_length=32,
        ),
        16,
        32,
    ),
    (
        "d128-L2-T16-M16-b4-V1000",
        dict(
            vocabulary_size=1000,
            num_layers=2,
            num_heads=2,
            hidden_dim=128,
            head_dim=64,
            intermediate_dim=512,
            memory_length=16,
        ),
        4,
        16,
    ),
    (
        "d64-L4-T128-M128-b8",
        dict(
            vocabulary_size=256,
            num_layers=4,
            num_heads=4,
            hidden_dim=64,
            head_dim=16,
            intermediate_dim=256,
            memory_length=128,
        ),
        8,
        128,
    ),
)


def compare_with_measurement(name, config, batch_size, segment_length):
    """Estimate and measurement of one configuration, on one device."""
    import keras
    import numpy as np

    from keras_txl.models import TransformerXLBackbone
    from keras_txl.models import TransformerXLCausalLM

    keras.utils.set_random_seed(0)
    backbone = TransformerXLBackbone(**config)
    lm = TransformerXLCausalLM(backbone)
    lm.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    lm.build_memory(batch_size)
    tokens = np.random.default_rng(0).integers(
        0, config["vocabulary_size"], size=(batch_size, segment_length)
    )
    tokens = tokens.astype("int32")
    measured = measure_train_step_memory(lm, tokens, tokens)
    estimate = memory_budget(config, batch_size, segment_length)
    return {
        "name": name,
        "backend": keras.backend.backend(),
        "estimate": estimate["total"],
        "measured": measured,
        "ratio": round(measured / estimate["total"], 3),
    }


def main(argv=None):
    """Prints, one JSON line per configuration of `SMALL_CONFIGS`, the
    estimate of `memory_budget` and the measurement of
    `measure_train_step_memory` (use KERAS_BACKEND=jax: XLA's analysis).

        KERAS_BACKEND=jax PYTHONPATH=. python -m benchmarks.memory_budget [NAME]
    """
    import json
    import sys

    names = sys.argv[1:] if argv is None else argv
    for name, config, batch_size, length in SMALL_CONFIGS:
        if not names or name in names:
            print(
                json.dumps(
                    compare_with_measurement(name, config, batch_size, length)
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
