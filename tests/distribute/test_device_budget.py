"""`keras_txl.distribute.device_budget`: the bytes a replica holds in a
training step, from a backbone's config (strategies know no model
class). How close it lies to what XLA measures is
tests/benchmarks' business (the benchmark measures it)."""

import numpy as np
import pytest

from keras_txl.distribute import device_budget
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM


@pytest.mark.parametrize("tie_weights", [True, False])
def test_parameter_count_from_the_config_is_count_params(
    tie_weights, tiny_config
):
    backbone = TransformerXLBackbone(**tiny_config)
    lm = TransformerXLCausalLM(backbone, tie_weights=tie_weights)
    budget = device_budget(backbone.get_config(), 2, 3, tie_weights=tie_weights)
    assert budget["parameter_count"] == lm.count_params()
    assert budget["parameters"] == 4 * lm.count_params()


@pytest.mark.parametrize(
    "options",
    [
        dict(cutoffs=[10, 20], div_val=2),
        dict(position_encoding="learned_relative", max_relative_distance=3),
        dict(compressed_memory_length=2, compression_rate=2),
    ],
    ids=["adaptive", "learned_relative", "compressive"],
)
def test_a_variant_needs_its_parameter_count(options, tiny_config):
    config = dict(tiny_config, vocabulary_size=30, **options)
    with pytest.raises(ValueError, match="parameter_count=lm.count_params"):
        device_budget(config, batch_size=2, segment_length=4)
    budget = device_budget(config, 2, 4, parameter_count=1234)
    assert budget["parameter_count"] == 1234
    assert budget["parameters"] == 4 * 1234


def test_state_bytes_are_the_variables(tiny_config):
    backbone = TransformerXLBackbone(**tiny_config)
    lm = TransformerXLCausalLM(backbone)
    lm.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    lm.build_memory(4)
    lm.optimizer.build(lm.trainable_variables)
    budget = device_budget(backbone.get_config(), 4, segment_length=5)
    params = sum(4 * int(np.prod(v.shape)) for v in lm.trainable_variables)
    slots = sum(
        4 * int(np.prod(v.shape))
        for v in lm.optimizer.variables
        if len(v.shape)  # the moments, not the step counter
    )
    held = 4 * int(np.prod(lm.memory_state.memory.shape))
    assert budget["parameters"] == budget["gradients"] == params
    assert budget["optimizer"] == slots == 2 * params
    assert budget["memory"] == 2 * held  # held, and the one written


def test_budget_follows_the_complexity_of_the_paper(tiny_config):
    base = device_budget(tiny_config, 8, segment_length=16, memory_length=16)
    long_memory = device_budget(tiny_config, 8, 16, memory_length=32)
    # Memory O(M d L): twice the slots, twice the bytes.
    assert long_memory["memory"] == 2 * base["memory"]
    # Attention O(T (T + M)): 16 x 32 keys -> 16 x 48.
    assert long_memory["attention"] * 32 == base["attention"] * 48
    # Activations O(T d L) grow with the segment.
    longer = device_budget(tiny_config, 8, segment_length=32, memory_length=16)
    assert longer["activations"] > 1.5 * base["activations"]
    # Replicas split the batch, not the weights.
    split = device_budget(tiny_config, 8, 16, memory_length=16, replicas=2)
    assert split["per_replica_batch"] == 4
    for key in ("memory", "activations", "attention", "logits"):
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
    full = device_budget(tiny_config, 4, 8)
    mixed = device_budget(tiny_config, 4, 8, dtype="mixed_bfloat16")
    assert mixed["activations"] * 2 == full["activations"]
    assert mixed["parameters"] == full["parameters"]
    # The memory is kept in the compute dtype, unless memory_dtype is set.
    assert mixed["memory"] * 2 == full["memory"]
    kept = device_budget(
        {**tiny_config, "memory_dtype": "float32"}, 4, 8, dtype="mixed_bfloat16"
    )
    assert kept["memory"] == full["memory"]


def test_budget_arguments_are_checked(tiny_config):
    with pytest.raises(ValueError, match="multiple of `replicas`"):
        device_budget(tiny_config, 5, 8, replicas=2)
    with pytest.raises(ValueError, match="`dtype` must be one of"):
        device_budget(tiny_config, 4, 8, dtype="float64")
    with pytest.raises(ValueError, match="`optimizer` must be one of"):
        device_budget(tiny_config, 4, 8, optimizer="adagrad")
    with pytest.raises(ValueError, match="lacks the keys"):
        device_budget({"num_layers": 2}, 4, 8)
