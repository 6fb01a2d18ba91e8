"""A diverging `keras-txl train` stops, keeps its last good checkpoint and
says so in one line."""

import math
import os

import h5py
import keras
import numpy as np
import pytest

from keras_txl.training.evaluation import perplexity
from keras_txl.training.nan_guard import TrainingDiverged
from keras_txl_cli import artifacts
from keras_txl_cli import cli
from keras_txl_cli.train_run import fit_language_model
from tests.tiny_models import train_config


class _PoisonAtEpoch(keras.callbacks.Callback):
    """Makes one weight NaN at the start of an epoch (read back by the JAX
    `fit` at that epoch's first step), so its first loss is NaN."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            weight = self.model.backbone.token_embedding.embeddings
            weight.assign(np.full(weight.shape, np.nan, "float32"))


@pytest.mark.torch_ok
def test_nan_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    # Epochs of 2 steps: the checkpoint of step 2 is written, the weights
    # turn NaN at step 3, and the end of that epoch must not save them.
    config = train_config(tmp_path, steps=7, steps_per_epoch=2)
    with pytest.raises(TrainingDiverged) as caught:
        fit_language_model(config, [_PoisonAtEpoch(1)], log=lambda _: None)
    error = caught.value
    assert (error.step, error.checkpoint_step) == (3, 2)
    message = str(error)
    assert "loss nan at step 3 of 7" in message
    assert "checkpoint of step 2" in message and "--resume" in message
    assert "\n" not in message
    checkpoint = tmp_path / "run" / "checkpoint"
    state = artifacts.read_json(checkpoint / "state.json")
    assert state["step"] == 2
    with h5py.File(checkpoint / state["files"]["weights"]) as weights:
        arrays = []
        weights.visititems(
            lambda name, item: (
                arrays.append(item[()])
                if isinstance(item, h5py.Dataset)
                else None
            )
        )
    floats = [a for a in arrays if np.issubdtype(a.dtype, np.floating)]
    assert floats and all(np.isfinite(a).all() for a in floats)


def test_nan_before_any_checkpoint_says_to_start_again(tmp_path):
    config = train_config(tmp_path, steps=4, steps_per_epoch=2)
    with pytest.raises(TrainingDiverged, match="no checkpoint was written"):
        fit_language_model(config, [_PoisonAtEpoch(0)], log=lambda _: None)
    # Nothing of the run stays: no folder, no temporary folder beside.
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt"]


def test_cli_reports_divergence_in_one_line(tmp_path, capsys, monkeypatch):
    from keras_txl_cli import train_run

    original = train_run.fit_language_model

    def poisoned(config, callbacks=(), log=print):
        return original(config, [*callbacks, _PoisonAtEpoch(1)], log)

    monkeypatch.setattr(train_run, "fit_language_model", poisoned)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The quick brown fox jumps over the lazy dog. " * 4)
    status = cli.main(
        [
            "train",
            "--corpus", str(corpus),
            "--size", "tiny",
            "--steps", "6",
            "--steps-per-epoch", "2",
            "--segment-length", "8",
            "--batch-size", "2",
            "--output", str(tmp_path / "out"),
        ]
    )  # fmt: skip
    assert status == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "diverged" in lines[0] and "step 3" in lines[0]


def test_huge_finite_loss_has_infinite_perplexity():
    assert perplexity(1e4) == math.inf
    assert perplexity(2.0) == pytest.approx(math.exp(2.0))
    assert math.isnan(perplexity(float("nan")))
