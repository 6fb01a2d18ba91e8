"""Text from a trained model through `TransformerXLCausalLM.generate`."""

import keras_hub
import numpy as np

from keras_txl.utils.validation import check_positive_int

# The keras-hub samplers that `TransformerXLCausalLM.generate` runs (the
# contrastive sampler reads hidden states this model does not keep, the
# speculative one needs a draft model).
SAMPLERS = ("greedy", "top_k", "top_p", "random", "beam")


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
            f"only. Received: sampler={name!r}"
        )
    if top_p is not None and name != "top_p":
        raise ValueError(
            f"top_p={top_p} applies to the 'top_p' sampler only. "
            f"Received: sampler={name!r}"
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


def prompt_as_read(tokenizer, prompt):
    """`prompt` as the model reads it, `decode(encode(prompt))`: the prompt
    itself for byte and character tokenizers; for a word tokenizer its
    words, one space apart, and the end of its line. `generate_text`'s
    continuation follows it."""
    from keras_txl.data import decode
    from keras_txl.data import encode

    return decode(tokenizer, encode(tokenizer, prompt))


def generate_text(
    lm, tokenizer, prompt, max_length, sampler=None, memory_length=None
):
    """Continues `prompt` with `lm.generate`.

    The prompt is run once through the model in segments; then every new
    token is one step that attends to the memory of the tokens before it
    (see `TransformerXLCausalLM.generate`).

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

    Returns:
        The generated text, without the prompt: what follows
        `prompt_as_read(tokenizer, prompt)` in the decoded whole. With a
        byte tokenizer, whole characters only: valid UTF-8 text.
    """
    from keras_txl.data import decode
    from keras_txl.data import encode

    max_length = check_positive_int("max_length", max_length)
    ids = encode(tokenizer, prompt)
    if not len(ids):
        raise ValueError("The prompt must hold at least one token.")
    if max_length < len(ids):
        raise ValueError(
            f"max_length ({max_length}) is shorter than the prompt "
            f"({len(ids)} tokens): it counts the prompt's tokens and the "
            f"new ones. Use at least {len(ids)}."
        )
    if sampler is not None:
        lm.compile(sampler=sampler)
    token_ids = np.zeros((1, max_length), "int32")  # (1, max_length)
    token_ids[0, : len(ids)] = ids
    padding_mask = np.arange(max_length)[None] < len(ids)  # (1, max_length)
    outputs = lm.generate(
        {"token_ids": token_ids, "padding_mask": padding_mask},
        stop_token_ids=None,
        memory_length=memory_length,
    )
    # What the whole text adds to the prompt's: a word tokenizer joins
    # words with spaces (and ends the prompt's line), so the new ids
    # decoded alone would lose the separator before them.
    whole = decode(tokenizer, np.asarray(outputs["token_ids"])[0])
    if isinstance(tokenizer, keras_hub.tokenizers.ByteTokenizer):
        # Text, not bytes: whole characters (an incomplete one at the end
        # held back), an invalid byte as U+FFFD.
        from keras_txl.data.byte_tokenizer import bytes_to_text

        whole = bytes_to_text(whole.encode("utf-8", "surrogateescape"))
    return whole[len(decode(tokenizer, ids)) :]
