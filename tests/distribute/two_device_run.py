"""Trains a tiny Transformer-XL on one device, then on two replicas,
evaluates and scores the two-replica model on one device and on the two
replicas (`evaluate_bpc(..., strategy=)`, `score(..., strategy=)`), and
writes a JSON report. Run by
`test_two_devices.py` in subprocesses: device counts are fixed once the
engine starts, so this cannot share the test process.

    KERAS_BACKEND=tensorflow python tests/distribute/two_device_run.py OUT
    KERAS_BACKEND=jax python tests/distribute/two_device_run.py OUT

trains on one device and on 2 logical CPU devices, strategy `mirrored`
(TensorFlow) or `jax-data-parallel` (JAX).

    python tests/distribute/two_device_run.py OUT worker INDEX PORT

is process INDEX (0 or 1) of two on localhost, one CPU replica each:
`multiworker` (TensorFlow, `TF_CONFIG`, PORT and PORT + 1) or
`jax-data-parallel` over two hosts (JAX, `jax.distributed` through
`KERAS_DISTRIBUTION_*`, coordinator on PORT).
"""

import json
import os
import sys
import time

from keras_txl import distribute

BACKEND = os.environ["KERAS_BACKEND"]
OUT = sys.argv[1]
WORKER = sys.argv[2:3] == ["worker"]
if WORKER:
    INDEX, PORT = int(sys.argv[3]), int(sys.argv[4])
    NUM_DEVICES = 1
if WORKER and BACKEND == "tensorflow":
    NAME = "multiworker"
    os.environ["TF_CONFIG"] = json.dumps(
        {
            "cluster": {"worker": [f"localhost:{PORT + i}" for i in (0, 1)]},
            "task": {"type": "worker", "index": INDEX},
        }
    )
elif WORKER:
    NAME = "jax-data-parallel"
    os.environ["KERAS_DISTRIBUTION_JOB_ADDRESSES"] = f"localhost:{PORT}"
    os.environ["KERAS_DISTRIBUTION_NUM_PROCESSES"] = "2"
    os.environ["KERAS_DISTRIBUTION_PROCESS_ID"] = str(INDEX)
else:
    NUM_DEVICES = 2
    NAME = "mirrored" if BACKEND == "tensorflow" else "jax-data-parallel"
# First thing: device counts are fixed once the engine starts.
distribute.configure_devices(NAME, NUM_DEVICES)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_txl.models import TransformerXLBackbone  # noqa: E402
from keras_txl.models import TransformerXLCausalLM  # noqa: E402
from keras_txl.training import evaluate_bpc  # noqa: E402

BATCH, LENGTH, STEPS, VOCAB, PERIOD = 4, 8, 20, 24, 13


def segments():
    """Inputs and targets `(STEPS, BATCH, LENGTH)` of ordered segments: row
    `b` of segment `i + 1` continues row `b` of segment `i`. Each row
    repeats its own random pattern of PERIOD tokens (longer than a
    segment), so the memory helps and the loss falls."""
    rng = np.random.default_rng(0)
    patterns = rng.integers(0, VOCAB, size=(BATCH, PERIOD))
    length = STEPS * LENGTH + 1
    streams = np.stack([np.resize(p, length) for p in patterns])
    streams = streams.astype("int32")  # (BATCH, STEPS * LENGTH + 1)
    starts = range(0, STEPS * LENGTH, LENGTH)
    inputs = np.stack([streams[:, s : s + LENGTH] for s in starts])
    targets = np.stack([streams[:, s + 1 : s + LENGTH + 1] for s in starts])
    return inputs, targets  # (STEPS, BATCH, LENGTH) each


def dataset(batch=BATCH):
    inputs, targets = segments()
    return tf.data.Dataset.from_tensor_slices(
        (inputs[:, :batch], targets[:, :batch])
    )


def train(strategy):
    """Builds the model in the strategy, fits one pass, and returns the
    loss of each step and the memory each local replica holds."""
    running = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            running.append(float(logs["loss"]))

    with strategy.scope():
        keras.utils.set_random_seed(7)
        backbone = TransformerXLBackbone(
            vocabulary_size=VOCAB,
            num_layers=2,
            num_heads=2,
            hidden_dim=16,
            head_dim=8,
            intermediate_dim=32,
            memory_length=LENGTH,
        )
        lm = TransformerXLCausalLM(backbone)
        lm.compile(
            # Clipped as the paper: the gradient of the global batch is
            # clipped (`ReplicaStrategy.clip_after_all_reduce`).
            optimizer=keras.optimizers.Adam(1e-2, global_clipnorm=0.25),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        strategy.build_memory(lm, BATCH)
        lm.fit(
            strategy.distribute_dataset(dataset()),
            epochs=1,
            verbose=0,
            callbacks=[Record()],
        )
    # Keras logs the running mean of the epoch: recover each step's loss.
    losses = [
        (k + 1) * mean - k * (running[k - 1] if k else 0.0)
        for k, mean in enumerate(running)
    ]
    memory = [
        {key: value.tolist() for key, value in replica.items()}
        for replica in strategy.replica_memory(lm)
    ]
    return {"losses": losses, "memory": memory}, lm


def first_tokens_per_replica(strategy, data):
    """The first token of the rows each local replica gets, step by step,
    through the path Keras's trainer takes."""
    data = strategy.distribute_dataset(data)
    if BACKEND == "tensorflow":
        local = strategy.native.experimental_local_results
        distributed = strategy.native.experimental_distribute_dataset(data)
        return [
            [np.asarray(x)[:, 0].tolist() for x in local(element[0])]
            for element in distributed
        ]
    from keras.src.backend.jax.trainer import _distribute_data

    steps = []
    with strategy.scope():
        for element in data:
            x = _distribute_data(tuple(np.asarray(e) for e in element))[0]
            shards = sorted(x.addressable_shards, key=lambda s: s.device.id)
            steps.append([np.asarray(s.data)[:, 0].tolist() for s in shards])
    return steps


def spec(value):
    return [None if axis is None else str(axis) for axis in value.sharding.spec]


def call_logits(lm):
    """Logits of two segments by `call_with_memory` (the memory threaded)."""
    inputs, _ = segments()
    memory = lm.backbone.initial_memory(BATCH)
    logits = []
    for segment in inputs[:2]:
        out, memory = lm.call_with_memory(segment, memory)
        logits.append(keras.ops.convert_to_numpy(out).tolist())
    return logits


def model_parallel():
    """JAX: a mesh of 1 (batch) x 2 (model) devices, the weights laid out
    by `TransformerXLBackbone.get_layout_map` (memory included)."""
    devices = keras.distribution.list_devices()[:2]
    mesh = keras.distribution.DeviceMesh((1, 2), ("batch", "model"), devices)
    layouts = TransformerXLBackbone.get_layout_map(mesh)
    strategy = distribute.ReplicaStrategy.for_distribution(
        keras.distribution.ModelParallel(layout_map=layouts)
    )
    report, lm = train(strategy)
    report["memory_spec"] = spec(lm.memory_state.memory.value)
    report["specs"] = {
        v.path: spec(v.value)
        for v in lm.weights
        if "memory_state" not in v.path
    }
    report["call_logits"] = call_logits(lm)
    return report


def evaluation(lm, strategy):
    """`evaluate_bpc` of the model trained on two replicas, on one device
    and in `strategy`, with a memory of 2 segments (longer than in
    training): the bits per character, and the memory that each replica
    of the evaluation copy holds at the end."""
    copies = []
    make_copy = TransformerXLCausalLM.with_memory_length

    def spy(self, memory_length):  # keeps the copy, to read its memory
        copies.append(make_copy(self, memory_length))
        return copies[-1]

    report = {}
    TransformerXLCausalLM.with_memory_length = spy
    try:
        for name, where in (("single", None), ("multi", strategy)):
            result = evaluate_bpc(lm, dataset(), 2 * LENGTH, strategy=where)
            one = distribute.make_strategy("none")
            memory = (where or one).replica_memory(copies[-1])
            report[name] = {
                "bpc": result["bits_per_character"],
                "memory": [r["memory"].tolist() for r in memory],
            }
    finally:
        del TransformerXLCausalLM.with_memory_length
    report["odd_batch_error"] = error_of(
        lambda: evaluate_bpc(lm, dataset(batch=1), strategy=strategy)
    )
    return report


def scoring(lm, strategy):
    """`lm.score` of the rows' first 16 tokens (2 segments), memory
    returned, on one device and in
    `strategy`: the losses, the memory, and the devices that held the
    rows of each result gathered (`strategy.gather_rows`, spied)."""
    inputs, targets = segments()
    ids = np.concatenate(list(inputs[:2]), axis=1)  # (BATCH, 16)
    kwargs = dict(
        scoring_mode="loss",
        target_ids=np.concatenate(list(targets[:2]), axis=1),
        segment_length=LENGTH,
        return_memory=True,
    )
    gathered = []
    gather_rows = strategy.gather_rows

    def spy(values):
        gathered.extend(
            devices_of(strategy, v) for v in keras.tree.flatten(values)
        )
        return gather_rows(values)

    report = {}
    strategy.gather_rows = spy
    try:
        for name, where in (("single", None), ("multi", strategy)):
            losses, memory = lm.score(ids, strategy=where, **kwargs)
            report[name] = {
                "losses": keras.ops.convert_to_numpy(losses).tolist(),
                "memory": keras.ops.convert_to_numpy(memory["memory"]).tolist(),
                "valid_length": keras.ops.convert_to_numpy(
                    memory["valid_length"]
                ).tolist(),
            }
    finally:
        del strategy.gather_rows
    report["gathered_from"] = gathered
    report["odd_rows_error"] = error_of(
        lambda: lm.score(ids[:3], strategy=strategy)
    )
    return report


def devices_of(strategy, value):
    """`[rows, device]` of each part of `value`, first rows first: its
    per-replica parts (TensorFlow, where each replica's output comes
    back on the first CPU: `device` is None), its shards (JAX)."""
    if BACKEND == "tensorflow":
        local = strategy.native.experimental_local_results(value)
        return [[int(part.shape[0]), None] for part in local]
    shards = sorted(
        value.addressable_shards, key=lambda s: s.index[0].start or 0
    )
    return [[int(s.data.shape[0]), str(s.device)] for s in shards]


def error_of(function, kind=ValueError):
    try:
        function()
    except kind as error:
        return str(error)
    return None


def two_devices():
    report = {"backend": BACKEND, "strategy": NAME}
    multi = distribute.make_strategy(NAME, NUM_DEVICES)
    report["num_replicas"] = multi.num_replicas
    report["single"], single = train(distribute.make_strategy("none"))
    report["multi"], lm = train(multi)
    if BACKEND == "jax":
        value = lm.memory_state.memory.value
        report["memory_devices"] = sorted(
            str(s.device) for s in value.addressable_shards
        )
        report["memory_spec"] = spec(value)
        kernel = lm.backbone.token_embedding.embeddings.value
        report["embedding_devices"] = len(kernel.sharding.device_set)
        report["single"]["call_logits"] = call_logits(single)
        report["model_parallel"] = model_parallel()
    report["evaluation"] = evaluation(lm, multi)
    start = time.perf_counter()
    report["scoring"] = scoring(lm, multi)
    report["scoring"]["seconds"] = time.perf_counter() - start
    lm.reset_memory()  # from outside the replicas: every copy forgets
    report["largest_after_reset"] = max(
        float(np.abs(replica[key]).max())
        for replica in multi.replica_memory(lm)
        for key in ("memory", "valid_length")
    )
    # Rows tagged with their index: which rows each replica gets.
    rows = np.repeat(np.arange(BATCH, dtype="int32")[:, None], LENGTH, 1)
    tagged = tf.data.Dataset.from_tensors((rows, rows)).repeat(3)
    report["rows"] = first_tokens_per_replica(multi, tagged)
    report["odd_batch_error"] = error_of(
        lambda: multi.distribute_dataset(dataset(batch=3))
    )
    report["odd_build_error"] = error_of(lambda: multi.build_memory(lm, 5))
    report["unbatched_error"] = error_of(
        lambda: multi.distribute_dataset(dataset().unbatch().batch(4))
    )
    # TensorFlow: no TPU here (last: connecting to a cluster resets
    # TensorFlow's context). JAX: the TPU strategy is TensorFlow's.
    report["tpu_error"] = error_of(
        lambda: distribute.make_strategy("tpu", tpu="local"),
        RuntimeError if BACKEND == "tensorflow" else ValueError,
    )
    return report


def worker():
    strategy = distribute.make_strategy(NAME, NUM_DEVICES)
    report = {"strategy": NAME, "num_replicas": strategy.num_replicas}
    report["multi"], _ = train(strategy)
    return report


if __name__ == "__main__":
    with open(OUT, "w") as file:
        json.dump(worker() if WORKER else two_devices(), file)
