"""`keras_txl_cli.sampling.generate_text`: the text `keras-txl generate`
prints after the prompt."""

import pytest

from keras_txl import data
from keras_txl.data.tokenization import encode
from keras_txl_cli.sampling import generate_text
from keras_txl_cli.sampling import prompt_as_read
from tests.tiny_models import tiny_lm

TEXT = "the cat sat on the mat\nthe dog sat on the log\n"
NEW = 5


@pytest.mark.parametrize("kind", ["word", "char"])
def test_prompt_and_continuation_read_as_one_text(kind):
    tokenizer = data.make_tokenizer(kind, TEXT)
    lm = tiny_lm(vocabulary_size=tokenizer.vocabulary_size())
    prompt = "the cat" if kind == "word" else "the c"
    ids = encode(tokenizer, prompt)
    head = prompt_as_read(tokenizer, prompt)  # `keras-txl generate` prints
    text = generate_text(  # ... then this
        lm, tokenizer, prompt, len(ids) + NEW, sampler="greedy"
    )
    if kind == "char":
        assert head == prompt and len(text) == NEW
        return
    # The words' prompt is a line that goes on (after the `<eos>` of the
    # line before it): the new words follow it, each after a space or a
    # new line, none glued to the prompt.
    assert head == "the cat"
    assert text[:1] in (" ", "\n"), text
    words = text.split()
    assert len(words) + text.count("\n") == NEW  # a word or <eos> each
    # The printed line: no new word glued to the prompt's last ("catsat").
    printed = (head + text).split()
    assert printed[:2] == ["the", "cat"]
    assert set(printed) <= set(tokenizer.get_vocabulary())


def test_word_run_reads_unseen_words_as_unk():
    from keras_txl.data import make_tokenizer
    from keras_txl_cli.sampling import prompt_as_read
    from keras_txl_cli.sampling import unknown_in_prompt

    tokenizer = make_tokenizer("word", "the cat sat\nthe dog")
    assert unknown_in_prompt(tokenizer, "the cow sat on é") == (
        ["cow", "on", "é"],
        "<unk>",
    )
    assert prompt_as_read(tokenizer, "the cow sat") == "the <unk> sat"
    char = make_tokenizer("char", "abc")
    assert unknown_in_prompt(char, "cafe\t") == (["\t", "e", "f"], "<unk>")
    assert unknown_in_prompt(make_tokenizer("byte"), "☕") == ([], None)
