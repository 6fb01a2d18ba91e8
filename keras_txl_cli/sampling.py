"""Text from a trained model through `TransformerXLCausalLM.generate`."""

import keras
import keras_hub
import numpy as np

from keras_txl.utils.validation import check_positive_int
from keras_txl_cli.choices import SAMPLERS


def make_sampler(name, top_k=None, top_p=None, seed=None):
    """The keras-hub sampler `name`, for `lm.compile(sampler=...)`.

    Args:
        name: one of `SAMPLERS`.
        top_k: int >= 1 or `None`. The `k` of `"top_k"` (default 5) and of
            `"top_p"` (default: no cap).
        top_p: float in (0, 1] or `None`. The `p` of `"top_p"` (default
            0.1, keras-hub's).
        seed: int or `None`. Seed of the random samplers (`"top_k"`,
            `"top_p"`, `"random"`); greedy and beam search draw nothing.

    Returns:
        A `keras_hub.samplers.Sampler`.

    Example:

    >>> make_sampler("top_k", top_k=3, seed=0).k
    3
    """
    if name not in SAMPLERS:
        raise ValueError(
            f"`sampler` must be one of {list(SAMPLERS)}. Received: "
            f"sampler={name!r}"
        )
    if top_k is not None and name not in ("top_k", "top_p"):
        raise ValueError(
            f"top_k={top_k} applies to the 'top_k' and 'top_p' samplers "
            f"only. Received: sampler={name!r}. Pass sampler='top_k' "
            "(`--sampler top_k`), or leave top_k out."
        )
    if top_p is not None and name != "top_p":
        raise ValueError(
            f"top_p={top_p} applies to the 'top_p' sampler only. "
            f"Received: sampler={name!r}. Pass sampler='top_p' "
            "(`--sampler top_p`), or leave top_p out."
        )
    if top_k is not None:
        top_k = check_positive_int("top_k", top_k)
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"`top_p` must be in (0, 1]. Received: {top_p!r}")
    samplers = keras_hub.samplers
    if name == "greedy":
        return samplers.GreedySampler()
    if name == "beam":
        return samplers.BeamSampler()
    if name == "random":
        return samplers.RandomSampler(seed=seed)
    if name == "top_k":
        return samplers.TopKSampler(k=5 if top_k is None else top_k, seed=seed)
    return samplers.TopPSampler(
        p=0.1 if top_p is None else top_p, k=top_k, seed=seed
    )


def unknown_in_prompt(tokenizer, prompt):
    """What of `prompt` the vocabulary of `tokenizer` lacks, and the token
    that stands for it.

    Args:
        tokenizer: a run's tokenizer (`keras_txl.data.make_tokenizer`), or
            a `TransformerXLTokenizer`.
        prompt: str.

    Returns:
        `(unknown, oov_token)`: the characters (character tokenizers) or
        words (word tokenizers) of `prompt` outside the vocabulary, each
        once (characters in code point order, words in prompt order; none
        for a byte tokenizer, which reads every text), and the token they
        are read as (`None`: a character vocabulary saved before keras-txl
        reserved `<unk>`, which has no id for them).

    Example:

    >>> from keras_txl.data import make_tokenizer
    >>> unknown_in_prompt(make_tokenizer("char", "abc"), "cafe")
    (['e', 'f'], '<unk>')
    """
    from keras_txl.models import CharacterTokenizer
    from keras_txl.models import TransformerXLTokenizer
    from keras_txl.models.transformer_xl_tokenizer import (
        is_whole_word_tokenizer,
    )

    if isinstance(tokenizer, CharacterTokenizer):
        return tokenizer.unknown_characters(prompt), tokenizer.oov_token
    if isinstance(tokenizer, TransformerXLTokenizer):
        words, oov_token = tokenizer.split(prompt), tokenizer.unknown_token
    elif is_whole_word_tokenizer(tokenizer):
        words, oov_token = prompt.split(), tokenizer.oov_token
    else:
        return [], None
    known = set(tokenizer.get_vocabulary())
    unknown = [word for word in dict.fromkeys(words) if word not in known]
    return unknown, oov_token


def unknown_notice(command, where, tokenizer, unknown, oov_token):
    """The line of `keras-txl command` that names the characters (or
    words) `unknown` of `where` ("the prompt", a file) that the run's
    vocabulary lacks, and the token they are read as: what
    `unknown_in_prompt` returns (`oov_token` `None`: they are left
    out)."""
    kind = "character" if hasattr(tokenizer, "unknown_characters") else "word"
    read_as = (
        "left out (the run was saved without <unk>)"
        if oov_token is None
        else f"read as {oov_token}"
    )
    shown = " ".join(repr(token) for token in unknown[:20])
    if len(unknown) > 20:
        shown += f" and {len(unknown) - 20} more"
    return (
        f"keras-txl {command}: {len(unknown)} {kind}(s) of {where} not in "
        f"the run's vocabulary, {read_as}: {shown}"
    )


def prompt_as_read(tokenizer, prompt, continued=False):
    """`prompt` as the model reads it, which `generate_text` continues:
    the text of its tokens, as `TransformerXLCausalLM.generate` writes it
    (`TransformerXLCausalLMPreprocessor`). The prompt itself for byte and
    character tokenizers; for a word tokenizer its words, one space apart,
    each line break kept. `continued`: the prompt follows a memory (no
    start token)."""
    preprocessor = _preprocessor(tokenizer, add_start_token=not continued)
    prompt_ids = preprocessor.generate_preprocess(
        [prompt], sequence_length=_longest(prompt)
    )
    return preprocessor.generate_postprocess(prompt_ids)[0]


def generate_text(
    lm,
    tokenizer,
    prompt,
    max_length,
    sampler=None,
    memory_length=None,
    memory=None,
    return_memory=False,
):
    """Continues `prompt` with `lm.generate`.

    The prompt is run once through the model in segments; then every new
    token is one step that attends to the memory of the tokens before it
    (see `TransformerXLCausalLM.generate`). Text becomes tokens and tokens
    text as `lm.generate("text")` does it, through
    `TransformerXLCausalLMPreprocessor` (for a word tokenizer: the prompt
    is a line that goes on, after the `<eos>` of the line before it).

    Args:
        lm: a `TransformerXLCausalLM`.
        tokenizer: its tokenizer (`keras_txl.data.make_tokenizer`).
        prompt: str of at least one token.
        max_length: int. Tokens of prompt and continuation together, as
            the `max_length` of `keras_hub.models.CausalLM.generate`; at
            least the prompt's length.
        sampler: `None` (the sampler `lm` is compiled with), or a sampler
            name or `keras_hub.samplers.Sampler` (see `make_sampler`) to
            compile `lm` with first: `lm.compile(sampler=sampler)`, which
            also gives it a fresh optimizer and metrics.
        memory_length: int >= 1 or `None` (the model's memory length, or
            the whole context for a model without memory): tokens each new
            token attends to.
        memory: `None`, or the memory of the text before `prompt` (the
            memory dict `lm.generate(..., return_memory=True)` returned,
            of one row): the prompt goes on from it, without a start
            token.
        return_memory: bool. Also return the memory after the text (every
            token of the prompt and of the continuation).

    Returns:
        The generated text, without the prompt: what follows
        `prompt_as_read(tokenizer, prompt, memory is not None)` in the
        generated whole. With a byte tokenizer, whole characters only:
        valid UTF-8 text. With `return_memory`, `(text, memory)`.
    """
    max_length = check_positive_int("max_length", max_length)
    preprocessor = _preprocessor(tokenizer, add_start_token=memory is None)
    prompt_ids = preprocessor.generate_preprocess(
        [prompt], sequence_length=max(max_length, _longest(prompt))
    )
    prompt_ids = {
        key: np.asarray(keras.ops.convert_to_numpy(value))
        for key, value in prompt_ids.items()
    }
    length = int(prompt_ids["padding_mask"].sum())
    if not length:
        raise ValueError("The prompt must hold at least one token.")
    if max_length < length:
        raise ValueError(
            f"max_length ({max_length}) is shorter than the prompt "
            f"({length} tokens): it counts the prompt's tokens and the "
            f"new ones. Use at least {length}."
        )
    if sampler is not None:
        lm.compile(sampler=sampler)
    # Only a stream asks for the memory: other calls keep
    # `lm.generate`'s arguments as they were.
    streaming = {"memory": memory, "return_memory": True}
    outputs = lm.generate(
        {
            "token_ids": prompt_ids["token_ids"][:, :max_length],
            "padding_mask": prompt_ids["padding_mask"][:, :max_length],
        },  # (1, max_length) each
        stop_token_ids=None,
        memory_length=memory_length,
        **(streaming if memory is not None or return_memory else {}),
    )
    if memory is not None or return_memory:
        outputs, memory = outputs
    # What the whole text adds to the prompt's: a word tokenizer joins
    # words with spaces, so the new ids decoded alone would lose the
    # separator before them.
    whole = preprocessor.generate_postprocess(outputs)[0]
    text = whole[len(preprocessor.generate_postprocess(prompt_ids)[0]) :]
    return (text, memory) if return_memory else text


def _preprocessor(tokenizer, add_start_token=True):
    """The preprocessor of `lm.generate("text")` for `tokenizer`
    (`add_start_token=False`: of a prompt that goes on from a memory). A
    keras-hub `ByteTokenizer` (runs saved before keras-txl had its own)
    becomes keras-txl's, which writes whole characters only."""
    from keras_txl.models import TransformerXLCausalLMPreprocessor
    from keras_txl.models import Utf8ByteTokenizer

    if type(tokenizer) is keras_hub.tokenizers.ByteTokenizer:
        tokenizer = Utf8ByteTokenizer.from_config(tokenizer.get_config())
    return TransformerXLCausalLMPreprocessor(
        tokenizer, add_start_token=add_start_token
    )


def _longest(prompt):
    """A length that no tokenization of `prompt` exceeds (one token a
    byte at most, and a start token), so that none is cut off."""
    return len(prompt.encode("utf-8", "surrogateescape")) + 2
