"""Word-level training speed and perplexity: adaptive softmax vs full softmax.

A real word-level corpus with more than 30k word types: tinyshakespeare
(`data/tinyshakespeare.txt`) followed by the built-in corpus
(the English documentation text of CPython's `pydoc_data`), split on
whitespace as WikiText-103 is, every word type kept (the vocabulary comes
from the whole text, as the authors build enwik8's and text8's), the last
5% held out for validation. Two language models of the same body (the
same initial weights of the shared layers, the same batches) train with
`model.fit` for the same number of steps:

- `full`: one embedding of `vocabulary_size x d`, tied to a full softmax;
- `adaptive`: `AdaptiveEmbedding` + `AdaptiveSoftmax` with the authors'
  WikiText-103 settings scaled to the vocabulary (cutoffs at about 6% and
  30% of it, `div_val=4`, tied embeddings and projections), trained on the
  per-cluster NLL without building the full softmax.

Reported per model: training tokens/s (median step time after the first
`--warmup` steps, so compilation is excluded), validation perplexity
after the same steps, and the number of parameters. `speedup` is
adaptive tokens/s over full tokens/s, measured in the same process.

    PYTHONPATH=. KERAS_BACKEND=jax python benchmarks/adaptive_word_lm.py
"""

import argparse
import json
import math
import time
from pathlib import Path

import keras
import numpy as np

from benchmarks import common
from keras_txl import data
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM

SHAKESPEARE = Path(__file__).resolve().parents[1] / "data/tinyshakespeare.txt"


class _StepTimes(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)


def corpus():
    """The two real texts, one after the other."""
    with open(SHAKESPEARE, encoding="utf-8") as file:
        shakespeare = file.read()
    builtin = data.load_corpus("builtin", valid_fraction=0.0).train
    return shakespeare + "\n" + builtin


def _language_model(args, vocabulary_size, adaptive):
    options = {}
    if adaptive:
        options = dict(
            cutoffs=[
                int(round(vocabulary_size * 0.06, -3)),
                int(round(vocabulary_size * 0.3, -3)),
            ],
            div_val=4,
        )
    backbone = TransformerXLBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=args.layers,
        num_heads=args.hidden // 64,
        hidden_dim=args.hidden,
        head_dim=64,
        intermediate_dim=4 * args.hidden,
        memory_length=args.memory,
        **options,
    )
    lm = TransformerXLCausalLM(backbone)
    lm.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=0.25),
    )
    lm.build_memory(args.batch)
    return lm


def run(name, args, vocabulary_size, train_ids, valid_ids):
    keras.utils.set_random_seed(args.seed)
    lm = _language_model(args, vocabulary_size, name == "adaptive")
    train = data.segment_dataset(
        train_ids, args.batch, args.segment, vocabulary_size=vocabulary_size
    ).take(args.steps)
    valid = data.segment_dataset(
        valid_ids, args.batch, args.segment, vocabulary_size=vocabulary_size
    )
    times = _StepTimes()
    start = time.perf_counter()
    history = lm.fit(
        train, epochs=1, shuffle=False, verbose=0, callbacks=[times]
    )
    seconds = time.perf_counter() - start
    lm.reset_memory()  # validation starts with no context
    logs = lm.evaluate(valid, verbose=0, return_dict=True)
    step = float(np.median(times.seconds[args.warmup :]))
    return {
        "model": name,
        "backend": keras.config.backend(),
        "vocabulary_size": vocabulary_size,
        "cutoffs": getattr(lm.backbone, "cutoffs", None),
        "parameters": int(lm.count_params()),
        "steps": args.steps,
        "train_tokens_per_second": round(args.batch * args.segment / step, 1),
        "median_step_ms": round(1000 * step, 2),
        "fit_seconds": round(seconds, 1),
        "train_loss_last": round(float(history.history["loss"][-1]), 4),
        "valid_perplexity": round(math.exp(logs["loss"]), 2),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--segment", type=int, default=64)
    parser.add_argument("--memory", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.steps <= args.warmup:
        raise SystemExit(
            f"--steps must exceed --warmup. Received: steps={args.steps}, "
            f"warmup={args.warmup}"
        )

    text = corpus()
    cut = len(text) - int(len(text) * 0.05)  # the last 5% validates
    train_text, valid_text = text[:cut], text[cut:]
    tokenizer = data.make_tokenizer("word", text)
    vocabulary_size = int(tokenizer.vocabulary_size())
    train_ids = data.encode(tokenizer, train_text)
    valid_ids = data.encode(tokenizer, valid_text)
    common.log(
        f"{vocabulary_size} word types, {len(train_ids)} training and "
        f"{len(valid_ids)} validation tokens"
    )
    results = {}
    for name in ("full", "adaptive"):
        results[name] = run(name, args, vocabulary_size, train_ids, valid_ids)
        print(json.dumps(results[name]), flush=True)
    summary = {
        "benchmark": "adaptive_word_lm",
        "args": vars(args),
        "train_tokens": len(train_ids),
        "speedup": round(
            results["adaptive"]["train_tokens_per_second"]
            / results["full"]["train_tokens_per_second"],
            2,
        ),
        "valid_perplexity": {
            k: r["valid_perplexity"] for k, r in results.items()
        },
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
