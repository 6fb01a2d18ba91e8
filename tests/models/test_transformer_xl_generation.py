import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from tests.tiny_models import GENERATION_VOCABULARY_SIZE
from tests.tiny_models import generation_lm
from tests.tiny_models import padded
from tests.tiny_models import prompts_of
from tests.tiny_models import tiny_lm

VOCABULARY_SIZE = GENERATION_VOCABULARY_SIZE


def greedy_by_recomputation(lm, prompt, max_length):
    """The greedy tokens of a loop that runs the whole prefix, with an
    empty memory, for every new token. (The prefix is right-padded to
    `max_length`, one shape for every step; the model is causal, so the
    padding does not change the logits of the prefix.)"""
    tokens = list(prompt)
    empty = lm.backbone.initial_memory(1, memory_length=0)
    while len(tokens) < max_length:
        prefix = np.zeros((1, max_length), "int32")
        prefix[0, : len(tokens)] = tokens
        logits, _ = lm.call_with_memory(prefix, empty)
        logits = ops.convert_to_numpy(logits)[0, len(tokens) - 1]
        tokens.append(int(np.argmax(logits)))
    return tokens


def greedy_by_steps(lm, prompt, max_length, memory_length, start="empty"):
    """The greedy tokens of a Python loop of single-token
    `call_with_memory` steps with a memory of `memory_length`."""
    memory = lm.backbone.initial_memory(1, memory_length, start=start)
    tokens = list(prompt)
    for position in range(max_length - 1):
        step = np.array([[tokens[position]]], "int32")
        logits, memory = lm.call_with_memory(step, memory)
        if position + 1 >= len(tokens):
            logits = ops.convert_to_numpy(logits)[0, -1]
            tokens.append(int(np.argmax(logits)))
    return tokens


def logits_by_steps(lm, tokens, memory_length):
    """The logits `(batch, T, vocabulary)` after each of `tokens` `(batch,
    T)`, by single-token `call_with_memory` steps with a memory of
    `memory_length`."""
    memory = lm.backbone.initial_memory(len(tokens), memory_length)
    columns = []
    for position in range(tokens.shape[1]):
        step = np.asarray(tokens[:, position : position + 1], "int32")
        logits, memory = lm.call_with_memory(step, memory)
        columns.append(ops.convert_to_numpy(logits)[:, -1])
    return np.stack(columns, axis=1)


@pytest.mark.torch_ok
def test_greedy_with_memory_equals_recomputing_the_prefix():
    lm = generation_lm()
    max_length = 24
    # 7 prompt tokens: two segments of 3 in memory, then steps of one.
    prompt = [3, 17, 5, 22, 9, 1, 30]
    out = lm.generate(
        padded([prompt], max_length),
        stop_token_ids=None,
        segment_length=3,
        memory_length=max_length,
    )
    expected = greedy_by_recomputation(lm, prompt, max_length)
    assert out["token_ids"][0].tolist() == expected
    assert len(set(expected[7:])) >= 5  # not one token over and over
    assert out["padding_mask"].all()


def test_generation_equals_single_token_steps():
    """A prompt read in segments (of 4 and 1 here) gives the tokens of
    feeding it one token at a time, for either memory start, with a
    memory that slides past the prompt's start (3 < 13 prompt tokens)
    and one that never slides (24). (Reading the prompt's segments
    through the graph, where a segment's last token sees the memory and
    the whole segment, gives other tokens for this seed.)

    `memory_start="zeros"` generates from attended zero vectors, as
    `initial_memory(start="zeros")` (HuggingFace, the authors' TensorFlow
    code), and differs from the empty start."""
    lm = generation_lm(seed=3)
    prompt, max_length = prompts_of([13], seed=3)[0], 24
    tokens = {}
    for start in ("empty", "zeros"):
        for memory_length in (3, 24):
            out = lm.generate(
                padded([prompt], max_length),
                stop_token_ids=None,
                segment_length=4,
                memory_length=memory_length,
                memory_start=start,
            )["token_ids"][0].tolist()
            steps = greedy_by_steps(
                lm, prompt, max_length, memory_length, start
            )
            assert out == steps, (start, memory_length)
            tokens[start, memory_length] = steps
        assert tokens[start, 3] != tokens[start, 24]  # the short one slid
    # The zeros stay in the long memory: they change the text.
    assert tokens["zeros", 24] != tokens["empty", 24]


def test_mixed_length_prompts_match_each_prompt_alone():
    lm = generation_lm(seed=3)
    max_length = 14
    prompts = prompts_of([2, 9, 5], seed=3)
    together = lm.generate(
        padded(prompts, max_length), stop_token_ids=None, segment_length=4
    )["token_ids"]
    for row, prompt in enumerate(prompts):
        alone = lm.generate(
            padded([prompt], max_length),
            stop_token_ids=None,
            segment_length=4,
        )["token_ids"]
        assert together[row].tolist() == alone[0].tolist()
        assert together[row, : len(prompt)].tolist() == prompt


def spy_steps(lm):
    """Records `(token shape, memory shape)` of every backbone step of
    `generate()`: the graph's (`_generate_segment`, memory states `(batch,
    L, M, hidden)`) and the key/value cache's (`call_with_key_value_cache`,
    memory `(batch, M, 2 * heads * head_dim)` per layer)."""
    calls = []
    generate_segment = lm._generate_segment
    cached_step = lm.call_with_key_value_cache

    def spy_graph(token_ids, memory):
        shape = tuple(memory["memory"].shape)
        calls.append((tuple(token_ids.shape), shape[0], shape[2], "graph"))
        return generate_segment(token_ids, memory)

    def spy_cache(token_ids, cache, position_keys=None, **options):
        shape = tuple(cache["key_values"][0].shape)
        calls.append((tuple(token_ids.shape), shape[0], shape[1], "cache"))
        return cached_step(token_ids, cache, position_keys, **options)

    lm._generate_segment = spy_graph
    lm.call_with_key_value_cache = spy_cache
    return calls


@pytest.mark.torch_ok
def test_memory_and_step_cost_stay_fixed_past_the_memory_length():
    """Output 3x longer than the memory: every backbone step gets the same
    fixed-size memory and one token (or a prompt segment), and the tokens
    are those of single-token steps over a sliding memory."""
    memory_length, max_length = 4, 12
    lm = generation_lm()
    calls = spy_steps(lm)
    prompts = [[3, 17, 5], [22, 9, 1, 4, 7]]
    out = lm.generate(
        padded(prompts, max_length),
        stop_token_ids=None,
        memory_length=memory_length,
        segment_length=2,
    )
    # Traced once per loop under jit, called per step when eager. The
    # prompt's first whole segment, its last token and the new ones all
    # run on the cache.
    assert {call[1:3] for call in calls} == {(2, memory_length)}
    assert {(call[0], call[3]) for call in calls} == {
        ((2, 2), "cache"),
        ((2, 1), "cache"),
    }
    for row, prompt in enumerate(prompts):
        expected = greedy_by_steps(lm, prompt, max_length, memory_length)
        assert out["token_ids"][row].tolist() == expected
    # A memory shorter than the context forgets: not the full-context text.
    full = greedy_by_recomputation(lm, prompts[0], max_length)
    assert out["token_ids"][0].tolist() != full


def spy_memory_lengths(lm):
    """The memory length of every backbone step of `generate()`."""
    calls = spy_steps(lm)

    class Lengths:
        def __iter__(self):
            return iter([call[2] for call in calls])

        def clear(self):
            calls.clear()

    return Lengths()


@pytest.mark.torch_ok
def test_default_memory_is_the_models_own_not_max_length():
    """By default a token attends to the model's memory (8), whatever the
    length asked for (3x longer): the cost per token does not grow with
    `max_length`; a longer memory stays an argument."""
    lm = generation_lm(memory_length=8)
    prompt, max_length = [3, 17, 5], 24
    lengths = spy_memory_lengths(lm)
    out = lm.generate(padded([prompt], max_length), stop_token_ids=None)
    assert set(lengths) == {8}
    expected = greedy_by_steps(lm, prompt, max_length, memory_length=8)
    assert out["token_ids"][0].tolist() == expected
    lengths.clear()
    lm.generate(
        padded([prompt], max_length), stop_token_ids=None, memory_length=20
    )
    assert set(lengths) == {20}


def test_model_without_memory_generates_with_the_whole_context():
    lm = generation_lm(memory_length=0)
    lengths = spy_memory_lengths(lm)
    lm.generate(padded([[3, 17]], 10), stop_token_ids=None)
    assert set(lengths) == {10}


def test_stop_tokens_end_rows_in_the_padding_mask():
    lm = generation_lm(seed=6)
    max_length = 12
    prompts = prompts_of([3, 5], seed=7)
    # Stop on the first new token of row 0: the greedy token after its
    # prompt (3 tokens, all in the memory of 8).
    logits, _ = lm.call_with_memory(
        np.array(prompts[:1], "int32"), lm.backbone.initial_memory(1)
    )
    stop = int(np.argmax(ops.convert_to_numpy(logits)[0, -1]))
    out = lm.generate(padded(prompts, max_length), stop_token_ids=(stop,))
    mask = out["padding_mask"]
    assert mask[0].tolist() == [True] * 4 + [False] * (max_length - 4)
    tokens = out["token_ids"][1].tolist()
    new = [i for i in range(5, max_length) if tokens[i] == stop]
    last = new[0] if new else max_length - 1
    assert mask[1].tolist() == [i <= last for i in range(max_length)]


# Greedy, top-k, top-p and random share keras-hub's base sampler loop (only
# the choice from the logits differs); beam search also reorders the memory.
@pytest.mark.parametrize(
    "sampler",
    ["top_k", keras_hub.samplers.BeamSampler(num_beams=2)],
    ids=["top_k", "beam"],
)
def test_keras_hub_samplers_generate_after_the_prompts(sampler):
    lm = generation_lm(seed=8, sampler=sampler)
    prompts = prompts_of([4, 2], seed=9)
    out = lm.generate(
        padded(prompts, 10), stop_token_ids=None, memory_length=6
    )["token_ids"]
    assert out.shape == (2, 10)
    # Each new token is one of the `top` most likely after its own prefix
    # (a beam's token is one of its `num_beams` best: the beams keep the
    # best (beam, token) pairs), by single steps with the same memory.
    top = 5 if sampler == "top_k" else 2  # TopKSampler's k, num_beams
    logits = logits_by_steps(lm, out, memory_length=6)
    for row, prompt in enumerate(prompts):
        tokens = out[row].tolist()
        assert tokens[: len(prompt)] == prompt
        for position in range(len(prompt), 10):
            best = np.argsort(logits[row, position - 1])[::-1][:top]
            assert tokens[position] in best, (row, position, tokens)


def test_beam_search_with_one_beam_is_greedy():
    lm = generation_lm(seed=10)
    prompts = prompts_of([4, 2], seed=11)
    greedy = lm.generate(padded(prompts, 10), stop_token_ids=None)
    lm.compile(sampler=keras_hub.samplers.BeamSampler(num_beams=1))
    beam = lm.generate(padded(prompts, 10), stop_token_ids=None)
    np.testing.assert_array_equal(beam["token_ids"], greedy["token_ids"])


def test_generate_on_strings_with_a_preprocessor():
    tokenizer = keras_hub.tokenizers.ByteTokenizer()
    # ByteTokenizer has no special tokens; CausalLMPreprocessor reads them.
    tokenizer.start_token_id = None
    tokenizer.end_token_id = None
    tokenizer.pad_token_id = 0
    preprocessor = keras_hub.models.CausalLMPreprocessor(
        tokenizer=tokenizer,
        sequence_length=12,
        add_start_token=False,
        add_end_token=False,
    )
    lm = tiny_lm(
        seed=12, preprocessor=preprocessor, vocabulary_size=256, num_layers=1
    )
    lm.compile(sampler="greedy")
    texts = lm.generate(["hello", "a"], max_length=9, stop_token_ids=None)
    assert all(isinstance(text, str) for text in texts)
    assert texts[0].startswith("hello") and texts[1].startswith("a")
    single = lm.generate("hello", max_length=9, stop_token_ids=None)
    assert single == texts[0]


def test_generate_rejects_bad_arguments():
    lm = generation_lm()
    inputs = padded(prompts_of([3, 2]), 8)
    with pytest.raises(ValueError, match="memory_length=0"):
        lm.generate(inputs, stop_token_ids=None, memory_length=0)
    with pytest.raises(ValueError, match="segment_length=-2"):
        lm.generate(inputs, stop_token_ids=None, segment_length=-2)
    left_padded = {
        "token_ids": inputs["token_ids"],
        "padding_mask": inputs["padding_mask"][:, ::-1],
    }
    with pytest.raises(ValueError, match="right-padded.*Row 0"):
        lm.generate(left_padded, stop_token_ids=None)
    empty = padded([[4, 5], []], 8)
    with pytest.raises(ValueError, match="row 1 has none"):
        lm.generate(empty, stop_token_ids=None)


def test_tensorflow_generation_is_compiled_with_xla():
    """keras-hub compiles TensorFlow generation with the model's
    `jit_compile`, False on a CPU-only machine; generation compiles with
    XLA anyway (as on JAX) unless `jit_compile=False` was asked for, and
    the training setting is left as it was."""
    lm = generation_lm()
    training_jit = lm.jit_compile
    prompt = padded([[3, 17, 5]], 8)
    xla = lm.generate(prompt, stop_token_ids=None)["token_ids"]
    function = lm.generate_function
    assert lm.jit_compile == training_jit
    lm.compile(sampler="greedy", jit_compile=False)
    plain = lm.generate(prompt, stop_token_ids=None)["token_ids"]
    np.testing.assert_array_equal(xla, plain)
    if keras.backend.backend() == "tensorflow":
        assert function._jit_compile is True
        assert lm.generate_function._jit_compile is False
    else:
        # JAX compiles with jax.jit, torch runs op by op, as keras-hub does.
        assert (function is lm.generate_step) is (
            keras.backend.backend() == "torch"
        )


# === A stream across calls: `memory=` and `return_memory=` ===


def _rows(outputs):
    """Each returned row's tokens (`padding_mask` True), as lists."""
    return [
        row[keep].tolist()
        for row, keep in zip(outputs["token_ids"], outputs["padding_mask"])
    ]


@pytest.mark.torch_ok
def test_greedy_in_two_calls_equals_one_call_on_the_joined_text():
    """Ragged rows (prompts of 3 and 6 tokens; row 1 stops early, at
    token 37) with a memory of 12 slots, shorter than the text: the
    window slides the same way in two calls as in one (compiled on JAX
    and TensorFlow). The second call and the one call share a compiled
    function: the same lengths, each from a memory."""
    lm = generation_lm(seed=5, memory_length=12)
    first, then = prompts_of([3, 6], seed=20), prompts_of([4, 2], seed=21)
    out, memory = lm.generate(
        padded(first, 12), stop_token_ids=(37,), return_memory=True
    )
    lengths = out["padding_mask"].sum(axis=1).tolist()
    assert lengths == [12, 8], out  # the rows this test is about
    valid = ops.convert_to_numpy(memory["valid_length"]).tolist()
    assert valid == lengths
    more, _ = lm.generate(
        padded(then, 22),
        stop_token_ids=None,
        memory=memory,
        return_memory=True,
    )
    joined = [row + prompt for row, prompt in zip(_rows(out), then)]
    one, _ = lm.generate(
        padded(joined, 22),
        stop_token_ids=None,
        memory=lm.backbone.initial_memory(2, 12),  # empty: the default
        return_memory=True,
    )
    for row, length in enumerate(lengths):
        np.testing.assert_array_equal(
            one["token_ids"][row, length:],
            more["token_ids"][row, : 22 - length],
        )


@pytest.mark.torch_ok
def test_returned_memory_holds_each_row_of_the_returned_beam():
    """Beam search (3 beams) on ragged rows (row 0 stops at token 25), a
    memory longer than the rows: each row's memory is `call_with_memory`
    on that row's tokens, prompt and new ones, the last included, so it
    is the memory of the beam returned, whichever it is."""
    beam = keras_hub.samplers.BeamSampler(num_beams=3)
    lm = generation_lm(seed=10, memory_length=16, sampler=beam)
    prompts = prompts_of([2, 5], seed=11)
    out, memory = lm.generate(
        padded(prompts, 11), stop_token_ids=(25,), return_memory=True
    )
    states = ops.convert_to_numpy(memory["memory"])
    valid = ops.convert_to_numpy(memory["valid_length"]).tolist()
    rows = _rows(out)
    assert valid == [len(row) for row in rows] == [3, 7], out
    for b, row in enumerate(rows):
        _, expected = lm.call_with_memory(
            np.array([row]), lm.backbone.initial_memory(1, 16)
        )
        expected = ops.convert_to_numpy(expected["memory"])[0]
        np.testing.assert_allclose(
            states[b, :, -len(row) :], expected[:, -len(row) :], atol=1e-4
        )


def test_a_prompt_after_a_memory_gets_no_start_token():
    """On strings, the prompt that follows a memory is tokenized without
    the start token (`<eos>` here): the same memory as its token ids.
    (One compiled function: the same length and stop token each time.)"""
    from keras_txl.models import TransformerXLTokenizer
    from tests.tiny_models import tokenizer_lm

    tokenizer = TransformerXLTokenizer(["<eos>", "<unk>", "a", "b", "c"])
    lm = tokenizer_lm(tokenizer, memory_length=16, seed=3)
    start = lm.backbone.initial_memory(1, 16)
    _, memory = lm.generate(
        "a b", max_length=6, memory=start, return_memory=True
    )
    text, after_text = lm.generate(
        "c a", max_length=6, memory=memory, return_memory=True
    )
    out, after_ids = lm.generate(
        padded([[4, 2]], 6),
        stop_token_ids=(0,),
        memory=memory,
        return_memory=True,
    )
    assert lm.preprocessor.add_start_token  # as it was
    np.testing.assert_array_equal(
        ops.convert_to_numpy(after_text["valid_length"]),
        ops.convert_to_numpy(after_ids["valid_length"]),
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(after_text["memory"]),
        ops.convert_to_numpy(after_ids["memory"]),
        atol=1e-6,
    )
    assert [text] == lm.preprocessor.generate_postprocess(out)


def test_a_memory_that_does_not_fit_says_what_to_pass():
    lm = generation_lm()
    prompts = padded(prompts_of([3, 2]), 8)
    backbone = lm.backbone

    def generate(memory, **kwargs):
        lm.generate(prompts, stop_token_ids=None, memory=memory, **kwargs)

    memory = backbone.initial_memory(2)
    states = memory["memory"]  # (2, 2, 8, 16)
    for bad, error, message in [
        (backbone.initial_memory(3), ValueError, "holds 3 rows.*2 prompts"),
        ({"memory": states}, ValueError, "keys.*initial_memory"),
        (
            {**memory, "memory": np.zeros((2, 3, 8, 16), "float32")},
            ValueError,
            r"num_layers.*\(2, 3, 8, 16\)",
        ),
        (
            {**memory, "memory": np.zeros((2, 2, 8, 5), "float32")},
            ValueError,
            r"hidden_dim.*\(2, 2, 8, 5\)",
        ),
        (
            {**memory, "memory": np.zeros((2, 2, 8, 16), "int32")},
            TypeError,
            "float tensor",
        ),
        (backbone.initial_memory(2, 0), ValueError, "0 slots"),
    ]:
        with pytest.raises(error, match=message):
            generate(bad)
    with pytest.raises(ValueError, match=r"memory_length.*\(4\).*\(8\)"):
        generate(memory, memory_length=4)
    with pytest.raises(ValueError, match="memory_start='zeros'"):
        generate(memory, memory_start="zeros")
    with pytest.raises(ValueError, match="return_memory='yes'"):
        generate(None, return_memory="yes")
