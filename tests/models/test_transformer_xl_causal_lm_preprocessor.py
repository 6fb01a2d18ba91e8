"""TransformerXLCausalLMPreprocessor: the checks of keras-hub's
`run_preprocessor_test` (config round trip, direct call == tf.data
unbatched == tf.data batched, `sequence_length` override), written here
because keras-hub's `TestCase` imports `grain`, which keras-txl does not
need; plus `fit` and `generate` on strings with each kind of tokenizer
(the "word" one of `keras-txl train`, keras-hub's WordPiece over whole
words, included: text in, text out)."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_txl.data import make_tokenizer
from keras_txl.models import CharacterTokenizer
from keras_txl.models import TransformerXLCausalLMPreprocessor
from keras_txl.models import TransformerXLTokenizer
from tests.tiny_models import tokenizer_lm

WORDS = ["<eos>", "<unk>", "a", "b", "c"]


def _whole_words():
    """The "word" tokenizer of `keras-txl train --tokenizer word`:
    `<unk>` 0, `<eos>` 1, a 2, b 3, c 4."""
    return make_tokenizer("word", "a b c")


def _numpy(structure):
    return keras.tree.map_structure(
        lambda x: np.asarray(keras.ops.convert_to_numpy(x)), structure
    )


def _check_preprocessing_layer(layer, texts):
    """keras-hub's `run_preprocessing_layer_test` without grain."""
    config = json.dumps(layer.get_config(), sort_keys=True)
    revived = type(layer).from_config(json.loads(config))
    assert json.dumps(revived.get_config(), sort_keys=True) == config
    direct = _numpy(layer(texts))
    dataset = tf.data.Dataset.from_tensor_slices(texts)
    batched = _numpy(dataset.batch(len(texts)).map(layer).get_single_element())
    keras.tree.map_structure(np.testing.assert_array_equal, direct, batched)
    rows = [_numpy(element) for element in dataset.map(layer)]
    stacked = keras.tree.map_structure(lambda *x: np.stack(x), *rows)
    keras.tree.map_structure(np.testing.assert_array_equal, direct, stacked)
    return direct


@pytest.mark.parametrize("kind", ["word", "whole_words", "char"])
def test_preprocessor_like_keras_hub(kind):
    if kind == "word":
        tokenizer = TransformerXLTokenizer(WORDS)
        texts = ["a b c", "c", "a a a a a a a a"]
    elif kind == "whole_words":
        tokenizer = _whole_words()
        # Words at any whitespace (U+3000 too, inside tf.data as in
        # Python), a line break as `<eos>`.
        texts = ["a b\nc", "c", "a\u3000a a a a a a a"]
    else:
        tokenizer = CharacterTokenizer(vocabulary=list(" abc"))
        texts = ["ab c", "c", "aaaaaaaaaa"]
    preprocessor = TransformerXLCausalLMPreprocessor(
        tokenizer, sequence_length=6
    )
    x, y, weight = _check_preprocessing_layer(preprocessor, texts)
    assert x["token_ids"].shape == (3, 6)
    np.testing.assert_array_equal(x["token_ids"][:, 1:], y[:, :-1])
    if kind == "word":  # <eos> starts and ends each string, pads it
        np.testing.assert_array_equal(x["token_ids"][1], [0, 4, 0, 0, 0, 0])
        np.testing.assert_array_equal(y[1], [4, 0, 0, 0, 0, 0])
        np.testing.assert_array_equal(weight[1], [1, 1, 0, 0, 0, 0])
    elif kind == "whole_words":  # one id a word; <eos> starts, ends
        np.testing.assert_array_equal(x["token_ids"][0], [1, 2, 3, 1, 4, 1])
        np.testing.assert_array_equal(x["token_ids"][1], [1, 4, 1, 0, 0, 0])
        np.testing.assert_array_equal(x["token_ids"][2], [1, 2, 2, 2, 2, 2])
        np.testing.assert_array_equal(weight[1], [1, 1, 0, 0, 0, 0])
    else:  # nothing added; padded with id 0, masked out
        np.testing.assert_array_equal(x["token_ids"][1], [3, 0, 0, 0, 0, 0])
        np.testing.assert_array_equal(x["padding_mask"][1], [1, 0, 0, 0, 0, 0])
        np.testing.assert_array_equal(weight[1], [0, 0, 0, 0, 0, 0])
    preprocessor.sequence_length = 9
    assert preprocessor(texts)[0]["token_ids"].shape == (3, 9)
    assert preprocessor(texts, sequence_length=4)[1].shape == (3, 4)


_lm = tokenizer_lm


def test_fit_on_strings_keeps_strings_independent():
    keras.utils.set_random_seed(0)
    lm = _lm(TransformerXLTokenizer(WORDS))
    history = lm.fit(["a b c", "c a", "b b", "a"], batch_size=2, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    # Strings carry no memory: nothing was stored for the next batch.
    assert not lm.memory_state.has_state
    # A string's logits do not depend on the strings before it.
    x = lm.preprocessor(["a b c"])[0]
    alone = lm(x)
    lm(lm.preprocessor(["c c c"])[0])
    np.testing.assert_allclose(_numpy(lm(x)), _numpy(alone), atol=1e-6)

    # Beside a carried memory (token ids fitted first), strings neither
    # read it nor write it.
    ids = np.array([[2, 3, 4, 2], [4, 4, 3, 2]], "int32")
    lm.fit(ids, ids, batch_size=2, verbose=0, shuffle=False)
    held = _numpy(lm.memory_state.read())
    assert held["valid_length"].min() > 0
    assert np.abs(held["memory"]).max() > 0.01  # states to read
    strings = ["a b c", "c a"]
    lm.fit(strings, batch_size=2, verbose=0)
    after = _numpy(lm.memory_state.read())
    for key in held:
        np.testing.assert_array_equal(after[key], held[key])
    with_memory = lm.evaluate(strings, batch_size=2, verbose=0)
    lm.reset_memory()
    assert lm.evaluate(strings, batch_size=2, verbose=0) == pytest.approx(
        with_memory, abs=1e-6
    )


def test_token_ids_pass_through_the_preprocessor_with_memory():
    lm = _lm(TransformerXLTokenizer(WORDS))
    ids = np.array([[2, 3, 4, 2], [4, 4, 3, 2]], "int32")
    # The memory these ids leave, computed without the preprocessor (by
    # the weights before the step, which the step's forward pass uses).
    _, expected = lm.call_with_memory(ids)
    lm.fit(ids, ids, batch_size=2, verbose=0, shuffle=False)
    assert lm.memory_state.has_state  # ordered segments: memory carried
    # The ids reached the backbone unchanged (not tokenized again, not
    # shifted, no `<eos>` added): the memory carried is theirs.
    held = _numpy(lm.memory_state.read())
    expected = _numpy(expected)
    np.testing.assert_array_equal(held["valid_length"], [4, 4])
    np.testing.assert_allclose(held["memory"], expected["memory"], atol=1e-5)


@pytest.mark.parametrize("kind", ["word", "char"])
def test_generate_on_strings(kind):
    keras.utils.set_random_seed(1)
    if kind == "word":
        lm = _lm(TransformerXLTokenizer(WORDS))
        prompts = ["a b", "c"]
    else:
        lm = _lm(CharacterTokenizer(vocabulary=list(" abc")))
        prompts = ["ab", "c"]
    out = lm.generate(prompts, max_length=8, stop_token_ids=None)
    assert isinstance(out, list) and len(out) == 2
    for prompt, text in zip(prompts, out):
        assert isinstance(text, str) and text.startswith(prompt)
        assert len(text) > len(prompt)
    single = lm.generate(prompts[0], max_length=8, stop_token_ids=None)
    assert single == out[0]
    # "auto" stops at the end token when the tokenizer has one, else never.
    assert isinstance(lm.generate(prompts[0], max_length=8), str)
    # Token ids are not tokenized again: ids in, ids out.
    ids = lm.preprocessor.generate_preprocess(prompts, sequence_length=8)
    out_ids = lm.generate(dict(ids), stop_token_ids=None)
    assert lm.preprocessor.generate_postprocess(out_ids) == out


def test_generate_continues_a_line_of_whole_words():
    # A run of `keras-txl train --tokenizer word`: text in, text out.
    tokenizer = make_tokenizer("word", "the quick brown fox\nthe lazy dog")
    lm = _lm(tokenizer)
    text = lm.generate("the quick", max_length=8)
    assert isinstance(text, str) and text.startswith("the quick"), text
    # The line goes on: new words one space apart (the `<eos>` that ends
    # the line, where "auto" stops, a line break), none glued on.
    new = text[len("the quick") :]
    assert new == "" or new[0] in " \n", text
    # Never stopping, 6 new tokens must come: a continuation, not empty.
    text = lm.generate("the quick", max_length=8, stop_token_ids=None)
    new = text[len("the quick") :]
    assert text.startswith("the quick") and new.strip(), text
    assert new[0] in " \n", text
    assert set(text.split()) <= set(tokenizer.get_vocabulary())
