"""Property: every input gets a valid result or a documented exception.

Hypothesis draws arguments for the public constructors and calls, mixing
valid values with anything (negative, huge, NaN, Inf, bool, None,
strings). Each draw must either give a finite result of the documented
shape, or raise `ValueError` / `TypeError` whose message names one of the
arguments: never NaN, never another exception. About half the draws of
the constructors' arguments are all valid (`arguments`), and each test
requires a share of its draws to reach the shape and finiteness checks
(`run_fuzz`): a constructor that refused everything would fail it.
"""

import collections
import re

import keras
import numpy as np
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_txl import data
from keras_txl import layers
from keras_txl.models import TransformerXLBackbone
from tests.test_case import to_numpy
from tests.tiny_models import VOCABULARY_SIZE
from tests.tiny_models import tiny_lm

V = VOCABULARY_SIZE


def fuzz(max_examples):
    """Hypothesis settings of `max_examples` draws on TensorFlow, and half
    as many on the other backends. The checks of the arguments are the
    same code on every backend; what depends on the backend is the call,
    and there each draw of a new shape compiles every op again on JAX
    (measured on a loaded 2-core machine: the file takes 8 s on
    TensorFlow, 74 s on JAX with all the draws, 52 s with half)."""
    if keras.backend.backend() != "tensorflow":
        max_examples = max(8, max_examples // 2)
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,  # the same draws in every CI run
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


ANYTHING = st.one_of(
    st.integers(-3, 10),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=2),
)


def small_int(low=1, high=4):
    return st.one_of(st.integers(low, high), ANYTHING)


def rate():
    return st.one_of(st.sampled_from([0.0, 0.1, 0.5]), ANYTHING)


def flag():
    return st.one_of(st.booleans(), ANYTHING)


def positive_float():
    return st.one_of(st.floats(1e-6, 1.0), ANYTHING)


def arguments(**valid):
    """Keyword arguments drawn all from `valid` (the strategies of valid
    values) or each from `valid` or `ANYTHING`: with 13 arguments, mixed
    draws alone would almost never all be valid."""
    mixed = {name: st.one_of(value, ANYTHING) for name, value in valid.items()}
    return st.one_of(st.fixed_dictionaries(valid), st.fixed_dictionaries(mixed))


# Draws of the running fuzz test, and those that reached its checks.
TALLY = collections.Counter()


def checked():
    """Called by a draw after its shape and finiteness checks passed."""
    TALLY["checked"] += 1


def run_fuzz(fuzz_test, *args, share=0.25):
    """Runs the Hypothesis test `fuzz_test(*args)` and requires that at
    least `share` of its draws reached their checks (measured: 28% to 75%
    of each test's draws; 0 if a constructor refused everything)."""
    TALLY.clear()
    fuzz_test(*args)
    drawn, reached = TALLY["drawn"], TALLY["checked"]
    assert drawn > 0 and reached >= share * drawn, (
        f"{reached} of {drawn} draws reached the checks; "
        f"at least {share:.0%} must"
    )


def assert_documented(error, names):
    """`error` is a ValueError or TypeError that names an argument."""
    if not isinstance(error, (ValueError, TypeError)):
        raise AssertionError(f"undocumented {type(error).__name__}: {error}")
    message = str(error)
    assert any(re.search(rf"`{name}\b|\b{name}=", message) for name in names), (
        f"message names none of {sorted(names)}: {message}"
    )


def assert_finite(*tensors):
    for tensor in tensors:
        values = to_numpy(keras.ops.cast(tensor, "float32"))
        assert np.all(np.isfinite(values)), "non-finite output"


def _attempt(make, names):
    """`make()`, or None after checking that its error is documented."""
    TALLY["drawn"] += 1
    try:
        return make()
    except Exception as error:  # noqa: BLE001 - classified just below
        assert_documented(error, names)
        return None


RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 3, 8)).astype("float32")
MEMORY = RNG.normal(size=(2, 2, 8)).astype("float32")


@fuzz(30)
@given(
    kwargs=arguments(
        hidden_dim=st.integers(2, 8),
        clamp_length=st.one_of(st.none(), st.integers(1, 4)),
    )
)
def fuzz_relative_position_embedding(kwargs):
    layer = _attempt(lambda: layers.RelativePositionEmbedding(**kwargs), kwargs)
    if layer is not None:
        x = np.zeros((2, 3, layer.hidden_dim), "float32")
        out = layer(x, np.zeros((2, 2, layer.hidden_dim), "float32"))
        assert tuple(out.shape) == (5, layer.hidden_dim)
        assert_finite(out)
        checked()


@pytest.mark.torch_ok
def test_relative_position_embedding():
    run_fuzz(fuzz_relative_position_embedding)


@fuzz(25)
@given(
    kwargs=arguments(
        num_heads=st.integers(1, 4),
        head_dim=st.integers(1, 4),
        output_dim=st.one_of(st.none(), st.integers(1, 4)),
        dropout=st.sampled_from([0.0, 0.1, 0.5]),
        same_length=st.booleans(),
    ),
    valid=st.integers(-1, 3),
)
def fuzz_relative_multi_head_attention(kwargs, valid):
    layer = _attempt(
        lambda: layers.RelativeMultiHeadAttention(**kwargs), kwargs
    )
    if layer is None:
        return
    position = layers.RelativePositionEmbedding(8)(X, MEMORY)
    lengths = np.full((2,), max(valid, 0), "int32")
    if valid > MEMORY.shape[1]:
        # More valid slots than the memory has: one clear error.
        with pytest.raises(ValueError, match="memory_valid_length"):
            layer(X, position, memory=MEMORY, memory_valid_length=lengths)
        checked()
        return
    out = layer(
        X, position, memory=MEMORY, memory_valid_length=lengths, training=True
    )
    assert tuple(out.shape) == (2, 3, layer.output_dim or 8)
    assert_finite(out)
    checked()


@pytest.mark.torch_ok
def test_relative_multi_head_attention():
    run_fuzz(fuzz_relative_multi_head_attention)


@fuzz(25)
@given(
    memory_length=st.one_of(st.none(), small_int(0, 5)),
    old_length=st.integers(0, 4),
    new_length=st.integers(0, 4),
)
def fuzz_memory_cache(memory_length, old_length, new_length):
    kwargs = dict(memory_length=memory_length)
    cache = _attempt(lambda: layers.MemoryCache(**kwargs), kwargs)
    if cache is None:
        return
    memory = np.ones((2, old_length, 3), "float32")
    states = np.ones((2, new_length, 3), "float32")
    new, valid = cache(memory, np.zeros((2,), "int32"), states)
    length = old_length if memory_length is None else memory_length
    assert tuple(new.shape) == (2, length, 3)
    np.testing.assert_array_equal(to_numpy(valid), min(new_length, length))
    assert_finite(new)
    checked()


@pytest.mark.torch_ok
def test_memory_cache():
    run_fuzz(fuzz_memory_cache)


@fuzz(20)
@given(
    kwargs=arguments(
        num_heads=st.integers(1, 4),
        head_dim=st.integers(1, 4),
        intermediate_dim=st.integers(1, 4),
        dropout=st.sampled_from([0.0, 0.1, 0.5]),
        attention_dropout=st.sampled_from([0.0, 0.1, 0.5]),
        pre_norm=st.booleans(),
        same_length=st.booleans(),
        layer_norm_epsilon=st.floats(1e-6, 1.0),
    )
)
def fuzz_transformer_xl_block(kwargs):
    block = _attempt(lambda: layers.TransformerXLBlock(**kwargs), kwargs)
    if block is None:
        return
    position = layers.RelativePositionEmbedding(8)(X, MEMORY)
    out = block(X, position, memory=MEMORY, training=True)
    assert tuple(out.shape) == X.shape
    assert_finite(out)
    checked()


@pytest.mark.torch_ok
def test_transformer_xl_block():
    run_fuzz(fuzz_transformer_xl_block)


@fuzz(15)
@given(
    kwargs=arguments(
        vocabulary_size=st.integers(1, 30),
        num_layers=st.integers(1, 2),
        num_heads=st.integers(1, 2),
        hidden_dim=st.integers(2, 8),
        head_dim=st.integers(1, 4),
        intermediate_dim=st.integers(1, 8),
        memory_length=st.integers(0, 4),
        clamp_length=st.one_of(st.none(), st.integers(1, 4)),
        same_length=st.booleans(),
        pre_norm=st.booleans(),
        dropout=st.sampled_from([0.0, 0.1, 0.5]),
        layer_norm_epsilon=st.floats(1e-6, 1.0),
        initializer_range=st.floats(1e-6, 1.0),
    )
)
def fuzz_transformer_xl_backbone(kwargs):
    backbone = _attempt(lambda: TransformerXLBackbone(**kwargs), kwargs)
    if backbone is None:
        return
    tokens = np.arange(6).reshape(2, 3) % backbone.vocabulary_size
    output, memory = backbone.call_with_memory(tokens)
    output, memory = backbone.call_with_memory(tokens, memory)
    assert tuple(output.shape) == (2, 3, backbone.hidden_dim)
    assert_finite(output, memory["memory"])
    checked()


def test_transformer_xl_backbone():
    run_fuzz(fuzz_transformer_xl_backbone)


def _ids(low, high):
    return lambda dtype, shape, seed: (
        np.random.default_rng(seed).integers(low, high, shape).astype(dtype)
    )


# Half valid (int ids in the vocabulary, `(batch, T)`), half anything.
TOKENS = st.one_of(
    st.builds(
        _ids(0, V),
        dtype=st.sampled_from(["int32", "int64"]),
        shape=st.tuples(st.integers(1, 3), st.integers(1, 3)),
        seed=st.integers(0, 2**16),
    ),
    st.builds(
        _ids(-3, V + 3),
        dtype=st.sampled_from(["int32", "int64", "uint8", "float32", "bool"]),
        shape=st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple),
        seed=st.integers(0, 2**16),
    ),
)


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


@fuzz(30)
@given(tokens=TOKENS)
def fuzz_token_ids(lm, tokens):
    result = _attempt(lambda: lm.call_with_memory(tokens), ["token_ids"])
    if result is not None:
        logits, memory = result
        assert tuple(logits.shape) == tokens.shape + (V,)
        assert_finite(logits, memory["memory"])
        checked()


@pytest.mark.torch_ok
def test_token_ids(lm):
    run_fuzz(fuzz_token_ids, lm)


def _memory(shape, dtype, valid, valid_dtype, batch):
    return {
        "memory": np.ones(shape, dtype),
        "valid_length": np.full((batch,), valid, valid_dtype),
    }


# Half valid (the tiny model's `(2, layers 2, M, hidden 8)`, a valid
# length within M), half anything.
MEMORIES = st.one_of(
    st.integers(1, 4).flatmap(
        lambda m: st.builds(
            _memory,
            shape=st.just((2, 2, m, 8)),
            dtype=st.just("float32"),
            valid=st.integers(0, m),
            valid_dtype=st.sampled_from(["int32", "int64"]),
            batch=st.just(2),
        )
    ),
    st.builds(
        _memory,
        shape=st.lists(st.integers(1, 4), min_size=3, max_size=5)
        .map(tuple)
        .map(lambda s: s if len(s) != 4 else (2, 2) + s[2:3] + (8,)),
        dtype=st.sampled_from(["float32", "float16", "int32"]),
        valid=st.integers(-2, 6),
        valid_dtype=st.sampled_from(["int32", "int64", "float32"]),
        batch=st.sampled_from([2, 3]),
    ),
)


@fuzz(30)
@given(memory=MEMORIES)
def fuzz_memories(lm, memory):
    tokens = np.ones((2, 3), "int32")
    result = _attempt(
        lambda: lm.call_with_memory(tokens, memory),
        ["memory", "memory['memory']", "memory['valid_length']"],
    )
    if result is not None:
        logits, new = result
        assert tuple(new["memory"].shape) == memory["memory"].shape
        assert_finite(logits, new["memory"])
        checked()


@pytest.mark.torch_ok
def test_memories(lm):
    run_fuzz(fuzz_memories, lm)


@fuzz(25)
@given(
    # Enough tokens for every batch of valid arguments, or any number.
    length=st.one_of(st.integers(30, 60), st.integers(0, 60)),
    kwargs=arguments(
        batch_size=st.integers(1, 4),
        sequence_length=st.integers(1, 6),
        drop_remainder=st.booleans(),
        vocabulary_size=st.one_of(st.none(), st.integers(50, 80)),
    ),
)
def fuzz_segment_dataset(length, kwargs):
    batch_size = kwargs["batch_size"]
    ids = np.arange(length) % 50
    dataset = _attempt(
        lambda: data.segment_dataset(ids, **kwargs),
        list(kwargs) + ["num_tokens", "token_ids"],
    )
    if dataset is None:
        return
    inputs, targets = next(iter(dataset.as_numpy_iterator()))
    assert inputs.shape[0] == batch_size
    # Targets are the inputs shifted by one token, within each stream.
    np.testing.assert_array_equal(targets[:, :-1], inputs[:, 1:])
    checked()


def test_segment_dataset():
    run_fuzz(fuzz_segment_dataset)
