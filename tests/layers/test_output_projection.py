import doctest

import numpy as np
import pytest

from keras_txl.layers import output_projection
from keras_txl.layers.output_projection import OutputProjection
from tests.test_case import run_layer_round_trip
from tests.test_case import to_numpy

RNG = np.random.default_rng(0)
HIDDEN = RNG.normal(size=(2, 3, 8)).astype("float32")
TABLE = RNG.normal(size=(11, 8)).astype("float32")


@pytest.mark.torch_ok
@pytest.mark.parametrize("tie_weights", [True, False])
def test_round_trip(tie_weights):
    # Float32 logits under any policy (checked below), so the round trip's
    # mixed-precision check, which expects the compute dtype, is skipped.
    run_layer_round_trip(
        OutputProjection,
        {"vocabulary_size": 11, "tie_weights": tie_weights},
        [HIDDEN, TABLE] if tie_weights else [HIDDEN],
        mixed_precision=False,
    )


@pytest.mark.torch_ok
def test_tied_logits_are_the_table_product_plus_bias():
    layer = OutputProjection(vocabulary_size=11)
    layer.build(HIDDEN.shape)
    assert [w.name for w in layer.weights] == ["output_bias"]
    layer.output_bias.assign(np.arange(11, dtype="float32"))
    logits = to_numpy(layer(HIDDEN, TABLE))
    np.testing.assert_allclose(
        logits, HIDDEN @ TABLE.T + np.arange(11), rtol=1e-5, atol=1e-5
    )


@pytest.mark.torch_ok
def test_untied_has_its_kernel_first_then_bias():
    layer = OutputProjection(vocabulary_size=11, tie_weights=False)
    layer.build(HIDDEN.shape)
    assert [w.name for w in layer.weights] == ["output_kernel", "output_bias"]
    kernel = to_numpy(layer.output_kernel)
    np.testing.assert_allclose(
        to_numpy(layer(HIDDEN)), HIDDEN @ kernel, rtol=1e-5, atol=1e-5
    )


@pytest.mark.torch_ok
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_logits_are_float32_under_a_mixed_policy(policy):
    layer = OutputProjection(vocabulary_size=11, dtype=policy)
    logits = layer(HIDDEN, TABLE)
    assert layer.compute_dtype != "float32"
    assert "float32" in str(logits.dtype)


def test_the_table_is_required_when_tied_and_refused_when_not():
    with pytest.raises(ValueError, match="tied: pass the token embedding"):
        OutputProjection(vocabulary_size=11)(HIDDEN)
    with pytest.raises(ValueError, match="untied .* pass no `embeddings`"):
        OutputProjection(vocabulary_size=11, tie_weights=False)(HIDDEN, TABLE)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"vocabulary_size": 0}, "vocabulary_size"),
        ({"vocabulary_size": 11, "tie_weights": "yes"}, "tie_weights"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OutputProjection(**kwargs)


def test_a_file_saved_before_the_layer_hands_it_an_empty_entry_once():
    # Files saved when the task held these variables: the task hands them
    # here (`load_saved_before`), then Keras hands this layer its own
    # entry, empty in such a file.
    layer = OutputProjection(vocabulary_size=11, tie_weights=False)
    layer.build(HIDDEN.shape)
    saved = {"0": TABLE.T.copy(), "1": np.ones(11, "float32")}
    layer.load_saved_before(saved)
    layer.load_own_variables({})
    np.testing.assert_array_equal(to_numpy(layer.output_kernel), TABLE.T)
    np.testing.assert_array_equal(to_numpy(layer.output_bias), np.ones(11))
    # An empty entry otherwise is a file without this layer's weights.
    with pytest.raises(ValueError, match="expected 2 variables"):
        layer.load_own_variables({})


def test_docstring_example_runs():
    result = doctest.testmod(output_projection, verbose=False)
    assert result.attempted > 0 and result.failed == 0
