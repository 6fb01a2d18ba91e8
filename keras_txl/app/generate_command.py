"""`keras-txl generate`: text from a saved model."""

from keras_txl.app import artifacts
from keras_txl.app.console import printable
from keras_txl.app.sampling import generate_text
from keras_txl.app.sampling import make_sampler
from keras_txl.app.sampling import prompt_as_read
from keras_txl.utils import run_folder


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
):
    """Text from a saved model with `TransformerXLCausalLM.generate`:
    prints `prompt` and its continuation.

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

    Returns:
        The generated text (without the prompt).
    """
    chosen = make_sampler(sampler, top_k=top_k, top_p=top_p, seed=seed)
    lm = artifacts.load_model(model_dir)
    tokenizer = artifacts.load_tokenizer(model_dir)
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
