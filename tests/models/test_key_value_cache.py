"""Generation's key/value cache: `TransformerXLCausalLM.key_value_cache`
and `call_with_key_value_cache` compute what the graph computes on the
hidden-state memory, and `generate()` gives the same tokens either way."""

import collections

import keras
import numpy as np
import pytest

from keras_txl.ablation import AblationTransformerXLBackbone
from keras_txl.models import CompressiveTransformerXLBackbone
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from tests.test_case import to_numpy
from tests.tiny_models import backbone_config
from tests.tiny_models import generation_lm
from tests.tiny_models import padded
from tests.tiny_models import prompts_of

TINY = backbone_config(
    vocabulary_size=30, num_layers=3, memory_length=5, initializer_range=0.5
)


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "options",
    [{}, {"pre_norm": True}, {"cutoffs": [10, 20], "div_val": 2}],
    ids=["post_norm", "pre_norm", "adaptive_embedding"],
)
@pytest.mark.parametrize("segment_length", [1, 3])
def test_cache_steps_equal_memory_steps(options, segment_length):
    check_cache_steps(options, segment_length)


@pytest.mark.torch_ok
def test_cache_steps_equal_memory_steps_same_length_clamp():
    # The paper's evaluation flags (benchmarks/paper_eval.py evaluates
    # segments of 128 from the cache with them).
    check_cache_steps({"same_length": True, "clamp_length": 3}, 3)


def check_cache_steps(options, segment_length):
    # From an empty memory (its slots fill over the first steps) to a full
    # one that drops its oldest states: 6 segments.
    keras.utils.set_random_seed(0)
    lm = TransformerXLCausalLM(TransformerXLBackbone(**TINY, **options))
    rng = np.random.default_rng(1)
    memory = lm.backbone.initial_memory(2)
    cache = lm.key_value_cache(memory)
    for _ in range(6):
        tokens = rng.integers(0, 30, (2, segment_length)).astype("int32")
        expected, memory = lm.call_with_memory(tokens, memory)
        got, _, cache = lm.call_with_key_value_cache(tokens, cache)
        # Logits reach about 6: float32 sums in another order differ by
        # 2e-5 there after six segments (XLA on CPU, 2 cores).
        np.testing.assert_allclose(
            to_numpy(got), to_numpy(expected), rtol=1e-5, atol=1e-5
        )
        # The cache holds what projecting the new memory gives.
        projected = lm.key_value_cache(memory)
        for layer, expected_layer in zip(
            cache["key_values"], projected["key_values"]
        ):
            np.testing.assert_allclose(
                to_numpy(layer), to_numpy(expected_layer), atol=1e-5
            )
        np.testing.assert_array_equal(
            to_numpy(cache["valid_length"]),
            to_numpy(projected["valid_length"]),
        )
    assert to_numpy(cache["valid_length"]).tolist() == [5, 5]
    assert [tuple(layer.shape) for layer in cache["key_values"]] == [
        (2, 5, 2 * 2 * 4)
    ] * 3


def test_position_keys_are_computed_once_per_length(monkeypatch):
    """`generate()` projects the position embeddings once per segment
    length it runs (`_position_keys(T, M)`, one `(heads, head_dim, M + T
    + 1)` per layer: T = 1 for the steps, the segment length and 8 for the
    prompt); the steps take them and project none themselves."""
    keys = TransformerXLCausalLM(TransformerXLBackbone(**TINY))._position_keys(
        1, 5
    )
    assert len(keys) == 3
    assert [tuple(k.shape) for k in keys] == [(2, 4, 7)] * 3

    lm = generation_lm(memory_length=6)
    # Eager: TensorFlow and torch run the Python of every step (JAX traces
    # its loops' bodies once), so the counts are of steps.
    lm.compile(sampler="greedy", run_eagerly=True)
    backbone = lm.backbone
    counts = collections.Counter()
    in_step = []

    def counted(name, function, inside_steps_only=False):
        def wrapper(*args, **kwargs):
            if in_step or not inside_steps_only:
                counts[name] += 1
            if name == "steps":
                in_step.append(True)
            try:
                return function(*args, **kwargs)
            finally:
                if name == "steps":
                    in_step.pop()

        return wrapper

    monkeypatch.setattr(
        lm, "_position_keys", counted("once", lm._position_keys)
    )
    monkeypatch.setattr(
        lm,
        "call_with_key_value_cache",
        counted("steps", lm.call_with_key_value_cache),
    )
    for block in backbone.transformer_layers:
        attention = block.attention
        project = counted("in steps", attention.position_keys, True)
        monkeypatch.setattr(attention, "position_keys", project)
    # 3-token prompts, segments of 4: the prompt's last 2 tokens and the 9
    # new ones are one-token steps.
    prompts = padded(prompts_of([3, 3], seed=4), 12)
    lm.generate(prompts, stop_token_ids=None, segment_length=4)
    assert counts["once"] == 3  # T = 1, 4 and 8, never again per step
    assert counts["in steps"] == 0
    many = 2 if keras.backend.backend() == "jax" else 11
    assert counts["steps"] >= many, counts


@pytest.mark.parametrize("pre_norm", [False, True])
def test_generate_gives_the_tokens_of_the_graph(pre_norm):
    lm = generation_lm(seed=5, memory_length=6, pre_norm=pre_norm)
    prompts = padded(prompts_of([3, 7, 1], seed=4), 20)
    cached = lm.generate(prompts, stop_token_ids=None)
    lm.backbone.generates_from_key_values = False
    lm.generate_function = None  # compiled again, through the graph
    graph = lm.generate(prompts, stop_token_ids=None)
    np.testing.assert_array_equal(cached["token_ids"], graph["token_ids"])
    # The tokens moved: equal outputs say something.
    assert len(set(np.asarray(cached["token_ids"])[0, 3:].tolist())) > 2


def test_the_variants_generate_through_their_graph():
    assert TransformerXLBackbone.generates_from_key_values
    assert not CompressiveTransformerXLBackbone.generates_from_key_values
    assert not AblationTransformerXLBackbone.generates_from_key_values
