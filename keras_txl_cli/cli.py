"""The `keras-txl` command: train, evaluate and sample Transformer-XL
language models.

    keras-txl train                    # a small character model, builtin text
    keras-txl evaluate DIR [--corpus FILE]
    keras-txl generate DIR --prompt TEXT
    keras-txl export DIR OUT_DIR
    keras-txl convert hf://transfo-xl/transfo-xl-wt103 OUT_DIR
    keras-txl token-cache [--clear]
    keras-txl ablate | recl

Each subcommand is a module, `keras_txl_cli.<name>_command`, whose
`add_parser(subparsers)` adds its flags and sets `run` (a function of the
parsed arguments that returns the exit status) and optionally `check` (a
function of them that returns the first error found without Keras, or
`None`). Building the parser and these checks import no Keras,
TensorFlow or JAX.

Errors (a missing or empty corpus, a bad option, an output folder that
already holds a model) print one line on stderr and exit with status 1
(2 for a bad option); set `KERAS_TXL_DEBUG=1` for the traceback. The
command prints its own output only; `keras-txl --verbose SUBCOMMAND ...`
also shows what TensorFlow, JAX, absl and Keras print.
"""

import argparse
import gc
import os
import sys

from keras_txl_cli import ablate_command
from keras_txl_cli import convert_command
from keras_txl_cli import evaluate_command
from keras_txl_cli import export_command
from keras_txl_cli import generate_command
from keras_txl_cli import recl_command
from keras_txl_cli import token_cache_command
from keras_txl_cli import train_command
from keras_txl_cli.path_checks import check_paths

# The subcommands, in the order `keras-txl --help` lists them.
COMMANDS = (
    train_command,
    evaluate_command,
    generate_command,
    export_command,
    convert_command,
    token_cache_command,
    ablate_command,
    recl_command,
)


class _Parser(argparse.ArgumentParser):
    """Reports a bad option in one line, without the usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def make_parser():
    """The `argparse` parser of `keras-txl`. Building it imports no
    Keras, TensorFlow or JAX."""
    parser = _Parser(
        prog="keras-txl",
        description="Transformer-XL language models with Keras 3.",
        epilog="On JAX the command keeps what it compiles in "
        "$XDG_CACHE_HOME/keras-txl/jax (else ~/.cache/keras-txl/jax), so "
        "that its next run starts faster; KERAS_TXL_JAX_CACHE=0 turns "
        "that off.",
    )
    parser.add_argument(
        "--verbose",
        dest="show_library_output",
        action="store_true",
        help="also show what TensorFlow, JAX, XLA, absl and Keras print "
        "(start-up lines, warnings); before the subcommand",
    )
    subparsers = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="{train,evaluate,generate,export,convert,token-cache,"
        "ablate,recl}",
    )
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def _one_line_errors():
    """The errors that the command prints as one line, without a
    traceback: bad input, a file that cannot be used, a run that
    diverged, an optional package that is not installed."""
    from keras_txl.training.nan_guard import TrainingDiverged
    from keras_txl.utils.missing_extra_error import MissingExtraError

    return (ValueError, OSError, TrainingDiverged, MissingExtraError)


def import_library():
    """Imports `keras_txl`, and with it Keras, keras-hub and the backend.

    In a process that has not imported it yet (a command's start), the
    garbage collector is paused for the imports, and what they made
    (modules, classes, functions: alive as long as the process) is then
    moved out of its reach (`gc.freeze()`). Each collection otherwise walks
    every object alive, TensorFlow's and Keras's modules first: the
    collections that the imports' allocations trigger, then every full
    one while the command runs. Measured on 2 cores (TensorFlow, `keras-txl
    evaluate` of a tiny run): 8.8 s -> 7.0 s of CPU. (A process that
    imported Keras already, one that calls `main` again or a user's
    script, is left as it is: what it holds is its own.)
    """
    if "keras" in sys.modules:
        import keras_txl  # noqa: F401

        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        import keras_txl  # noqa: F401

        gc.freeze()
    finally:
        if enabled:
            gc.enable()


def main(argv=None):
    """Runs `keras-txl` with `argv` (default: the command line) and
    returns the exit status.

    The arguments, the files they name and the relations between
    `train`'s flags are checked first, before Keras, TensorFlow or JAX is
    imported.
    """
    from keras_txl_cli.console import quiet_libraries

    parser = make_parser()
    args = parser.parse_args(argv)
    error = check_paths(args)
    if error is None and getattr(args, "check", None) is not None:
        error = args.check(args)
    if error:
        print(f"keras-txl {args.command}: error: {error}", file=sys.stderr)
        return 1
    if not args.show_library_output:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        with quiet_libraries(args.show_library_output):
            # Registers every class a run can name, then the JAX
            # compilation cache before the first computation.
            import_library()
            from keras_txl_cli import compilation_cache

            compilation_cache.enable_for_command()  # JAX only
            return args.run(args)
    except KeyboardInterrupt as error:
        # `TrainingInterrupted` (a KeyboardInterrupt) says which signal
        # stopped the run and where it stopped.
        message = str(error) or (
            "interrupted. A training run continues from its last "
            "checkpoint with --resume."
        )
        print(f"keras-txl {args.command}: {message}", file=sys.stderr)
        return getattr(error, "exit_status", 130)
    except _one_line_errors() as error:
        if os.environ.get("KERAS_TXL_DEBUG"):
            raise
        from keras_txl_cli.console import in_flag_words

        message = " ".join(str(error).split()) or type(error).__name__
        message = in_flag_words(args.command, message)
        print(f"keras-txl {args.command}: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
