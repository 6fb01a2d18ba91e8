import json
import subprocess
import sys

import keras
import numpy as np
import pytest

from benchmarks.memory_budget import SMALL_CONFIGS
from benchmarks.memory_budget import compare_with_measurement
from keras_txl.distribute import memory_budget
from keras_txl.distribute import parameter_count
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM


@pytest.mark.parametrize("tie_weights", [True, False])
def test_parameter_count_is_the_models(tie_weights, tiny_config):
    backbone = TransformerXLBackbone(**tiny_config)
    lm = TransformerXLCausalLM(backbone, tie_weights=tie_weights)
    lm.build((2, 3))  # the output layer and the memory, no compute
    weights = sum(int(np.prod(w.shape)) for w in lm.trainable_weights)
    assert parameter_count(backbone, tie_weights) == weights
    assert parameter_count(backbone.get_config(), tie_weights) == weights


@pytest.mark.parametrize(
    "options",
    [
        dict(cutoffs=[10, 20], div_val=2),
        dict(position_encoding="learned_relative", max_relative_distance=3),
        dict(
            compressed_memory_length=2, compression_rate=2, compression="conv"
        ),
    ],
    ids=["adaptive", "learned_relative", "compressive_conv"],
)
def test_parameter_count_of_every_backbone_is_count_params(
    options, tiny_config
):
    config = dict(tiny_config, vocabulary_size=30, **options)
    backbone = TransformerXLBackbone.from_config(config)  # or compressive
    lm = TransformerXLCausalLM(backbone)
    lm.build()
    expected = lm.count_params()  # no carried memory yet: all trainable
    assert parameter_count(lm) == expected
    assert parameter_count(backbone.get_config()) == expected
    budget = memory_budget(lm, batch_size=2, segment_length=4)
    assert budget["parameter_count"] == expected
    assert budget["parameters"] == 4 * expected


def test_state_bytes_are_the_variables(tiny_config):
    backbone = TransformerXLBackbone(**tiny_config)
    lm = TransformerXLCausalLM(backbone)
    lm.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    lm.build((4, 5))  # the output layer and the memory, no compute
    lm.optimizer.build(lm.trainable_variables)
    budget = memory_budget(backbone, batch_size=4, segment_length=5)
    params = sum(4 * int(np.prod(v.shape)) for v in lm.trainable_variables)
    slots = sum(
        4 * int(np.prod(v.shape))
        for v in lm.optimizer.variables
        if len(v.shape)  # the moments, not the step counter
    )
    held = 4 * int(np.prod(lm.memory_state.memory.shape))
    assert budget["parameters"] == budget["gradients"] == params
    assert budget["optimizer"] == slots == 2 * params
    assert budget["memory_cache"] == 2 * held  # held, and the one written


def test_budget_follows_the_complexity_of_the_paper(tiny_config):
    base = memory_budget(tiny_config, 8, segment_length=16, memory_length=16)
    long_memory = memory_budget(tiny_config, 8, 16, memory_length=32)
    # Cache O(M d L): twice the memory, twice the cache.
    assert long_memory["memory_cache"] == 2 * base["memory_cache"]
    # Attention O(T (T + M)): 16 x 32 keys -> 16 x 48.
    assert long_memory["attention"] * 32 == base["attention"] * 48
    # Activations O(T d L) grow with the segment.
    longer = memory_budget(tiny_config, 8, segment_length=32, memory_length=16)
    assert longer["activations"] > 1.5 * base["activations"]
    # Replicas split the batch, not the weights.
    split = memory_budget(tiny_config, 8, 16, memory_length=16, replicas=2)
    assert split["per_replica_batch"] == 4
    for key in ("memory_cache", "activations", "attention", "logits"):
        assert split[key] * 2 == base[key], key
    for key in ("parameters", "gradients", "optimizer"):
        assert split[key] == base[key], key
    parts = sum(
        v for k, v in base.items() if k not in ("total", "per_replica_batch")
    )
    assert base["total"] == parts - base["parameter_count"]


def test_mixed_precision_halves_the_activations_not_the_weights(
    tiny_config,
):
    full = memory_budget(tiny_config, 4, 8)
    mixed = memory_budget(tiny_config, 4, 8, dtype="mixed_bfloat16")
    assert mixed["activations"] * 2 == full["activations"]
    assert mixed["parameters"] == full["parameters"]
    # The memory is kept in the compute dtype, unless memory_dtype is set.
    assert mixed["memory_cache"] * 2 == full["memory_cache"]
    kept = memory_budget(
        {**tiny_config, "memory_dtype": "float32"}, 4, 8, dtype="mixed_bfloat16"
    )
    assert kept["memory_cache"] == full["memory_cache"]


def test_budget_arguments_are_checked(tiny_config):
    with pytest.raises(ValueError, match="multiple of `replicas`"):
        memory_budget(tiny_config, 5, 8, replicas=2)
    with pytest.raises(ValueError, match="`dtype` must be one of"):
        memory_budget(tiny_config, 4, 8, dtype="float64")
    with pytest.raises(ValueError, match="`optimizer` must be one of"):
        memory_budget(tiny_config, 4, 8, optimizer="adagrad")
    with pytest.raises(ValueError, match="lacks the keys"):
        memory_budget({"num_layers": 2}, 4, 8)


@pytest.mark.slow
def test_budget_is_within_2x_of_what_xla_measures(subprocess_env):
    """XLA's memory analysis of the compiled training step (JAX): in this
    process on JAX, in a JAX subprocess otherwise (TensorFlow's CPU
    allocator reports pool sizes, too coarse at this scale)."""
    name, config, batch, length = SMALL_CONFIGS[1]
    if keras.backend.backend() == "jax":
        result = compare_with_measurement(name, config, batch, length)
    else:
        completed = subprocess.run(
            [sys.executable, "-m", "benchmarks.memory_budget", name],
            env=subprocess_env("jax"),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["backend"] == "jax"
    assert 0.5 < result["measured"] / result["estimate"] < 2.0, result
