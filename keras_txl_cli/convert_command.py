"""`keras-txl convert`: a checkpoint into a keras-hub preset, checked by
scoring a sentence before and after. Its flags import nothing heavy;
`convert` loads Keras.

    keras-txl convert hf://transfo-xl/transfo-xl-wt103 OUT_DIR
"""

import os

from keras_txl_cli.choices import ConfigError


def add_parser(subparsers):
    """Adds `convert` to `subparsers` (the `keras-txl` subcommands)."""
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
    parser.set_defaults(run=run)


def run(args):
    """Runs `keras-txl convert` (Keras is imported by now)."""
    convert(args.source, args.out_dir, overwrite=args.overwrite)
    return 0


# Scored by `keras-txl convert` (WikiText-103's tokenization).
CHECK_SENTENCE = (
    "The tower is 324 metres ( 1,063 ft ) tall , about the same height as "
    "an 81 @-@ storey building , and the tallest structure in Paris ."
)


def sentence_log_probabilities(lm, sentence):
    """Log-probability of each token of `sentence` after the ones before
    it (float64 array of length tokens - 1), from an empty memory, by
    `keras_txl.training.evaluation.per_token_losses` (one segment): with
    `lm.preprocessor`'s tokenizer, or for a model without one the ids
    `0, 1, 2, ...` (modulo the vocabulary)."""
    import numpy as np

    from keras_txl.data.tokenization import encode
    from keras_txl.training.evaluation import per_token_losses

    vocabulary_size = lm.backbone.vocabulary_size
    if lm.preprocessor is not None:
        ids = encode(lm.preprocessor.tokenizer, sentence)
    else:
        ids = np.arange(len(sentence.split())) % vocabulary_size
    ids = np.asarray(ids, "int32")[None]  # (1, tokens)
    losses = per_token_losses(lm, ids, segment_length=ids.shape[1] - 1)
    return -losses[0].astype("float64")


def convert(source, out_dir, overwrite=False, log=print):
    """`keras-txl convert`: a checkpoint into a keras-hub preset.

    Args:
        source: what `TransformerXLCausalLM.from_preset` takes: a
            HuggingFace Transformer-XL folder or `hf://` handle, a folder
            of the authors' TensorFlow checkpoint with its `config.json`,
            or a keras-hub preset.
        out_dir: the preset folder to write.
        overwrite: bool. Replace a preset already in `out_dir`.
        log: function that prints a line.

    Returns:
        A dict: `tokens` (scored), `mean_log_probability` (nats per token,
        converted model) and `max_difference` (largest difference of a
        token's log-probability between the converted model and the preset
        loaded back from `out_dir`).
    """
    import numpy as np

    from keras_txl.models import TransformerXLCausalLM
    from keras_txl.utils import run_folder
    from keras_txl.utils.atomic_folder import AtomicFolder
    from keras_txl_cli import artifacts

    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConfigError(f"OUT_DIR '{out_dir}' is a file, not a folder.")
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        if not run_folder.is_preset(out_dir):
            raise ConfigError(
                f"'{out_dir}' holds files that are not a keras-hub preset: "
                "pick an empty or new folder."
            )
        if not overwrite:
            raise ConfigError(
                f"'{out_dir}' already holds a preset. Pass --overwrite to "
                "replace it, or another OUT_DIR."
            )
    lm = TransformerXLCausalLM.from_preset(source)
    expected = sentence_log_probabilities(lm, CHECK_SENTENCE)
    # Written beside OUT_DIR, checked, then put in place whole: a failed
    # conversion leaves OUT_DIR (and a preset there) as it was.
    with AtomicFolder(out_dir) as folder:
        artifacts.save_model(lm, folder.path)
        loaded = TransformerXLCausalLM.from_preset(folder.path)
        got = sentence_log_probabilities(loaded, CHECK_SENTENCE)
        _check_converted(got, expected, out_dir)
    difference = float(np.max(np.abs(got - expected)))
    finite = bool(np.all(np.isfinite(expected)))
    result = {
        "tokens": int(expected.size),
        "mean_log_probability": float(np.mean(expected)),
        "max_difference": difference,
    }
    tokenizer = "with its tokenizer" if lm.preprocessor else "no tokenizer"
    log(
        f"Converted {source} to {out_dir} ({tokenizer}). Check: "
        f"{expected.size} tokens of a built-in sentence, mean log-probability "
        f"{result['mean_log_probability']:.4f} nats "
        f"({'finite' if finite else 'NOT FINITE'}), "
        f"max |difference| after reloading the preset {difference:.2e}."
    )
    return result


def _check_converted(got, expected, out_dir):
    import numpy as np

    difference = float(np.max(np.abs(got - expected)))
    if not np.all(np.isfinite(expected)) or difference > 1e-5:
        raise ValueError(
            "The converted model's log-probabilities are not finite or "
            f"change when its preset is loaded back ({difference:.2e}); "
            f"nothing was written to '{out_dir}'."
        )
