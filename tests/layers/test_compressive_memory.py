import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.layers import CompressiveMemory
from keras_txl.layers import MemoryCache
from keras_txl.layers import RelativePositionEmbedding
from keras_txl.layers import TransformerXLBlock
from tests.test_case import gradients
from tests.test_case import run_layer_round_trip
from tests.test_case import to_numpy
from tests.test_case import variable_gradients


def _run(layer, segments, memory_length, compressed_length):
    """Feeds `segments` (list of (batch, L, T, dim) arrays) through a FIFO
    memory and `layer`; yields the state after each segment."""
    batch, num_layers, _, dim = segments[0].shape
    memory = np.zeros((batch, num_layers, memory_length, dim), "float32")
    valid = np.zeros((batch,), "int32")
    compressed = np.zeros(
        (batch, num_layers, compressed_length, dim), "float32"
    )
    compressed_valid = np.zeros((batch,), "int32")
    cache = MemoryCache()
    for states in segments:
        compressed, compressed_valid, loss = layer(
            memory, valid, states, compressed, compressed_valid
        )
        memory, valid = cache(memory, valid, states)
        compressed, compressed_valid, memory, valid = (
            to_numpy(t) for t in (compressed, compressed_valid, memory, valid)
        )
        yield memory, valid, compressed, compressed_valid, float(to_numpy(loss))


def _scalar_segments(num_segments, length):
    """Segment s holds the states s * length + 1, ..., (s + 1) * length,
    one layer, width 1."""
    ids = np.arange(1, num_segments * length + 1, dtype="float32")
    return [s.reshape(1, 1, length, 1) for s in np.split(ids, num_segments)]


@pytest.mark.torch_ok
def test_fifo_order_of_compressed_slots_with_mean_pooling():
    layer = CompressiveMemory(compression_rate=2, compressed_memory_length=3)
    steps = list(_run(layer, _scalar_segments(4, 4), 4, 3))
    # Segment 0 fills the empty memory: nothing is evicted.
    assert steps[0][3].tolist() == [0]
    # Segment 1 evicts states 1..4: groups (1, 2) and (3, 4).
    _, _, compressed, valid, _ = steps[1]
    assert valid.tolist() == [2]
    np.testing.assert_allclose(compressed[0, 0, 1:, 0], [1.5, 3.5])
    # Segment 2 evicts 5..8: the oldest slot falls out of Mc = 3.
    _, _, compressed, valid, _ = steps[2]
    assert valid.tolist() == [3]
    np.testing.assert_allclose(compressed[0, 0, :, 0], [3.5, 5.5, 7.5])
    _, _, compressed, valid, _ = steps[3]
    np.testing.assert_allclose(compressed[0, 0, :, 0], [7.5, 9.5, 11.5])


@pytest.mark.torch_ok
def test_warm_up_drops_the_partial_group():
    # M = 5, T = 4: segment 1 evicts one empty slot and states 1, 2, 3.
    # The group (empty, 1) is not fully valid and is dropped; (2, 3) is
    # kept. Garbage in the empty memory slot changes nothing.
    layer = CompressiveMemory(compression_rate=2, compressed_memory_length=3)
    steps = list(_run(layer, _scalar_segments(3, 4), 5, 3))
    _, valid, compressed, compressed_valid, _ = steps[1]
    assert valid.tolist() == [5]
    assert compressed_valid.tolist() == [1]
    np.testing.assert_allclose(compressed[0, 0, -1, 0], 2.5)
    _, _, compressed, compressed_valid, _ = steps[2]
    assert compressed_valid.tolist() == [3]
    np.testing.assert_allclose(compressed[0, 0, :, 0], [2.5, 4.5, 6.5])

    memory = np.zeros((1, 1, 5, 1), "float32")
    memory[0, 0, 0, 0] = 1e6  # an invalid slot
    memory[0, 0, 1:, 0] = [1, 2, 3, 4]
    args = (
        np.array([4], "int32"),
        _scalar_segments(2, 4)[1],
        np.zeros((1, 1, 3, 1), "float32"),
        np.zeros((1,), "int32"),
    )
    new, new_valid, loss = layer(memory, *args)
    clean, _, clean_loss = layer(memory * (memory < 1e6), *args)
    assert to_numpy(new_valid).tolist() == [1]
    np.testing.assert_allclose(
        to_numpy(new)[0, 0, -1], to_numpy(clean)[0, 0, -1]
    )
    np.testing.assert_allclose(to_numpy(loss), to_numpy(clean_loss))


def _reference_memories(segments, memory_length, rate, compressed_length):
    """The paper's memories as growing Python lists: evicted states are
    grouped from the end of each evicted block (the layout's alignment),
    a leading partial group is dropped."""
    memory, compressed = [], []
    for states in segments:
        joined = memory + list(states)
        old = joined[: max(0, len(joined) - memory_length)]
        memory = joined[len(old) :]
        old = old[len(old) % rate :]
        groups = [np.mean(old[i : i + rate]) for i in range(0, len(old), rate)]
        compressed = compressed + groups
        compressed = compressed[max(0, len(compressed) - compressed_length) :]
        yield memory, compressed


@pytest.mark.parametrize(
    "memory_length, T, rate, compressed_length",
    [(4, 4, 2, 3), (5, 4, 2, 3), (3, 4, 4, 2), (0, 2, 2, 2), (7, 6, 3, 4)],
)
def test_memories_match_growing_lists_and_join_valid_slots_last(
    memory_length, T, rate, compressed_length
):
    """Against lists that grow like the authors' `mems`: the valid slots of
    both memories hold the same states, and `concat(compressed, memory)`
    has exactly `compressed_valid + valid` valid slots, the last ones."""
    segments = _scalar_segments(6, T)
    layer = CompressiveMemory(rate, compressed_length)
    reference = _reference_memories(
        [s.ravel().tolist() for s in segments],
        memory_length,
        rate,
        compressed_length,
    )
    held = _run(layer, segments, memory_length, compressed_length)
    for (memory, valid, compressed, cvalid, _), (ref_m, ref_c) in zip(
        held, reference
    ):
        assert valid.tolist() == [len(ref_m)]
        assert cvalid.tolist() == [len(ref_c)]
        if cvalid[0]:  # the contiguity claim
            assert valid[0] == memory_length
        joined = np.concatenate([compressed, memory], axis=2)[0, 0, :, 0]
        count = int(cvalid[0] + valid[0])
        np.testing.assert_allclose(
            joined[joined.shape[0] - count :], ref_c + ref_m
        )


def _block(pre_norm=False):
    block = TransformerXLBlock(
        num_heads=2,
        head_dim=4,
        intermediate_dim=8,
        pre_norm=pre_norm,
        kernel_initializer=keras.initializers.RandomNormal(stddev=0.5),
        bias_initializer=keras.initializers.RandomNormal(stddev=0.5),
    )
    x = np.zeros((2, 4, 6), "float32")
    block(x, RelativePositionEmbedding(6)(x, x), memory=x)
    return block


def _full_step_inputs(T=4, dim=6, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(2, 1, 4, dim)).astype("float32"),  # a full memory
        np.array([4, 4], "int32"),
        rng.normal(size=(2, 1, T, dim)).astype("float32"),
        np.zeros((2, 1, 3, dim), "float32"),
        np.zeros((2,), "int32"),
    )


@pytest.mark.torch_ok
@pytest.mark.parametrize("pre_norm", [False, True, None])
def test_identity_compression_has_zero_reconstruction_loss(pre_norm):
    identity = CompressiveMemory(1, 3, "mean")
    pooled = CompressiveMemory(2, 3, "mean")
    if pre_norm is not None:  # None: attention without projections
        block = _block(pre_norm)
        identity.use_attention_of([block])
        pooled.use_attention_of([block])
    inputs = _full_step_inputs()
    assert float(to_numpy(identity(*inputs)[2])) == 0.0
    assert float(to_numpy(pooled(*inputs)[2])) > 1e-4


@pytest.mark.torch_ok
def test_conv_learns_from_the_reconstruction_loss_only():
    layer = CompressiveMemory(2, 3, "conv", reconstruction_loss_weight=0.5)
    block = _block()
    layer.use_attention_of([block])
    inputs = _full_step_inputs()
    layer(*inputs)
    # Initialized to mean pooling.
    mean = CompressiveMemory(2, 3, "mean")
    np.testing.assert_allclose(
        to_numpy(layer(*inputs)[0]), to_numpy(mean(*inputs)[0]), atol=1e-6
    )
    weights = [layer.kernel, layer.bias]

    def reconstruction_loss():
        return layer(*inputs)[2]

    grads = variable_gradients(reconstruction_loss, weights)
    assert all(np.abs(g).max() > 1e-6 for g in grads)

    # The stored compressed memory carries no gradient to the weights (the
    # zero term keeps torch's autograd from refusing a constant) ...
    def stored():
        held = ops.sum(ops.square(layer(*inputs)[0]))
        return held + 0.0 * sum(ops.sum(w) for w in weights)

    grads = variable_gradients(stored, weights)
    assert all(np.abs(g).max() == 0.0 for g in grads)
    # ... nor the loss to the attention's weights or to the states.
    grads = variable_gradients(reconstruction_loss, block.trainable_weights)
    assert all(np.abs(g).max() == 0.0 for g in grads)

    def loss_of(memory, states):
        return layer(memory, inputs[1], states, *inputs[3:])[2]

    for grad in gradients(loss_of, [inputs[0], inputs[2]]):
        np.testing.assert_array_equal(grad, 0.0)
    # The weighted loss is added in training only.
    layer(*inputs, training=True)
    assert len(layer.losses) == 1
    np.testing.assert_allclose(
        to_numpy(layer.losses[0]), 0.5 * to_numpy(layer(*inputs)[2]), rtol=1e-6
    )
    layer(*inputs, training=False)
    assert layer.losses == []


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(compression_rate=0), "compression_rate"),
        (dict(compressed_memory_length=-1), "compressed_memory_length"),
        (dict(compression="avg"), "compression"),
        (dict(reconstruction_loss_weight=-1.0), "reconstruction_loss_weight"),
    ],
)
def test_invalid_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        CompressiveMemory(**kwargs)


def test_segment_length_must_be_a_multiple_of_the_rate():
    layer = CompressiveMemory(compression_rate=3)
    with pytest.raises(ValueError, match="compression_rate=3"):
        layer(*_full_step_inputs(T=4))


@pytest.mark.parametrize("compression", ["max", "conv"])
def test_round_trip(compression):
    run_layer_round_trip(
        CompressiveMemory,
        dict(
            compression_rate=2,
            compressed_memory_length=3,
            compression=compression,
            reconstruction_loss_weight=1.0,
        ),
        list(_full_step_inputs()),
        mixed_precision=compression == "max",
    )
