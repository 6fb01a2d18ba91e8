"""Memory carried through `fit`, `evaluate` and `predict`, its resets, and
the batch-size checks, compared with `call_with_memory` and the memory
passed by hand."""

import keras
import numpy as np
import pytest

from keras_txl.models import MemoryReset
from keras_txl.models.memory_state import MemoryState
from tests.test_case import to_numpy
from tests.tiny_models import training_lm
from tests.training.helpers import explicit_loop
from tests.training.helpers import nll
from tests.training.helpers import ordered_arrays
from tests.training.helpers import ordered_dataset
from tests.training.helpers import periodic_ids

V, T, B = 16, 8, 4


class _Frozen:
    """A compiled model whose weights never move (learning rate 0), so
    that two passes differ only through the memory; its weights are large
    enough (`initializer_range=0.5`) for the memory to move the logits."""

    def __init__(self):
        self.ids = periodic_ids(0, 10, T, 4, V)
        self.inputs, self.targets = ordered_arrays(self.ids, B, T)
        self.dataset = ordered_dataset(self.ids, B, T)
        self.lm = training_lm(V, T, initializer_range=0.5)
        self.lm.compile(optimizer=keras.optimizers.SGD(0.0))
        self.logits, self.memory = explicit_loop(self.lm, self.inputs)


@pytest.fixture(scope="module")
def frozen():
    # One model for the module: each Keras function compiles once.
    return _Frozen()


class _BatchLosses(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["batch_loss"]))


@pytest.mark.torch_ok
def test_fit_evaluate_predict_carry_the_memory_of_the_previous_batch(
    frozen,
):
    lm = frozen.lm
    history = lm.fit(frozen.dataset, epochs=2, verbose=0)
    # After an epoch the carried memory is the one passed by hand.
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(lm.memory_state.memory.value),
        keras.ops.convert_to_numpy(frozen.memory["memory"]),
        atol=1e-4,
    )
    assert (
        keras.ops.convert_to_numpy(lm.memory_state.valid_length.value).tolist()
        == [T] * B
    )
    expected = nll(frozen.logits, frozen.targets)
    # Each epoch starts from an empty memory: both see the same losses.
    assert history.history["loss"] == pytest.approx([expected] * 2, abs=1e-5)

    logs = lm.evaluate(frozen.dataset, verbose=0, return_dict=True)
    assert logs["loss"] == pytest.approx(expected, abs=1e-5)
    assert logs["bits_per_character"] == pytest.approx(
        expected / np.log(2), abs=1e-5
    )
    assert logs["perplexity"] == pytest.approx(np.exp(expected), rel=1e-5)

    logits = lm.predict(frozen.dataset, verbose=0)
    np.testing.assert_allclose(
        logits, frozen.logits.reshape(-1, T, V), atol=1e-4
    )
    # Without memory the logits differ: the checks above are not vacuous.
    no_memory_logits, _ = explicit_loop(lm, frozen.inputs, memory_length=0)
    assert np.abs(no_memory_logits - frozen.logits).max() > 1e-2


@pytest.mark.torch_ok
def test_memory_is_reset_at_each_epoch_and_evaluation(frozen):
    lm = frozen.lm
    losses = [lm.evaluate(frozen.dataset, verbose=0)[0] for _ in range(2)]
    assert losses[0] == pytest.approx(losses[1], abs=1e-6)
    # Without the reset, epoch 2 sees the end of epoch 1 as memory.
    no_reset = MemoryReset(reset_every=10**9, initial_step=1)
    lm.reset_memory()
    history = lm.fit(frozen.dataset, epochs=2, verbose=0, callbacks=[no_reset])
    first, second = history.history["loss"]
    assert abs(first - second) > 1e-3


@pytest.mark.torch_ok
def test_reset_every_pass_mid_epoch_and_validation_keeps_the_memory(frozen):
    lm = frozen.lm
    passes = len(frozen.inputs)  # 9 batches a pass
    runs = []
    for validation in (None, frozen.dataset):
        recorder = _BatchLosses()
        lm.fit(
            frozen.dataset.repeat(),
            steps_per_epoch=4,  # epochs cut the passes: resets mid-epoch
            epochs=5,
            validation_data=validation,
            verbose=0,
            callbacks=[MemoryReset(reset_every=passes), recorder],
        )
        runs.append(np.array(recorder.losses))
    plain, validated = runs
    # Pass 2 repeats pass 1 exactly: reset at step 9, in the middle of
    # epoch 3 (on JAX after a state sync).
    np.testing.assert_allclose(plain[passes:], plain[: 20 - passes], atol=1e-6)
    assert abs(plain[1] - plain[passes + 2]) > 1e-3  # Not all equal.
    # A validation at each epoch end does not disturb the training memory.
    np.testing.assert_allclose(validated, plain, atol=1e-6)


@pytest.mark.torch_ok
def test_batch_size_change_is_a_clear_error(frozen):
    import tensorflow as tf

    rows = (frozen.inputs.reshape(-1, T), frozen.targets.reshape(-1, T))
    # 36 rows: batches of 4, then none left over, then a batch of 2.
    ragged = tf.data.Dataset.from_tensor_slices(
        tuple(r[:34] for r in rows)
    ).batch(B)
    with pytest.raises(Exception, match="batch size") as error:
        frozen.lm.fit(ragged, verbose=0)
    assert "drop_remainder" in str(error.value)
    # Arrays that do not split into equal batches fail before training.
    with pytest.raises(ValueError, match="do not split into batches of 5"):
        frozen.lm.fit(*rows, batch_size=5)
    # The memory is built for 4 streams: 2 are refused.
    with pytest.raises(ValueError, match="built for batch size 4"):
        frozen.lm.evaluate(ordered_dataset(frozen.ids, 2, T), verbose=0)


@pytest.mark.torch_ok
def test_few_rows_are_one_batch_of_keras_default_size():
    """4 rows with Keras's default `batch_size` (32) are one batch of 4:
    one batch size, so `predict` and `evaluate` accept them; 40 rows in
    batches of 32 and 8 are still refused."""
    lm = training_lm(V, T)
    lm.compile()
    # Its optimizer is built when `fit` makes the train function, before
    # the step's first trace (`build_optimizer_first`).
    lm.make_train_function()
    assert lm.optimizer.built
    ids = np.arange(4 * T).reshape(4, T) % V
    logits = lm.predict(ids, verbose=0)
    assert np.asarray(logits).shape == (4, T, V)
    assert lm.memory_state.batch_size == 4
    loss = lm.evaluate(ids, (ids + 1) % V, verbose=0)
    assert np.all(np.isfinite(loss))
    lm.reset_memory()
    many = np.zeros((40, T), "int32")
    with pytest.raises(ValueError, match="40 rows do not split into batches"):
        lm.predict(many, verbose=0)


def test_fit_solves_a_task_only_the_previous_batch_can_solve():
    # Every target but the last of each segment is a token of the previous
    # segment and of no token the current segment has seen.
    ids = periodic_ids(1, 200, T, 4, V)
    dataset = ordered_dataset(ids, 8, T)
    losses = {}
    for memory_length in (T, 0):
        lm = training_lm(V, memory_length, hidden_dim=32, intermediate_dim=64)
        lm.compile(optimizer=keras.optimizers.Adam(3e-3))
        lm.fit(dataset, epochs=3, verbose=0)
        losses[memory_length] = lm.evaluate(dataset, verbose=0)[0]
    # Without memory the loss stays near chance, ln(16) = 2.77.
    assert losses[0] > 2.5, losses
    # With memory, 3 of the 4 copies of each block are predictable.
    assert losses[T] < losses[0] - 1.0, losses


def test_memory_state_write_names_the_keys_a_memory_dict_needs():
    state = MemoryState(num_layers=1, memory_length=2, hidden_dim=3)
    state.build(batch_size=1)
    with pytest.raises(KeyError, match=r"\['memory', 'valid_length'\]"):
        state.write({"memory": np.zeros((1, 1, 2, 3), "float32")})


def test_fit_on_ordered_segments_does_not_warn_of_shuffling(frozen):
    """Ordered segments are never shuffled: `fit` passes `shuffle=False`
    itself, so Keras does not warn that it ignores its default
    `shuffle=True` for a dataset (the README's `lm.fit(ordered_segments)`);
    the memory is carried as before."""
    import warnings

    lm = frozen.lm
    lm.reset_memory()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lm.fit(frozen.dataset, epochs=1, verbose=0)
    assert not [w for w in caught if "shuffle" in str(w.message)]
    assert to_numpy(lm.memory_state.valid_length.value).max() == T
