"""`TransformerXLCausalLM.score`: keras-hub's signature, and texts longer
than a segment scored with the memory carried."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.training.evaluation import evaluate_segments
from tests.test_case import models_freed_after
from tests.test_case import to_numpy
from tests.tiny_models import SEGMENT_LENGTHS
from tests.tiny_models import SegmentLengthsBackbone
from tests.tiny_models import tiny_lm

VOCABULARY_SIZE = 30


@pytest.fixture(scope="module")
def lm():
    return tiny_lm(
        build=True,
        vocabulary_size=VOCABULARY_SIZE,
        memory_length=6,
        initializer_range=0.3,
    )


def _ids(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, VOCABULARY_SIZE, shape).astype("int32")


def _hand_loop(lm, ids, segment_length, memory_length):
    """Losses of `ids[:, 1:]` by `call_with_memory`, segment by segment."""
    memory = lm.backbone.initial_memory(len(ids), memory_length=memory_length)
    losses = []
    for start in range(0, ids.shape[1] - 1, segment_length):
        end = min(start + segment_length, ids.shape[1] - 1)
        logits, memory = lm.call_with_memory(ids[:, start:end], memory)
        log_probs = to_numpy(ops.log_softmax(logits, axis=-1))
        targets = ids[:, start + 1 : end + 1, None]
        losses.append(-np.take_along_axis(log_probs, targets, -1)[..., 0])
    return np.concatenate(losses, axis=1)


def test_twenty_thousand_tokens_equal_a_hand_loop_of_call_with_memory(lm):
    ids = _ids((1, 20_001))
    losses = lm.score(
        ids[:, :-1],
        scoring_mode="loss",
        target_ids=ids[:, 1:],
        memory_length=50,
        segment_length=1000,
    )
    expected = _hand_loop(lm, ids, 1000, 50)
    assert tuple(losses.shape) == (1, 20_000)
    np.testing.assert_allclose(to_numpy(losses), expected, atol=1e-5)
    # The memory mattered: without it every segment starts cold.
    cold = lm.score(
        ids[:, :2001],
        scoring_mode="loss",
        target_ids=ids[:, 1:2002],
        memory_length=0,
        segment_length=1000,
    )
    cold_change = np.abs(to_numpy(cold)[0, 1000:] - expected[0, 1000:2001])
    assert cold_change.max() > 1e-3

    # The one-document evaluation is the same computation.
    result = evaluate_segments(
        lm,
        ids[0, :5001],
        batch_size=1,
        segment_length=1000,
        memory_length=50,
        return_token_losses=True,
    )
    np.testing.assert_allclose(
        result["token_losses"], expected[:, :5000], atol=1e-5
    )
    assert result["loss"] == pytest.approx(expected[:, :5000].mean(), 1e-5)


def test_logits_and_loss_modes_of_one_segment(lm):
    ids = _ids((2, 9), seed=1)
    logits = lm.score(ids[:, :-1])  # keras-hub's default mode: logits
    expected, _ = lm.call_with_memory(
        ids[:, :-1], lm.backbone.initial_memory(2)
    )
    np.testing.assert_allclose(to_numpy(logits), to_numpy(expected), atol=1e-5)
    losses = lm.score(ids[:, :-1], scoring_mode="loss", target_ids=ids[:, 1:])
    keras_hub_loss = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=None
    )(ids[:, 1:], expected)
    assert tuple(losses.shape) == (2, 8)
    np.testing.assert_allclose(
        to_numpy(losses), to_numpy(keras_hub_loss), atol=1e-5
    )


def test_layer_intercept_fn_sees_every_layer_and_feeds_the_memory(lm):
    ids = _ids((1, 12), seed=2)
    calls = []

    def identity(x, index):
        calls.append(index)
        return x

    plain = to_numpy(lm.score(ids, segment_length=6, memory_length=6))
    seen = to_numpy(
        lm.score(
            ids, segment_length=6, memory_length=6, layer_intercept_fn=identity
        )
    )
    assert calls == [-1, 0, 1] * 2  # two segments, two layers
    np.testing.assert_allclose(seen, plain, atol=1e-5)

    def zero_the_embeddings(x, index):
        return x * 0.0 if index == -1 else x

    changed = to_numpy(
        lm.score(
            ids[:, :6],
            segment_length=6,
            memory_length=6,
            layer_intercept_fn=zero_the_embeddings,
        )
    )
    assert np.abs(changed - plain[:, :6]).max() > 1e-3

    # What the function returns goes into the memory: the second segment
    # changes when only the first one's embeddings are zeroed.
    first = []

    def zero_the_first_segment(x, index):
        if index == -1:
            first.append(len(first) == 0)
        return x * 0.0 if first[-1] and index == -1 else x

    after = to_numpy(
        lm.score(
            ids,
            segment_length=6,
            memory_length=6,
            layer_intercept_fn=zero_the_first_segment,
        )
    )
    assert np.abs(after[:, 6:] - plain[:, 6:]).max() > 1e-3


def test_right_padding_changes_no_score_before_it(lm):
    ids = _ids((2, 10), seed=3)
    padded = ids.copy()
    padded[1, 6:] = 0
    mask = np.ones_like(ids, dtype=bool)
    mask[1, 6:] = False
    expected = to_numpy(lm.score(ids, segment_length=4))
    scores = to_numpy(lm.score(padded, padding_mask=mask, segment_length=4))
    np.testing.assert_allclose(scores[1, :6], expected[1, :6], atol=1e-5)
    np.testing.assert_allclose(scores[0], expected[0], atol=1e-5)


@pytest.mark.torch_ok
def test_texts_of_any_length_compile_one_step_per_bucket():
    # Segments of 16: texts of 1, 9 and 23 tokens give segments of 1, 9,
    # 16 and 7 tokens, run padded at their end to the buckets 8 and 16
    # (`bucket_length`), with the scores and memory of the unpadded ones.
    lm = tiny_lm(
        backbone_class=SegmentLengthsBackbone,
        vocabulary_size=VOCABULARY_SIZE,
        memory_length=6,
        initializer_range=0.3,
    )
    texts = [_ids((2, n + 1), seed=n) for n in (1, 9, 23)]
    runs = {}
    for pad in (True, False):
        SEGMENT_LENGTHS.clear()
        runs[pad] = [
            lm.score(
                ids[:, :-1],
                scoring_mode="loss",
                target_ids=ids[:, 1:],
                segment_length=16,
                pad_to_bucket=pad,
                return_memory=True,
            )
            for ids in texts
        ]
        runs[pad, "lengths"] = list(SEGMENT_LENGTHS)
    # The same scores, and the same memory after each text.
    for (padded, memory), (unpadded, expected) in zip(runs[True], runs[False]):
        assert padded.shape == unpadded.shape
        pairs = [(padded, unpadded)]
        pairs += [(memory[key], expected[key]) for key in expected]
        for got, want in pairs:
            np.testing.assert_allclose(
                to_numpy(got), to_numpy(want), rtol=1e-6, atol=1e-6
            )
    padded, unpadded = runs[True, "lengths"], runs[False, "lengths"]
    if keras.config.backend() == "jax":
        # One compilation per bucket: max(1, ceil(log2(16)) - 2) = 2.
        # Without buckets, one per other length (8 and 16 are compiled).
        assert sorted(padded) == [8, 16]
        assert sorted(unpadded) == [1, 7, 9]
    elif keras.config.backend() == "torch":  # a record per segment run
        assert set(padded) == {8, 16}
        assert set(unpadded) == {1, 7, 9, 16}
    # TensorFlow relaxes the traced lengths to None (`reduce_retracing`)
    # while XLA still compiles per length: nothing to count in Python.


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scoring_mode": "bits"}, "scoring_mode"),
        ({"scoring_mode": "loss"}, "target_ids"),
        ({"segment_length": 0}, "segment_length"),
        ({"target_ids": np.zeros((1, 3), "int32")}, "shape of `token_ids`"),
        ({"padding_mask": np.array([[0, 1, 1, 1]], bool)}, "right padding"),
    ],
)
def test_bad_arguments_say_what_to_fix(lm, kwargs, message):
    with pytest.raises(ValueError, match=message):
        lm.score(_ids((1, 4)), **kwargs)


@pytest.mark.torch_ok
def test_a_one_device_strategy_scores_as_no_strategy(lm):
    """`score(strategy=make_strategy("none"))` gives the scores and the
    memory of no strategy; `layer_intercept_fn` (eager, one device) is
    refused with one. Two replicas: tests/distribute/test_two_devices.py.
    """
    from keras_txl.distribute import make_strategy

    strategy = make_strategy("none")
    ids = _ids((3, 13))
    kwargs = dict(
        scoring_mode="loss",
        target_ids=ids[:, 1:],
        segment_length=6,
        return_memory=True,
    )
    alone, memory = lm.score(ids[:, :-1], **kwargs)
    placed, placed_memory = lm.score(ids[:, :-1], strategy=strategy, **kwargs)
    np.testing.assert_array_equal(to_numpy(placed), to_numpy(alone))
    for key, value in memory.items():
        np.testing.assert_array_equal(
            to_numpy(placed_memory[key]), to_numpy(value)
        )
    with pytest.raises(ValueError, match="Drop `strategy`"):
        lm.score(ids, strategy=strategy, layer_intercept_fn=lambda x, i: x)


@pytest.mark.torch_ok
def test_a_text_scored_in_two_calls_equals_one_call(lm):
    """A (2 segments of 5), then B (7: a shorter last segment) with A's
    memory: the scores of [A; B] in one call, per token, and the memory
    after B that of `call_with_memory` on the same segments."""
    ids = _ids((2, 18), seed=5)
    text, targets = ids[:, :-1], ids[:, 1:]
    kwargs = dict(scoring_mode="loss", segment_length=5)
    first, memory = lm.score(
        text[:, :10], target_ids=targets[:, :10], return_memory=True, **kwargs
    )
    rest, memory = lm.score(
        text[:, 10:],
        target_ids=targets[:, 10:],
        memory=memory,
        return_memory=True,
        **kwargs,
    )
    joined = to_numpy(lm.score(text, target_ids=targets, **kwargs))
    assert joined.shape[:2] == (2, 17)
    two = np.concatenate([to_numpy(first), to_numpy(rest)], axis=1)
    np.testing.assert_allclose(two, joined, atol=1e-5, rtol=0)
    expected = lm.backbone.initial_memory(2)
    for start in (0, 5, 10, 15):
        _, expected = lm.call_with_memory(text[:, start : start + 5], expected)
    for key in ("memory", "valid_length"):
        np.testing.assert_allclose(
            to_numpy(memory[key]), to_numpy(expected[key]), atol=1e-5
        )


def test_a_memory_that_does_not_fit_a_score_says_what_to_pass(lm):
    ids = _ids((2, 4))
    memory = lm.backbone.initial_memory(2)
    for kwargs, message in [
        ({"memory": lm.backbone.initial_memory(3)}, "holds 3 rows.*2"),
        ({"memory": {"memory": memory["memory"]}}, "keys"),
        ({"memory": memory, "memory_length": 4}, r"\(4\).*\(6\)"),
        ({"memory": memory, "memory_start": "zeros"}, "memory_start"),
        (
            {"return_memory": True, "padding_mask": ids > 100},
            "one length",
        ),
    ]:
        with pytest.raises(ValueError, match=message):
            lm.score(ids, **kwargs)


def test_the_compiled_steps_do_not_keep_the_model_alive():
    # `score` keeps its compiled step for the model (not on it): a model
    # scored and dropped is freed. In a fresh process (one for this and
    # dynamic evaluation's check): under pytest, TensorFlow keeps models
    # alive for reasons of its own (the code before this cache did too).
    assert models_freed_after()["score"]
