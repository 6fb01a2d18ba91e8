"""`keras-txl ablate`: the paper's ablations at small scale.

`add_parser` adds it to the `keras-txl` subcommands; `ablate_main(argv)`
runs it alone. The study itself is `keras_txl.ablation`'s
(`run_ablation`, `markdown_report`); here are its options, its printing
and its files. Its flags import nothing heavy.

    keras-txl ablate --corpus FILE --steps N --segment-length T \\
        --batch-size B --size S --metrics-json FILE
"""

import argparse
import json
import os
import sys

from keras_txl_cli.choices import VARIANTS
from keras_txl_cli.choices import integer
from keras_txl_cli.choices import integer_list
from keras_txl_cli.choices import list_of
from keras_txl_cli.sizes import SIZES
from keras_txl_cli.sizes import describe
from keras_txl_cli.text_segments import ablation_corpus

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


FLOAT_LIST = list_of(float, lambda v: v >= 0.0, "numbers >= 0")
VARIANT_LIST = list_of(
    str, lambda v: v in VARIANTS, f"names among {', '.join(VARIANTS)}"
)


def _configure_ablate(parser):
    parser.add_argument(
        "--corpus",
        help="text file (UTF-8); default: the built-in corpus",
    )
    parser.add_argument("--steps", type=integer(1))
    parser.add_argument("--segment-length", type=integer(1))
    parser.add_argument("--batch-size", type=integer(1))
    parser.add_argument(
        "--size",
        choices=tuple(SIZES),
        help="model size (default small): "
        + "; ".join(f"{name}: {describe(name)}" for name in SIZES),
    )
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--num-seeds", type=integer(1), help="runs with seeds S, S+1, ..."
    )
    parser.add_argument(
        "--memory-length",
        type=integer(1),
        help="memory of the recurrent variants (default: the segment length)",
    )
    parser.add_argument(
        "--segments-per-step",
        type=integer(1),
        help="segments per row and batch, in one graph (>= 2)",
    )
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument(
        "--eval-tokens",
        type=integer(1),
        help="validation characters evaluated (at most)",
    )
    parser.add_argument(
        "--eval-batch-size", type=integer(1), help="evaluation streams"
    )
    parser.add_argument(
        "--variants",
        type=VARIANT_LIST,
        help="comma-separated subset of the variants (default: all)",
    )
    parser.add_argument(
        "--memory-sweep",
        type=FLOAT_LIST,
        help="memory lengths of the sweep in multiples of the segment "
        "length (default: 0,0.25,1,2,5)",
    )
    parser.add_argument(
        "--recl-contexts",
        type=integer_list,
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
    parser.set_defaults(run=run)
    return parser


def add_parser(subparsers):
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


def run(args):
    """Runs `keras-txl ablate` with parsed arguments; returns 0."""
    from keras_txl.ablation import run_ablation
    from keras_txl.ablation.report import PICTURES
    from keras_txl.ablation.report import markdown_report
    from keras_txl.ablation.report import picture_series
    from keras_txl.utils.missing_extra_error import MissingExtraError
    from keras_txl_cli.plots import plot_lines
    from keras_txl_cli.sizes import size_arguments

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
        ablation_corpus(args.corpus),
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
