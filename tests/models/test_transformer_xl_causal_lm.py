import functools
import warnings

import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.models import TransformerXLCausalLM
from tests.test_case import dtype_name
from tests.test_case import gradients
from tests.test_case import to_numpy
from tests.test_case import variable_gradients
from tests.tiny_models import COMPRESSIVE_LM
from tests.tiny_models import PLAIN_LM
from tests.tiny_models import SEGMENT_LENGTHS
from tests.tiny_models import SegmentLengthsBackbone
from tests.tiny_models import tiny_lm

_lm = functools.partial(tiny_lm, **PLAIN_LM)


def _nll(lm, tokens, targets, memory):
    logits, _ = lm.call_with_memory(tokens, memory)
    logprobs = ops.log_softmax(logits, axis=-1)
    picked = ops.take_along_axis(logprobs, targets[..., None], axis=-1)
    return -ops.mean(picked)


@pytest.mark.torch_ok
def test_gradient_into_the_memory_is_exactly_zero():
    lm = _lm()
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 20, (2, 3)).astype("int32")
    targets = rng.integers(0, 20, (2, 3)).astype("int32")
    _, memory = lm.call_with_memory(rng.integers(0, 20, (2, 4)))
    valid = memory["valid_length"]

    def loss(memory_states):
        return _nll(
            lm,
            tokens,
            ops.convert_to_tensor(targets),
            {"memory": memory_states, "valid_length": valid},
        )

    (grad,) = gradients(loss, [to_numpy(memory["memory"])])
    assert grad.shape == (2, 2, 4, 8)
    np.testing.assert_array_equal(grad, 0.0)
    # ... while the memory does change the loss (so the zero is the
    # stop-gradient, not a disconnected input).
    empty = lm.backbone.initial_memory(2)
    assert (
        abs(
            float(to_numpy(loss(memory["memory"])))
            - float(
                to_numpy(
                    _nll(lm, tokens, ops.convert_to_tensor(targets), empty)
                )
            )
        )
        > 1e-4
    )


@pytest.mark.torch_ok
def test_gradients_reach_u_and_v_of_every_layer():
    lm = _lm()
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 20, (2, 3)).astype("int32")
    targets = ops.convert_to_tensor(rng.integers(0, 20, (2, 3)).astype("int32"))
    _, memory = lm.call_with_memory(rng.integers(0, 20, (2, 4)))
    biases = []
    for block in lm.backbone.transformer_layers:
        biases += [block.attention.content_bias, block.attention.position_bias]
    grads = variable_gradients(
        lambda: _nll(lm, tokens, targets, memory), biases
    )
    for var, grad in zip(biases, grads):
        assert np.abs(grad).max() > 1e-6, var.path


@pytest.mark.torch_ok
def test_every_weight_is_tracked_and_trainable():
    lm = _lm(tie_weights=False)
    backbone_count = len(lm.backbone.trainable_weights)
    assert backbone_count > 0
    # The output kernel and bias, on top of the backbone's.
    assert len(lm.trainable_weights) == backbone_count + 2
    # The carried memory is state, not a parameter.
    assert all("memory" not in w.path for w in lm.trainable_weights)


@pytest.mark.parametrize(
    "sizes", [{}, {"cutoffs": [5, 10], "div_val": 2}], ids=["plain", "adaptive"]
)
def test_no_two_weights_start_equal(sizes):
    # One initializer argument, one draw per weight: the query, key and
    # value kernels, the layers, the clusters are not copies of each other.
    lm = tiny_lm(tie_weights=False, build=True, **sizes)
    drawn = [
        (w.path, to_numpy(w).ravel())
        for w in lm.weights
        if np.ptp(to_numpy(w)) > 0  # not a constant start (zeros, ones)
    ]
    # q, k, v, position, output, two feed-forward kernels per layer.
    assert len(drawn) >= 7 * len(lm.backbone.transformer_layers)
    # One seed gives weights of any shape the same first values (JAX's
    # and TensorFlow's counter-based generators): the adaptive clusters'
    # kernels and projections, of other shapes each, start so.
    same_seed = [
        (a, b)
        for i, (a, x) in enumerate(drawn)
        for b, y in drawn[i + 1 :]
        if np.array_equal(x[:4], y[:4])
    ]
    assert not same_seed, same_seed


@pytest.mark.parametrize("tie_weights", [True, False])
def test_every_weight_exists_once_constructed(tmp_path, tie_weights):
    """As keras-hub's tasks: no call is needed before `count_params`,
    `load_weights` or `set_weights` (a new task used to lack its output
    bias until its first call)."""
    trained = _lm(tie_weights=tie_weights)
    tokens = np.random.default_rng(3).integers(0, 20, (2, 5))
    expected, _ = trained.call_with_memory(tokens)
    path = str(tmp_path / "lm.weights.h5")
    trained.save_weights(path)
    for load in ("load_weights", "set_weights"):
        fresh = TransformerXLCausalLM(
            tiny_lm(seed=1, **PLAIN_LM).backbone, tie_weights=tie_weights
        )
        assert fresh.built
        assert fresh.count_params() == trained.count_params()
        if load == "load_weights":
            fresh.load_weights(path)
        else:
            fresh.set_weights(trained.get_weights())
        got, _ = fresh.call_with_memory(tokens)
        np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))


@pytest.mark.parametrize("tie_weights", [True, False])
def test_save_and_load_give_the_same_logits(tmp_path, tie_weights):
    lm = _lm(tie_weights=tie_weights)
    # The shape of test_every_weight_exists_once_constructed's tokens: on
    # JAX the two share each eager op's compilation.
    tokens = np.random.default_rng(2).integers(0, 20, (2, 5))
    expected, _ = lm.call_with_memory(tokens)
    path = str(tmp_path / "lm.keras")
    lm.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.get_config() == lm.get_config()
    got, _ = loaded.call_with_memory(tokens)
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), atol=1e-6)


def _load_silently(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = keras.saving.load_model(path, safe_mode=True)
    messages = [str(w.message) for w in caught]
    assert not [
        m
        for m in messages
        if "Skipping variable loading" in m or "not yet built" in m
    ], messages
    return loaded


@pytest.mark.torch_ok
def test_loading_a_compiled_never_trained_model_is_silent(tmp_path):
    # Its saved optimizer has only its 2 scalars, no slots.
    lm = _lm()
    lm.compile()
    lm.save(tmp_path / "lm.keras")
    loaded = _load_silently(tmp_path / "lm.keras")
    assert int(to_numpy(loaded.optimizer.iterations)) == 0


@pytest.mark.torch_ok
def test_loading_a_compiled_model_restores_the_optimizer(tmp_path):
    lm = _lm()
    lm.compile()
    tokens = np.random.default_rng(5).integers(0, 20, (2, 5)).astype("int32")
    lm.fit(tokens, tokens, batch_size=2, epochs=2, verbose=0)
    path = str(tmp_path / "lm.keras")
    lm.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "compile() was not called"
        loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.compiled
    assert loaded.optimizer.global_clipnorm == 0.25
    assert int(to_numpy(loaded.optimizer.iterations)) == 2
    saved = lm.optimizer.variables
    assert len(loaded.optimizer.variables) == len(saved)
    for got, expected in zip(loaded.optimizer.variables, saved):
        np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))


def test_tied_output_uses_the_embedding():
    lm = _lm(tie_weights=True)
    hidden = np.random.default_rng(3).normal(size=(1, 2, 8)).astype("float32")
    table = to_numpy(lm.backbone.token_embedding.embeddings)
    bias = to_numpy(lm.output_projection.output_bias)
    np.testing.assert_allclose(
        to_numpy(lm.compute_logits(hidden)), hidden @ table.T + bias, atol=1e-5
    )


@pytest.mark.torch_ok
def test_carried_memory_matches_explicit_memory():
    lm = _lm()
    rng = np.random.default_rng(4)
    segments = rng.integers(0, 20, (3, 2, 4)).astype("int32")
    memory = None
    lm.reset_memory()
    for tokens in segments:
        explicit, memory = lm.call_with_memory(tokens, memory)
        carried = lm(tokens)
        np.testing.assert_allclose(
            to_numpy(carried), to_numpy(explicit), atol=1e-5
        )
    lm.reset_memory()
    fresh = lm(segments[0])
    first, _ = lm.call_with_memory(segments[0])
    np.testing.assert_allclose(to_numpy(fresh), to_numpy(first), atol=1e-5)


@pytest.mark.torch_ok
def test_pieces_padded_to_buckets_give_the_same_logits_and_memory():
    # A stream of pieces of 5, 3 and 7 tokens: padded at their end to 8
    # tokens (`pad_to_bucket=True`, the default on JAX), the logits and
    # every next memory (4 slots, full after the first piece) are those
    # of the unpadded pieces.
    lm = tiny_lm(backbone_class=SegmentLengthsBackbone, **PLAIN_LM)
    rng = np.random.default_rng(5)
    pieces = [rng.integers(0, 20, (2, n)) for n in (5, 3, 7)]
    SEGMENT_LENGTHS.clear()
    padded = unpadded = None
    for tokens in pieces:
        logits, padded = lm.call_with_memory(tokens, padded, pad_to_bucket=True)
        expected, unpadded = lm.call_with_memory(
            tokens, unpadded, pad_to_bucket=False
        )
        assert logits.shape == expected.shape
        pairs = [(logits, expected)]
        pairs += [(padded[key], unpadded[key]) for key in unpadded]
        for got, want in pairs:
            np.testing.assert_allclose(
                to_numpy(got), to_numpy(want), rtol=1e-6, atol=1e-6
            )
    # The padded pieces run at one length (each length a compilation of
    # every operation on JAX); the unpadded ones through `call`.
    assert SEGMENT_LENGTHS == [8, 8, 8]


@pytest.mark.torch_ok
def test_pad_to_bucket_is_refused_where_it_cannot_be_exact():
    tokens = np.zeros((1, 4), "int32")
    with pytest.raises(ValueError, match="pad_to_bucket=False"):
        _lm().call_with_memory(tokens, training=True, pad_to_bucket=True)
    # The compressive memory is written from whole segments.
    compressive = tiny_lm(**COMPRESSIVE_LM)
    with pytest.raises(ValueError, match="pad_to_bucket=False"):
        compressive.call_with_memory(tokens, pad_to_bucket=True)


def test_carried_memory_refuses_another_batch_size():
    lm = _lm()
    lm(np.zeros((2, 3), "int32"))
    with pytest.raises(ValueError, match="batch size 2"):
        lm(np.zeros((3, 3), "int32"))


def test_mixed_bfloat16_logits_are_float32_and_finite():
    keras.config.set_dtype_policy("mixed_bfloat16")
    lm = _lm()
    logits, memory = lm.call_with_memory(np.zeros((2, 3), "int32"))
    assert dtype_name(logits) == "float32"
    assert dtype_name(memory["memory"]) == "bfloat16"  # the compute dtype
    assert np.all(np.isfinite(to_numpy(logits)))


def test_backbone_must_be_a_transformer_xl_backbone():
    with pytest.raises(ValueError, match="TransformerXLBackbone"):
        TransformerXLCausalLM(keras.Sequential([]))


def test_eager_call_checks_the_token_range():
    with pytest.raises(ValueError, match="vocabulary_size=20"):
        _lm()(np.array([[1, 25]], "int32"))


def test_the_bases_before_causal_lm_are_checked_when_a_class_is_made():
    import keras_hub

    from keras_txl.models.carried_memory import CarriedMemory
    from keras_txl.models.transformer_xl_generation import (
        TransformerXLGeneration,
    )

    for base in (CarriedMemory, TransformerXLGeneration):
        with pytest.raises(TypeError, match="after `keras_hub.models.Ca"):
            type("Late", (keras_hub.models.CausalLM, base), {})
        with pytest.raises(TypeError, match="make it a subclass of"):
            type("Alone", (base,), {})


def test_a_host_without_what_a_base_reads_is_named_at_construction():
    class Partial(TransformerXLCausalLM):
        def __init__(self, backbone):
            # Skips the task's `__init__`: nothing of what the bases read.
            keras.Model.__init__(self)
            self.backbone = backbone
            self.check_carried_memory_host()

    with pytest.raises(TypeError) as info:
        Partial(tiny_lm().backbone)
    message = str(info.value)
    assert "Partial has `CarriedMemory` as a base but lacks" in message
    assert "lacks ['memory_state', 'memory_length']" in message


def test_with_memory_length_shares_the_output_layer():
    lm = tiny_lm()
    copy = lm.with_memory_length(3)
    assert copy.output_projection is lm.output_projection
    # Every variable of the copy but its memory is one of the model's.
    own = {id(v) for v in lm.weights}
    carried = {id(v) for v in copy.memory_state.weights}
    assert all(id(v) in own for v in copy.weights if id(v) not in carried)


def test_an_output_layer_of_another_backbone_shape_is_refused():
    lm = tiny_lm()
    other = tiny_lm(tie_weights=False)
    with pytest.raises(ValueError, match="`output_layer` must be the output"):
        TransformerXLCausalLM(lm.backbone, output_layer=other.output_projection)
