"""`keras-txl train`: its flags, the checks made before Keras is imported,
and the run (`keras_txl_cli.train_run.train`, imported when it starts).

    keras-txl train                    # a small character model, builtin text
    keras-txl train --corpus FILE --size reference --steps 2000
    keras-txl train --output DIR --resume
    keras-txl train --strategy mirrored --num-devices 2   # TensorFlow
"""

import argparse
import os

from keras_txl_cli.choices import DATASETS
from keras_txl_cli.choices import TOKENIZERS
from keras_txl_cli.choices import ConfigError
from keras_txl_cli.choices import integer
from keras_txl_cli.choices import integer_list_from
from keras_txl_cli.choices import jit_compile_flag
from keras_txl_cli.choices import number
from keras_txl_cli.console import progress_flag
from keras_txl_cli.console import progress_verbosity
from keras_txl_cli.path_checks import output_error
from keras_txl_cli.sizes import TRAIN_SIZES
from keras_txl_cli.sizes import describe
from keras_txl_cli.strategy_flags import add_strategy_arguments
from keras_txl_cli.train_config import TrainConfig

DEFAULT_OUTPUT = os.path.join("runs", "keras-txl")


class _MovedVerbose(argparse.Action):
    """`keras-txl train --verbose [N]`, the old spelling of `--progress`:
    one meaning of `--verbose` now (the libraries' logs, before the
    subcommand), so this says what to type instead."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(
            "--verbose goes before the subcommand (`keras-txl --verbose "
            "train ...`: the libraries' logs too). For fit's output use "
            "--progress bar, lines or none (--verbose 1, 2, 0 before)."
        )


def add_parser(subparsers):
    """Adds `train` to `subparsers` (the `keras-txl` subcommands)."""
    parser = subparsers.add_parser(
        "train",
        help="train a model (no options: a small character model on the "
        "built-in text, about 3.5 minutes on an idle 2-core CPU)",
        description="Trains a Transformer-XL language model with model.fit "
        "on ordered segments, evaluates it in bits per character with and "
        "without memory, saves the model and its tokenizer in OUTPUT as a "
        "keras-hub preset (TransformerXLCausalLM.from_preset(OUTPUT)), "
        "pictures and metrics, and prints a sample. Options left out take "
        "the values of the --size. Every step's loss goes to OUTPUT/steps.csv.",
    )
    parser.add_argument(
        "--corpus",
        help="text file to train on (UTF-8), or the local copy of the "
        "--dataset benchmark",
    )
    parser.add_argument("--dataset", choices=DATASETS, default="builtin")
    parser.add_argument(
        "--size",
        choices=tuple(TRAIN_SIZES),
        default="tiny",
        help="model size and its training defaults (default tiny): "
        + "; ".join(f"{name}: {describe(name)}" for name in TRAIN_SIZES),
    )
    parser.add_argument(
        "--tokenizer",
        choices=TOKENIZERS,
        help="default: byte for enwik8, word for wikitext103 and "
        "one_billion_word, char otherwise",
    )
    parser.add_argument("--steps", type=integer(1))
    parser.add_argument("--segment-length", type=integer(1))
    parser.add_argument("--memory-length", type=integer(0))
    parser.add_argument(
        "--eval-memory-length",
        type=integer(0),
        help="memory of the 'with memory' validation",
    )
    parser.add_argument("--batch-size", type=integer(1))
    parser.add_argument("--dropout", type=number(0.0, 1.0, False))
    parser.add_argument("--learning-rate", type=number(1e-12, 10.0, True))
    parser.add_argument("--warmup-steps", type=integer(0))
    parser.add_argument(
        "--steps-per-epoch",
        type=integer(1),
        default=100,
        help="steps between checkpoints (default 100)",
    )
    parser.add_argument(
        "--valid-fraction",
        type=number(0.0, 1.0, False),
        default=0.1,
        help="end of the text held out for validation (default 0.1)",
    )
    parser.add_argument(
        "--valid-tokens",
        type=integer(0),
        default=200_000,
        metavar="N",
        help="validation tokens evaluated after training, at each memory "
        "length (default 200000; 0: the whole split, as `keras-txl "
        "evaluate` does)",
    )
    parser.add_argument(
        "--validation-memory-lengths",
        type=integer_list_from(0),
        metavar="N,N,...",
        help="memory lengths of the validation after training (its table "
        "and bpc_vs_memory.png), one pass each; 0 and --eval-memory-length "
        "are always among them (default: 0, T/4, T, 2T and 4T, T the "
        "segment length, and --memory-length)",
    )
    parser.add_argument(
        "--sample-tokens",
        type=integer(0),
        default=200,
        metavar="N",
        help="tokens of the sample printed after training (default 200; "
        "0: no sample)",
    )
    parser.add_argument("--seed", type=integer(0), default=0)
    add_strategy_arguments(parser, "how fit spreads each batch")
    parser.add_argument(
        "--dtype-policy",
        metavar="POLICY",
        help="Keras dtype policy of the model: float32 (default), "
        "mixed_bfloat16 (faster on CPUs with bf16 and on TPUs), "
        "mixed_float16 (GPUs)",
    )
    parser.add_argument(
        "--jit-compile",
        type=jit_compile_flag,
        default="auto",
        metavar="{auto,true,false}",
        help="jit_compile of Model.compile: XLA on TensorFlow, "
        "torch.compile on torch; JAX always compiles (default auto)",
    )
    parser.add_argument(
        "--steps-per-execution",
        type=integer(1),
        default=1,
        metavar="K",
        help="training steps per compiled call (TPUs want tens to "
        "hundreds); --steps, --steps-per-epoch and --validate-every must "
        "be multiples of it (default 1)",
    )
    parser.add_argument(
        "--validate-every",
        type=integer(1),
        metavar="N",
        help="validation bits per character every N steps during "
        "training, with a progress bar (default: only at the end)",
    )
    parser.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="write TensorBoard logs of every step to DIR (view with "
        "`tensorboard --logdir DIR`: pip install keras-txl[tensorboard])",
    )
    parser.add_argument(
        "--output",
        default=DEFAULT_OUTPUT,
        help=f"folder of the run (default {DEFAULT_OUTPUT})",
    )
    parser.add_argument("--metrics-json", metavar="FILE")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --output from its last checkpoint",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the model in --output",
    )
    parser.add_argument(
        "--progress",
        **progress_flag(
            "bar: progress bars (of fit and of each validation pass); "
            "lines: one line per epoch and per validation pass"
        ),
    )
    parser.add_argument(
        "--verbose",
        nargs="?",
        action=_MovedVerbose,
        help=argparse.SUPPRESS,
    )
    parser.set_defaults(run=run, check=check)


def train_config(args):
    """The `TrainConfig` of `keras-txl train`'s parsed `args`."""
    names = set(TrainConfig.__dataclass_fields__)
    values = {k: v for k, v in vars(args).items() if k in names}
    values["verbose"] = progress_verbosity(args.progress)
    return TrainConfig(**values)


def check(args):
    """The first bad `train` flag found without Keras, or `None`: an
    output folder that holds a model (without --resume or --overwrite),
    then the relations between the flags (a resumed run's flags are
    checked in `train`, once merged with the saved run)."""
    error = output_error(args.output, args.resume, args.overwrite)
    if error:
        return error
    try:
        train_config(args).check_without_keras()
    except ConfigError as error:
        return str(error)


def run(args):
    """Runs `keras-txl train` (Keras is imported by now)."""
    from keras_txl_cli import train_run

    with train_run.sigterm_as_interrupt():
        train_run.train(train_config(args))
    return 0
