"""`measure_step_cost`: the time and memory of one training step."""

import keras

from keras_txl.ablation.cost import measure_step_cost
from tests.tiny_models import backbone_config

TINY = backbone_config(num_layers=1)


def test_step_cost_is_measured():
    cost = measure_step_cost(TINY, 2, 4, 1, steps=1, isolate=False)
    assert cost["seconds_per_step"] > 0
    assert cost["tokens_per_step"] == 8
    if keras.config.backend() == "jax":
        assert cost["xla_temp_bytes"] > 0
