"""Text from a trained model, one token at a time with explicit memory."""

import numpy as np

from keras_txl.utils.validation import check_positive_int


def sample_text(
    lm,
    tokenizer,
    prompt,
    length=200,
    top_k=5,
    memory_length=None,
    seed=0,
):
    """Continues `prompt` with `length` tokens sampled from the `top_k`
    most likely (`top_k=1`: greedy).

    Each token runs as a segment of one, with the memory of all the tokens
    before it passed explicitly (the model's dict inputs, as
    `call_with_memory`, compiled once by `predict_on_batch`): the context
    is the last `memory_length` tokens.

    Args:
        lm: a `TransformerXLCausalLM`.
        tokenizer: its tokenizer (`keras_txl.data.make_tokenizer`).
        prompt: non-empty str.
        length: int. Number of tokens to generate.
        top_k: int >= 1.
        memory_length: int or `None` (the backbone's memory length).
        seed: int. Seed of the sampling.

    Returns:
        The generated text (without the prompt).
    """
    from keras_txl.data import decode
    from keras_txl.data import encode

    length = check_positive_int("length", length)
    top_k = check_positive_int("top_k", top_k)
    ids = encode(tokenizer, prompt)
    if not len(ids):
        raise ValueError("`prompt` must hold at least one token.")
    memory = lm.backbone.initial_memory(1, memory_length)
    rng = np.random.default_rng(seed)

    def step(token, memory):
        outputs = lm.predict_on_batch(
            {"token_ids": np.array([[token]], "int32"), **memory}
        )
        memory = {
            "memory": outputs["memory"],
            "valid_length": outputs["valid_length"],
        }
        return np.asarray(outputs["logits"])[0, -1], memory

    for token in ids[:-1]:
        _, memory = step(int(token), memory)
    token, generated = int(ids[-1]), []
    for _ in range(length):
        logits, memory = step(token, memory)
        candidates = np.argsort(logits)[-top_k:]  # (k,)
        weights = np.exp(logits[candidates] - logits[candidates].max())
        token = int(rng.choice(candidates, p=weights / weights.sum()))
        generated.append(token)
    return decode(tokenizer, np.array(generated, "int32"))
