"""`keras-txl export`: a saved model as a TensorFlow SavedModel (or a
LiteRT or ONNX file) that serves without Keras or keras-txl, the memory
an input and an output of its signature. Its flags import nothing heavy;
`run` calls `keras_txl.export.export_main`.

    keras-txl export DIR OUT_DIR [--any-segment-length]
        [--format {litert,onnx}]
"""

from keras_txl_cli.choices import integer


def add_parser(subparsers):
    """Adds `export` to `subparsers` (the `keras-txl` subcommands)."""
    parser = subparsers.add_parser(
        "export",
        help="a TensorFlow SavedModel (or LiteRT or ONNX file) with "
        "explicit memory",
        description="Writes the model of MODEL_DIR as a TensorFlow "
        "SavedModel in OUT_DIR that plain TensorFlow serves, without "
        "Keras or keras-txl: serving_default(token_ids, memory, "
        "valid_length) -> logits, memory, valid_length, where the memory "
        "a call returns is the next call's input, and initial_memory"
        "(batch_size) -> the empty memory; the tokenizer's vocabulary is "
        "in OUT_DIR/assets/vocabulary.json (docs/serving.md). Runs under "
        "TensorFlow whatever KERAS_BACKEND is. Prints one line naming the "
        "signatures' inputs and outputs. --format litert writes "
        "OUT_DIR/model.tflite for the LiteRT runtime instead, --format "
        "onnx OUT_DIR/model.onnx for ONNX Runtime (outputs logits, "
        "next_memory, next_valid_length; any batch size), each checked "
        "against the Keras model before it is written.",
    )
    parser.add_argument("model_dir", metavar="MODEL_DIR")
    parser.add_argument("out_dir", metavar="OUT_DIR")
    parser.add_argument(
        "--batch-size",
        type=integer(1),
        help="fixed number of streams per call (default: any; litert: 1)",
    )
    lengths = parser.add_mutually_exclusive_group()
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
    parser.add_argument(
        "--memory-length",
        type=integer(1),
        help="memory slots (default: the run's evaluation memory length)",
    )
    parser.add_argument(
        "--format",
        choices=("saved_model", "litert", "onnx"),
        default="saved_model",
        help="a SavedModel directory (default), OUT_DIR/model.tflite "
        "for the LiteRT runtime (static shapes, builtin ops), or "
        "OUT_DIR/model.onnx for ONNX Runtime (the onnx extra)",
    )
    parser.add_argument(
        "--quantize",
        choices=("int8",),
        help="litert: int8 weights (dynamic-range quantization)",
    )
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="print the signatures that were written",
    )
    parser.set_defaults(run=run)


def run(args):
    """Runs `keras-txl export` (Keras is imported by now), then prints
    one line that names what was written."""
    from keras_txl.export.saved_model import export_main

    out_dir = export_main(
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
    if args.format == "saved_model":
        print(success_line(out_dir))
    elif args.format == "onnx":
        print(onnx_success_line(out_dir))
    return 0


def onnx_success_line(out_dir):
    """The line `keras-txl export --format onnx` prints once the file is
    written: its path, its inputs and outputs (read from the file)."""
    import os

    import onnx

    from keras_txl.export.onnx import ONNX_FILE
    from keras_txl.export.onnx import describe

    path = os.path.join(out_dir, ONNX_FILE)
    model = onnx.load(path)
    return f"Exported an ONNX file to {path}: {describe(model)}."


def success_line(out_dir):
    """The line `keras-txl export` prints once a SavedModel is written:
    its folder, each signature with its inputs and outputs, and the
    vocabulary's file (read from `assets/signatures.json`, which the
    export writes)."""
    import json
    import os

    from keras_txl.export.serving_assets import SIGNATURES_ASSET
    from keras_txl.export.serving_assets import VOCABULARY_ASSET

    assets = os.path.join(out_dir, "assets")
    with open(os.path.join(assets, SIGNATURES_ASSET), encoding="utf-8") as f:
        signatures = json.load(f)

    def spec(tensor):
        shape = ", ".join("?" if d is None else str(d) for d in tensor["shape"])
        return f"{tensor['name']} {tensor['dtype']} ({shape})"

    described = "; ".join(
        f"{name}({', '.join(spec(t) for t in signature['inputs'])}) -> "
        + ", ".join(t["name"] for t in signature["outputs"])
        for name, signature in signatures.items()
    )
    line = f"Exported a SavedModel to {out_dir}: {described}"
    vocabulary = os.path.join(assets, VOCABULARY_ASSET)
    if os.path.isfile(vocabulary):
        line += f"; vocabulary: {vocabulary}"
    return line + "."
