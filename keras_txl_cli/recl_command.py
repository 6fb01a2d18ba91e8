"""`keras-txl recl`: the relative effective context length of a group of
saved models (`keras_txl.ablation.compare_contexts`). `add_parser` adds
it to the `keras-txl` subcommands; `recl_main(argv)` runs it alone. Its
flags import nothing heavy.

    keras-txl recl MODEL.keras MODEL.keras ... --corpus FILE \\
        --segment-length T --contexts 16,32,48
"""

import argparse
import json
import os

from keras_txl_cli.choices import integer
from keras_txl_cli.choices import integer_list
from keras_txl_cli.choices import list_of
from keras_txl_cli.text_segments import ablation_corpus

RATIO_LIST = list_of(float, lambda v: 0.0 < v <= 1.0, "numbers in (0, 1]")


def _configure_recl(parser):
    parser.add_argument(
        "models", nargs="+", metavar="MODEL", help="saved .keras models"
    )
    parser.add_argument(
        "--corpus", help="text file (UTF-8); default: the built-in corpus"
    )
    parser.add_argument("--segment-length", type=integer(1), default=32)
    parser.add_argument(
        "--contexts",
        type=integer_list,
        help="context lengths, e.g. 16,32,48 (default: T/2, T, ..., 3T)",
    )
    parser.add_argument("--ratios", type=RATIO_LIST, default=[0.1, 0.5, 1.0])
    parser.add_argument("--threshold", type=float, default=0.01)
    parser.add_argument("--batch-size", type=integer(1), default=4)
    parser.add_argument("--eval-tokens", type=integer(1), default=16384)
    parser.add_argument("--metrics-json", metavar="FILE")
    parser.set_defaults(run=run)
    return parser


def add_parser(subparsers):
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


def run(args):
    """Runs `keras-txl recl` with parsed arguments; returns 0."""
    import keras

    from keras_txl.ablation import compare_contexts
    from keras_txl.ablation.study import validation_characters

    ids, vocabulary = validation_characters(
        ablation_corpus(args.corpus), args.eval_tokens
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
