"""The `model.keras` of a run holds the trained optimizer, and loads it
without a warning."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_txl.app import artifacts
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from keras_txl.training.schedules import transformer_xl_optimizer
from tests.test_case import to_numpy


@pytest.mark.torch_ok
def test_trained_optimizer_round_trips_without_warning(tmp_path):
    keras.utils.set_random_seed(0)
    lm = TransformerXLCausalLM(
        TransformerXLBackbone(
            vocabulary_size=20,
            num_layers=1,
            num_heads=2,
            hidden_dim=8,
            head_dim=4,
            intermediate_dim=16,
            memory_length=4,
        )
    )
    lm.compile(
        optimizer=transformer_xl_optimizer(1e-3, total_steps=10, warmup_steps=2)
    )
    ids = np.random.default_rng(0).integers(0, 20, (3, 2, 5)).astype("int32")
    lm.fit(tf.data.Dataset.from_tensor_slices((ids, ids)), verbose=0)
    artifacts.save_model(lm, tmp_path)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Skipping variable loading ..."
        restored = keras.saving.load_model(tmp_path / artifacts.MODEL_FILE)
        # What `keras-txl evaluate` and `generate` load, also silently.
        artifacts.load_model(tmp_path)
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
