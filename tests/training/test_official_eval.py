"""Scoring at the authors' evaluation settings gives their per-token losses.

`tests/fixtures/official_eval.npz` holds the per-token losses of the
authors' own `eval.py` loop (kimiyoung/transformer-xl, PyTorch) on the
`official_small.npz` weights, at three settings of `tgt_len`, `mem_len`,
`clamp_len`, `same_length` and batch size (tests/fixtures/README.md).
"""

import json

import numpy as np
import pytest

from keras_txl.convert import from_official_pytorch
from keras_txl.training.evaluation import evaluate_segments
from tests.test_case import FIXTURES


def test_per_token_losses_equal_the_authors_eval_loop():
    weights = np.load(FIXTURES / "official_small.npz")
    data = np.load(FIXTURES / "official_eval.npz")
    config = json.loads(str(weights["config"]))
    params = {k: weights[k] for k in weights.files if k.startswith("param/")}
    lm = from_official_pytorch(params, config)
    for i, setting in enumerate(json.loads(str(data["settings"]))):
        expected = data[f"losses_{i}"]  # (B, n - 1)
        result = evaluate_segments(
            lm,
            data["stream"],
            batch_size=setting["batch_size"],
            segment_length=setting["tgt_len"],
            memory_length=setting["mem_len"],
            clamp_length=setting["clamp_len"],
            same_length=setting["same_length"],
            start="empty",
            return_token_losses=True,
        )
        np.testing.assert_allclose(
            result["token_losses"],
            expected,
            rtol=0,
            atol=1e-5,
            err_msg=f"setting {setting}",
        )
        assert result["loss"] == pytest.approx(float(np.mean(expected)), 1e-6)
