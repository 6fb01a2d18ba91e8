"""`keras-txl train` precision, compilation and logging options: dtype
policy, jit_compile, steps per execution, validation every N steps, the
per-step CSV log and TensorBoard."""

import csv
import math
import os

import keras
import pytest

from keras_txl.models import MemoryReset
from keras_txl.utils import run_folder
from keras_txl_cli import artifacts
from keras_txl_cli.choices import ConfigError
from keras_txl_cli.cli import make_parser
from keras_txl_cli.train_config import TrainConfig
from keras_txl_cli.train_run import fit_language_model
from keras_txl_cli.train_run import train
from tests.tiny_models import train_config


def _rows(path):
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def test_flags_are_applied_recorded_and_logged_every_step(tmp_path):
    board = tmp_path / "board"
    config = train_config(
        tmp_path,
        dtype_policy="mixed_bfloat16",
        jit_compile=False,
        steps_per_execution=2,
        validate_every=2,
        tensorboard=str(board),
        validation_memory_lengths=[0],
    )
    lines = []
    metrics = train(config, log=lines.append)
    output = tmp_path / "run"
    # Precision and compilation: on the model, in the config and metrics.
    lm = artifacts.load_model(output)
    assert lm.backbone.dtype_policy.name == "mixed_bfloat16"
    assert lm.backbone.compute_dtype == "bfloat16"
    saved = artifacts.read_json(output / run_folder.CONFIG_FILE)
    for record in (saved, metrics):
        assert record["dtype_policy"] == "mixed_bfloat16"
        assert record["jit_compile"] is False
        assert record["steps_per_execution"] == 2
    assert metrics["resolved_jit_compile"] is (
        keras.backend.backend() == "jax"  # JAX always compiles
    )
    # The validation after training, at the lengths asked for: 0 and the
    # evaluation memory (16), one pass each.
    table = metrics["bpc_by_memory_length"]
    assert [row["memory_length"] for row in table] == [0, 16]
    assert metrics["valid_bpc_without_memory"] == table[0]["bits_per_character"]
    # Two executions of two steps: one loss each, four steps.
    assert metrics["steps"] == 4 and len(metrics["train_loss"]) == 2
    # Validation at steps 2 and 4, in the metrics and the step log.
    during = metrics["validation_during_training"]
    assert [row["step"] for row in during] == [2, 4]
    for row in during:
        assert row["val_bpc"] == pytest.approx(row["val_loss"] / math.log(2))
        assert 0 < row["val_bpc"] < 10
    rows = _rows(output / "steps.csv")
    assert [int(row["step"]) for row in rows] == [2, 4]
    assert [float(row["loss"]) for row in rows] == pytest.approx(
        metrics["train_loss"]
    )
    assert float(rows[-1]["val_bpc"]) == pytest.approx(during[-1]["val_bpc"])
    assert any("Step 4: validation" in line for line in lines)
    # TensorBoard event files of the training.
    events = [
        name
        for _, _, names in os.walk(board)
        for name in names
        if name.startswith("events.out.tfevents")
    ]
    assert events


@pytest.mark.backend_dependent
@pytest.mark.torch_ok
def test_jit_compile_false_is_what_the_backend_resolves(tmp_path):
    """`--jit-compile false` on this backend: the model runs op by op (on
    JAX too: Keras's JAX trainer honors it with one step per execution),
    and the run's config and log say what the model resolved. One step,
    the least a backend can run (the flags' other effects are checked on
    TensorFlow above)."""
    lines = []
    config = train_config(
        tmp_path, jit_compile=False, steps=1, steps_per_epoch=1
    )
    run = fit_language_model(config, log=lines.append)
    assert run["lm"].jit_compile is False
    saved = artifacts.read_json(tmp_path / "run" / run_folder.CONFIG_FILE)
    assert saved["jit_compile"] is False
    assert saved["resolved_jit_compile"] is False
    assert any("jit_compile False (not compiled)" in line for line in lines)
    assert run["history"].step == 1


def test_resume_may_change_execution_but_not_precision(tmp_path):
    first = fit_language_model(
        train_config(tmp_path, steps=4), log=lambda _: None
    )
    assert first["history"].step == 4
    resume = dict(output=str(tmp_path / "run"), resume=True, verbose=0)
    differs = "--dtype-policy mixed_bfloat16 differs"
    with pytest.raises(ConfigError, match=differs):
        fit_language_model(
            TrainConfig(dtype_policy="mixed_bfloat16", **resume),
            log=lambda _: None,
        )
    rows_before = _rows(tmp_path / "run" / "steps.csv")
    assert [int(row["step"]) for row in rows_before] == [1, 2, 3, 4]
    # Nothing left to train: the resumed run keeps its 4 steps and log.
    done = fit_language_model(
        TrainConfig(steps_per_execution=2, jit_compile=False, **resume),
        log=lambda _: None,
    )
    assert done["config"].steps_per_execution == 2
    assert done["config"].dtype_policy == "float32"
    assert _rows(tmp_path / "run" / "steps.csv") == rows_before


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dtype_policy="float33"), "--dtype-policy"),
        (dict(jit_compile="yes"), "--jit-compile"),
        (dict(steps_per_execution=0), "--steps-per-execution"),
        (dict(steps_per_execution=3), "--steps \\(4\\) must be a multiple"),
        (
            dict(steps_per_execution=2, validate_every=3),
            "--validate-every \\(3\\)",
        ),
        (dict(validate_every=0), "--validate-every"),
    ],
)
def test_option_errors_name_the_option(tmp_path, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        train_config(tmp_path, **kwargs).resolved()


def test_command_line_options_reach_the_config():
    args = make_parser().parse_args(
        [
            "train",
            "--dtype-policy",
            "mixed_bfloat16",
            "--jit-compile",
            "false",
            "--steps-per-execution",
            "4",
            "--validate-every",
            "100",
            "--tensorboard",
            "logs",
            "--validation-memory-lengths",
            "0,64",
        ]
    )
    assert (args.dtype_policy, args.jit_compile) == ("mixed_bfloat16", False)
    assert (args.steps_per_execution, args.validate_every) == (4, 100)
    assert args.tensorboard == "logs"
    assert args.validation_memory_lengths == [0, 64]
    defaults = make_parser().parse_args(["train"])
    assert (defaults.jit_compile, defaults.steps_per_execution) == ("auto", 1)
    assert defaults.validation_memory_lengths is None


class _Model:
    def __init__(self, steps_per_execution):
        self.steps_per_execution = steps_per_execution
        self.resets = 0

    def reset_memory(self):
        self.resets += 1


@pytest.mark.parametrize(
    "spe, expected", [(1, [0, 5, 10]), (2, [0, 4, 10]), (4, [0, 4, 8])]
)
def test_memory_reset_with_steps_per_execution(spe, expected):
    """Passes of 5 steps: the memory is reset before the execution that
    holds each pass's first step (steps 0, 5, 10)."""
    model = _Model(spe)
    reset = MemoryReset(reset_every=5)
    reset.set_model(model)
    reset.on_train_begin()
    at = []
    for begin in range(0, 12, spe):
        before = model.resets
        reset.on_train_batch_begin(begin)
        if model.resets > before:
            at.append(reset.step)
        reset.on_train_batch_end(begin + spe - 1)
    assert at == expected
