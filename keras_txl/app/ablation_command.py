"""The `keras-txl ablate` and `keras-txl recl` commands.

`keras_txl.app.cli` adds them to its subcommands with `add_ablate_parser` and
`add_recl_parser`; each sets `run` (a function of the parsed arguments
that returns the exit status), as the other subcommands do.
`ablate_main(argv)` and `recl_main(argv)` run one of them alone. The
study itself is `keras_txl.ablation`'s (`run_ablation`,
`compare_contexts`, `markdown_report`); here are its options, its
printing and its files.

    keras-txl ablate --corpus FILE --steps N --segment-length T \\
        --batch-size B --size S --metrics-json FILE
    keras-txl recl MODEL.keras MODEL.keras ... --corpus FILE \\
        --segment-length T --contexts 16,32,48
"""

import argparse
import json
import os
import sys

from keras_txl.app.choices import VARIANTS
from keras_txl.app.sizes import SIZES
from keras_txl.app.sizes import describe
from keras_txl.utils.missing_extra_error import MissingExtraError

# The default budget: `keras-txl ablate` with no options (see
# docs/ablations.md for its measured time).
DEFAULTS = dict(
    steps=1000,
    segment_length=32,
    batch_size=16,
    size="small",
    seed=0,
    num_seeds=2,
    segments_per_step=2,
    learning_rate=5e-3,
    eval_tokens=16384,
)


def _list_of(convert, allowed, what):
    """An argparse type: comma-separated values, each `allowed`."""

    def parse(text):
        try:
            values = [convert(v.strip()) for v in text.split(",") if v.strip()]
        except ValueError:
            values = []
        if not values or not all(allowed(v) for v in values):
            raise argparse.ArgumentTypeError(
                f"must be {what} separated by commas, got {text!r}"
            )
        return values

    return parse


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 1, got {text!r}"
        )
    return value


_int_list = _list_of(int, lambda v: v >= 1, "integers >= 1")
_ratio_list = _list_of(float, lambda v: 0.0 < v <= 1.0, "numbers in (0, 1]")
_float_list = _list_of(float, lambda v: v >= 0.0, "numbers >= 0")
_variant_list = _list_of(
    str, lambda v: v in VARIANTS, f"names among {', '.join(VARIANTS)}"
)


def _read_corpus(path):
    """The built-in text or the file `path`, split 90/5/5."""
    from keras_txl import data

    return data.load_corpus("builtin", path, 0.05, 0.05)


def _configure_ablate(parser):
    parser.add_argument(
        "--corpus",
        help="text file (UTF-8); default: the built-in corpus",
    )
    parser.add_argument("--steps", type=_positive_int)
    parser.add_argument("--segment-length", type=_positive_int)
    parser.add_argument("--batch-size", type=_positive_int)
    parser.add_argument(
        "--size",
        choices=tuple(SIZES),
        help="model size (default small): "
        + "; ".join(f"{name}: {describe(name)}" for name in SIZES),
    )
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--num-seeds", type=_positive_int, help="runs with seeds S, S+1, ..."
    )
    parser.add_argument(
        "--memory-length",
        type=_positive_int,
        help="memory of the recurrent variants (default: the segment length)",
    )
    parser.add_argument(
        "--segments-per-step",
        type=_positive_int,
        help="segments per row and batch, in one graph (>= 2)",
    )
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument(
        "--eval-tokens",
        type=_positive_int,
        help="validation characters evaluated (at most)",
    )
    parser.add_argument(
        "--eval-batch-size", type=_positive_int, help="evaluation streams"
    )
    parser.add_argument(
        "--variants",
        type=_variant_list,
        help="comma-separated subset of the variants (default: all)",
    )
    parser.add_argument(
        "--memory-sweep",
        type=_float_list,
        help="memory lengths of the sweep in multiples of the segment "
        "length (default: 0,0.25,1,2,5)",
    )
    parser.add_argument(
        "--recl-contexts",
        type=_int_list,
        help="context lengths of RECL (default: T/2, T, ..., 3T)",
    )
    parser.add_argument(
        "--no-cost",
        action="store_true",
        help="skip measuring time and memory of a training step",
    )
    parser.add_argument("--metrics-json", metavar="FILE", help="results file")
    parser.add_argument(
        "--output",
        metavar="DIR",
        help="where the table (ablation.md) and pictures go; default: the "
        "folder of --metrics-json, else runs/ablation",
    )
    parser.add_argument(
        "--save-models",
        metavar="DIR",
        help="save every trained model as DIR/seed_S/VARIANT.keras",
    )
    parser.set_defaults(run=run_ablate_command)
    return parser


def add_ablate_parser(subparsers):
    """Adds the `ablate` subcommand to `subparsers` (of `argparse`)."""
    parser = subparsers.add_parser(
        "ablate",
        help="train the paper's ablations at small scale and compare them",
        description="Trains Transformer-XL and its ablations (no "
        "recurrence, absolute or learned relative positions, no "
        "stop-gradient, a sweep of memory lengths) with the same budget "
        "and seeds, evaluates them in bits per character, computes RECL and "
        "the cost of backpropagating through the memory, and writes a "
        "markdown table, pictures and a JSON file. Options left out take "
        f"the defaults {DEFAULTS}.",
    )
    return _configure_ablate(parser)


def run_ablate_command(args):
    """Runs `keras-txl ablate` with parsed arguments; returns 0."""
    from keras_txl.ablation import run_ablation
    from keras_txl.ablation.report import PICTURES
    from keras_txl.ablation.report import markdown_report
    from keras_txl.ablation.report import picture_series
    from keras_txl.app.plots import plot_lines
    from keras_txl.app.sizes import size_arguments

    options = {
        key: getattr(args, key) if getattr(args, key) is not None else value
        for key, value in DEFAULTS.items()
    }
    optional = {
        "eval_batch_size": args.eval_batch_size,
        "variants": args.variants,
        "memory_sweep": args.memory_sweep,
        "recl_contexts": args.recl_contexts,
    }
    options.update({k: v for k, v in optional.items() if v is not None})
    results = run_ablation(
        _read_corpus(args.corpus),
        architecture=size_arguments(options["size"]),
        memory_length=args.memory_length,
        measure_cost=not args.no_cost,
        save_dir=args.save_models,
        **options,
    )
    results["config"]["corpus"] = args.corpus or "builtin"
    output = args.output
    if output is None:
        output = (
            os.path.dirname(os.path.abspath(args.metrics_json))
            if args.metrics_json
            else os.path.join("runs", "ablation")
        )
    os.makedirs(output, exist_ok=True)
    table = markdown_report(results)
    with open(os.path.join(output, "ablation.md"), "w") as file:
        file.write(table)
    try:
        results["pictures"] = [
            plot_lines(series, PICTURES[name], os.path.join(output, name))
            for name, series in picture_series(results).items()
        ]
    except MissingExtraError as error:
        results["pictures"] = []
        print(f"No pictures: {error}", file=sys.stderr)
    if args.metrics_json:
        with open(args.metrics_json, "w") as file:
            json.dump(results, file, indent=1)
    print(table)
    return 0


def ablate_main(argv=None):
    """`keras-txl ablate` alone: parses `argv` and runs it."""
    parser = argparse.ArgumentParser(prog="keras-txl ablate")
    args = _configure_ablate(parser).parse_args(argv)
    return args.run(args)


def _configure_recl(parser):
    parser.add_argument(
        "models", nargs="+", metavar="MODEL", help="saved .keras models"
    )
    parser.add_argument(
        "--corpus", help="text file (UTF-8); default: the built-in corpus"
    )
    parser.add_argument("--segment-length", type=_positive_int, default=32)
    parser.add_argument(
        "--contexts",
        type=_int_list,
        help="context lengths, e.g. 16,32,48 (default: T/2, T, ..., 3T)",
    )
    parser.add_argument("--ratios", type=_ratio_list, default=[0.1, 0.5, 1.0])
    parser.add_argument("--threshold", type=float, default=0.01)
    parser.add_argument("--batch-size", type=_positive_int, default=4)
    parser.add_argument("--eval-tokens", type=_positive_int, default=16384)
    parser.add_argument("--metrics-json", metavar="FILE")
    parser.set_defaults(run=run_recl_command)
    return parser


def add_recl_parser(subparsers):
    """Adds the `recl` subcommand to `subparsers` (of `argparse`)."""
    parser = subparsers.add_parser(
        "recl",
        help="relative effective context length of a group of models",
        description="Computes the relative effective context length (Dai "
        "et al., 2019, appendix C) of a group of saved character models "
        "(e.g. from `keras-txl ablate --save-models`) on the validation "
        "part (the 5% before the last 5%) of a corpus, tokenized by "
        "characters as `keras-txl ablate` does.",
    )
    return _configure_recl(parser)


def run_recl_command(args):
    """Runs `keras-txl recl` with parsed arguments; returns 0."""
    import keras

    from keras_txl.ablation import compare_contexts
    from keras_txl.ablation.study import validation_characters

    ids, vocabulary = validation_characters(
        _read_corpus(args.corpus), args.eval_tokens
    )
    models = {}
    for path in args.models:
        lm = keras.saving.load_model(path, compile=False)
        if lm.backbone.vocabulary_size != vocabulary:
            raise ValueError(
                f"{path} has a vocabulary of {lm.backbone.vocabulary_size} "
                f"tokens; the characters of the corpus make {vocabulary}. "
                "Pass the corpus the model was trained on."
            )
        models[os.path.splitext(os.path.basename(path))[0]] = lm
    results = compare_contexts(
        models,
        ids,
        args.segment_length,
        contexts=args.contexts,
        ratios=args.ratios,
        threshold=args.threshold,
        batch_size=args.batch_size,
    )
    if args.metrics_json:
        with open(args.metrics_json, "w") as file:
            json.dump(results, file, indent=1)
    print(json.dumps(results["recl"], indent=1))
    return 0


def recl_main(argv=None):
    """`keras-txl recl` alone: parses `argv` and runs it."""
    parser = argparse.ArgumentParser(prog="keras-txl recl")
    args = _configure_recl(parser).parse_args(argv)
    return args.run(args)
