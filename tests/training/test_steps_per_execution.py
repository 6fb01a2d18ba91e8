"""`steps_per_execution > 1` with the carried memory, on the backend under
test: several steps in one execution carry the memory from step to step
as one step per execution does (the CLI's flag is checked on TensorFlow
only, in tests/app/test_run_options.py)."""

import keras
import numpy as np

from tests.tiny_models import training_lm
from tests.training.helpers import ordered_dataset


def _fit(steps_per_execution):
    lm = training_lm()
    lm.compile(
        optimizer=keras.optimizers.SGD(0.1),
        steps_per_execution=steps_per_execution,
    )
    ids = np.random.default_rng(0).integers(0, 16, size=2 * 8 * 4 + 2)
    lm.fit(ordered_dataset(ids, 2, 8), epochs=1, shuffle=False, verbose=0)
    memory = lm.memory_state.read()["memory"]
    return [keras.ops.convert_to_numpy(w) for w in lm.trainable_weights], (
        keras.ops.convert_to_numpy(memory)
    )


def test_two_steps_per_execution_carry_the_memory_like_one():
    weights, memory = _fit(1)
    weights_2, memory_2 = _fit(2)
    np.testing.assert_allclose(memory_2, memory, rtol=0, atol=1e-5)
    for got, want in zip(weights_2, weights):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
