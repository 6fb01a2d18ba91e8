import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_txl.data import segment_dataset
from keras_txl.data.segments import num_batches
from keras_txl.data.segments import segment_info
from keras_txl.data.segments import shard_streams
from keras_txl.data.text_source import CorpusError


def _expected_batches(ids, batch_size, sequence_length, drop_remainder):
    """The authors' `LMOrderedIterator`, written out with NumPy."""
    stream_length = len(ids) // batch_size
    streams = np.asarray(ids[: batch_size * stream_length]).reshape(
        batch_size, stream_length
    )
    batches = []
    for start in range(0, stream_length - 1, sequence_length):
        length = min(sequence_length, stream_length - 1 - start)
        if length < sequence_length and drop_remainder:
            break
        batches.append(
            (
                streams[:, start : start + length],
                streams[:, start + 1 : start + 1 + length],
            )
        )
    return batches


def _batches(dataset):
    return list(dataset.as_numpy_iterator())


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_layout_matches_ordered_iterator(drop_remainder):
    ids = np.random.default_rng(0).integers(0, 50, 103)
    dataset = segment_dataset(ids, 3, 4, drop_remainder=drop_remainder)
    batches = _batches(dataset)
    expected = _expected_batches(ids, 3, 4, drop_remainder)
    assert len(batches) == len(expected) == int(dataset.cardinality())
    for (inputs, targets), (want_inputs, want_targets) in zip(
        batches, expected
    ):
        assert inputs.dtype == targets.dtype == np.int32
        np.testing.assert_array_equal(inputs, want_inputs)
        np.testing.assert_array_equal(targets, want_targets)


def test_rows_continue_across_batches_and_targets_shift():
    ids = np.arange(10_000) % 997  # distinct neighbours, position-coded
    batches = _batches(segment_dataset(ids, 4, 16))
    positions = np.arange(10_000)
    position_batches = _batches(segment_dataset(positions, 4, 16))
    for i, (inputs, targets) in enumerate(position_batches):
        # Targets are the inputs shifted by one token.
        np.testing.assert_array_equal(targets, inputs + 1)
        if i + 1 < len(position_batches):
            # Row b of batch i + 1 starts where row b of batch i ended.
            next_inputs = position_batches[i + 1][0]
            np.testing.assert_array_equal(next_inputs[:, 0], inputs[:, -1] + 1)
        np.testing.assert_array_equal(batches[i][0], ids[inputs])
    # Row b is stream b: it starts at b * (10_000 // 4).
    np.testing.assert_array_equal(
        position_batches[0][0][:, 0], [0, 2500, 5000, 7500]
    )


def test_static_shapes_and_tail_accounting():
    ids = np.arange(103)  # 3 streams of 34; 33 inputs each = 8 x 4 + 1
    dataset = segment_dataset(ids, 3, 4)
    for spec in dataset.element_spec:
        assert spec.shape == (3, 4) and spec.dtype == tf.int32
    info = segment_info(ids, 3, 4)
    assert info.num_batches == 8 == num_batches(103, 3, 4)
    assert info.stream_length == 34 and info.last_sequence_length == 4
    # Each stream reads 8 * 4 inputs + 1 target; 1 stream token and the
    # 103 % 3 = 1 global token are dropped.
    assert info.used_tokens == 3 * 33 and info.dropped_tokens == 4
    ragged = segment_dataset(ids, 3, 4, drop_remainder=False)
    assert ragged.element_spec[0].shape.as_list() == [3, None]
    last_inputs, last_targets = _batches(ragged)[-1]
    np.testing.assert_array_equal(last_inputs, [[32], [66], [100]])
    np.testing.assert_array_equal(last_targets, [[33], [67], [101]])
    info = segment_info(103, 3, 4, drop_remainder=False)
    assert (info.num_batches, info.last_sequence_length) == (9, 1)
    assert info.dropped_tokens == 1
    exact = segment_info(3 * 33, 3, 4, drop_remainder=False)
    assert (exact.num_batches, exact.dropped_tokens) == (8, 0)


def test_range_check_and_input_validation():
    ids = np.arange(40)
    segment_dataset(ids, 2, 4, vocabulary_size=40)
    with pytest.raises(CorpusError) as excinfo:
        segment_dataset(ids, 2, 4, vocabulary_size=39)
    assert "[0, 39]" in str(excinfo.value)
    with pytest.raises(CorpusError, match=r"\[-1, 38\]"):
        segment_dataset(ids - 1, 2, 4)
    with pytest.raises(TypeError, match="integer"):
        segment_dataset(ids.astype("float32"), 2, 4)
    with pytest.raises(ValueError, match="1-D"):
        segment_dataset(ids.reshape(4, 10), 2, 4)
    with pytest.raises(ValueError, match="batch_size"):
        segment_dataset(ids, 0, 4)


def test_too_short_corpus_is_refused():
    with pytest.raises(CorpusError) as excinfo:
        segment_dataset(np.arange(19), 4, 4)
    message = str(excinfo.value)
    assert "19 tokens" in message and "(20)" in message
    assert "\n" not in message
    assert num_batches(20, 4, 4) == 1
    # Without drop_remainder, two tokens per stream are enough.
    short = _batches(segment_dataset(np.arange(8), 4, 4, drop_remainder=False))
    assert len(short) == 1 and short[0][0].shape == (4, 1)
    with pytest.raises(CorpusError):
        segment_dataset(np.arange(7), 4, 4, drop_remainder=False)


def test_shards_are_fixed_blocks_of_global_rows():
    ids = np.arange(8 * 41)
    global_batches = _batches(segment_dataset(ids, 8, 5))
    for shard in range(4):
        rows = shard_streams(8, num_shards=4, shard_index=shard)
        np.testing.assert_array_equal(rows, [2 * shard, 2 * shard + 1])
        shard_batches = _batches(
            segment_dataset(ids, 8, 5, num_shards=4, shard_index=shard)
        )
        assert len(shard_batches) == len(global_batches)
        for (inputs, targets), (all_inputs, all_targets) in zip(
            shard_batches, global_batches
        ):
            np.testing.assert_array_equal(inputs, all_inputs[rows])
            np.testing.assert_array_equal(targets, all_targets[rows])
    with pytest.raises(ValueError, match="multiple"):
        shard_streams(6, num_shards=4, shard_index=0)
    with pytest.raises(ValueError, match="shard_index"):
        shard_streams(8, num_shards=4, shard_index=4)


@pytest.mark.backend_dependent
@pytest.mark.torch_ok
def test_dataset_feeds_fit_and_evaluate():
    vocabulary_size = 11
    ids = np.arange(2 * 3 * 8 + 2) % vocabulary_size
    dataset = segment_dataset(ids, 2, 8, vocabulary_size=vocabulary_size)
    model = keras.Sequential(
        [
            keras.Input((8,), batch_size=2, dtype="int32"),
            keras.layers.Embedding(vocabulary_size, 4),
            keras.layers.Dense(vocabulary_size),
        ]
    )
    model.compile(
        optimizer="sgd",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = model.fit(dataset, epochs=2, shuffle=False, verbose=0)
    assert len(history.history["loss"]) == 2
    assert np.isfinite(model.evaluate(dataset, verbose=0))
