"""Train a Compressive Transformer beside a plain Transformer-XL.

The Compressive Transformer (Rae et al., 2019) keeps what falls out of
Transformer-XL's memory instead of dropping it: every `c` evicted states
are compressed into one slot of a second memory of `Mc` slots, and every
layer attends to `[compressed memory; memory; segment]`. With a memory of
`M` and a compressed memory of `Mc` at rate `c`, a query sees
`M + c * Mc` characters back through `M + Mc` slots.

What this shows, top to bottom:

1. One ordered-segment dataset (`keras_txl.data.segment_dataset`) for
   both models.
2. `CompressiveTransformerXLBackbone`: `TransformerXLBackbone`'s arguments
   plus `compressed_memory_length`, `compression_rate` and `compression`
   (`"conv"` learns the compression, trained by the attention-
   reconstruction loss). `TransformerXLCausalLM` carries and trains both
   memories through `fit` as it does one; `fit` logs the
   `reconstruction_loss`.
3. Both models trained the same steps, then validated with their carried
   memories, and the memories after a few segments of explicit
   `call_with_memory`.

Run it (any Keras backend):

    python examples/compressive_memory.py
    KERAS_BACKEND=jax python examples/compressive_memory.py --steps 2000
    python examples/compressive_memory.py --smoke

Defaults: 2 layers x 128, segments of 32, a memory of 32 (plain and
compressive) and a compressed memory of 16 at rate 2 (so the compressive
model sees 64 characters back), 16 streams, 600 steps on
tinyshakespeare. See docs/compressive.md for the layout and the evidence.

The output of a full run on a 2-core CPU (2026-12-01): docs/examples.md.
"""

import argparse
import sys
from pathlib import Path

import keras
import numpy as np

from keras_txl import data
from keras_txl.models import CompressiveTransformerXLBackbone
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from keras_txl.training import evaluate_bpc
from keras_txl.training import transformer_xl_optimizer

# `fit`'s progress: bars on a terminal, one plain line per epoch in a log
# file (no carriage returns or terminal codes).
FIT_PROGRESS = 1 if sys.stdout.isatty() else 2

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--text", default=str(REPO / "data" / "tinyshakespeare.txt")
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--segment-length", type=int, default=32)  # T
    parser.add_argument("--memory-length", type=int, default=32)  # M
    parser.add_argument("--compressed-length", type=int, default=16)  # Mc
    parser.add_argument("--compression-rate", type=int, default=2)  # c
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.batch_size, args.segment_length, args.memory_length = 4, 8, 8
        args.compressed_length, args.hidden_dim, args.steps = 4, 32, 30
    return args


def make_model(args, vocabulary_size, compressive):
    shared = dict(  # the same model but for the second memory
        vocabulary_size=vocabulary_size,
        num_layers=2,
        num_heads=4,
        hidden_dim=args.hidden_dim,
        head_dim=args.hidden_dim // 4,
        intermediate_dim=4 * args.hidden_dim,
        memory_length=args.memory_length,
    )
    keras.utils.set_random_seed(0)  # the same initial weights
    if compressive:
        backbone = CompressiveTransformerXLBackbone(
            compressed_memory_length=args.compressed_length,  # Mc slots
            compression_rate=args.compression_rate,  # c states per slot
            compression="conv",  # a learned strided convolution
            reconstruction_loss_weight=1.0,  # trains the convolution
            **shared,
        )
    else:
        backbone = TransformerXLBackbone(**shared)
    lm = TransformerXLCausalLM(backbone)
    lm.compile(
        optimizer=transformer_xl_optimizer(
            2e-3, total_steps=args.steps, warmup_steps=args.steps // 10
        )
    )
    return lm


def main(argv=None):
    args = parse_args(argv)
    text = Path(args.text).read_text(encoding="utf-8")
    # Enough text for the steps (one pass), and a tenth more to validate.
    needed = args.steps * args.batch_size * args.segment_length
    text = text[: needed * 11 // 10 + args.batch_size * 2]
    cut = len(text) - int(len(text) * (1 / 11))  # the last 11th validates
    train_text, valid_text = text[:cut], text[cut:]
    tokenizer = data.make_tokenizer("char", text)
    train = data.segment_dataset(
        tokenizer(train_text),  # 1-D ids
        args.batch_size,
        args.segment_length,
    ).take(args.steps)  # (B, T) inputs and targets
    valid_ids = tokenizer(valid_text)
    valid = data.segment_dataset(
        valid_ids, args.batch_size, args.segment_length
    )

    results = {}
    for name in ("plain", "compressive"):
        lm = make_model(args, tokenizer.vocabulary_size(), name != "plain")
        reach = args.memory_length
        if name == "compressive":
            reach += args.compression_rate * args.compressed_length
        print(f"--- {name}: attends up to {reach} characters back")
        history = lm.fit(train, epochs=1, shuffle=False, verbose=FIT_PROGRESS)
        logs = {k: v[-1] for k, v in history.history.items()}
        if name == "compressive":
            # The attention-reconstruction loss of the compression.
            print(f"reconstruction_loss {logs['reconstruction_loss']:.3g}")
        result = evaluate_bpc(lm, valid)  # its own memories, empty at first
        results[name] = result["bits_per_character"]
        print(f"validation: {results[name]:.4f} bits per character")

        # The memories, explicit: 6 segments of the first validation row.
        memory = lm.backbone.initial_memory(1)
        T = args.segment_length
        for k in range(6):
            segment = valid_ids[None, k * T : (k + 1) * T]  # (1, T)
            _, memory = lm.call_with_memory(segment, memory)
        for key, value in memory.items():
            shape = tuple(value.shape)
            if key.endswith("valid_length"):
                value = keras.ops.convert_to_numpy(value).tolist()
                print(f"after 6 segments: {key} {value}")
            else:
                print(f"after 6 segments: {key} {shape}")

    print(
        f"validation: plain {results['plain']:.4f}, compressive "
        f"{results['compressive']:.4f} bits per character"
    )
    return {k: float(np.asarray(v)) for k, v in results.items()}


if __name__ == "__main__":
    main()
