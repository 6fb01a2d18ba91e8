"""Bad input gets an error that names the argument, the value and the fix.

Every public constructor is tried with a bad value of each argument, and
every way of calling the model with bad token ids or a bad memory, eager
and inside `fit` (where values cannot raise: see `test_fit_*`).
"""

import re
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_txl import data
from keras_txl import layers
from keras_txl import models
from keras_txl.data.segments import segment_info
from keras_txl.data.segments import shard_streams
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from keras_txl.models.memory_state import MemoryState
from keras_txl.training.nan_guard import NanGuard
from tests.test_case import to_numpy
from tests.tiny_models import BACKBONE_KWARGS
from tests.tiny_models import VOCABULARY_SIZE
from tests.tiny_models import random_ids
from tests.tiny_models import tiny_lm

V = VOCABULARY_SIZE


def raises_naming(error, *words):
    """`pytest.raises(error)` whose message holds every one of `words`."""
    return pytest.raises(
        error,
        match="(?s)" + "".join(f"(?=.*{re.escape(word)})" for word in words),
    )


# === Constructors: every argument, bad values of its kind ===

POSITIVE_INT = [0, -1, 2.5, True, "3", None]
OPTIONAL_POSITIVE_INT = [0, -1, 2.5, True, "3"]
NON_NEGATIVE_INT = [-1, 1.5, False, "3", None]
OPTIONAL_NON_NEGATIVE_INT = [-1, 1.5, False, "3"]
RATE = [-0.1, 1.0, float("nan"), True, "0.1", None]
BOOL = [1, 0, "yes", None]
POSITIVE_FLOAT = [0.0, -1e-5, float("inf"), float("nan"), True, "1e-5"]

CONSTRUCTORS = {
    "RelativePositionEmbedding": (
        layers.RelativePositionEmbedding,
        dict(hidden_dim=8),
        dict(hidden_dim=POSITIVE_INT + [7], clamp_length=OPTIONAL_POSITIVE_INT),
    ),
    "RelativeMultiHeadAttention": (
        layers.RelativeMultiHeadAttention,
        dict(num_heads=2, head_dim=4),
        dict(
            num_heads=POSITIVE_INT,
            head_dim=POSITIVE_INT,
            output_dim=OPTIONAL_POSITIVE_INT,
            dropout=RATE,
            same_length=BOOL,
        ),
    ),
    "MemoryCache": (
        layers.MemoryCache,
        dict(),
        dict(memory_length=OPTIONAL_NON_NEGATIVE_INT),
    ),
    "MemoryState": (
        MemoryState,
        dict(num_layers=2, memory_length=4, hidden_dim=8),
        dict(
            num_layers=POSITIVE_INT,
            memory_length=NON_NEGATIVE_INT,
            hidden_dim=POSITIVE_INT,
        ),
    ),
    "TransformerXLBlock": (
        layers.TransformerXLBlock,
        dict(num_heads=2, head_dim=4, intermediate_dim=16),
        dict(
            num_heads=POSITIVE_INT,
            head_dim=POSITIVE_INT,
            intermediate_dim=POSITIVE_INT,
            dropout=RATE,
            attention_dropout=RATE,
            pre_norm=BOOL,
            same_length=BOOL,
            layer_norm_epsilon=POSITIVE_FLOAT,
        ),
    ),
    "TransformerXLBackbone": (
        TransformerXLBackbone,
        BACKBONE_KWARGS,
        dict(
            vocabulary_size=POSITIVE_INT,
            num_layers=POSITIVE_INT,
            num_heads=POSITIVE_INT,
            hidden_dim=POSITIVE_INT + [7],
            head_dim=POSITIVE_INT,
            intermediate_dim=POSITIVE_INT,
            memory_length=NON_NEGATIVE_INT,
            clamp_length=OPTIONAL_POSITIVE_INT,
            same_length=BOOL,
            pre_norm=BOOL,
            dropout=RATE,
            attention_dropout=RATE,
            layer_norm_epsilon=POSITIVE_FLOAT,
            initializer_range=POSITIVE_FLOAT,
            dtype=["int32", "complex64"],
        ),
    ),
    "segment_dataset": (
        data.segment_dataset,
        dict(token_ids=np.arange(100) % 7, batch_size=2, sequence_length=4),
        dict(
            batch_size=POSITIVE_INT,
            sequence_length=POSITIVE_INT,
            drop_remainder=BOOL,
            vocabulary_size=OPTIONAL_POSITIVE_INT,
            num_shards=POSITIVE_INT + [3],
            shard_index=[-1, 2, 1.0, None],
        ),
    ),
    "shard_streams": (
        shard_streams,
        dict(batch_size=4, num_shards=2, shard_index=0),
        dict(
            batch_size=POSITIVE_INT + [3],
            num_shards=POSITIVE_INT,
            shard_index=[-1, 2, 1.0, None],
        ),
    ),
    "segment_info": (
        segment_info,
        dict(num_tokens=100, batch_size=2, sequence_length=4),
        dict(
            num_tokens=[-1, 2.5],
            batch_size=POSITIVE_INT,
            sequence_length=POSITIVE_INT,
            drop_remainder=BOOL,
        ),
    ),
    "make_tokenizer": (
        data.make_tokenizer,
        dict(kind="char", corpus="abc"),
        dict(kind=["chars", None, 3], vocabulary_size=[0, -1, 1.5, "9"]),
    ),
    "CharacterTokenizer": (
        models.CharacterTokenizer,
        dict(vocabulary=["a", "b"]),
        dict(
            vocabulary=["ab", ["a", "a"], ["ab"], [1, 2]],
            oov_token=["", 3, "<unk>"],
            dtype=["float32"],
        ),
    ),
}


def _message_problem(call, error, words):
    """None if `call()` raises `error` naming all `words`, else what
    happened instead."""
    try:
        call()
    except error as caught:
        message = str(caught)
        missing = [word for word in words if word not in message]
        return f"message lacks {missing}: {message}" if missing else None
    except Exception as caught:  # noqa: BLE001 - reported below
        return f"{type(caught).__name__}: {caught}"
    return "no error"


@pytest.mark.torch_ok
@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_constructor_names_the_argument_and_the_value(name):
    factory, base, bad = CONSTRUCTORS[name]
    problems = {}
    for arg, values in bad.items():
        for value in values:
            # The message names the argument, says what it must be (the
            # fix) and, for a single value, echoes it as `arg=value`.
            words = [f"`{arg}", " must "]
            if not isinstance(value, list):
                words.append(f"{arg}={value!r}")
            problem = _message_problem(
                lambda: factory(**{**base, arg: value}),
                (ValueError, TypeError),
                words,
            )
            if problem:
                problems[f"{arg}={value!r}"] = problem
    assert problems == {}


@pytest.mark.torch_ok
def test_causal_lm_constructor_names_the_argument():
    backbone = TransformerXLBackbone(**BACKBONE_KWARGS)
    cases = {
        "tie_weights": ("yes", ["tie_weights", "'yes'"]),
        "memory_length": (-1, ["memory_length", "-1"]),
        "backbone": (keras.Sequential([]), ["backbone", "Sequential"]),
    }
    problems = {}
    for arg, (value, words) in cases.items():
        kwargs = {"backbone": backbone, arg: value}
        problem = _message_problem(
            lambda: TransformerXLCausalLM(**kwargs), ValueError, words
        )
        if problem:
            problems[arg] = problem
    assert problems == {}


# === Token ids, eager: three entry points ===

BAD_TOKENS = [
    (
        np.array([[1, 2, V]]),
        ValueError,
        ["token_ids", f"[1, {V}]", "tokenizer"],
    ),
    (np.array([[-1, 2, 3]]), ValueError, ["token_ids", "[-1, 3]"]),
    (np.array([[1.0, 2.0]]), TypeError, ["token_ids", "float", "int32"]),
    (np.array([[True]]), TypeError, ["token_ids", "bool"]),
    (np.array([1, 2, 3]), ValueError, ["token_ids", "rank 2", "(3,)"]),
    (np.zeros((1, 2, 3), "int32"), ValueError, ["token_ids", "(1, 2, 3)"]),
    (np.zeros((0, 3), "int32"), ValueError, ["token_ids", "(0, 3)"]),
]


@pytest.mark.torch_ok
@pytest.mark.parametrize("entry", ["lm", "lm.call_with_memory", "backbone"])
def test_bad_token_ids_are_refused_by_every_entry_point(tiny, entry):
    call = {
        "lm": tiny,
        "lm.call_with_memory": tiny.call_with_memory,
        "backbone": tiny.backbone.call_with_memory,
    }[entry]
    problems = {
        f"{tokens.dtype}{tokens.shape}": _message_problem(
            lambda: call(tokens), error, words
        )
        for tokens, error, words in BAD_TOKENS
    }
    if entry != "lm":
        # `model(x)` converts int64 to int32 first on JAX (x64 disabled),
        # which wraps ids >= 2**31: only the explicit calls see them.
        problems["2**40"] = _message_problem(
            lambda: call(np.array([[2**40]])),
            ValueError,
            ["token_ids", str(2**40)],
        )
    assert {k: v for k, v in problems.items() if v} == {}


@pytest.mark.torch_ok
def test_token_ids_as_python_lists_work(tiny):
    logits, _ = tiny.call_with_memory([[1, 2], [3, 4]])
    assert tuple(logits.shape) == (2, 2, V)
    with raises_naming(TypeError, "token_ids", "Tokenize"):
        tiny.call_with_memory("some text")


@pytest.fixture
def tiny():
    return tiny_lm()


# === Explicit memory ===


def _memory(shape=(2, 2, 4, 8), dtype="float32", valid=0, valid_dtype="int32"):
    return {
        "memory": np.zeros(shape, dtype),
        "valid_length": np.full((shape[0],), valid, valid_dtype),
    }


BAD_MEMORIES = {
    "batch": (_memory((3, 2, 4, 8)), ValueError, ["batch", "(3, 2, 4, 8)"]),
    "layers": (_memory((2, 3, 4, 8)), ValueError, ["num_layers", "(2, 3"]),
    "width": (_memory((2, 2, 4, 6)), ValueError, ["hidden_dim", "4, 6)"]),
    "rank": (_memory((2, 4, 8)), ValueError, ["shape", "initial_memory"]),
    "dtype": (_memory(dtype="int32"), TypeError, ["memory", "int32"]),
    "valid>M": (_memory(valid=5), ValueError, ["valid_length", "[5, 5]"]),
    "valid<0": (_memory(valid=-1), ValueError, ["valid_length", "[-1, -1]"]),
    "valid float": (
        _memory(valid_dtype="float32"),
        TypeError,
        ["valid_length", "float32"],
    ),
    "list": ([np.zeros((2, 2, 4, 8))], ValueError, ["memory", "dict"]),
    "no valid": ({"memory": np.zeros((2, 2, 4, 8))}, ValueError, ["valid"]),
}


@pytest.mark.torch_ok
def test_bad_memory_names_the_key_the_value_and_the_fix(tiny):
    tokens = random_ids((2, 3))
    problems = {
        case: _message_problem(
            lambda: tiny.call_with_memory(tokens, memory), error, words
        )
        for case, (memory, error, words) in BAD_MEMORIES.items()
    }
    assert {k: v for k, v in problems.items() if v} == {}


@pytest.mark.torch_ok
def test_other_float_memories_are_cast_to_float32(tiny):
    tokens = random_ids((2, 3))
    expected, _ = tiny.call_with_memory(tokens, _memory(valid=4))
    got, memory = tiny.call_with_memory(
        tokens, _memory(dtype="float16", valid=4)
    )
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), atol=1e-6)
    assert keras.backend.standardize_dtype(memory["memory"].dtype) == (
        "float32"
    )


# === Carried memory: one batch size ===


@pytest.mark.torch_ok
def test_a_loaded_model_takes_any_batch_size(tmp_path, tiny):
    tiny(random_ids((2, 3)))
    tiny.save(tmp_path / "lm.keras")
    loaded = keras.saving.load_model(tmp_path / "lm.keras", safe_mode=True)
    assert tuple(loaded(random_ids((5, 3))).shape) == (5, 3, V)
    with raises_naming(ValueError, "batch size 5", "batch_size=3"):
        loaded.build_memory(3)


def _pairs(rows, length=3, seed=0):
    tokens = random_ids((rows, length + 1), seed)
    return tokens[:, :-1], tokens[:, 1:]


def test_fit_refuses_arrays_whose_last_batch_is_smaller(tiny):
    x, y = _pairs(10)
    with raises_naming(ValueError, "10 rows", "batches of 4", "batch_size"):
        tiny.fit(x, y, batch_size=4, verbose=0)
    with raises_naming(ValueError, "10 rows", "batches of 4", "batch_size"):
        tiny.evaluate(x, y, batch_size=4, verbose=0)


def test_a_batch_size_change_mid_fit_is_a_clear_error(tiny):
    x, y = _pairs(10)
    # Batches of 4, 4, then 2, with no static batch size: the memory is
    # built for the first batch, the third cannot meet it and is named
    # (TensorFlow: by a check in the input pipeline; JAX and torch see
    # every batch's shape in the model).
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    steps = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: steps.append(batch)
    )
    with raises_naming(
        (ValueError, tf.errors.InvalidArgumentError), "4", "remainder"
    ):
        tiny.fit(dataset, callbacks=[record], verbose=0)
    assert steps == [0, 1]


def test_a_batch_of_another_size_is_refused_before_any_step(tiny):
    x, y = _pairs(10)
    tiny(x[:5])  # the carried memory now holds 5 streams
    with raises_naming(ValueError, "batch size 5", "a batch of size 2"):
        tiny.evaluate(x[:2], y[:2], batch_size=2, verbose=0)


def test_fit_checks_array_ids_and_targets_before_any_step(tiny):
    x, y = _pairs(10)
    bad = x.copy()
    bad[3, 1] = V + 5
    with raises_naming(ValueError, "`x`", f"[0, {V + 5}]"):
        tiny.fit(bad, y, batch_size=5, verbose=0)
    with raises_naming(ValueError, "`y`", f"[0, {V + 5}]"):
        tiny.fit(x, bad, batch_size=5, verbose=0)
    with raises_naming(TypeError, "`x`", "float32"):
        tiny.fit(x.astype("float32"), y, batch_size=5, verbose=0)
    with raises_naming(ValueError, "`x`", "rank 2"):
        tiny.fit(x[..., None], y, batch_size=5, verbose=0)
    spec = tf.data.Dataset.from_tensor_slices((x.astype("float32"), y))
    with raises_naming(TypeError, "`x`", "float32", "segment_dataset"):
        tiny.fit(spec.batch(5, drop_remainder=True), verbose=0)


# === Order ===


def test_a_shuffled_dataset_is_reported_and_segment_dataset_is_not(tiny):
    ids = random_ids((400,))
    ordered = data.segment_dataset(ids, 4, 3, vocabulary_size=V)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tiny.evaluate(ordered.take(2), verbose=0)
    assert not [w for w in caught if "shuffles" in str(w.message)]
    with pytest.warns(UserWarning, match=r"`x` shuffles its elements"):
        tiny.evaluate(ordered.shuffle(8).take(2), verbose=0)


# === Out-of-range ids inside fit (values cannot raise in a traced step) ===


def _dataset_with_bad_batch(bad_batch, where, value, batches=5, rows=4):
    """Batches of `rows` rows, ordered; batch `bad_batch` (1-based) holds
    `value` in its inputs or targets. Batches of 4 tokens by 3, as
    `test_a_batch_size_change_mid_fit_is_a_clear_error` fits: on JAX the
    two share one compiled train step (the persistent cache)."""
    x, y = _pairs(rows * batches, seed=1)
    (x if where == "inputs" else y)[rows * (bad_batch - 1), 1] = value
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    return dataset.batch(rows, drop_remainder=True)


def test_out_of_range_ids_in_a_traced_step_give_nan_logits(tiny):
    # JAX would give NaN for V and V + 100 and wrap -1 silently, and
    # TensorFlow on CPU raise for V: the model makes all three NaN.
    tiny(random_ids((2, 3)))  # built: predict traces every batch
    x, _ = _pairs(6)
    bad = {(1, 2): V, (3, 0): V + 100, (4, 1): -1}
    for (row, column), value in bad.items():
        x[row, column] = value
    dataset = tf.data.Dataset.from_tensor_slices(x).batch(2, True)
    logits = tiny.predict(dataset, verbose=0)  # (6, 3, V)
    is_nan = np.isnan(logits)
    for row in range(6):
        for column in range(3):
            expected = (row, column) in bad
            assert is_nan[row, column].all() == expected, (row, column)
            assert is_nan[row, column].any() == expected, (row, column)


def test_out_of_range_targets_in_fit_are_not_scored_silently(tiny):
    dataset = _dataset_with_bad_batch(2, "targets", V + 3)
    if keras.config.backend() == "tensorflow":
        # TensorFlow's loss kernel refuses the label itself, on CPU.
        with pytest.raises(tf.errors.InvalidArgumentError, match="label"):
            tiny.fit(dataset, verbose=0)
        return
    guard = NanGuard()
    tiny.fit(dataset, callbacks=[guard], verbose=0)
    assert guard.step == 2
