"""The paper's learning-rate schedule and optimizer."""

import math

import keras
import pytest

from keras_txl.training import transformer_xl_optimizer
from keras_txl.training.schedules import warmup_cosine_schedule


def _values(schedule, steps):
    return [float(schedule(step)) for step in steps]


@pytest.mark.torch_ok
def test_linear_warmup_then_cosine_decay():
    schedule = warmup_cosine_schedule(
        2e-3, total_steps=110, warmup_steps=10, min_learning_rate_ratio=0.1
    )
    # Warmup: lr * s / w. Decay: cosine over the 100 steps after it, from
    # lr to 0.1 lr, then flat.
    expected = [0.0, 2e-4, 1e-3, 2e-3]
    for step in (35, 60, 85, 110, 500):
        fraction = min(step - 10, 100) / 100
        cosine = 0.5 * (1 + math.cos(math.pi * fraction))
        expected.append(2e-3 * (0.1 + 0.9 * cosine))
    got = _values(schedule, [0, 1, 5, 10, 35, 60, 85, 110, 500])
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-9)
    assert got[5] == pytest.approx(2e-3 * (0.1 + 0.9 * 0.5), rel=1e-5)


@pytest.mark.torch_ok
def test_no_warmup_and_serialization():
    schedule = warmup_cosine_schedule(1.0, total_steps=4)
    assert _values(schedule, [0, 2, 4]) == pytest.approx([1.0, 0.5, 0.0])
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule)
    )
    assert _values(restored, [1, 3]) == pytest.approx(_values(schedule, [1, 3]))


@pytest.mark.torch_ok
def test_optimizer_clips_the_global_norm():
    optimizer = transformer_xl_optimizer(1e-3, total_steps=100, warmup_steps=5)
    assert isinstance(optimizer, keras.optimizers.Adam)
    assert optimizer.global_clipnorm == 0.25 and optimizer.clipnorm is None
    assert float(optimizer.learning_rate) == 0.0  # step 0 of the warmup
    constant = transformer_xl_optimizer(1e-3, clip_norm=None)
    assert float(constant.learning_rate) == pytest.approx(1e-3)
    assert constant.global_clipnorm is None


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(learning_rate=0.0, total_steps=10), "learning_rate"),
        (dict(learning_rate=1e-3, total_steps=0), "total_steps"),
        (dict(learning_rate=1e-3, total_steps=10, warmup_steps=10), "below"),
        (
            dict(learning_rate=1e-3, total_steps=10, min_learning_rate_ratio=2),
            "min_learning_rate_ratio",
        ),
    ],
)
def test_schedule_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        warmup_cosine_schedule(**kwargs)


def test_optimizer_argument_errors():
    with pytest.raises(ValueError, match="needs `total_steps`"):
        transformer_xl_optimizer(1e-3, warmup_steps=10)
    with pytest.raises(ValueError, match="clip_norm"):
        transformer_xl_optimizer(1e-3, clip_norm=-1.0)
