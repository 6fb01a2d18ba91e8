"""Train the character LM on several devices: tf.distribute or JAX.

The training of `train_char_lm.py` under data parallelism, the strategy
chosen by a flag:

| `--strategy`        | backend    | replicas                                 |
| ------------------- | ---------- | ---------------------------------------- |
| `mirrored`          | TensorFlow | the GPUs of this host (else CPU devices) |
| `multiworker`       | TensorFlow | every worker of `TF_CONFIG` x its GPUs   |
| `tpu`               | TensorFlow | every core of the TPU                    |
| `jax-data-parallel` | JAX        | the devices of every host                |

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
3. `strategy.scope()`, `strategy.build_memory(lm, B)` and
   `strategy.distribute_dataset(dataset)` around an ordinary
   `compile` / `fit`.
4. The memory each replica holds after training
   (`strategy.replica_memory`), and a validation with a longer memory.

Data parallel only: model parallelism (sharding the weights over a
`keras.distribution.ModelParallel` mesh) needs a layout of the weights,
which the backbone does not provide yet; `docs/distributed.md` shows
`keras_txl.distribute.memory_layout_map` for the memory's part.

Run it:

    # TensorFlow, every GPU of the host (CPU devices without GPUs)
    python examples/distributed_training.py --strategy mirrored
    # JAX, every device of the host
    KERAS_BACKEND=jax python examples/distributed_training.py \\
        --strategy jax-data-parallel
    # A TPU VM: python examples/distributed_training.py --strategy tpu
    # Several hosts (TensorFlow): set TF_CONFIG on each, then
    #   python examples/distributed_training.py --strategy multiworker
    # Several hosts (JAX): set KERAS_DISTRIBUTION_JOB_ADDRESSES,
    #   _NUM_PROCESSES and _PROCESS_ID on each (docs/distributed.md)
    python examples/distributed_training.py --smoke   # 2 CPU devices

Defaults: the model, segments and memory of `train_char_lm.py`, a global
batch of 32 streams, one pass over 90% of tinyshakespeare.

The output of a full run on a 2-core CPU (2026-12-01): docs/examples.md.
"""

import argparse
import os
from pathlib import Path

from keras_txl import distribute

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--strategy",
        choices=distribute.STRATEGY_NAMES,
        default="jax-data-parallel" if backend == "jax" else "mirrored",
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
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:  # 2 logical CPU devices, a tiny model, a few steps
        args.num_devices, args.batch_size = 2, 4
        args.segment_length, args.memory_length = 16, 16
        args.num_layers, args.hidden_dim, args.max_chars = 1, 32, 3000
    return args


def main(argv=None):
    args = parse_args(argv)
    # -----------------------------------------------------------------------
    # 1. Devices first: nothing may have started TensorFlow or JAX yet.
    # -----------------------------------------------------------------------
    distribute.configure_devices(args.strategy, args.num_devices)
    strategy = distribute.make_strategy(
        args.strategy, args.num_devices, tpu=args.tpu
    )

    import keras

    from keras_txl import data
    from keras_txl.models import TransformerXLBackbone
    from keras_txl.models import TransformerXLCausalLM
    from keras_txl.training import evaluate_bpc
    from keras_txl.training import transformer_xl_optimizer

    # -----------------------------------------------------------------------
    # 2. Global and per-replica batch.
    # -----------------------------------------------------------------------
    # B = args.batch_size streams of text are trained in parallel; each of
    # the R replicas trains B / R of them and carries only their memory.
    # B must be a multiple of R (each replica carries as many streams);
    # changing R with B fixed trains on the same streams, the same loss.
    global_batch = args.batch_size  # B
    per_replica = strategy.per_replica_batch_size(global_batch)  # B / R
    print(
        f"strategy {strategy.name!r}: {strategy.num_replicas} replicas, "
        f"global batch {global_batch} streams, {per_replica} per replica"
    )

    text = Path(args.text).read_text(encoding="utf-8")
    if args.max_chars:
        text = text[: args.max_chars]
    train_text, valid_text, _ = data.split_text(text, 0.1, 0.0)
    tokenizer = data.make_tokenizer("char", text)
    # The dataset yields GLOBAL batches (B, T); every host builds the same
    # one, and each replica takes its rows of every batch. No shuffling:
    # the memory must stay aligned with the streams.
    train = data.segment_dataset(
        data.encode(tokenizer, train_text), global_batch, args.segment_length
    )
    valid = data.segment_dataset(
        data.encode(tokenizer, valid_text), global_batch, args.segment_length
    )
    steps = int(train.cardinality()) * args.epochs

    # -----------------------------------------------------------------------
    # 3. Build, compile and fit in the strategy's scope.
    # -----------------------------------------------------------------------
    with strategy.scope():
        keras.utils.set_random_seed(0)
        backbone = TransformerXLBackbone(
            vocabulary_size=tokenizer.vocabulary_size(),
            num_layers=args.num_layers,
            num_heads=4,
            hidden_dim=args.hidden_dim,
            head_dim=args.hidden_dim // 4,
            intermediate_dim=4 * args.hidden_dim,
            memory_length=args.memory_length,
        )
        lm = TransformerXLCausalLM(backbone)
        lm.compile(
            optimizer=transformer_xl_optimizer(
                args.learning_rate,
                total_steps=steps,
                warmup_steps=min(200, steps // 10),
            )
        )
        # The carried memory, (rows, num_layers, M, hidden) + (rows,):
        # - TensorFlow: sync-on-read variables, ONE COPY PER REPLICA, each
        #   of the per-replica batch B / R;
        # - JAX: one array of the GLOBAL batch B, sharded along the batch
        #   axis of the device mesh like the input batches (B / R rows on
        #   each device).
        # Either way a replica holds the memory of its B / R streams. This
        # also makes the optimizer clip the gradient of the global batch
        # (Keras's TensorFlow optimizers clip each replica's share).
        strategy.build_memory(lm, global_batch)
        history = lm.fit(
            strategy.distribute_dataset(train),  # checked: B static, R | B
            epochs=args.epochs,
            shuffle=False,
            verbose=2 if args.smoke else 1,
        )
    print(
        f"trained {steps} steps: last epoch "
        f"{history.history['bits_per_character'][-1]:.3f} bits per character"
    )

    # -----------------------------------------------------------------------
    # 4. What each replica carries, and a validation with a longer memory.
    # -----------------------------------------------------------------------
    for r, memory in enumerate(strategy.replica_memory(lm)):
        print(
            f"replica {r}: memory {memory['memory'].shape} "
            f"(rows, layers, M, hidden), valid slots "
            f"{memory['valid_length'].tolist()}"
        )
    # Outside the scope: a model on the same weights with its own memory.
    for memory_length in (0, 2 * args.memory_length):
        result = evaluate_bpc(lm, valid, memory_length=memory_length)
        print(
            f"validation, memory {memory_length:4d}: "
            f"{result['bits_per_character']:.4f} bits per character"
        )
    return lm


if __name__ == "__main__":
    main()
