"""Strategy names, device setup, and the one-device strategy, in this
process (the multi-device runs are in `test_two_devices.py`)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_txl import distribute
from keras_txl.distribute.replica_strategy import static_batch_size
from keras_txl.distribute.strategies import STRATEGY_BACKENDS
from keras_txl.distribute.strategies import STRATEGY_NAMES
from keras_txl.distribute.strategies import check_strategy_name
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM

BACKEND = keras.backend.backend()


@pytest.fixture
def tiny_lm(tiny_config):
    """Makes a tiny causal LM (call it in the strategy's scope)."""
    return lambda: TransformerXLCausalLM(TransformerXLBackbone(**tiny_config))


def segments(batch=4, steps=3, length=5):
    tokens = np.arange(batch * (steps * length + 1)) % 20
    tokens = tokens.reshape(batch, -1).astype("int32")
    inputs = np.stack(
        [tokens[:, s * length : (s + 1) * length] for s in range(steps)]
    )
    targets = np.stack(
        [tokens[:, s * length + 1 : (s + 1) * length + 1] for s in range(steps)]
    )
    return tf.data.Dataset.from_tensor_slices((inputs, targets))


def test_strategy_names():
    assert STRATEGY_NAMES == (
        "none",
        "mirrored",
        "multiworker",
        "tpu",
        "jax-data-parallel",
    )


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_strategy_of_another_backend_fails_before_anything(name):
    wanted = STRATEGY_BACKENDS[name]
    if wanted in (None, BACKEND):
        assert check_strategy_name(name) == name
        return
    for call in (
        lambda: check_strategy_name(name),
        lambda: distribute.configure_devices(name, 2),
        lambda: distribute.make_strategy(name, 2),
    ):
        with pytest.raises(ValueError, match=f"runs on the {wanted} backend"):
            call()


def test_unknown_strategy_names_the_choices():
    with pytest.raises(ValueError, match="jax-data-parallel"):
        distribute.make_strategy("horovod")


def test_no_strategy_is_one_replica_of_the_whole_batch():
    strategy = distribute.make_strategy("none")
    assert strategy.num_replicas == 1
    assert strategy.per_replica_batch_size(6) == 6
    assert strategy.memory_batch_size(6) == 6
    with pytest.raises(ValueError, match="trains on one device"):
        distribute.configure_devices("none", 2)


def test_build_memory_refuses_another_batch_size(tiny_lm):
    strategy = distribute.make_strategy("none")
    lm = tiny_lm()
    lm.build_memory(3)
    with pytest.raises(ValueError, match="already exists for batch size 3"):
        strategy.build_memory(lm, 4)


def test_replica_memory_needs_a_built_memory(tiny_lm):
    with pytest.raises(ValueError, match="build_memory"):
        distribute.make_strategy("none").replica_memory(tiny_lm())


def test_static_batch_size():
    assert static_batch_size(segments(batch=3)) == 3
    with pytest.raises(ValueError, match="drop_remainder=True"):
        static_batch_size(segments().unbatch().batch(2))
    with pytest.raises(ValueError, match="tf.data.Dataset"):
        static_batch_size(np.zeros((2, 3)))


def test_distribute_dataset_keeps_the_batches():
    strategy = distribute.make_strategy("none")
    data = strategy.distribute_dataset(segments())
    for got, want in zip(data, segments()):
        np.testing.assert_array_equal(got[0], want[0])


def test_configure_devices_after_the_engine_started_says_so():
    name = "mirrored" if BACKEND == "tensorflow" else "jax-data-parallel"
    keras.ops.convert_to_numpy(keras.ops.zeros((1,)))  # the engine runs
    if BACKEND == "tensorflow":
        available = len(tf.config.list_logical_devices("CPU"))
    else:
        import jax

        available = len(jax.local_devices())
    with pytest.raises(RuntimeError, match="before"):
        distribute.configure_devices(name, available + 1)


def test_layout_map_shards_the_carried_memory_along_the_batch():
    devices = keras.distribution.list_devices()[:1]
    mesh = keras.distribution.DeviceMesh((1, 1), ("data", "model"), devices)
    layouts = TransformerXLBackbone.get_layout_map(
        mesh, data_parallel_dim_name="data"
    )
    path = "transformer_xl_causal_lm/memory_state/memory"
    assert layouts[path].axes == ("data", None, None, None)
    assert layouts["memory_state/valid_length"].axes == ("data",)
    with pytest.raises(ValueError, match="not an axis"):
        TransformerXLBackbone.get_layout_map(mesh, "heads")


def test_memory_state_follows_a_jax_distribution_in_this_process(tiny_lm):
    """Under a `keras.distribution` (JAX) the memory takes the layout of
    a data batch; elsewhere (or without one) it has no layout."""
    devices = keras.distribution.list_devices()[:1]
    distribution = keras.distribution.DataParallel(devices=devices)
    with distribution.scope():
        lm = tiny_lm()
        lm.build_memory(2)
    layout = lm.memory_state.memory._layout
    if BACKEND == "jax":
        assert layout.axes == ("batch", None, None, None)
        assert lm.memory_state.valid_length._layout.axes == ("batch",)
    else:
        assert layout is None
    strategy = distribute.ReplicaStrategy.for_distribution(distribution)
    assert strategy.num_replicas == 1
