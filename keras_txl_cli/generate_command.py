"""`keras-txl generate`: text from a saved model. Its flags and checks
import nothing heavy; `generate` loads Keras.

    keras-txl generate DIR --prompt TEXT [--max-length N] [--sampler top_k]
                       [--state FILE]

With `--state FILE` the text is a stream that goes on from one command to
the next: FILE (`keras_txl_cli.stream_state`) holds the memory of the
stream so far, which the prompt continues, and is written back with the
memory after this call's text.
"""

import sys

from keras_txl_cli.choices import SAMPLERS
from keras_txl_cli.choices import integer
from keras_txl_cli.choices import number
from keras_txl_cli.console import printable
from keras_txl_cli.path_checks import prompt_tokens_at_least
from keras_txl_cli.stream_state import read_state


def add_parser(subparsers):
    """Adds `generate` to `subparsers` (the `keras-txl` subcommands)."""
    parser = subparsers.add_parser(
        "generate",
        help="continue a prompt with a saved model",
        description="Continues --prompt with TransformerXLCausalLM.generate "
        "(keras-hub's CausalLM.generate, the memory reused from token to "
        "token) and a keras-hub sampler, and prints the prompt and its "
        "continuation.",
    )
    parser.add_argument("model_dir", metavar="MODEL_DIR")
    parser.add_argument("--prompt", required=True)
    parser.add_argument(
        "--max-length",
        type=integer(1),
        default=200,
        metavar="N",
        help="length of the output in tokens, the prompt's included "
        "(keras-hub's max_length): N minus the prompt's tokens are new "
        "(default 200)",
    )
    parser.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default="top_k",
        help="keras-hub sampler (default top_k)",
    )
    parser.add_argument(
        "--top-k",
        type=integer(1),
        metavar="K",
        help="k of top_k (default 5) and top_p (default: no cap)",
    )
    parser.add_argument(
        "--top-p",
        type=number(1e-12, 1.0, True),
        metavar="P",
        help="p of top_p (default 0.1)",
    )
    parser.add_argument(
        "--memory-length",
        type=integer(1),
        help="tokens each new token attends to (default: those of the "
        "--state file, else the run's evaluation memory length)",
    )
    parser.add_argument(
        "--seed",
        type=integer(0),
        default=0,
        help="seed of top_k, top_p and random (default 0)",
    )
    parser.add_argument(
        "--state",
        metavar="FILE",
        help="continue the stream saved in FILE (made when absent): the "
        "prompt follows the text of the previous calls (no start token), "
        "and FILE is written back with the memory after this call's text. "
        "Greedy, two calls give the text of one call on the whole text. A "
        "state of another run, vocabulary or --memory-length is refused",
    )
    parser.set_defaults(run=run, check=check)


def check(args):
    """The error of `generate`'s flags found without Keras, or `None`: an
    empty prompt, or a --max-length shorter than the prompt's tokens
    (counted from the run's tokenizer file for characters and bytes), or
    a --state file that is damaged or of another run, vocabulary or
    memory length. The state read is kept in `args.stream_state`."""
    if not args.prompt:
        return "--prompt must not be empty."
    length = prompt_tokens_at_least(args.model_dir, args.prompt)
    if args.max_length < length:
        return (
            f"--max-length ({args.max_length}) is shorter than the prompt "
            f"({length} tokens): it counts the prompt's tokens and the new "
            f"ones. Use at least {length}."
        )
    args.stream_state = None
    if args.state is not None:
        try:
            args.stream_state = read_state(
                args.state, args.model_dir, args.memory_length
            )
        except ValueError as error:
            return str(error)
    return None


def run(args):
    """Runs `keras-txl generate` (Keras is imported by now)."""
    generate(
        args.model_dir,
        args.prompt,
        max_length=args.max_length,
        sampler=args.sampler,
        top_k=args.top_k,
        top_p=args.top_p,
        memory_length=args.memory_length,
        seed=args.seed,
        state=getattr(args, "stream_state", None),
    )
    return 0


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
    state=None,
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
            parameters (see `keras_txl_cli.sampling.make_sampler`).
        memory_length: int >= 1 or `None`: tokens each new token attends
            to; `None` takes the run's `eval_memory_length` (the model's
            memory length if it is 0); with a `state` that holds a
            memory, that memory's length (`read_state` refuses another).
        state: `None`, or the `keras_txl_cli.stream_state.StreamState`
            of a stream (`read_state`): the prompt goes on from its
            memory (if any), and the memory after the text is saved in
            its file.
        log: function that prints a line.
        warn: function that prints the line on unknown characters or
            words (default: to stderr, so that stdout is the text alone).

    Returns:
        The generated text (without the prompt).
    """
    from keras_txl.utils import run_folder
    from keras_txl_cli import artifacts
    from keras_txl_cli.sampling import generate_text
    from keras_txl_cli.sampling import make_sampler
    from keras_txl_cli.sampling import prompt_as_read

    chosen = make_sampler(sampler, top_k=top_k, top_p=top_p, seed=seed)
    lm = artifacts.load_model(model_dir)
    tokenizer = artifacts.load_tokenizer(model_dir)
    prompt = _known_prompt(tokenizer, prompt, warn)
    memory = None if state is None else state.memory
    continued = memory is not None
    if continued:
        memory_length = state.memory_length
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
        memory=memory,
        return_memory=state is not None,
    )
    if state is not None:
        text, memory = text
        state.save(lm.backbone.memory_spec.flatten(memory))
    read = prompt_as_read(tokenizer, prompt, continued=continued)
    log(printable(read + text))
    return text


def _known_prompt(tokenizer, prompt, warn):
    """`prompt` as the run can read it, after one line through `warn`
    that names what its vocabulary lacks (if anything)."""
    from keras_txl_cli.sampling import unknown_in_prompt
    from keras_txl_cli.sampling import unknown_notice

    unknown, oov_token = unknown_in_prompt(tokenizer, prompt)
    if not unknown:
        return prompt
    if oov_token is None:
        # A character vocabulary saved without `<unk>`: no id to read
        # them as.
        left_out = set(unknown)
        prompt = "".join(c for c in prompt if c not in left_out)
    warn(
        unknown_notice("generate", "the prompt", tokenizer, unknown, oov_token)
    )
    return prompt
