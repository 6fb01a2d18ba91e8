"""The `keras-txl` command: train, evaluate and sample Transformer-XL
language models.

    keras-txl train                    # a small character model, builtin text
    keras-txl train --corpus FILE --size reference --steps 2000
    keras-txl train --output DIR --resume
    keras-txl train --strategy mirrored --num-devices 2   # TensorFlow
    keras-txl evaluate DIR [--corpus FILE] [--memory-length M]
        [--segment-length T --clamp-length C --same-length tensorflow
         --memory-start zeros]     # the paper's protocol
    keras-txl evaluate DIR --dataset enwik8 [--corpus LOCAL_COPY] [--split test]
    keras-txl generate DIR --prompt TEXT [--max-length N] [--sampler top_k]
    keras-txl convert hf://transfo-xl/transfo-xl-wt103 OUT_DIR

Errors (a missing or short corpus, a bad option, an output folder that
already holds a model) print one line on stderr and exit with status 1
(2 for a bad option); set `KERAS_TXL_DEBUG=1` for the traceback. The
command prints its own output only; `keras-txl --verbose SUBCOMMAND ...`
also shows what TensorFlow, JAX, absl and Keras print.
"""

import argparse
import os
import sys

from keras_txl.app.choices import integer
from keras_txl.app.choices import jit_compile_flag
from keras_txl.app.choices import number

DEFAULT_OUTPUT = os.path.join("runs", "keras-txl")


class _Parser(argparse.ArgumentParser):
    """Reports a bad option in one line, without the usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


# `--progress` -> the Keras verbosity of `fit` (2: one line per epoch).
PROGRESS = {"bar": 1, "lines": 2, "none": 0}


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


def _progress_verbosity(progress):
    """The Keras verbosity of `--progress` (auto: bars on a terminal)."""
    if progress == "auto":
        progress = "bar" if sys.stdout.isatty() else "lines"
    return PROGRESS[progress]


def _train_parser(subparsers):
    from keras_txl.app.choices import DATASETS
    from keras_txl.app.choices import STRATEGY_NAMES
    from keras_txl.app.choices import TOKENIZERS
    from keras_txl.app.sizes import TRAIN_SIZES
    from keras_txl.app.sizes import describe

    parser = subparsers.add_parser(
        "train",
        help="train a model (no options: a small character model on the "
        "built-in text, about two minutes on a 2-core CPU)",
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
        "--sample-tokens",
        type=integer(0),
        default=200,
        metavar="N",
        help="tokens of the sample printed after training (default 200; "
        "0: no sample)",
    )
    parser.add_argument("--seed", type=integer(0), default=0)
    parser.add_argument(
        "--strategy",
        choices=STRATEGY_NAMES,
        default="none",
        help="how fit spreads each batch over devices: mirrored, "
        "multiworker and tpu under KERAS_BACKEND=tensorflow, "
        "jax-data-parallel under jax (default none: one device; see "
        "docs/distributed.md)",
    )
    parser.add_argument(
        "--num-devices",
        type=integer(1),
        metavar="N",
        help="devices per host of --strategy (default: all; on a host "
        "without accelerators the CPU is split into N devices)",
    )
    parser.add_argument(
        "--tpu",
        metavar="NAME",
        help="with --strategy tpu: 'local' on a TPU VM (the TPU attached "
        "to this host), or a TPU's name or grpc:// address (default: "
        "$TPU_NAME or the Cloud metadata, found by TPUClusterResolver)",
    )
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
        choices=("auto", *PROGRESS),
        default="auto",
        help="bar: progress bars (of fit and of each validation pass); "
        "lines: one line per epoch and per validation pass, no terminal "
        "codes (for a log file); none: the results only (default auto: "
        "bar on a terminal, else lines)",
    )
    parser.add_argument(
        "--verbose",
        nargs="?",
        action=_MovedVerbose,
        help=argparse.SUPPRESS,
    )
    parser.set_defaults(run=_train)


def _train_config(args):
    """The `TrainConfig` of `keras-txl train`'s parsed `args`."""
    from keras_txl.app.train_config import TrainConfig

    names = set(TrainConfig.__dataclass_fields__)
    values = {k: v for k, v in vars(args).items() if k in names}
    values["verbose"] = _progress_verbosity(args.progress)
    return TrainConfig(**values)


def _train_flag_error(args):
    """The first bad `train` flag found without Keras, or `None` (a resumed
    run's flags are checked in `train`, once merged with the saved run)."""
    from keras_txl.app.train_config import ConfigError

    try:
        _train_config(args).check_without_keras()
    except ConfigError as error:
        return str(error)


def _train(args):
    from keras_txl.app.train_command import sigterm_as_interrupt
    from keras_txl.app.train_command import train

    with sigterm_as_interrupt():
        train(_train_config(args))
    return 0


def _generate_parser(subparsers):
    from keras_txl.app.choices import SAMPLERS

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
        help="tokens each new token attends to (default: the run's "
        "evaluation memory length)",
    )
    parser.add_argument(
        "--seed",
        type=integer(0),
        default=0,
        help="seed of top_k, top_p and random (default 0)",
    )
    parser.set_defaults(run=_generate)


def _evaluate(args):
    from keras_txl.app.evaluate_command import evaluate

    evaluate(
        args.model_dir,
        args.corpus,
        memory_length=args.memory_length,
        segment_length=args.segment_length,
        batch_size=args.batch_size,
        metrics_json=args.metrics_json,
        clamp_length=args.clamp_length,
        same_length={"off": False, None: None}.get(
            args.same_length, args.same_length
        ),
        memory_start=args.memory_start,
        dataset=args.dataset,
        split=args.split,
        dynamic=None
        if args.dynamic is None
        else dict(
            method=args.dynamic,
            learning_rate=args.dynamic_learning_rate,
            decay=args.dynamic_decay,
            segments_per_update=args.dynamic_segments_per_update,
        ),
        token_losses=args.token_losses,
    )
    return 0


def _generate(args):
    from keras_txl.app.generate_command import generate

    if not args.prompt:
        raise ValueError("--prompt must not be empty.")
    generate(
        args.model_dir,
        args.prompt,
        max_length=args.max_length,
        sampler=args.sampler,
        top_k=args.top_k,
        top_p=args.top_p,
        memory_length=args.memory_length,
        seed=args.seed,
    )
    return 0


def _export(args):
    from keras_txl.export.saved_model import export_main

    export_main(
        args.model_dir,
        args.out_dir,
        batch_size=args.batch_size,
        segment_length=args.segment_length,
        memory_length=args.memory_length,
        overwrite=args.overwrite,
        verbose=args.verbose,
        any_segment_length=args.any_segment_length,
        format=args.format,
        quantize=args.quantize,
    )
    return 0


def _convert(args):
    from keras_txl.app.convert_command import convert

    convert(args.source, args.out_dir, overwrite=args.overwrite)
    return 0


def _convert_parser(subparsers):
    parser = subparsers.add_parser(
        "convert",
        help="a HuggingFace or TensorFlow Transformer-XL checkpoint into a "
        "keras-hub preset",
        description="Converts SOURCE (a HuggingFace Transformer-XL folder "
        "such as save_pretrained writes, a handle like "
        "hf://transfo-xl/transfo-xl-wt103, a folder of the authors' "
        "TensorFlow checkpoint with its config.json, or a keras-hub preset) "
        "into a keras-hub preset in OUT_DIR, with its tokenizer when SOURCE "
        "has one, and prints one line that checks the log-probabilities of "
        "a built-in sentence: finite, and the same when OUT_DIR is loaded "
        "back.",
    )
    parser.add_argument("source", metavar="SOURCE")
    parser.add_argument("out_dir", metavar="OUT_DIR")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a preset in OUT_DIR"
    )
    parser.set_defaults(run=_convert)


def _cache_parser(subparsers):
    parser = subparsers.add_parser(
        "cache",
        help="show (--list, the default) or free (--clear) the token cache",
        description="The token cache holds the corpora that `keras-txl "
        "train` tokenized, so that the next run maps them in a second. "
        "Its folder is $KERAS_TXL_CACHE, else "
        "$KERAS_HOME/keras_txl_cache (~/.keras/keras_txl_cache).",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--list", action="store_true", help="each entry and its size"
    )
    action.add_argument(
        "--clear", action="store_true", help="delete the cache's folder"
    )
    parser.set_defaults(run=_cache)


def _cache(args):
    from keras_txl.data.token_cache import clear_token_cache
    from keras_txl.data.token_cache import token_cache_entries
    from keras_txl.data.token_cache import token_cache_folder

    folder = token_cache_folder()
    if args.clear:
        count, size = clear_token_cache()
        print(f"Removed {count} files ({size / 2**20:,.1f} MiB): {folder}")
        return 0
    entries = token_cache_entries()
    total = sum(entry["bytes"] for entry in entries)
    print(
        f"Token cache: {folder} ({len(entries)} entries, "
        f"{total / 2**20:,.1f} MiB)"
    )
    for entry in entries:
        what = entry.get("source") or os.path.basename(entry["files"][0])
        tokens = entry.get("tokens")
        count = "" if tokens is None else f", {tokens:,} tokens"
        print(
            f"  {entry['kind']:<11} {entry['bytes'] / 2**20:9,.2f} MiB  "
            f"{what}{count}"
        )
    return 0


def make_parser():
    """The `argparse` parser of `keras-txl`. Building it imports no
    Keras, TensorFlow or JAX (`keras_txl.app.choices`)."""
    from keras_txl.app.choices import DATASETS

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
        metavar="{train,evaluate,generate,export,convert,cache,ablate,recl}",
    )
    _train_parser(subparsers)

    evaluate = subparsers.add_parser(
        "evaluate",
        help="bits per character of a saved model on a text, with a "
        "progress bar",
        description="Scores a text with a saved run. With the run folder "
        "alone: the run's own corpus (its test part when it has one, else "
        "its validation text) with the run's tokenizer, segment length, "
        "batch size and evaluation memory.",
    )
    evaluate.add_argument("model_dir", metavar="MODEL_DIR")
    evaluate.add_argument(
        "--corpus",
        help="text file (all of it), or with --dataset the local copy of "
        "the benchmark",
    )
    evaluate.add_argument(
        "--dataset",
        choices=DATASETS,
        help="score a split of this corpus (builtin: the --corpus file "
        "split as in training) instead of a whole file",
    )
    evaluate.add_argument(
        "--split",
        choices=("valid", "test"),
        help="split of --dataset or of the run's corpus (default: test "
        "when there is one, else valid)",
    )
    evaluate.add_argument(
        "--memory-length",
        type=integer(0),
        help="default: the run's evaluation memory length",
    )
    evaluate.add_argument("--segment-length", type=integer(1))
    evaluate.add_argument(
        "--streams",
        "--batch-size",
        dest="batch_size",
        type=integer(1),
        help="parallel streams the text is cut into (default: 1 for "
        "--corpus FILE, read once with its memory; else the run's batch "
        "size). Each stream starts without memory: faster, a higher loss",
    )
    evaluate.add_argument("--metrics-json", metavar="FILE")
    evaluate.add_argument(
        "--token-losses",
        metavar="FILE",
        help="write the loss (nats) of every token: .npy, else one a line",
    )
    # The paper's protocol (docs/pretrained.md): any of these scores the
    # text with an explicit memory, as the authors' evaluation does.
    evaluate.add_argument(
        "--clamp-length",
        type=integer(-1),
        help="clamp relative distances (the authors' clamp_len; -1: none)",
    )
    evaluate.add_argument(
        "--same-length",
        choices=("off", "pytorch", "tensorflow"),
        help="every query sees as many keys (the authors' same_length, "
        "with the mask of their PyTorch or TensorFlow code)",
    )
    evaluate.add_argument(
        "--memory-start",
        choices=("empty", "zeros"),
        help="zeros: the memory starts as mem_len zero vectors that are "
        "attended to (the authors' TensorFlow code, HuggingFace)",
    )
    dynamic = evaluate.add_argument_group(
        "dynamic evaluation (Krause et al., 2019)",
        "a gradient step on each segment once it is scored; prints static "
        "and dynamic results side by side (one stream unless --batch-size)",
    )
    dynamic.add_argument(
        "--dynamic",
        choices=("sgd", "rms"),
        help="sgd: plain steps; rms: steps scaled by the gradients' RMS "
        "(from the run's training text), decaying to the saved weights",
    )
    dynamic.add_argument(
        "--dynamic-learning-rate",
        type=float,
        help="default: 0.03 (sgd), 0.0001 (rms)",
    )
    dynamic.add_argument("--dynamic-decay", type=float, default=0.0)
    dynamic.add_argument(
        "--dynamic-segments-per-update", type=integer(1), default=1
    )
    evaluate.set_defaults(run=_evaluate)

    _generate_parser(subparsers)

    export = subparsers.add_parser(
        "export",
        help="a TensorFlow SavedModel (or LiteRT file) with explicit memory",
    )
    export.add_argument("model_dir", metavar="MODEL_DIR")
    export.add_argument("out_dir", metavar="OUT_DIR")
    export.add_argument(
        "--batch-size",
        type=integer(1),
        help="fixed number of streams per call (default: any; litert: 1)",
    )
    lengths = export.add_mutually_exclusive_group()
    lengths.add_argument(
        "--segment-length",
        type=integer(1),
        help="fixed segment length T (default: the run's)",
    )
    lengths.add_argument(
        "--any-segment-length",
        action="store_true",
        help="accept segments of any length (a prompt, then single tokens)",
    )
    export.add_argument(
        "--memory-length",
        type=integer(1),
        help="memory slots (default: the run's evaluation memory length)",
    )
    export.add_argument(
        "--format",
        choices=("saved_model", "litert"),
        default="saved_model",
        help="a SavedModel directory (default), or OUT_DIR/model.tflite "
        "for the LiteRT runtime (static shapes, builtin ops)",
    )
    export.add_argument(
        "--quantize",
        choices=("int8",),
        help="litert: int8 weights (dynamic-range quantization)",
    )
    export.add_argument("--overwrite", action="store_true")
    export.add_argument(
        "--verbose",
        action="store_true",
        help="print the signatures that were written",
    )
    export.set_defaults(run=_export)

    _convert_parser(subparsers)
    _cache_parser(subparsers)

    from keras_txl.app.ablation_command import add_ablate_parser
    from keras_txl.app.ablation_command import add_recl_parser

    add_ablate_parser(subparsers)
    add_recl_parser(subparsers)
    return parser


def _one_line_errors():
    """The errors that the command prints as one line, without a
    traceback: bad input, a file that cannot be used, a run that
    diverged, an optional package that is not installed."""
    from keras_txl.training.nan_guard import TrainingDiverged
    from keras_txl.utils.missing_extra_error import MissingExtraError

    return (ValueError, OSError, TrainingDiverged, MissingExtraError)


def main(argv=None):
    """Runs `keras-txl` with `argv` (default: the command line) and
    returns the exit status.

    The arguments, the files they name and the relations between
    `train`'s flags are checked first, before Keras, TensorFlow or JAX is
    imported.
    """
    from keras_txl.app.console import quiet_libraries

    parser = make_parser()
    args = parser.parse_args(argv)
    from keras_txl.app.path_checks import check_paths

    error = check_paths(args)
    if error is None and args.command == "train":
        error = _train_flag_error(args)
    if error:
        print(f"keras-txl {args.command}: error: {error}", file=sys.stderr)
        return 1
    if not args.show_library_output:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        with quiet_libraries(args.show_library_output):
            import keras_txl
            from keras_txl.app import compilation_cache

            compilation_cache.enable_for_command()  # JAX only
            keras_txl._import_submodules()
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
        from keras_txl.app.console import in_flag_words

        message = " ".join(str(error).split()) or type(error).__name__
        message = in_flag_words(args.command, message)
        print(f"keras-txl {args.command}: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
