"""Files that keras-txl wrote before the restructure of issue #27 (a
`keras-txl train` run folder: a keras-hub preset and a training
checkpoint; a `.keras` file) still load with the public API and compute
the same numbers, on every backend (tests/fixtures/saved_by_v0/README.md
says how they were made)."""

import shutil

import keras
import keras_hub
import numpy as np
import pytest

from keras_txl.models import TransformerXLCausalLM
from keras_txl.training.schedules import transformer_xl_optimizer
from keras_txl.training.training_checkpoint import TrainingCheckpoint
from keras_txl_cli.train_config import TrainConfig
from tests.test_case import FIXTURES
from tests.test_case import to_numpy

SAVED = FIXTURES / "saved_by_v0"
RUN = SAVED / "run"
PROBE = "the lazy dog packs boxes"  # tools/fixtures/make_saved_by_v0.py
SEGMENT_LENGTH = 8
MEMORY_LENGTH = 8
# Float32 on another backend than the one that wrote the numbers
# (TensorFlow): a few ulps of logits of order 1.
TOLERANCE = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def expected():
    return dict(np.load(SAVED / "expected.npz"))


@pytest.fixture(scope="module")
def preset_lm():
    return TransformerXLCausalLM.from_preset(str(RUN))


def _assert_scores_the_same(lm, expected):
    # Three segments of 8, each on the memory of the 8 tokens before it.
    logits = lm.score(
        expected["probe_ids"],
        segment_length=SEGMENT_LENGTH,
        memory_length=MEMORY_LENGTH,
    )
    np.testing.assert_allclose(
        to_numpy(logits), expected["logits"], **TOLERANCE
    )


def _assert_same_weights(lm, reference):
    # The trainable ones: a model that trained also holds its memory.
    assert len(lm.trainable_weights) == len(reference.trainable_weights)
    for got, want in zip(lm.trainable_weights, reference.trainable_weights):
        np.testing.assert_array_equal(to_numpy(got), to_numpy(want))


@pytest.mark.torch_ok
def test_run_folder_loads_as_a_preset_and_computes_the_same(
    preset_lm, expected
):
    # (Scoring without memory and greedy generation, also in
    # expected.npz, are left out: 20 s of compiling on TensorFlow.)
    _assert_scores_the_same(preset_lm, expected)
    tokenizer = preset_lm.preprocessor.tokenizer
    np.testing.assert_array_equal(
        to_numpy(tokenizer(PROBE))[None], expected["probe_ids"]
    )


@pytest.mark.torch_ok
def test_keras_hub_finds_the_class_and_weights_of_the_run(preset_lm):
    loaded = keras_hub.models.CausalLM.from_preset(str(RUN))
    assert type(loaded) is TransformerXLCausalLM
    assert loaded.get_config() == preset_lm.get_config()
    _assert_same_weights(loaded, preset_lm)


@pytest.mark.torch_ok
def test_keras_file_loads_and_computes_the_same(expected):
    lm = keras.saving.load_model(SAVED / "causal_lm.keras")
    assert isinstance(lm, TransformerXLCausalLM)
    _assert_scores_the_same(lm, expected)


@pytest.mark.torch_ok
def test_training_checkpoint_restores_weights_and_step(
    preset_lm, expected, tmp_path
):
    # A copy: `restore` only reads, but a test never risks the fixture.
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(RUN / "checkpoint", checkpoint)
    lm = TransformerXLCausalLM.from_preset(str(RUN), load_weights=False)
    lm.compile(optimizer=transformer_xl_optimizer(1e-2, total_steps=6))
    state = TrainingCheckpoint.restore(lm, checkpoint, batch_size=2)
    assert state["step"] == int(expected["checkpoint_step"]) == 6
    assert int(to_numpy(lm.optimizer.iterations)) == 6
    # The run saved its preset from the weights of its last checkpoint.
    _assert_same_weights(lm, preset_lm)


def test_a_run_saved_with_preset_resumes_with_its_size():
    # Its train_config.json (and checkpoint) say "preset", the old name of
    # `--size`.
    saved = TrainingCheckpoint.read_state(RUN / "checkpoint")["config"]
    assert saved["preset"] == "tiny" and "size" not in saved
    resumed = TrainConfig(output=str(RUN), resume=True)
    assert resumed.merged_for_resume(saved).size == "tiny"
    with pytest.raises(ValueError, match="--size reference differs"):
        TrainConfig(size="reference", resume=True).merged_for_resume(saved)


def test_generate_on_unseen_characters_is_one_plain_error(preset_lm):
    # The run's 30 characters have no <unk>: `generate("text")` names the
    # characters in a plain ValueError (not wrapped by Keras with its
    # terminal codes), before anything compiles.
    with pytest.raises(ValueError) as info:
        preset_lm.generate("the Café", max_length=12)
    message = str(info.value)
    assert message.startswith("2 character(s) of the text are not in the ")
    assert "'C', 'é'; " in message and "oov_token" in message
    assert "\x1b[" not in message and "CharacterTokenizer.call" not in message
