"""A run saves its model as a keras-hub preset (weights only, as keras-hub
presets are) that loads without a warning, and keeps the trained optimizer
in its checkpoint, which `--resume` restores. A `.keras` file a user saves
holds the trained optimizer and loads it without a warning."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_txl.training.schedules import transformer_xl_optimizer
from keras_txl.training.step_history import StepHistory
from keras_txl.training.training_checkpoint import TrainingCheckpoint
from keras_txl_cli import artifacts
from tests.test_case import to_numpy
from tests.tiny_models import tiny_lm


def _lm():
    lm = tiny_lm(seed=None, num_layers=1)
    lm.compile(
        optimizer=transformer_xl_optimizer(1e-3, total_steps=10, warmup_steps=2)
    )
    return lm


@pytest.mark.torch_ok
def test_trained_optimizer_is_kept_by_checkpoint_and_keras_file(
    tmp_path,
):
    keras.utils.set_random_seed(0)
    lm = _lm()
    ids = np.random.default_rng(0).integers(0, 20, (3, 2, 5)).astype("int32")
    history = StepHistory(tokens_per_step=10)
    checkpoint = TrainingCheckpoint(tmp_path / "checkpoint", history)
    lm.fit(
        tf.data.Dataset.from_tensor_slices((ids, ids)),
        callbacks=[history, checkpoint],
        verbose=0,
    )
    artifacts.save_model(lm, tmp_path)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Skipping variable loading ..."
        served = artifacts.load_model(tmp_path)
    for a, b in zip(lm.weights, served.weights):
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
    assert not served.optimizer.built  # a preset has no optimizer state

    resumed = _lm()
    TrainingCheckpoint.restore(resumed, tmp_path / "checkpoint", batch_size=2)
    lm.save(tmp_path / "user.keras")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reloaded = keras.saving.load_model(tmp_path / "user.keras")
    for restored in (resumed, reloaded):
        trained = lm.optimizer.variables
        loaded = restored.optimizer.variables
        assert len(trained) == len(loaded) > 2  # moments, not only the step
        for a, b in zip(trained, loaded):
            np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
        assert int(to_numpy(restored.optimizer.iterations)) == 3
        # The schedule too: the next learning rate is the trained run's.
        np.testing.assert_allclose(
            to_numpy(restored.optimizer.learning_rate),
            to_numpy(lm.optimizer.learning_rate),
        )
