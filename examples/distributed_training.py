"""Train the character LM on several devices: tf.distribute or JAX.

The training of `train_char_lm.py` under data or model parallelism, the
strategy chosen by a flag:

| `--strategy`         | backend    | replicas                               |
| -------------------- | ---------- | -------------------------------------- |
| `mirrored`           | TensorFlow | the GPUs of this host (or CPU devices) |
| `multiworker`        | TensorFlow | every worker of `TF_CONFIG` x its GPUs |
| `tpu`                | TensorFlow | every core of the TPU                  |
| `jax-data-parallel`  | JAX        | the devices of every host              |
| `jax-model-parallel` | JAX        | the "batch" axis of a (batch, model)   |
|                      |            | mesh, the weights split along "model"  |

What this shows, top to bottom:

1. `keras_txl.distribute.configure_devices` FIRST, before any op: the
   engines fix their device count when they start (on a host without
   accelerators it splits the CPU into N logical devices, so this runs
   on a laptop).
2. Ordered segments of a **global batch**: `--batch-size` streams of
   text, of which each of the R replicas trains `batch_size / R` and
   keeps the memory. Replica `r` gets rows `[r * B / R, (r + 1) * B / R)`
   of EVERY batch, so the memory it carries is always the text just
   before its next rows.
3. The strategy: `distribute.make_strategy(name)` for data parallelism;
   for model parallelism a `keras.distribution.DeviceMesh` of shape
   (batch, model), the weights laid out by
   `TransformerXLBackbone.get_layout_map(mesh)` in a
   `keras.distribution.ModelParallel`, wrapped by
   `distribute.ReplicaStrategy.for_distribution`.
4. `strategy.scope()`, `strategy.build_memory(lm, B)` and
   `strategy.distribute_dataset(dataset)` around an ordinary
   `compile` / `fit`; under model parallelism, how one kernel is split.
5. The memory each replica holds after training
   (`strategy.replica_memory`), and a validation with a longer memory.
6. A check: the same training on ONE device (same seed, same first
   `--check-steps` batches) reaches the same loss.

Several strategies of one backend train in turn in one process, e.g.
`--strategy jax-data-parallel jax-model-parallel`.

Run it:

    # TensorFlow, every GPU of the host (CPU devices without GPUs)
    python examples/distributed_training.py --strategy mirrored
    # JAX, every device of the host, data then model parallel
    KERAS_BACKEND=jax python examples/distributed_training.py \\
        --strategy jax-data-parallel jax-model-parallel
    # A TPU VM: python examples/distributed_training.py --strategy tpu
    # Several hosts (TensorFlow): set TF_CONFIG on each, then
    #   python examples/distributed_training.py --strategy multiworker
    # Several hosts (JAX): set KERAS_DISTRIBUTION_JOB_ADDRESSES,
    #   _NUM_PROCESSES and _PROCESS_ID on each (docs/distributed.md)
    python examples/distributed_training.py --smoke   # 2 CPU devices

Defaults: the model, segments and memory of `train_char_lm.py`, a global
batch of 32 streams, one pass over 90% of tinyshakespeare.

The output of full runs on a 2-core CPU (2026-12-01): docs/examples.md.
"""

import argparse
import math
import os
import sys
from pathlib import Path

from keras_txl import distribute

# `fit`'s progress: bars on a terminal, one plain line per epoch in a log
# file (no carriage returns or terminal codes).
FIT_PROGRESS = 1 if sys.stdout.isatty() else 2

REPO = Path(__file__).resolve().parents[1]
NUM_HEADS = 4
# JAX model parallelism: our own strategy name, on the devices that
# `jax-data-parallel` configures.
MODEL_PARALLEL = "jax-model-parallel"
# `distribute.make_strategy`'s names, and ours.
STRATEGIES = (
    "none",
    "mirrored",
    "multiworker",
    "tpu",
    "jax-data-parallel",
    MODEL_PARALLEL,
)
# The loss after the check's steps against one device's: sums in
# another order, so float rounding. Measured on 2 CPU devices: 0 to
# 4.8e-7 (`mirrored`, JAX data and model parallel, smoke and full runs);
# tests/distribute saw up to 9.5e-6 a step on TensorFlow.
LOSS_TOLERANCE = 1e-4


def parse_args(argv=None):
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--strategy",
        nargs="+",
        choices=STRATEGIES,
        default=["jax-data-parallel" if backend == "jax" else "mirrored"],
        help="one or more, trained in turn",
    )
    parser.add_argument(
        "--num-devices", type=int, default=None, help="per host; all if unset"
    )
    parser.add_argument("--tpu", default=None, help="TPU name or 'local'")
    parser.add_argument(
        "--text", default=str(REPO / "data" / "tinyshakespeare.txt")
    )
    parser.add_argument("--batch-size", type=int, default=32)  # GLOBAL
    parser.add_argument("--segment-length", type=int, default=64)  # T
    parser.add_argument("--memory-length", type=int, default=64)  # M
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--max-chars", type=int, default=0)
    parser.add_argument(
        "--check-steps", type=int, default=20, help="0: no one-device check"
    )
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:  # 2 logical CPU devices, a tiny model, a few steps
        args.num_devices, args.batch_size = 2, 4
        args.segment_length, args.memory_length = 16, 16
        args.num_layers, args.hidden_dim, args.max_chars = 1, 32, 3000
        args.check_steps = 10
    return args


def main(argv=None):
    args = parse_args(argv)
    # -----------------------------------------------------------------------
    # 1. Devices first: nothing may have started TensorFlow or JAX yet.
    # -----------------------------------------------------------------------
    for name in args.strategy:
        if name == MODEL_PARALLEL:  # the devices of data parallelism
            name = "jax-data-parallel"
        distribute.configure_devices(name, args.num_devices)

    import keras

    from keras_txl import data
    from keras_txl.models import TransformerXLBackbone
    from keras_txl.models import TransformerXLCausalLM
    from keras_txl.training import evaluate_bpc
    from keras_txl.training import transformer_xl_optimizer

    # -----------------------------------------------------------------------
    # 2. Global batches of ordered segments.
    # -----------------------------------------------------------------------
    # B = args.batch_size streams of text are trained in parallel; each of
    # the R replicas trains B / R of them and carries only their memory.
    # B must be a multiple of R (each replica carries as many streams);
    # changing R with B fixed trains on the same streams, the same loss.
    # Under model parallelism a replica is a group of devices (the model
    # shards): R is the size of the mesh's "batch" axis, and every device
    # of a group computes on the group's B / R rows.
    global_batch = args.batch_size  # B
    text = Path(args.text).read_text(encoding="utf-8")
    if args.max_chars:
        text = text[: args.max_chars]
    cut = len(text) - int(len(text) * 0.1)  # the last 10% validates
    train_text, valid_text = text[:cut], text[cut:]
    tokenizer = data.make_tokenizer("char", text)
    # The dataset yields GLOBAL batches (B, T); every host builds the same
    # one, and each replica takes its rows of every batch. No shuffling:
    # the memory must stay aligned with the streams.
    train = data.segment_dataset(
        tokenizer(train_text), global_batch, args.segment_length
    )
    valid = data.segment_dataset(
        tokenizer(valid_text), global_batch, args.segment_length
    )
    steps = int(train.cardinality()) * args.epochs
    args.check_steps = min(args.check_steps, steps)

    # Model parallelism splits the 4 heads (and the feed-forward's inner
    # axis, and the vocabulary) along the mesh's "model" axis, so that
    # axis gets as many of the devices as the heads allow: gcd(devices,
    # heads). On 2 devices the mesh is (1, 2): both devices hold half of
    # every sharded weight and see the whole batch (ONE replica); (2, 1)
    # would be data parallelism again. On 8 devices: (2, 4), two replicas
    # of four shards each. (The layout also splits the kernels' hidden
    # axis along "batch": on (2, 4) each device holds 1/8 of a kernel.)
    model_shards = 1
    if MODEL_PARALLEL in args.strategy:
        import jax

        # Several hosts: leave --num-devices unset (every device of all).
        devices = jax.devices()[: args.num_devices]
        model_shards = math.gcd(len(devices), NUM_HEADS)
    # The embedding's rows split evenly only if the vocabulary does: pad
    # it to a multiple of the shards (as Megatron-LM pads its vocabulary).
    # The padding ids never occur in the text; every strategy gets the
    # same padded model, so that all start from the same weights.
    vocabulary_size = (
        math.ceil(tokenizer.vocabulary_size() / model_shards) * model_shards
    )

    # -----------------------------------------------------------------------
    # 3. The strategies.
    # -----------------------------------------------------------------------
    def make_strategy(name):
        if name != MODEL_PARALLEL:
            return distribute.make_strategy(
                name, args.num_devices, tpu=args.tpu
            )
        mesh = keras.distribution.DeviceMesh(
            (len(devices) // model_shards, model_shards),  # (batch, model)
            ("batch", "model"),
            devices,
        )
        # Which axis of which weight goes along "model" or "batch", and
        # the carried memory along "batch" like the data.
        layout_map = TransformerXLBackbone.get_layout_map(
            mesh,
            model_parallel_dim_name="model",
            data_parallel_dim_name="batch",
        )
        distribution = keras.distribution.ModelParallel(
            layout_map=layout_map, batch_dim_name="batch"
        )
        print(f"device mesh {dict(zip(mesh.axis_names, mesh.shape))}")
        # Replicas: the devices along "batch".
        return distribute.ReplicaStrategy.for_distribution(distribution, name)

    # -----------------------------------------------------------------------
    # 4. Build, compile and fit in the strategy's scope.
    # -----------------------------------------------------------------------
    def fit(strategy, dataset, verbose):
        """Returns the model, its `History` and its loss after
        `args.check_steps` steps (Keras's running mean of the epoch's)."""
        logged = {}

        class LossAfterCheckSteps(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch + 1 == args.check_steps:
                    logged.setdefault("loss", float(logs["loss"]))

        with strategy.scope():
            keras.utils.set_random_seed(0)  # the same weights every time
            backbone = TransformerXLBackbone(
                vocabulary_size=vocabulary_size,
                num_layers=args.num_layers,
                num_heads=NUM_HEADS,
                hidden_dim=args.hidden_dim,
                head_dim=args.hidden_dim // NUM_HEADS,
                intermediate_dim=4 * args.hidden_dim,
                memory_length=args.memory_length,
            )
            lm = TransformerXLCausalLM(backbone)
            lm.compile(
                optimizer=transformer_xl_optimizer(
                    args.learning_rate,
                    total_steps=steps,  # one schedule for every run
                    warmup_steps=min(200, steps // 10),
                )
            )
            # The carried memory, (rows, num_layers, M, hidden) + (rows,):
            # - TensorFlow: sync-on-read variables, ONE COPY PER REPLICA,
            #   each of the per-replica batch B / R;
            # - JAX, data parallel: one array of the GLOBAL batch B,
            #   sharded along the batch axis of the device mesh like the
            #   input batches (B / R rows on each device);
            # - JAX, model parallel: the same array laid out by the
            #   layout map's memory entry, ("batch", None, None, None):
            #   split along "batch", REPLICATED along "model", since every
            #   shard projects the whole hidden state of the memory into
            #   the keys and values of its heads (to split the hidden axis
            #   too, set `layout_map[".*memory_state/memory"] = ("batch",
            #   None, None, "model")`: less memory, a gather a step).
            # Either way a replica holds the memory of its B / R streams.
            # This also makes the optimizer clip the gradient of the global
            # batch (Keras's TensorFlow optimizers clip each replica's).
            strategy.build_memory(lm, global_batch)
            history = lm.fit(
                strategy.distribute_dataset(dataset),  # B static, R | B
                epochs=args.epochs,
                shuffle=False,
                verbose=verbose,
                callbacks=[LossAfterCheckSteps()],
            )
        return lm, history, logged.get("loss")

    results = {}
    for name in args.strategy:
        strategy = make_strategy(name)
        per_replica = strategy.per_replica_batch_size(global_batch)  # B / R
        print(
            f"strategy {strategy.name!r}: {strategy.num_replicas} "
            f"replica(s), global batch {global_batch} streams, "
            f"{per_replica} per replica"
        )
        lm, history, results[name] = fit(strategy, train, verbose=FIT_PROGRESS)
        print(
            f"trained {steps} steps: last epoch "
            f"{history.history['bits_per_character'][-1]:.3f} bits per "
            "character"
        )
        if name == MODEL_PARALLEL:
            # One feed-forward kernel (hidden, 4 hidden): its columns
            # split along "model", each device holding its part.
            block = lm.backbone.get_layer("transformer_layer_0")
            kernel = block.intermediate_dense.kernel.value
            shards = kernel.addressable_shards
            print(
                f"intermediate kernel {tuple(kernel.shape)}: sharding "
                f"{tuple(kernel.sharding.spec)}, "
                f"{tuple(shards[0].data.shape)} on each of "
                f"{sorted(str(s.device) for s in shards)}"
            )
            weights = lm.trainable_weights
            split = [w for w in weights if "model" in w.value.sharding.spec]
            print(
                f"{len(split)} of {len(weights)} weights split along "
                f"'model' ({sum(math.prod(w.shape) for w in split):,} of "
                f"{sum(math.prod(w.shape) for w in weights):,} parameters)"
            )

        # -------------------------------------------------------------------
        # 5. What each replica carries, and a validation with a longer
        #    memory.
        # -------------------------------------------------------------------
        for r, memory in enumerate(strategy.replica_memory(lm)):
            print(
                f"replica {r}: memory {memory['memory'].shape} "
                f"(rows, layers, M, hidden), valid slots "
                f"{memory['valid_length'].tolist()}"
            )
        # Outside the scope: a model on the same weights with its own
        # memory (JAX computes on the sharded weights where they lie).
        for memory_length in (0, 2 * args.memory_length):
            result = evaluate_bpc(lm, valid, memory_length=memory_length)
            print(
                f"validation, memory {memory_length:4d}: "
                f"{result['bits_per_character']:.4f} bits per character"
            )

    # -----------------------------------------------------------------------
    # 6. The check: one device, the same seed and first batches.
    # -----------------------------------------------------------------------
    if args.check_steps:
        one_device = distribute.make_strategy("none")
        _, _, reference = fit(
            one_device, train.take(args.check_steps), verbose=0
        )
        for name, loss in results.items():
            gap = abs(loss - reference)
            print(
                f"{name}: loss after {args.check_steps} steps {loss:.6f}, "
                f"one device {reference:.6f}, difference {gap:.1e} "
                f"({'within' if gap <= LOSS_TOLERANCE else 'OVER'} "
                f"{LOSS_TOLERANCE:.0e})"
            )
    return lm


if __name__ == "__main__":
    main()
