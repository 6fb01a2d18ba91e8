"""`keras-txl generate`: text from a saved model."""

import sys

from keras_txl.app import artifacts
from keras_txl.app.console import printable
from keras_txl.app.sampling import generate_text
from keras_txl.app.sampling import make_sampler
from keras_txl.app.sampling import prompt_as_read
from keras_txl.app.sampling import unknown_in_prompt
from keras_txl.utils import run_folder


def _print_to_stderr(line):
    print(line, file=sys.stderr)


def generate(
    model_dir,
    prompt,
    max_length=200,
    sampler="top_k",
    top_k=None,
    top_p=None,
    memory_length=None,
    seed=0,
    log=print,
    warn=_print_to_stderr,
):
    """Text from a saved model with `TransformerXLCausalLM.generate`:
    prints `prompt` and its continuation.

    Any prompt goes in: characters (or words) the run's vocabulary lacks
    are read as its `<unk>`, and one line through `warn` names them. A
    character run saved before keras-txl reserved `<unk>` has no id for
    them: they are left out of the prompt, and that line says so.

    Args:
        model_dir: the `--output` folder of a `keras-txl train` run.
        prompt: str of at least one token (of the run's tokenizer).
        max_length: int. Tokens of prompt and continuation together (the
            `max_length` of `keras_hub.models.CausalLM.generate`).
        sampler, top_k, top_p, seed: the keras-hub sampler and its
            parameters (see `keras_txl.app.sampling.make_sampler`).
        memory_length: int >= 1 or `None`: tokens each new token attends
            to; `None` takes the run's `eval_memory_length` (the model's
            memory length if it is 0).
        log: function that prints a line.
        warn: function that prints the line on unknown characters or
            words (default: to stderr, so that stdout is the text alone).

    Returns:
        The generated text (without the prompt).
    """
    chosen = make_sampler(sampler, top_k=top_k, top_p=top_p, seed=seed)
    lm = artifacts.load_model(model_dir)
    tokenizer = artifacts.load_tokenizer(model_dir)
    prompt = _known_prompt(tokenizer, prompt, warn)
    if memory_length is None:
        run_config = run_folder.read_run_config(model_dir)
        memory_length = run_config.get("eval_memory_length")
    text = generate_text(
        lm,
        tokenizer,
        prompt,
        max_length,
        sampler=chosen,
        memory_length=memory_length or None,
    )
    log(printable(prompt_as_read(tokenizer, prompt) + text))
    return text


def _known_prompt(tokenizer, prompt, warn):
    """`prompt` as the run can read it, after one line through `warn`
    that names what its vocabulary lacks (if anything)."""
    unknown, oov_token = unknown_in_prompt(tokenizer, prompt)
    if not unknown:
        return prompt
    kind = "character" if hasattr(tokenizer, "unknown_characters") else "word"
    shown = " ".join(repr(token) for token in unknown[:20])
    if len(unknown) > 20:
        shown += f" and {len(unknown) - 20} more"
    line = (
        f"keras-txl generate: {len(unknown)} {kind}(s) of the prompt not "
        f"in the run's vocabulary, "
    )
    if oov_token is None:
        # A character vocabulary saved without `<unk>`: no id to read
        # them as.
        left_out = set(unknown)
        prompt = "".join(c for c in prompt if c not in left_out)
        line += "left out (the run was saved without <unk>)"
    else:
        line += f"read as {oov_token}"
    warn(f"{line}: {shown}")
    return prompt
