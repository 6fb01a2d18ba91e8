"""`python -m keras_txl.export MODEL_DIR OUT_DIR --batch-size B
--segment-length T --memory-length M [--overwrite]`: exports
`MODEL_DIR/model.keras` as a SavedModel (see `keras_txl.export`)."""

import argparse


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m keras_txl.export",
        description="Export MODEL_DIR/model.keras as a TensorFlow "
        "SavedModel whose signatures carry the memory explicitly.",
    )
    parser.add_argument("model_dir", help="directory holding model.keras")
    parser.add_argument(
        "out_dir", help="SavedModel directory (TF Serving: .../NAME/1)"
    )
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument(
        "--segment-length",
        type=int,
        default=None,
        help="tokens per call; omit to accept any length",
    )
    parser.add_argument("--memory-length", type=int, required=True)
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    from keras_txl.export.saved_model import export_main

    export_main(
        args.model_dir,
        args.out_dir,
        batch_size=args.batch_size,
        segment_length=args.segment_length,
        memory_length=args.memory_length,
        overwrite=args.overwrite,
        verbose=args.verbose,
    )
    print(args.out_dir)


if __name__ == "__main__":
    main()
