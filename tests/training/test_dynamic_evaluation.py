"""Dynamic evaluation: every token scored before the weights train on it,
the model passed in unchanged, adaptive softmaxes and a pretrained
preset, and a lower loss than static evaluation on a shifted domain."""

import os

import keras
import numpy as np
import pytest

from keras_txl.data import load_corpus
from keras_txl.models import TransformerXLCausalLM
from keras_txl.training import dynamic_evaluation
from keras_txl.training import evaluate_segments
from tests.test_case import models_freed_after
from tests.tiny_models import training_lm

from .helpers import ordered_dataset
from .helpers import periodic_ids

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
HF_FOLDER = os.path.join(ROOT, "tests", "fixtures", "hf_transfo_xl")
V, T = 16, 8


@pytest.fixture(scope="module")
def lm():
    model = training_lm(V, T)
    # Built now: a test that runs first in its worker (torch's run selects
    # a few) reads the weights before any call would build the output
    # layer.
    model.build()
    return model


@pytest.fixture(scope="module")
def text():
    return periodic_ids(
        0, num_documents=4, period=T, repeats=4, vocabulary_size=V
    )


def _weights(model):
    """`{path: value}` of every weight (compared by name, not order)."""
    return {v.path: keras.ops.convert_to_numpy(v) for v in model.weights}


@pytest.mark.torch_ok
@pytest.mark.parametrize("method", ["sgd", "rms"])
def test_no_token_is_scored_after_the_weights_trained_on_it(lm, text, method):
    # The loss of target j may depend on tokens 0..j+1 only: a text that
    # differs from token `p` on gives the same losses before target p - 1.
    # An evaluation that stepped on a segment before scoring it would
    # score targets 32..35 of segment 4 with weights that trained on the
    # changed tokens 37.. of the same segment.
    p = 4 * T + 5
    other = text.copy()
    other[p:] = (other[p:] + 5) % V
    rate = {"sgd": 0.5, "rms": 0.01}[method]
    kwargs = dict(segment_length=T, learning_rate=rate, method=method)
    losses = dynamic_evaluation(lm, text, return_token_losses=True, **kwargs)
    changed = dynamic_evaluation(lm, other, return_token_losses=True, **kwargs)
    a, b = losses["token_losses"][0], changed["token_losses"][0]
    np.testing.assert_allclose(a[: p - 1], b[: p - 1], rtol=0, atol=1e-6)
    assert np.abs(a[p - 1 :] - b[p - 1 :]).max() > 1e-2
    # The steps did change the scores: after the first segment, not in it.
    static = dynamic_evaluation(
        lm, text, segment_length=T, learning_rate=0.0, return_token_losses=True
    )["token_losses"][0]
    np.testing.assert_allclose(a[:T], static[:T], atol=1e-6)
    assert np.abs(a[T:] - static[T:]).max() > 1e-2
    assert losses["loss"] < static.mean()


@pytest.mark.torch_ok
def test_twice_the_same_result_and_the_model_unchanged(lm, text):
    before = _weights(lm)
    kwargs = dict(segment_length=T, learning_rate=0.01, method="rms")
    first = dynamic_evaluation(lm, text, decay=0.1, **kwargs)
    second = dynamic_evaluation(lm, text, decay=0.1, **kwargs)
    assert first["loss"] == second["loss"]
    assert first["updates"] == len(text) // T - 1
    assert first["rms_statistics"] == "online"
    after = _weights(lm)
    assert after.keys() == before.keys()
    for path, value in before.items():
        np.testing.assert_array_equal(after[path], value, err_msg=path)


@pytest.mark.torch_ok
def test_no_step_is_static_evaluation_and_steps_every_k_segments(lm, text):
    short = text[: 4 * T + 3]  # The last segment short.
    static = evaluate_segments(lm, short, batch_size=1, segment_length=T)
    zero = dynamic_evaluation(lm, short, segment_length=T, learning_rate=0.0)
    np.testing.assert_allclose(zero["loss"], static["loss"], rtol=1e-5)
    assert zero["tokens"] == static["tokens"] == len(short) - 1
    every = {
        k: dynamic_evaluation(
            lm, text, T, learning_rate=0.5, segments_per_update=k
        )
        for k in (1, 3)
    }
    segments = -(-(len(text) - 1) // T)
    assert every[1]["updates"] == segments - 1
    assert every[3]["updates"] == (segments - 1) // 3
    assert every[1]["loss"] != every[3]["loss"]


@pytest.mark.torch_ok
def test_rms_statistics_from_a_calibration_text(lm, text):
    # Every token: the rows of tokens it lacks would have no statistics.
    calibration = np.random.default_rng(1).integers(0, V, 12 * T)
    result = dynamic_evaluation(
        lm,
        text,
        T,
        learning_rate=0.01,
        method="rms",
        decay=0.5,
        calibration_ids=calibration,
        calibration_segments=6,
    )
    static = dynamic_evaluation(lm, text, T, learning_rate=0.0)
    assert result["rms_statistics"] == "calibration"
    assert np.isfinite(result["loss"]) and result["loss"] < static["loss"]


def test_arguments_are_checked(lm, text):
    with pytest.raises(ValueError, match="method"):
        dynamic_evaluation(lm, text, T, learning_rate=0.1, method="adam")
    with pytest.raises(ValueError, match="learning_rate"):
        dynamic_evaluation(lm, text, T, learning_rate=-1.0)
    with pytest.raises(ValueError, match="decay"):
        dynamic_evaluation(lm, text, T, learning_rate=0.1, decay=float("nan"))
    with pytest.raises(ValueError, match="calibration_ids"):
        dynamic_evaluation(lm, text, T, learning_rate=0.1, calibration_ids=text)
    with pytest.raises(ValueError, match="vocabulary_size"):
        dynamic_evaluation(lm, text + V, T, learning_rate=0.1)
    with pytest.raises(FloatingPointError, match="diverged.*segment 2 "):
        dynamic_evaluation(lm, text, T, learning_rate=1e30)


def test_adaptive_softmax_of_a_pretrained_preset():
    # The HuggingFace fixture: adaptive embedding and softmax (div_val 2),
    # loaded by `from_preset`, with the protocol of its authors' code.
    lm = TransformerXLCausalLM.from_preset(HF_FOLDER)
    assert lm.adaptive_softmax is not None
    before = _weights(lm)
    ids = np.random.default_rng(0).integers(0, 1203, 24)
    text = np.tile(ids, 4)  # Seen once, predictable afterwards.
    kwargs = dict(segment_length=24, start="zeros")
    short = evaluate_segments(lm, text[:49], batch_size=1, **kwargs)
    zero = dynamic_evaluation(lm, text[:49], learning_rate=0.0, **kwargs)
    np.testing.assert_allclose(zero["loss"], short["loss"], rtol=1e-5)
    static = dynamic_evaluation(lm, text, learning_rate=0.0, **kwargs)
    result = dynamic_evaluation(
        lm, text, learning_rate=0.03, method="rms", **kwargs
    )
    assert result["loss"] < static["loss"] - 1.0
    after = _weights(lm)
    assert after.keys() == before.keys()
    for path, value in before.items():
        np.testing.assert_array_equal(after[path], value, err_msg=path)


def test_lower_loss_than_static_on_a_shifted_domain():
    # A byte model trained briefly on Shakespeare, scored on Python's
    # documentation (the built-in corpus): the steps adapt it.
    keras.utils.set_random_seed(1)
    with open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), "rb") as f:
        train = np.frombuffer(f.read(20_000), dtype="uint8").astype("int32")
    builtin = load_corpus("builtin", valid_fraction=0.0).train
    shifted = builtin[:2_000].encode("utf-8")
    shifted = np.frombuffer(shifted, dtype="uint8").astype("int32")
    lm = training_lm(256, 32, seed=1, hidden_dim=32, intermediate_dim=64)
    lm.compile(optimizer=keras.optimizers.Adam(3e-3))
    lm.fit(ordered_dataset(train, 8, 32), epochs=1, verbose=0)
    kwargs = dict(segment_length=32, memory_length=32)
    static = dynamic_evaluation(lm, shifted, learning_rate=0.0, **kwargs)
    dynamic = dynamic_evaluation(
        lm, shifted, learning_rate=0.002, method="rms", **kwargs
    )
    assert dynamic["bits_per_character"] < static["bits_per_character"]


def test_the_compiled_stepper_does_not_keep_the_model_alive():
    # Kept for the model (not on it): a model evaluated and dropped is
    # freed (in a fresh process, as the scoring test says why; the same
    # one as the scoring test's).
    assert models_freed_after()["dynamic_evaluation"]
