"""`dynamic_evaluation(method="rms")` computes what Krause et al.'s
optimizer computes, token for token.

`tests/fixtures/krause_dynamic_eval/` holds a checkpoint of the authors'
TensorFlow `tf/model.py` and the per-token losses of 4 segments scored
and updated by Krause et al.'s `DynamicEvalOptimizer`
(benkrause/dynamiceval-transformer `9a57df5`) after their gradstat pass
over 3 calibration segments: `ss` the sums of the calibration gradients'
squares, `dw = theta - theta0` from zero, one session, each step split
into the gradients and then their update with those gradients fed (see
tests/fixtures/README.md). Their flags map to ours as
`learning_rate = lr / sqrt(N)`, `epsilon = eps / sqrt(N)`,
`decay = dr * sqrt(N)` (`ss = N * MS`); the fixture's `dr` keeps
`dr * sqrt(ss)` at most 0.60, under the cap of 1 of ours.
"""

import json
import math

import numpy as np
import pytest

from keras_txl.convert import from_official_tensorflow
from keras_txl.training import dynamic_evaluation
from tests.test_case import FIXTURES

FOLDER = FIXTURES / "krause_dynamic_eval"


@pytest.fixture(scope="module")
def reference():
    stored = np.load(FOLDER / "reference.npz")
    return dict(stored, settings=json.loads(str(stored["settings"])))


@pytest.fixture(scope="module")
def lm():
    return from_official_tensorflow(FOLDER)  # its config.json


def _token_losses(lm, reference, learning_rate, epsilon, decay):
    settings = reference["settings"]
    result = dynamic_evaluation(
        lm,
        reference["eval_ids"],
        settings["segment_length"],
        learning_rate=learning_rate,
        method="rms",
        decay=decay,
        batch_size=1,
        start="zeros",  # their TF scripts' memory
        calibration_ids=reference["calibration_ids"],
        calibration_segments=settings["calibration_segments"],
        epsilon=epsilon,
        return_token_losses=True,
    )
    assert result["rms_statistics"] == "calibration"
    return result["token_losses"]  # (1, E * T)


def _mapped(settings):
    """Their `--learning_rate`, `--epsilon`, `--decay_rate` as ours."""
    root = math.sqrt(settings["calibration_segments"])
    return (
        settings["learning_rate"] / root,
        settings["epsilon"] / root,
        settings["decay_rate"] * root,
    )


@pytest.mark.torch_ok
def test_static_losses_match_their_model(lm, reference):
    settings = reference["settings"]
    result = dynamic_evaluation(
        lm,
        reference["eval_ids"],
        settings["segment_length"],
        learning_rate=0.0,
        start="zeros",
        return_token_losses=True,
    )
    expected = reference["static_nll"].reshape(1, -1)
    np.testing.assert_allclose(result["token_losses"], expected, atol=1e-5)


@pytest.mark.torch_ok
def test_dynamic_losses_match_their_optimizer(lm, reference):
    losses = _token_losses(lm, reference, *_mapped(reference["settings"]))
    expected = reference["dynamic_nll"].reshape(1, -1)
    np.testing.assert_allclose(losses, expected, atol=1e-5)
    # The updates matter: the losses are far from the static ones.
    static = reference["static_nll"].reshape(1, -1)
    assert np.abs(expected - static).max() > 0.1


@pytest.mark.parametrize(
    "wrong",
    ["learning_rate", "epsilon", "decay", "no_decay"],
)
def test_each_mapping_factor_is_needed(lm, reference, wrong):
    """Without the `sqrt(N)` of any one flag (or without the decay) the
    losses are off by more than 1e-3: the match above tests each."""
    settings = reference["settings"]
    lr, eps, decay = _mapped(settings)
    if wrong == "learning_rate":
        lr = settings["learning_rate"]
    elif wrong == "epsilon":
        eps = settings["epsilon"]
    elif wrong == "decay":
        decay = settings["decay_rate"]
    else:
        decay = 0.0
    losses = _token_losses(lm, reference, lr, eps, decay)
    expected = reference["dynamic_nll"].reshape(1, -1)
    assert np.abs(losses - expected).max() > 1e-3
