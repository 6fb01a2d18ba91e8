"""The compressive memory (Rae et al., 2019) plumbed through the backbone
and the causal LM."""

import functools

import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.models import CompressiveTransformerXLBackbone
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from tests.models.test_transformer_xl_generation import greedy_by_steps
from tests.test_case import dtype_name
from tests.test_case import gradients
from tests.test_case import to_numpy
from tests.test_case import variable_gradients
from tests.tiny_models import COMPRESSIVE_LM
from tests.tiny_models import PLAIN_LM
from tests.tiny_models import tiny_lm

T = 4  # segment length


# The plain tests' tiny LM (memory_length=4), with Mc=3, c=2, conv.
_lm = functools.partial(tiny_lm, **COMPRESSIVE_LM)
_plain_lm = functools.partial(tiny_lm, **PLAIN_LM)


def _tokens(num_segments, batch=2, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 20, (batch, num_segments * T + 1)).astype("int32")
    return tokens


def _segments(tokens, count=None):
    if count is None:
        count = (tokens.shape[1] - 1) // T
    return [tokens[:, s * T : (s + 1) * T] for s in range(count)]


def _warm_memory(lm, num_segments=2):
    memory = None
    for segment in _segments(_tokens(num_segments, seed=9)):
        _, memory = lm.call_with_memory(segment, memory)
    return memory


@pytest.mark.torch_ok
def test_inputs_outputs_and_initial_memory_shapes():
    backbone = _lm().backbone
    assert sorted(backbone.input) == [
        "compressed_memory",
        "compressed_valid_length",
        "memory",
        "token_ids",
        "valid_length",
    ]
    memory = backbone.initial_memory(2)
    assert {k: tuple(v.shape) for k, v in memory.items()} == {
        "memory": (2, 2, 4, 8),
        "valid_length": (2,),
        "compressed_memory": (2, 2, 3, 8),
        "compressed_valid_length": (2,),
    }
    longer = backbone.initial_memory(2, 6, compressed_memory_length=5)
    assert tuple(longer["compressed_memory"].shape) == (2, 2, 5, 8)
    out = backbone(
        {"token_ids": ops.zeros((2, T), "int32"), **memory}
    )  # one segment
    assert tuple(out["sequence_output"].shape) == (2, T, 8)
    assert tuple(out["compressed_memory"].shape) == (2, 2, 3, 8)
    assert tuple(out["reconstruction_loss"].shape) == ()
    # The default backbone is unchanged.
    plain = _plain_lm().backbone
    assert sorted(plain.input) == ["memory", "token_ids", "valid_length"]
    assert sorted(plain.output) == ["memory", "sequence_output", "valid_length"]
    assert sorted(plain.initial_memory(2)) == ["memory", "valid_length"]


@pytest.mark.torch_ok
def test_equals_the_plain_model_until_something_is_compressed():
    """The Compressive Transformer has the paper's model's weights plus
    the compression's; with the same weights it computes the same as long
    as the compressed memory is empty, and differs once it holds states."""
    lm = _lm()
    plain = _plain_lm()
    source = {w.path: w for w in lm.backbone.weights}
    names = [w.path for w in plain.backbone.weights]
    assert sorted(set(source) - set(names)) == [
        "compressive_memory/bias",
        "compressive_memory/kernel",
    ]
    for weight in plain.backbone.weights:
        weight.assign(source[weight.path])
    plain.output_projection.output_bias.assign(lm.output_projection.output_bias)
    memory = plain_memory = None
    for s, segment in enumerate(_segments(_tokens(3))):
        logits, memory = lm.call_with_memory(segment, memory)
        expected, plain_memory = plain.call_with_memory(segment, plain_memory)
        held = to_numpy(memory["compressed_valid_length"])
        if s < 2:  # segment 1 is the first to evict (into memory for s=2)
            np.testing.assert_allclose(
                to_numpy(logits), to_numpy(expected), atol=1e-6
            )
    assert held.tolist() == [3, 3]
    assert np.abs(to_numpy(logits) - to_numpy(expected)).max() > 1e-4


@pytest.mark.torch_ok
def test_identity_compression_reconstructs_exactly():
    backbone = _lm(compression_rate=1, compression="mean").backbone
    memory = backbone.initial_memory(2)
    for segment in _segments(_tokens(3)):
        out = backbone({"token_ids": ops.convert_to_tensor(segment), **memory})
        memory = {key: out[key] for key in backbone.memory_spec.keys}
    assert to_numpy(memory["compressed_valid_length"]).tolist() == [3, 3]
    assert float(to_numpy(out["reconstruction_loss"])) == 0.0


def _nll(lm, tokens, memory):
    logits, _ = lm.call_with_memory(tokens[:, :-1], memory)
    logprobs = ops.log_softmax(logits, axis=-1)
    targets = ops.convert_to_tensor(tokens[:, 1:])
    picked = ops.take_along_axis(logprobs, targets[..., None], axis=-1)
    return -ops.mean(picked)


@pytest.mark.torch_ok
def test_gradients_flow_where_the_paper_says():
    lm = _lm()
    memory = _warm_memory(lm)
    tokens = _tokens(1, seed=1)
    compressive = lm.backbone.compressive_memory
    conv = [compressive.kernel, compressive.bias]
    others = [w for w in lm.trainable_weights if "compressive" not in w.path]

    def reconstruction():
        inputs = {"token_ids": ops.convert_to_tensor(tokens[:, :-1])}
        return lm.backbone({**inputs, **memory})["reconstruction_loss"]

    # The conv weights learn from the auxiliary loss, and only from it.
    grads = variable_gradients(reconstruction, conv + others)
    assert all(np.abs(g).max() > 0 for g in grads[:2])
    for grad in grads[2:]:
        np.testing.assert_array_equal(grad, 0.0)
    for grad in variable_gradients(lambda: _nll(lm, tokens, memory), conv):
        np.testing.assert_array_equal(grad, 0.0)
    # Nothing flows into the stored memories, which do change the loss.
    stored = [memory["memory"], memory["compressed_memory"]]

    def loss_of(states, compressed):
        return _nll(
            lm,
            tokens,
            {**memory, "memory": states, "compressed_memory": compressed},
        )

    for grad in gradients(loss_of, [to_numpy(t) for t in stored]):
        np.testing.assert_array_equal(grad, 0.0)
    zeroed = ops.zeros_like(memory["compressed_memory"])
    assert (
        abs(
            float(to_numpy(loss_of(memory["memory"], zeroed)))
            - float(to_numpy(loss_of(*stored)))
        )
        > 1e-5
    )


@pytest.mark.torch_ok
def test_carried_memory_matches_explicit_memory():
    lm = _lm()
    memory = None
    for segment in _segments(_tokens(4)):
        explicit, memory = lm.call_with_memory(segment, memory)
        carried = lm(segment)
        np.testing.assert_allclose(
            to_numpy(carried), to_numpy(explicit), atol=1e-5
        )
    state = lm.memory_state.read(2)
    for key in memory:
        np.testing.assert_allclose(
            to_numpy(state[key]), to_numpy(memory[key]), atol=1e-6
        )
    # A memory dict without the compressed keys (e.g. from code written for
    # the plain model) empties the compressed memory.
    plain_keys = ("memory", "valid_length")
    lm.memory_state.write({key: state[key] for key in plain_keys})
    state = lm.memory_state.read(2)
    assert to_numpy(state["compressed_valid_length"]).tolist() == [0, 0]
    np.testing.assert_array_equal(to_numpy(state["compressed_memory"]), 0.0)
    assert to_numpy(state["valid_length"]).tolist() == [4, 4]
    lm.reset_memory()
    state = lm.memory_state.read(2)
    assert to_numpy(state["valid_length"]).tolist() == [0, 0]


def test_fit_carries_the_compressed_memory_and_trains_the_conv():
    lm = _lm()
    lm.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    tokens = _tokens(4, batch=2)
    x = np.concatenate(_segments(tokens))  # ordered: batch i = segment i
    y = np.concatenate(_segments(tokens[:, 1:], count=4))
    kernel = to_numpy(lm.backbone.compressive_memory.kernel).copy()
    lm.build_memory(2)
    history = lm.fit(x, y, batch_size=2, shuffle=False, verbose=0)
    (loss,) = history.history["reconstruction_loss"]
    assert 0 < loss < np.inf
    moved = to_numpy(lm.backbone.compressive_memory.kernel) - kernel
    assert np.abs(moved).max() > 1e-4
    state = lm.memory_state.read(2)
    assert to_numpy(state["compressed_valid_length"]).tolist() == [3, 3]
    logs = lm.evaluate(x, y, batch_size=2, verbose=0, return_dict=True)
    assert logs["reconstruction_loss"] > 0


def test_save_and_load_give_the_same_logits(tmp_path):
    lm = _lm()
    memory = _warm_memory(lm)
    segment = _segments(_tokens(1, seed=3))[0]
    expected, expected_memory = lm.call_with_memory(segment, memory)
    path = str(tmp_path / "lm.keras")
    lm.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.get_config() == lm.get_config()
    assert loaded.backbone.compression == "conv"
    got, got_memory = loaded.call_with_memory(segment, memory)
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), atol=1e-6)
    np.testing.assert_allclose(
        to_numpy(got_memory["compressed_memory"]),
        to_numpy(expected_memory["compressed_memory"]),
        atol=1e-6,
    )


def test_mixed_bfloat16_keeps_the_memories_in_bfloat16():
    keras.config.set_dtype_policy("mixed_bfloat16")
    lm = _lm()
    memory = _warm_memory(lm, num_segments=1)  # full; the next evicts
    inputs = {"token_ids": ops.zeros((2, T), "int32"), **memory}
    out = lm.backbone(inputs)
    assert dtype_name(out["memory"]) == "bfloat16"
    assert dtype_name(out["compressed_memory"]) == "bfloat16"
    assert to_numpy(out["compressed_valid_length"]).tolist() == [2, 2]
    assert dtype_name(out["reconstruction_loss"]) == "float32"
    assert 0 < float(to_numpy(out["reconstruction_loss"])) < np.inf


@pytest.mark.parametrize(
    "overrides, name",
    [
        (dict(compression_rate=0), "compression_rate"),
        (dict(compressed_memory_length=0), "compressed_memory_length"),
        (dict(compression="sum"), "compression"),
    ],
)
def test_invalid_arguments_are_named(overrides, name):
    with pytest.raises(ValueError, match=name):
        _lm(**overrides)


def test_invalid_segments_and_memories_are_refused():
    lm = _lm()
    with pytest.raises(ValueError, match="compression_rate=2"):
        lm.call_with_memory(np.zeros((2, 3), "int32"))
    backbone = lm.backbone
    memory = backbone.initial_memory(2)
    with pytest.raises(ValueError, match="compressed_memory"):
        backbone.check_memory(
            {"memory": memory["memory"], "valid_length": memory["valid_length"]}
        )
    # A compressed memory that holds states while the memory is not full
    # is not one this backbone produced.
    memory["compressed_valid_length"] = np.array([1, 0], "int32")
    with pytest.raises(ValueError, match="memory is not full"):
        backbone.check_memory(memory, 2)


@pytest.mark.torch_ok
def test_generate_needs_compression_rate_one():
    prompt = {
        "token_ids": np.array([[5, 6, 7, 0, 0, 0]]),
        "padding_mask": np.array([[1, 1, 1, 0, 0, 0]], dtype=bool),
    }
    with pytest.raises(ValueError, match="compression_rate"):
        _lm().generate(prompt, stop_token_ids=None)
    lm = _lm(compression_rate=1)
    lm.compile(sampler="greedy")
    out = lm.generate(prompt, stop_token_ids=None, memory_length=2)
    # The tokens of a Python loop of single-token steps with a memory of
    # 2 (and its compressed memory), not just a shape.
    expected = greedy_by_steps(lm, [5, 6, 7], 6, memory_length=2)
    assert to_numpy(out["token_ids"])[0].tolist() == expected


@pytest.mark.parametrize("compressed_memory_length", [0, 3])
def test_configs_with_the_old_compressive_arguments_still_load(
    compressed_memory_length,
):
    """Presets and `.keras` files saved when `TransformerXLBackbone` took
    the compressive memory's arguments load as the model they described."""
    config = _lm().backbone.get_config()
    config["compressed_memory_length"] = compressed_memory_length
    backbone = TransformerXLBackbone.from_config(config)
    if compressed_memory_length:
        assert isinstance(backbone, CompressiveTransformerXLBackbone)
        assert backbone.get_config() == config
    else:
        assert type(backbone) is TransformerXLBackbone
        assert "compression" not in backbone.get_config()
    TransformerXLCausalLM(backbone)  # a working model
