"""Validation bits per character of a plain memory against a compressive one.

Char-level tinyshakespeare (`data/tinyshakespeare.txt`, the last
5% held out for validation), a small Transformer-XL, the same initial
weights and the same number of training steps for every configuration:

- `plain M`: memory of M slots (span M characters);
- `plain M/2`: the memory halved (span M/2);
- `compressive`: memory M/2 + compressed memory M/(2c) at rate c: the span
  of the plain M memory (M/2 + c * M/(2c) = M characters) in fewer slots,
  with mean pooling and with the trained convolution.

Prints one JSON line per configuration, then a summary with each bpc's
difference to `plain M` measured in the same run.

Usage (from the project root):

    PYTHONPATH=. KERAS_BACKEND=jax python benchmarks/compressive_bpc.py \
        --steps 2000 --segment 16 --memory 32 --seed 0
"""

import argparse
import json
import math
import time
from pathlib import Path

import keras

from keras_txl import data
from keras_txl.models import CompressiveTransformerXLBackbone
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM

CORPUS = Path(__file__).resolve().parents[1] / "data/tinyshakespeare.txt"


def run(config, args, vocabulary_size, train_ids, valid_ids):
    keras.utils.set_random_seed(args.seed)
    compressive = config.get("compressed_memory_length", 0) > 0
    options = {}
    if compressive:
        options = dict(
            compressed_memory_length=config["compressed_memory_length"],
            compression_rate=config.get("compression_rate", 1),
            compression=config.get("compression", "mean"),
        )
    backbone_class = TransformerXLBackbone
    if compressive:
        backbone_class = CompressiveTransformerXLBackbone
    backbone = backbone_class(
        vocabulary_size=vocabulary_size,
        num_layers=args.layers,
        num_heads=4,
        hidden_dim=args.hidden,
        head_dim=args.hidden // 4,
        intermediate_dim=4 * args.hidden,
        memory_length=config["memory_length"],
        **options,
    )
    lm = TransformerXLCausalLM(backbone)
    lm.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=0.25),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    lm.build_memory(args.batch)
    train = data.segment_dataset(
        train_ids, args.batch, args.segment, vocabulary_size=vocabulary_size
    ).take(args.steps)
    valid = data.segment_dataset(
        valid_ids, args.batch, args.segment, vocabulary_size=vocabulary_size
    )
    start = time.perf_counter()
    history = lm.fit(train, epochs=1, shuffle=False, verbose=0)
    seconds = time.perf_counter() - start
    lm.reset_memory()  # validation starts with no context
    logs = lm.evaluate(valid, verbose=0, return_dict=True)
    slots = config["memory_length"] + config.get("compressed_memory_length", 0)
    span = config["memory_length"] + config.get(
        "compressed_memory_length", 0
    ) * config.get("compression_rate", 1)
    return {
        "config": config["name"],
        "slots": slots,
        "span": span,
        "valid_bpc": logs["loss"] / math.log(2),
        "train_loss_last_epoch": history.history["loss"][-1],
        "valid_reconstruction_loss": logs.get("reconstruction_loss"),
        "train_seconds": round(seconds, 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--memory", type=int, default=32)
    parser.add_argument("--rate", type=int, default=2)
    parser.add_argument("--segment", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    corpus = data.load_corpus("builtin", CORPUS, 0.05, 0.05)
    tokenizer = data.make_tokenizer("char", corpus)
    vocabulary_size = int(tokenizer.vocabulary_size())
    _, train_ids, valid_ids, _ = data.corpus_ids(tokenizer, corpus)

    M, c = args.memory, args.rate
    half = M // 2
    configs = [
        {"name": f"plain M={M}", "memory_length": M},
        {"name": f"plain M={half}", "memory_length": half},
    ]
    for compression in ("mean", "conv"):
        configs.append(
            {
                "name": f"compressive {compression} M={half} Mc={half // c} "
                f"c={c}",
                "memory_length": half,
                "compressed_memory_length": half // c,
                "compression_rate": c,
                "compression": compression,
            }
        )
    results = []
    for config in configs:
        result = run(config, args, vocabulary_size, train_ids, valid_ids)
        print(json.dumps(result), flush=True)
        results.append(result)
    baseline = results[0]["valid_bpc"]
    summary = {
        "backend": keras.config.backend(),
        "args": vars(args),
        "bpc_minus_plain_M": {
            r["config"]: round(r["valid_bpc"] - baseline, 4) for r in results
        },
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
