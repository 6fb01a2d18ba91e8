import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.layers import MemoryCache
from keras_txl.layers import RelativeMultiHeadAttention
from keras_txl.layers import RelativePositionEmbedding
from tests.layers.reference import reference_attention
from tests.test_case import dtype_name
from tests.test_case import run_layer_round_trip
from tests.test_case import to_numpy
from tests.test_case import variable_gradients


def _random_layer(same_length=False, clamp=None, seed=0):
    rng = np.random.default_rng(seed)
    d, n, h = 8, 2, 4
    layer = RelativeMultiHeadAttention(
        num_heads=n, head_dim=h, same_length=same_length
    )
    layer.build((None, None, d), (None, d))
    for var in layer.weights:
        var.assign(rng.normal(scale=0.5, size=var.shape).astype("float32"))
    return layer, RelativePositionEmbedding(d, clamp_length=clamp)


def _weights(layer):
    return dict(
        wq=to_numpy(layer.query_dense.kernel),
        wk=to_numpy(layer.key_dense.kernel),
        wv=to_numpy(layer.value_dense.kernel),
        wr=to_numpy(layer.position_dense.kernel),
        wo=to_numpy(layer.output_dense.kernel),
        u=to_numpy(layer.content_bias),
        v=to_numpy(layer.position_bias),
    )


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "T, M, valid, same_length, clamp",
    [
        (4, 0, [0, 0], False, None),
        (3, 5, [5, 2], False, None),
        (4, 3, [0, 3], True, None),
        (3, 6, [6, 1], True, 2),
        (5, 2, [2, 2], False, 3),
    ],
)
def test_matches_loop_by_loop_definition(T, M, valid, same_length, clamp):
    layer, position = _random_layer(same_length, clamp)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, T, 8)).astype("float32")
    memory = rng.normal(size=(2, M, 8)).astype("float32")
    valid = np.array(valid, "int32")
    r = position(x, memory)
    out = to_numpy(layer(x, r, memory=memory, memory_valid_length=valid))
    expected = reference_attention(
        x,
        memory,
        valid,
        **_weights(layer),
        same_length=same_length,
        clamp=clamp,
    )
    np.testing.assert_allclose(out, expected, atol=2e-4, rtol=1e-4)


def test_empty_memory_slots_have_no_effect():
    # The shapes of test_matches_loop_by_loop_definition's second case
    # (T=3, M=5, batch 2): on JAX the two share each op's compilation.
    layer, position = _random_layer()
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3, 8)).astype("float32")
    memory = rng.normal(size=(2, 5, 8)).astype("float32")
    valid = np.array([2, 2], "int32")
    out = to_numpy(
        layer(x, position(x, memory), memory=memory, memory_valid_length=valid)
    )
    garbage = memory.copy()
    garbage[:, :3] = 1e4  # the three invalid slots
    out2 = to_numpy(
        layer(
            x, position(x, garbage), memory=garbage, memory_valid_length=valid
        )
    )
    np.testing.assert_allclose(out, out2, atol=1e-5)
    # ...and dropping them entirely gives the same numbers.
    short = memory[:, 3:]
    out3 = to_numpy(layer(x, position(x, short), memory=short))
    np.testing.assert_allclose(out, out3, atol=1e-5)


def test_probabilities_respect_masks_and_sum_to_one():
    layer, position = _random_layer(same_length=True)
    x = np.random.default_rng(3).normal(size=(2, 3, 8)).astype("float32")
    memory = np.zeros((2, 4, 8), "float32")
    valid = np.array([4, 1], "int32")
    _, probs = layer(
        x,
        position(x, memory),
        memory=memory,
        memory_valid_length=valid,
        return_attention_scores=True,
    )
    probs = to_numpy(probs)  # (batch, heads, T, K)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    M = 4
    for b in range(2):
        for i in range(3):
            for j in range(7):
                visible = M - valid[b] <= j <= M + i and j > i
                if not visible:
                    assert probs[b, :, i, j].max() == 0.0


def test_user_attention_mask_is_applied():
    layer, position = _random_layer()
    x = np.random.default_rng(4).normal(size=(1, 2, 8)).astype("float32")
    mask = np.array([[[True, False], [False, True]]])
    _, probs = layer(
        x, position(x), attention_mask=mask, return_attention_scores=True
    )
    np.testing.assert_allclose(to_numpy(probs)[0, :, 1], [[0, 1], [0, 1]])


def test_position_rows_must_match_keys():
    layer, position = _random_layer()
    x = np.zeros((1, 3, 8), "float32")
    with pytest.raises(ValueError, match="one row per key"):
        layer(x, position(x, np.zeros((1, 2, 8), "float32")))


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "memory, valid, match",
    [
        (np.zeros((2, 4, 6), "float32"), None, "width of the query, 8"),
        (np.zeros((3, 4, 8), "float32"), None, "batch size of the query, 2"),
        (np.zeros((2, 4), "float32"), None, r"shape `\(batch, M, dim\)`"),
        (np.zeros((2, 4, 8), "int32"), None, "floating-point.*int32"),
        (np.zeros((2, 4, 8), "float32"), np.array([1.0, 2.0]), "integers"),
        (
            np.zeros((2, 4, 8), "float32"),
            np.array([5, 2]),
            r"memory_valid_length` must lie in \[0, M\] = \[0, 4\].*\[5, 2\]",
        ),
        (np.zeros((2, 4, 8), "float32"), [1, -1], r"lie in \[0, M\]"),
        (np.zeros((2, 4, 8), "float32"), np.array([1]), r"shape `\(batch,\)`"),
    ],
)
def test_a_memory_that_does_not_fit_is_named(memory, valid, match):
    """A memory of the wrong width, batch, rank or dtype, and valid
    lengths that are not integers, not one per row or above the memory's
    length, raise an error that names the argument, not a backend's
    error or a silent result."""
    layer, position = _random_layer()
    x = np.zeros((2, 3, 8), "float32")
    rows = np.zeros((7, 8), "float32")  # M + T positions
    with pytest.raises(ValueError, match=match):
        layer(
            x,
            rows,
            memory=memory,
            memory_valid_length=valid,
        )
    # The same call with a memory that fits runs.
    fits = np.zeros((2, 4, 8), "float32")
    out = layer(x, rows, memory=fits, memory_valid_length=np.array([4, 0]))
    assert tuple(out.shape) == (2, 3, 8)


def test_key_values_that_do_not_fit_are_named():
    """The generation path (`key_values` in place of `memory`) checks its
    keys' width and batch and the valid lengths against their `M`."""
    layer, _ = _random_layer()
    x = np.zeros((2, 3, 8), "float32")
    keys = np.zeros((2, 7, 16), "float32")  # M + T = 7, 2 * heads * hd
    position_keys = layer.position_keys(np.zeros((7, 8), "float32"))
    call = dict(position_keys=position_keys)
    with pytest.raises(ValueError, match=r"`key_values` must have shape"):
        layer(x, key_values=keys[..., :12], **call)
    with pytest.raises(ValueError, match=r"`key_values` must have shape"):
        layer(x, key_values=keys[:1], **call)
    with pytest.raises(ValueError, match=r"\[0, M\] = \[0, 4\]"):
        layer(x, key_values=keys, memory_valid_length=[4, 5], **call)
    out = layer(x, key_values=keys, memory_valid_length=[4, 0], **call)
    assert tuple(out.shape) == (2, 3, 8)


def test_valid_lengths_are_not_read_when_traced():
    """Under a compiled call the valid lengths' values are traced: the
    layer checks their dtype and shape, and reads no value (no host
    sync), so a compiled call runs."""
    layer, _ = _random_layer()
    x = np.zeros((2, 3, 8), "float32")
    memory = np.zeros((2, 4, 8), "float32")
    rows = np.zeros((7, 8), "float32")
    inputs = [keras.Input((3, 8), batch_size=2)]
    inputs.append(keras.Input((4, 8), batch_size=2))
    inputs.append(keras.Input((), batch_size=2, dtype="int32"))
    out = layer(
        inputs[0], rows, memory=inputs[1], memory_valid_length=inputs[2]
    )
    model = keras.Model(inputs, out)
    compiled = model.predict_on_batch([x, memory, np.array([4, 1], "int32")])
    eager = layer(x, rows, memory=memory, memory_valid_length=[4, 1])
    np.testing.assert_allclose(compiled, to_numpy(eager), atol=1e-6)
    with pytest.raises(ValueError, match="integers"):
        layer(
            inputs[0],
            rows,
            memory=inputs[1],
            memory_valid_length=inputs[2] * 1.0,
        )


class MemoryInVariablesLM(keras.Model):
    """A user's language model that keeps its memory and the memory's
    valid length in non-trainable variables (the `stateful=True` habit
    of Keras RNNs): `call` reads both from the variables, passes them to
    the attention and assigns the next ones; `call_with_memory` takes
    and returns them explicitly."""

    def __init__(self, batch_size, vocabulary_size=11, memory_length=4):
        super().__init__()
        self.embedding = keras.layers.Embedding(vocabulary_size, 8)
        self.position = RelativePositionEmbedding(8)
        self.attention = RelativeMultiHeadAttention(num_heads=2, head_dim=4)
        self.head = keras.layers.Dense(vocabulary_size)
        self.cache = MemoryCache()
        self.memory = self.add_weight(
            (batch_size, memory_length, 8), "zeros", trainable=False
        )
        self.valid_length = self.add_weight(
            (batch_size,), "zeros", trainable=False, dtype="int32"
        )

    def call_with_memory(self, token_ids, memory, valid_length):
        x = self.embedding(token_ids)  # (batch, T, 8)
        attended = self.attention(
            x,
            self.position(x, memory),
            memory=memory,
            memory_valid_length=valid_length,
        )  # (batch, T, 8)
        memory, valid_length = self.cache(memory, valid_length, x)
        return self.head(x + attended), memory, valid_length

    def call(self, token_ids):
        # torch: a copy of the memory, which is assigned after use.
        logits, memory, valid_length = self.call_with_memory(
            token_ids, ops.copy(self.memory.value), self.valid_length.value
        )
        self.memory.assign(memory)
        self.valid_length.assign(valid_length)
        return logits


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "jit_compile",
    [False, True] if keras.config.backend() == "tensorflow" else ["auto"],
)
def test_fit_of_a_user_model_with_its_memory_in_variables(jit_compile):
    """Inside `fit` the valid length read from a variable is traced (a
    `tf.Variable` under TensorFlow) and is not read; `fit` then equals
    stepping the same model with `call_with_memory` and the same
    optimizer: the same losses, weights and memory after four batches
    whose valid lengths go 0, 3, 4, 4. Eagerly, a valid length held in
    a variable is still checked."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 11, (8, 3)).astype("int32")  # 4 batches of 2
    labels = np.roll(tokens, -1, axis=1)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model, stepped = MemoryInVariablesLM(2), MemoryInVariablesLM(2)
    empty = (np.zeros((2, 4, 8), "float32"), np.zeros((2,), "int32"))
    for lm in (model, stepped):
        lm.call_with_memory(tokens[:2], *empty)  # builds the layers
    stepped.set_weights(model.get_weights())
    model.compile(keras.optimizers.SGD(0.5), loss=loss, jit_compile=jit_compile)
    means = []
    model.fit(
        tokens,
        labels,
        batch_size=2,
        shuffle=False,
        verbose=0,
        callbacks=[
            keras.callbacks.LambdaCallback(
                on_train_batch_end=lambda _, logs: means.append(logs["loss"])
            )
        ],
    )

    optimizer, memory, losses = keras.optimizers.SGD(0.5), empty, []
    for start in range(0, 8, 2):
        x, y = tokens[start : start + 2], labels[start : start + 2]

        def batch_loss(x=x, y=y, memory=memory):
            return loss(y, stepped.call_with_memory(x, *memory)[0])

        grads = variable_gradients(batch_loss, stepped.trainable_variables)
        logits, *memory = stepped.call_with_memory(x, *memory)
        losses.append(float(to_numpy(loss(y, logits))))
        optimizer.apply(
            [ops.convert_to_tensor(g) for g in grads],
            stepped.trainable_variables,
        )
    # `fit` logs the running mean of the batches' losses.
    running = np.cumsum(losses) / np.arange(1, 5)
    np.testing.assert_allclose(means, running, rtol=1e-5)
    for got, want in zip(model.trainable_weights, stepped.trainable_weights):
        np.testing.assert_allclose(to_numpy(got), to_numpy(want), atol=1e-6)
    np.testing.assert_array_equal(to_numpy(model.valid_length), [4, 4])
    np.testing.assert_allclose(
        to_numpy(model.memory), to_numpy(memory[0]), atol=1e-6
    )

    # Eagerly, the valid length read from the variable and the variable
    # itself are checked.
    model.valid_length.assign([5, 0])
    match = r"\[0, M\] = \[0, 4\].*\[5, 0\]"
    with pytest.raises(ValueError, match=match):
        model(tokens[:2])
    x, rows = np.zeros((2, 3, 8), "float32"), np.zeros((7, 8), "float32")
    with pytest.raises(ValueError, match=match):
        model.attention(
            x, rows, memory=empty[0], memory_valid_length=model.valid_length
        )


def test_mixed_float16_stays_finite_with_large_scores():
    keras.config.set_dtype_policy("mixed_float16")
    layer, position = _random_layer()
    x = np.random.default_rng(5).normal(size=(1, 4, 8)).astype("float32")
    memory = np.zeros((1, 3, 8), "float32")
    out = layer(
        x * 30,
        position(x, memory),
        memory=memory,
        memory_valid_length=np.array([0], "int32"),
    )
    assert dtype_name(out) == "float16"
    assert np.all(np.isfinite(to_numpy(out).astype("float32")))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_heads": 0, "head_dim": 4}, "num_heads"),
        ({"num_heads": 2, "head_dim": -1}, "head_dim"),
        ({"num_heads": 2, "head_dim": 4, "dropout": 1.0}, "dropout"),
        ({"num_heads": 2, "head_dim": 4, "same_length": "yes"}, "same_length"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RelativeMultiHeadAttention(**kwargs)


def test_round_trip():
    run_layer_round_trip(
        RelativeMultiHeadAttention,
        {"num_heads": 2, "head_dim": 4, "dropout": 0.1, "same_length": True},
        [
            np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32"),
            np.random.default_rng(1).normal(size=(3, 8)).astype("float32"),
        ],
        mixed_precision=True,
    )


@pytest.mark.torch_ok
@pytest.mark.parametrize("T, M", [(4, 6), (5, 3), (3, 3)])
def test_tensorflow_same_length_mask(T, M):
    """`same_length="tensorflow"` is the mask of `_create_mask` in the
    authors' `tf/model.py` (masked: keys after the query, and keys j < i
    among the first T), one key more per row than the PyTorch mask."""
    from keras_txl.layers.relative_multi_head_attention import attention_allowed

    i, j = np.arange(T)[:, None], np.arange(M + T)[None, :]
    masked = j > i + M
    masked |= (j < T) & (j < i)
    tensorflow = to_numpy(
        attention_allowed(T, M + T, None, None, True, "tensorflow")
    )[0]
    np.testing.assert_array_equal(tensorflow, ~masked)
    pytorch = to_numpy(attention_allowed(T, M + T, None, None, True, True))[0]
    np.testing.assert_array_equal(tensorflow.sum(-1), pytorch.sum(-1) + 1)
    assert RelativeMultiHeadAttention(2, 4, same_length="pytorch").same_length
    layer = RelativeMultiHeadAttention(2, 4, same_length="tensorflow")
    assert layer.get_config()["same_length"] == "tensorflow"
    with pytest.raises(ValueError, match="same_length.*tensorflow"):
        RelativeMultiHeadAttention(2, 4, same_length="tf")


@pytest.mark.torch_ok
@pytest.mark.parametrize("same_length", [False, True, "tensorflow"])
def test_cached_key_values_and_position_keys_give_the_same_output(
    same_length,
):
    # Generation's caches: the keys and values of the memory and the
    # segment, and the projected position embeddings, computed outside
    # the call.
    layer, embed = _random_layer(same_length=same_length)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 8)).astype("float32")
    memory = rng.normal(size=(2, 5, 8)).astype("float32")
    valid = np.array([5, 2], "int32")
    position = embed(x, memory)  # (8, 8)
    expected = layer(x, position, memory=memory, memory_valid_length=valid)
    key_values = layer.key_values(np.concatenate([memory, x], axis=1))
    assert tuple(key_values.shape) == (2, 8, 2 * 2 * 4)
    position_keys = layer.position_keys(position)
    assert tuple(position_keys.shape) == (2, 4, 5 + 3 + 1)
    got = layer(
        x,
        None,
        memory_valid_length=valid,
        key_values=key_values,
        position_keys=position_keys,
    )
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), atol=1e-5)
    # Either cache alone as well.
    alone = layer(x, position, memory_valid_length=valid, key_values=key_values)
    np.testing.assert_allclose(to_numpy(alone), to_numpy(expected), atol=1e-5)
    with pytest.raises(ValueError, match="not both"):
        layer(x, position, memory=memory, key_values=key_values)
    with pytest.raises(ValueError, match="`position_keys` must have one"):
        layer(
            x,
            None,
            key_values=key_values,
            position_keys=layer.position_keys(position[:-1]),
        )


@pytest.mark.torch_ok
def test_projections_are_their_layers_calls():
    # A float projection is a 2-D matmul of the layer's kernel
    # (`_project`): the layer's call, LoRA's update included; a quantized
    # layer is called.
    layer, _ = _random_layer()
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 3, 8)).astype("float32")
    attended = rng.normal(size=(2, 3, 2, 4)).astype("float32")
    layer.query_dense.enable_lora(2)
    layer.query_dense.lora_kernel_b.assign(
        rng.normal(size=(2, 4)).astype("float32")
    )
    layer.value_dense.quantize("int8")
    for dense, inputs, rank in (
        (layer.query_dense, x, 1),
        (layer.key_dense, x, 1),
        (layer.value_dense, x, 1),
        (layer.output_dense, attended, 2),
    ):
        got = to_numpy(layer._project(dense, inputs, rank))
        np.testing.assert_allclose(
            got, to_numpy(dense(inputs)), atol=1e-5, err_msg=dense.name
        )
