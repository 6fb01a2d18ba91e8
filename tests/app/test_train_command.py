"""Training runs of `keras-txl train`: stop and resume, output folders,
option checks."""

import os

import keras
import numpy as np
import pytest

from keras_txl_cli import artifacts
from keras_txl_cli.choices import ConfigError
from keras_txl_cli.train_config import TrainConfig
from keras_txl_cli.train_run import _prepare_output
from keras_txl_cli.train_run import eval_memory_lengths
from keras_txl_cli.train_run import fit_language_model
from tests.tiny_models import train_config


def _config(tmp_path, name="run", **kwargs):
    return train_config(tmp_path, name, **{"steps": 7, **kwargs})


class _StopAfter(keras.callbacks.Callback):
    def __init__(self, steps):
        super().__init__()
        self.steps = steps
        self.seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.steps:
            self.model.stop_training = True


def test_stop_and_resume_ends_where_an_uninterrupted_run_ends(tmp_path):
    # 154 training characters: 2 streams of 77, 9 batches of 8 a pass; the
    # run of 7 steps stops at 3 (inside the second epoch of 2 steps) and
    # resumes with the weights, the optimizer, the data position and the
    # memory of step 3.
    whole = fit_language_model(_config(tmp_path, "whole"), log=lambda _: None)
    assert whole["finished"] and len(whole["history"].losses) == 7

    first = fit_language_model(
        _config(tmp_path, "parts"), [_StopAfter(3)], log=lambda _: None
    )
    assert not first["finished"] and len(first["history"].losses) == 3
    checkpoint = tmp_path / "parts" / "checkpoint"
    assert artifacts.read_json(checkpoint / "state.json")["step"] == 3
    rest = fit_language_model(
        TrainConfig(output=str(tmp_path / "parts"), resume=True, verbose=0),
        log=lambda _: None,
    )
    assert rest["finished"]
    np.testing.assert_allclose(
        rest["history"].losses, whole["history"].losses, atol=1e-4
    )
    for resumed, uninterrupted in zip(
        rest["lm"].get_weights(), whole["lm"].get_weights()
    ):
        np.testing.assert_allclose(resumed, uninterrupted, atol=1e-4)
    # The losses moved: equal losses are not those of an idle model.
    assert whole["history"].losses[-1] < whole["history"].losses[0] - 0.1


def test_resume_refuses_other_options_and_nothing_to_resume(tmp_path):
    with pytest.raises(ConfigError, match="Nothing to resume"):
        fit_language_model(_config(tmp_path, resume=True))
    checkpoint = tmp_path / "run" / "checkpoint"
    checkpoint.mkdir(parents=True)
    artifacts.write_json(
        checkpoint / "state.json",
        {"step": 1, "train_loss": [1.0], "config": _config(tmp_path).to_dict()},
    )
    with pytest.raises(ConfigError, match="--steps 9 differs .* \\(7\\)"):
        fit_language_model(
            TrainConfig(output=str(tmp_path / "run"), resume=True, steps=9)
        )
    # A resume may move to another strategy or number of devices (the
    # same global batch), never to another global batch or model.
    strategy = {"jax": "jax-data-parallel"}.get(
        keras.backend.backend(), "mirrored"
    )
    elsewhere = dict(strategy=strategy, num_devices=2)
    for change, match in (
        (dict(batch_size=4), "--batch-size 4 differs"),
        (dict(size="reference"), "--size reference differs"),
    ):
        with pytest.raises(ConfigError, match=match):
            fit_language_model(
                TrainConfig(
                    output=str(tmp_path / "run"),
                    resume=True,
                    **elsewhere,
                    **change,
                )
            )


def test_output_folder_is_never_overwritten_without_overwrite(tmp_path):
    config = _config(tmp_path).resolved()
    output = tmp_path / "run"
    output.mkdir()
    (output / "model.keras").write_bytes(b"a saved model")
    (output / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="already holds a model"):
        _prepare_output(config)
    # A run replaces its folder whole: never over files that are not ours.
    with pytest.raises(ConfigError, match=r"not a run's \(notes.txt\)"):
        _prepare_output(_config(tmp_path, overwrite=True).resolved())
    assert (output / "notes.txt").read_text() == "mine"
    (output / "notes.txt").unlink()
    folder = _prepare_output(_config(tmp_path, overwrite=True).resolved())
    # The new run writes beside; the old one is whole until the commit.
    assert os.path.dirname(folder.path) == str(tmp_path)
    assert (output / "model.keras").read_bytes() == b"a saved model"
    folder.discard()
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "run"]
    # A keras-hub preset (the layout of today's runs) is a model too.
    (output / "task.json").write_text("{}")
    with pytest.raises(ConfigError, match="already holds a model"):
        _prepare_output(config)
    folder = _prepare_output(_config(tmp_path, overwrite=True).resolved())
    with open(os.path.join(folder.path, "task.json"), "w") as file:
        file.write("new")
    folder.commit()
    assert os.listdir(output) == ["task.json"]
    assert (output / "task.json").read_text() == "new"
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file"):
        _prepare_output(_config(tmp_path, output=str(tmp_path / "file")))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(size="huge"), "--size"),
        (dict(dataset="ptb"), "--dataset"),
        (dict(steps=0), "--steps"),
        (dict(memory_length=-1), "--memory-length"),
        (dict(dropout=1.0), "--dropout"),
        (dict(learning_rate=0.0), "--learning-rate"),
        (dict(warmup_steps=7), "--warmup-steps"),
        (dict(tokenizer="bpe"), "--tokenizer"),
        (dict(resume=True, overwrite=True), "exclude each other"),
        (
            dict(validation_memory_lengths=[8, -1]),
            "--validation-memory-lengths must be an integer >= 0",
        ),
        (
            dict(validation_memory_lengths=[]),
            "--validation-memory-lengths must be a list",
        ),
    ],
)
def test_config_errors_name_the_option(tmp_path, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        _config(tmp_path, **kwargs).resolved()


def test_preset_defaults_and_memory_lengths(tmp_path):
    config = TrainConfig(steps=30).resolved()
    assert (config.segment_length, config.memory_length) == (64, 64)
    assert config.warmup_steps == 3  # a tenth of a short run
    assert config.tokenizer == "char"
    assert TrainConfig(dataset="enwik8").resolved().tokenizer == "byte"
    assert TrainConfig(size="reference").resolved().batch_size == 16
    assert eval_memory_lengths(_config(tmp_path).resolved()) == [
        0,
        2,
        8,
        16,
        32,
    ]
    # `--validation-memory-lengths`: the lengths given, with 0 and the
    # evaluation memory (16) always, each once.
    for given, expected in (
        ([64, 4, 64], [0, 4, 16, 64]),
        ([0], [0, 16]),
        ([16, 0], [0, 16]),
    ):
        config = _config(tmp_path, validation_memory_lengths=given)
        assert eval_memory_lengths(config.resolved()) == expected, given
