"""Mixed precision stays finite; a NaN loss stops training, naming the step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_txl import data
from keras_txl.layers import RelativeMultiHeadAttention
from keras_txl.layers import RelativePositionEmbedding
from keras_txl.training.nan_guard import NanGuard
from tests.test_case import dtype_name
from tests.test_case import to_numpy
from tests.tiny_models import random_ids
from tests.tiny_models import shakespeare_ids
from tests.tiny_models import tiny_lm


@pytest.mark.torch_ok
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_masks_and_softmax_run_in_float32(policy):
    # The float16 trap: a large negative mask value is -inf in float16, a
    # query whose keys are all masked then gets softmax(-inf, ...) = NaN,
    # and -inf x 0 is NaN too.
    assert np.isneginf(np.float16(-1e9)) and np.isneginf(np.float16(-1e30))
    keras.config.set_dtype_policy(policy)
    rng = np.random.default_rng(0)
    x = (30 * rng.normal(size=(2, 3, 8))).astype("float32")  # large scores
    memory = (30 * rng.normal(size=(2, 5, 8))).astype("float32")
    position = RelativePositionEmbedding(hidden_dim=8)(x, memory)
    mask = np.ones((2, 3, 8), bool)
    mask[0, 1] = False  # query 1 of example 0 may see no key at all
    attention = RelativeMultiHeadAttention(num_heads=2, head_dim=4)
    output, probs = attention(
        x,
        position,
        memory=memory,
        memory_valid_length=np.array([0, 5], "int32"),
        attention_mask=mask,
        return_attention_scores=True,
    )
    assert dtype_name(output) == attention.compute_dtype != "float32"
    probs = to_numpy(keras.ops.cast(probs, "float32"))
    assert np.all(np.isfinite(to_numpy(keras.ops.cast(output, "float32"))))
    # The fully masked row is uniform (finite -1e9 in float32), not NaN.
    np.testing.assert_allclose(probs[0, :, 1], 1 / 8, rtol=1e-2)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-2)


def _fit_200_steps(policy):
    keras.config.set_dtype_policy(policy)
    ids, vocabulary_size = shakespeare_ids(8_000)
    lm = tiny_lm(
        vocabulary_size=vocabulary_size,
        hidden_dim=16,
        memory_length=8,
    )
    lm.compile(optimizer=keras.optimizers.Adam(3e-3))
    dataset = data.segment_dataset(
        ids, batch_size=4, sequence_length=8, vocabulary_size=vocabulary_size
    )
    losses = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: losses.append(logs["loss"])
    )
    guard = NanGuard(raise_error=True)
    lm.fit(dataset.take(200), callbacks=[record, guard], verbose=0)
    return lm, np.array(losses)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_training_stays_finite_for_200_steps(policy):
    lm, losses = _fit_200_steps(policy)
    assert len(losses) == 200 and np.all(np.isfinite(losses))
    assert losses[-1] < losses[0] - 0.3  # it learned, it did not stall
    if policy == "mixed_float16":
        assert isinstance(lm.optimizer, keras.optimizers.LossScaleOptimizer)
    assert lm.backbone.transformer_layers[0].compute_dtype == policy[6:]
    for weight in lm.weights:
        assert np.all(np.isfinite(to_numpy(weight))), weight.path
    # The carried memory is in the compute dtype, full and finite after
    # 200 segments.
    memory = lm.memory_state.read(4)
    assert dtype_name(memory["memory"]) == policy[6:]
    assert np.all(np.isfinite(to_numpy(memory["memory"])))
    np.testing.assert_array_equal(to_numpy(memory["valid_length"]), 8)
    logits, _ = lm.call_with_memory(random_ids((4, 8), high=10))
    assert dtype_name(logits) == "float32"


def _bad_ids_at(batch, batches=6):
    """Ordered batches of 2 rows; batch `batch` (1-based) holds an id
    outside the vocabulary."""
    tokens = random_ids((2 * batches, 4), seed=2)
    tokens[2 * (batch - 1), 0] = 99
    x, y = tokens[:, :-1], tokens[:, 1:]
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(2, True)


def test_nan_loss_stops_training_naming_the_step_and_causes(capsys):
    lm = tiny_lm()
    seen = []
    count = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: seen.append(batch)
    )
    guard = NanGuard()
    lm.fit(_bad_ids_at(4), callbacks=[guard, count], verbose=0)
    assert guard.step == 4
    assert seen == [0, 1, 2, 3]  # stopped at the bad step
    printed = capsys.readouterr().out
    for words in ("at step 4", "epoch 1, batch 4", "vocabulary_size"):
        assert words in printed
    assert "reset_memory" in guard.message
    # The bad ids were looked up as id 0 and only their logits made NaN:
    # the gradients, the weights and the carried memory stay finite.
    for weight in lm.weights:
        assert np.all(np.isfinite(to_numpy(weight))), weight.path
    memory = lm.memory_state.read(2)  # written by the bad step too
    assert to_numpy(memory["valid_length"]).tolist() == [4, 4]
    assert np.all(np.isfinite(to_numpy(memory["memory"])))


def test_nan_guard_can_raise():
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer="sgd")
    values = np.array([[1.0], [np.nan], [1.0]], "float32")
    with pytest.raises(RuntimeError, match="at step 2 .*learning rate"):
        model.fit(
            values,
            values,
            batch_size=1,
            shuffle=False,  # Keras shuffles arrays by default
            callbacks=[NanGuard(raise_error=True)],
            verbose=0,
        )


@pytest.mark.torch_ok
def test_nan_guard_counts_steps_across_epochs(capsys):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer="sgd")
    values = np.ones((20, 1), "float32")
    values[7] = np.inf  # the 8th batch of 1: epoch 3, batch 2 of 3
    dataset = tf.data.Dataset.from_tensor_slices((values, values))
    guard = NanGuard()
    model.fit(
        dataset.batch(1).repeat(),
        steps_per_epoch=3,
        epochs=5,
        callbacks=[guard],
        verbose=0,
    )
    assert guard.step == 8
    assert "epoch 3, batch 2" in capsys.readouterr().out
    with pytest.raises(ValueError, match="raise_error"):
        NanGuard(raise_error="yes")
