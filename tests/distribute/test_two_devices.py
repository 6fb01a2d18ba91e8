"""Two replicas against one device, on 2 logical CPU devices, in
subprocesses (see `two_device_run.py`): TensorFlow `mirrored` and JAX
`jax-data-parallel`, each under its own backend."""

import numpy as np
import pytest

BATCH, REPLICAS = 4, 2
ROWS = BATCH // REPLICAS
# Two replicas follow one device to float rounding. Measured (20 steps):
# the memory within 7e-7 of one device's (activations of the replica's own
# rows: no reduction across replicas), the logged losses within 9.5e-6 on
# TensorFlow and 1.2e-6 on JAX (each a mean over both replicas' tokens and
# Keras's running mean over the epoch, summed in another order). The
# bounds are about 5x and 14x those.
LOSS_ATOL, MEMORY_ATOL = 5e-5, 1e-5
# Two processes (reducing over gRPC on TensorFlow, gloo on JAX) measured
# the same: losses within 9.5e-6 (TensorFlow) and 1.2e-6 (JAX), the
# memory within 6e-7 on both; they share these bounds.


def test_two_replicas_follow_the_single_device_loss_curve(
    two_device_report,
):
    single = np.array(two_device_report["single"]["losses"])
    multi = np.array(two_device_report["multi"]["losses"])
    assert two_device_report["num_replicas"] == REPLICAS
    assert single.shape == multi.shape == (20,)
    np.testing.assert_allclose(multi, single, atol=LOSS_ATOL, rtol=0)
    # The curve moves: the comparison is not of two flat lines.
    assert single[:3].mean() - single[-3:].mean() > 0.5


def test_each_replica_keeps_the_memory_of_its_rows(two_device_report):
    single = two_device_report["single"]["memory"]
    replicas = two_device_report["multi"]["memory"]
    assert len(single) == 1 and len(replicas) == REPLICAS
    memory = np.array(single[0]["memory"])  # (batch, layers, M, hidden)
    valid = np.array(single[0]["valid_length"])
    assert memory.shape[0] == BATCH and np.all(valid == memory.shape[2])
    for r, replica in enumerate(replicas):
        rows = slice(r * ROWS, (r + 1) * ROWS)
        assert np.array(replica["memory"]).shape == memory[rows].shape
        np.testing.assert_allclose(
            replica["memory"], memory[rows], atol=MEMORY_ATOL, rtol=0
        )
        np.testing.assert_array_equal(replica["valid_length"], valid[rows])
    # The rows differ, so a replica holding another's rows would fail.
    assert np.abs(memory[:ROWS] - memory[ROWS:]).max() > 0.1
    # `reset_memory()` from outside the replicas empties every copy.
    assert two_device_report["largest_after_reset"] == 0.0


# `evaluate_bpc` in the strategy equals one device: the bits per
# character (about 3.1) and each replica's memory to float rounding
# (measured: 0 and 0 on TensorFlow, 3.4e-7 and 0 on JAX; see
# docs/distributed.md, "Evaluation in the strategy").
EVAL_ATOL = 1e-5


def test_evaluation_in_the_strategy_equals_one_device(two_device_report):
    """`evaluate_bpc(lm, data, 2 * T, strategy=strategy)` on the model
    trained on two replicas: replica `r` reads rows `[2r, 2r + 2)` of
    every batch and carries their memory (a longer one than in
    training), and the bits per character are those of one device. A
    batch the replicas cannot share is refused, naming one that they
    can."""
    evaluation = two_device_report["evaluation"]
    single, multi = evaluation["single"], evaluation["multi"]
    assert abs(multi["bpc"] - single["bpc"]) <= EVAL_ATOL
    (memory,) = np.array(single["memory"])  # (batch, layers, 2T, hidden)
    assert memory.shape == (BATCH, 2, 16, 16)
    # The copy evaluated in the strategy has one memory per replica.
    assert len(multi["memory"]) == REPLICAS
    for r, replica in enumerate(multi["memory"]):
        rows = slice(r * ROWS, (r + 1) * ROWS)
        np.testing.assert_allclose(
            replica, memory[rows], atol=MEMORY_ATOL, rtol=0
        )
    assert np.abs(memory[:ROWS] - memory[ROWS:]).max() > 0.1
    message = evaluation["odd_batch_error"]
    assert message is not None and "global batch size (1)" in message
    assert "Use a global batch of 2." in message


# `score(..., strategy=)` equals one device: the losses (about 2.1) and
# the returned memory (measured: 4.8e-7 and 4.8e-7 on TensorFlow, whose
# replicas run the step without XLA as Keras does under `tf.distribute`;
# 0 and 0 on JAX).
SCORE_ATOL = 1e-5


def test_scoring_in_the_strategy_equals_one_device(two_device_report):
    """`lm.score(ids, strategy=strategy, return_memory=True)` of 4 rows
    in 2 segments: each replica scores its 2 rows
    (every result gathered held 2 rows on each replica), the losses and
    the memory, returned whole, are those of one device. Rows the
    replicas cannot share are refused, naming counts that they can."""
    scoring = two_device_report["scoring"]
    single, multi = scoring["single"], scoring["multi"]
    losses = np.array(single["losses"])
    assert losses.shape == np.array(multi["losses"]).shape == (BATCH, 16)
    np.testing.assert_allclose(multi["losses"], losses, atol=SCORE_ATOL)
    memory = np.array(single["memory"])  # (batch, layers, M, hidden)
    assert np.array(multi["memory"]).shape == memory.shape == (4, 2, 8, 16)
    np.testing.assert_allclose(multi["memory"], memory, atol=SCORE_ATOL)
    assert multi["valid_length"] == single["valid_length"] == [8] * BATCH
    # The rows differ, so rows put back in another order would fail.
    assert np.abs(losses[:ROWS] - losses[ROWS:]).max() > 0.1
    assert np.abs(memory[:ROWS] - memory[ROWS:]).max() > 0.1
    # 2 segments' losses and the memory's 2 arrays, gathered from the
    # replicas (on JAX from the 2 devices, in row order).
    gathered = scoring["gathered_from"]
    jax = two_device_report["backend"] == "jax"
    devices = ["cpu:0", "cpu:1"] if jax else [None] * REPLICAS
    expected = [[ROWS, device] for device in devices]
    assert gathered == [expected] * 4
    message = scoring["odd_rows_error"]
    assert message is not None and "received 3 rows" in message
    assert "2 replicas of strategy" in message
    assert "Score 2 or 4 rows" in message


def test_replica_gets_the_same_contiguous_rows_at_every_step(
    two_device_report,
):
    expected = [[list(range(r * ROWS, (r + 1) * ROWS)) for r in (0, 1)]] * 3
    assert two_device_report["rows"] == expected


def test_memory_is_held_per_replica(two_device_report):
    """TensorFlow: one sync-on-read copy per replica, of the per-replica
    batch. JAX: one global array whose rows the devices share; under
    `ModelParallel` over a (batch 1, model 2) mesh with the LayoutMap of
    `TransformerXLBackbone.get_layout_map`, the kernels split along the
    model axis, the same loss curve, memory and `call_with_memory`
    logits as on one device (1e-5)."""
    report = two_device_report
    if report["backend"] == "tensorflow":
        replicas = report["multi"]["memory"]
        shapes = [np.array(r["memory"]).shape for r in replicas]
        assert shapes == [(ROWS, 2, 8, 16)] * REPLICAS
        return
    assert report["memory_devices"] == ["cpu:0", "cpu:1"]
    assert report["memory_spec"] == ["batch", None, None, None]
    assert report["embedding_devices"] == 2  # weights copied on both
    parallel, single = report["model_parallel"], report["single"]
    assert parallel["memory_spec"] == ["batch", None, None, None]
    np.testing.assert_allclose(
        parallel["losses"], single["losses"], atol=LOSS_ATOL, rtol=0
    )
    (replica,) = parallel["memory"]  # the batch axis has one device
    np.testing.assert_allclose(
        replica["memory"],
        single["memory"][0]["memory"],
        atol=MEMORY_ATOL,
        rtol=0,
    )
    np.testing.assert_allclose(
        parallel["call_logits"], single["call_logits"], atol=1e-5, rtol=0
    )
    _check_sharded_kernels(parallel["specs"])


def _check_sharded_kernels(specs):
    """`TransformerXLBackbone.get_layout_map` splits the embedding, the
    attention heads and the feed-forward's inner axis along the model
    axis of the mesh (not replicated)."""
    layer = "transformer_layer_1/"
    assert specs["token_embedding/embeddings"] == ["model", "batch"]
    for name in ("query", "key", "value", "position"):
        assert specs[f"{layer}attention/{name}/kernel"] == [
            "batch",
            "model",
            None,
        ]
    assert specs[f"{layer}attention/attention_output/kernel"] == [
        "model",
        None,
        "batch",
    ]
    assert specs[f"{layer}attention/content_bias"] == ["model", None]
    assert specs[f"{layer}intermediate/kernel"] == ["batch", "model"]
    assert specs[f"{layer}output/kernel"] == ["model", "batch"]
    (bias,) = [path for path in specs if path.endswith("/output_bias")]
    assert specs[bias] == ["model"]
    sharded = [path for path, axes in specs.items() if "model" in axes]
    assert len(sharded) >= 2 * 9 + 2


def test_batch_that_replicas_cannot_share_fails_before_training(
    two_device_report,
):
    for key, batch in (("odd_batch_error", 3), ("odd_build_error", 5)):
        message = two_device_report[key]
        assert message is not None, key
        assert f"global batch size ({batch})" in message
        assert "multiple of the number of replicas (2" in message


def test_batch_without_static_size_fails_before_training(two_device_report):
    message = two_device_report["unbatched_error"]
    assert message is not None and "drop_remainder=True" in message


def test_tpu_strategy_without_a_tpu_says_so(two_device_report):
    """TensorFlow: `TPUClusterResolver("local")` finds no TPU here. JAX:
    the TPU strategy is TensorFlow's, refused after the JAX devices were
    set up too (JAX reaches TPUs through `jax-data-parallel`)."""
    message = two_device_report["tpu_error"]
    assert message is not None
    if two_device_report["backend"] == "tensorflow":
        assert "found no TPU" in message and "tpu='local'" in message
    else:
        assert "Strategy 'tpu' runs on the tensorflow backend" in message


@pytest.mark.slow
def test_two_processes_follow_the_single_device_run(
    two_device_report, two_process_reports
):
    """Two processes on localhost, one CPU replica each (TensorFlow
    `multiworker`, JAX `jax-data-parallel` over `jax.distributed`): each
    follows the single-device curve and holds the memory of its rows."""
    single = two_device_report["single"]
    memory = np.array(single["memory"][0]["memory"])
    for index, report in enumerate(two_process_reports):
        assert report["num_replicas"] == REPLICAS
        np.testing.assert_allclose(
            report["multi"]["losses"],
            single["losses"],
            atol=LOSS_ATOL,
            rtol=0,
        )
        (local,) = report["multi"]["memory"]
        rows = slice(index * ROWS, (index + 1) * ROWS)
        np.testing.assert_allclose(
            local["memory"], memory[rows], atol=MEMORY_ATOL, rtol=0
        )
