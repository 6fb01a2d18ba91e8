"""Score a long document token by token, with memory and without.

Transformer-XL reads a document in segments of `T` tokens; the memory
carries the hidden states of the previous segments, so each token sees
up to `M + T` tokens back instead of only the earlier tokens of its own
segment. This example measures what that buys on a held-out text:

1. The per-token negative log-likelihood, from explicit
   `lm.call_with_memory` calls, once carrying a memory of `M` from each
   segment to the next and once with no memory (each segment alone).
2. The totals in bits per character, checked against the library's
   `keras_txl.training.evaluate_segments` (the paper's evaluation
   protocol: the same streams, the same segments).
3. A plot (matplotlib) of the loss against the position in the segment
   (without memory the first tokens of every segment have no context;
   with memory they do) and along the document.

Run it (any Keras backend; the plot needs `pip install "keras-txl[plot]"`):

    python examples/train_char_lm.py          # trains runs/char_lm_preset
    python examples/score_long_document.py    # scores its held-out text
    python examples/score_long_document.py --preset DIR --text FILE
    python examples/score_long_document.py --smoke    # an untrained model

Defaults: the preset of `train_char_lm.py`, the last 10% of
tinyshakespeare (which it did not train on) read as 8 streams in
segments of 64, with a memory of 128; the plot goes to
`runs/score_long_document.png`.

The output of a full run on a 2-core CPU (2026-12-01): docs/examples.md.
"""

import argparse
import os
from pathlib import Path

import keras
import numpy as np

from keras_txl.models import CharacterTokenizer
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from keras_txl.models import TransformerXLCausalLMPreprocessor
from keras_txl.training import evaluate_segments

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="runs/char_lm_preset")
    parser.add_argument(
        "--text", default=str(REPO / "data" / "tinyshakespeare.txt")
    )
    parser.add_argument("--plot", default="runs/score_long_document.png")
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--segment-length", type=int, default=64)  # T
    parser.add_argument("--memory-length", type=int, default=128)  # M
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.streams, args.segment_length, args.memory_length = 2, 16, 32
    return args


def load_model(args):
    """The preset of `train_char_lm.py`, or (--smoke) an untrained tiny
    model with a character tokenizer."""
    if not args.smoke:
        if not os.path.isdir(args.preset):
            raise SystemExit(
                f"No preset at {args.preset!r}: run `python examples/"
                "train_char_lm.py` first, or pass --preset (or --smoke)."
            )
        return TransformerXLCausalLM.from_preset(args.preset)
    keras.utils.set_random_seed(0)
    text = Path(args.text).read_text(encoding="utf-8")
    tokenizer = CharacterTokenizer(sorted(set(text)))
    backbone = TransformerXLBackbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        head_dim=16,
        intermediate_dim=64,
        memory_length=16,
    )
    preprocessor = TransformerXLCausalLMPreprocessor(tokenizer)
    return TransformerXLCausalLM(backbone, preprocessor=preprocessor)


def token_losses(lm, streams, segment_length, memory_length):
    """Negative log-likelihood (nats) of every next token, `(B, n - 1)`
    for `streams` `(B, n)`, reading each row in segments and carrying a
    memory of `memory_length` (0: none) from each segment to the next."""
    batch, length = streams.shape
    memory = lm.backbone.initial_memory(batch, memory_length=memory_length)
    losses = []
    for start in range(0, length - 1, segment_length):
        stop = min(start + segment_length, length - 1)
        inputs = streams[:, start:stop]  # (B, T)
        targets = streams[:, start + 1 : stop + 1]  # (B, T)
        logits, memory = lm.call_with_memory(inputs, memory)  # (B, T, V)
        log_probs = keras.ops.log_softmax(logits, axis=-1)  # (B, T, V)
        picked = keras.ops.take_along_axis(
            log_probs, keras.ops.convert_to_tensor(targets[..., None]), -1
        )  # (B, T, 1)
        losses.append(-keras.ops.convert_to_numpy(picked)[..., 0])
    return np.concatenate(losses, axis=1)  # (B, n - 1)


def plot(args, losses):
    """Loss against the position in the segment and along the document."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    T = args.segment_length
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, values in losses.items():
        bits = values / np.log(2)  # (B, n - 1)
        full = bits[:, : bits.shape[1] // T * T]
        by_position = full.reshape(len(bits), -1, T).mean(axis=(0, 1))  # (T,)
        left.plot(np.arange(T), by_position, label=name)
        # Along the document: stream b is characters [b * n, (b + 1) * n).
        along = bits.reshape(-1)
        window = max(1, len(along) // 200)
        smooth = np.convolve(along, np.ones(window) / window, mode="valid")
        right.plot(np.arange(len(smooth)), smooth, label=name, linewidth=0.8)
    left.set(
        xlabel="position in the segment",
        ylabel="bits per character",
        title=f"mean over segments (T = {T})",
    )
    right.set(
        xlabel="character of the document",
        ylabel="bits per character",
        title=f"moving average over {window} characters",
    )
    left.legend()
    right.legend()
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
    figure.savefig(args.plot, dpi=120)


def main(argv=None):
    args = parse_args(argv)
    lm = load_model(args)
    text = Path(args.text).read_text(encoding="utf-8")
    document = text[len(text) * 9 // 10 :]  # held out by train_char_lm.py
    if args.smoke:
        document = document[:1000]
    ids = np.asarray(lm.preprocessor.tokenizer(document), "int32")
    # The paper's layout: B contiguous streams of n tokens, read in
    # parallel (the last len(ids) % B tokens are dropped).
    n = len(ids) // args.streams
    streams = ids[: args.streams * n].reshape(args.streams, n)  # (B, n)
    print(
        f"{len(document):,} characters as {args.streams} streams of {n:,}, "
        f"segments of {args.segment_length}"
    )

    losses = {
        f"memory {args.memory_length}": token_losses(
            lm, streams, args.segment_length, args.memory_length
        ),
        "no memory": token_losses(lm, streams, args.segment_length, 0),
    }
    for name, values in losses.items():
        print(f"{name:>12}: {values.mean() / np.log(2):.4f} bits per character")

    # The same protocol in one library call.
    reference = evaluate_segments(
        lm,
        ids,
        batch_size=args.streams,
        segment_length=args.segment_length,
        memory_length=args.memory_length,
    )
    ours = losses[f"memory {args.memory_length}"].mean()
    print(
        f"evaluate_segments: {reference['bits_per_character']:.4f} bits per "
        f"character over {reference['tokens']:,} tokens (per-token mean "
        f"differs by {abs(reference['loss'] - ours):.1e} nats)"
    )
    assert abs(reference["loss"] - ours) < 1e-4

    # Where the memory helps: the first tokens of each segment.
    T = args.segment_length
    for name, values in losses.items():
        full = values[:, : values.shape[1] // T * T] / np.log(2)
        by_position = full.reshape(len(values), -1, T).mean(axis=(0, 1))
        print(
            f"{name:>12}: first 8 positions of a segment "
            f"{by_position[:8].mean():.3f} bits, last 8 "
            f"{by_position[-8:].mean():.3f}"
        )
    plot(args, losses)
    print(f"plot: {args.plot}")
    return {name: float(values.mean()) for name, values in losses.items()}


if __name__ == "__main__":
    main()
