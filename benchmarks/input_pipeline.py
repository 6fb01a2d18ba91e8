"""Is the input pipeline ever the bottleneck? Tokens per second of the data
pipeline alone against the training step's consumption, in one process.

The corpus is data/tinyshakespeare.txt repeated to `--corpus-mb` in a
temporary folder. Measured, one after the other in the same run (so the
ratio holds under the same load):

- `memmap`: `segment_dataset` over the token cache's memory map (what
  `keras-txl train` feeds `fit`), every batch read once;
- `in_graph`: `text_segment_dataset` (tensorflow-text, tokenization
  included), every batch read once;
- `train`: `fit` steps of a preset's model on batches already in memory
  (`Dataset.cache`), after one compiling epoch: the tokens a training
  step consumes per second.

    KERAS_BACKEND=jax PYTHONPATH=. python -m benchmarks.input_pipeline \
        --presets tiny reference

Prints one JSON line per preset: tokens/s of each and the ratios
`memmap / train` and `in_graph / train` (above 1: the input keeps up).
"""

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "data", "tinyshakespeare.txt")


def _read_all(dataset):
    started = time.perf_counter()
    tokens = 0
    for inputs, _ in dataset:
        tokens += int(inputs.shape[0]) * int(inputs.shape[1])
    return tokens / (time.perf_counter() - started)


def _train_rate(config, vocabulary_size, dataset, steps):
    import keras

    from keras_txl.app.sizes import build_language_model
    from keras_txl.training.schedules import transformer_xl_optimizer

    keras.utils.set_random_seed(0)
    lm = build_language_model(config, vocabulary_size)
    lm.compile(optimizer=transformer_xl_optimizer(1e-3, 10 * steps, 0))
    batches = dataset.take(steps).cache().repeat()
    lm.fit(batches, steps_per_epoch=2, epochs=1, verbose=0)  # compiles
    started = time.perf_counter()
    lm.fit(batches, steps_per_epoch=steps, epochs=1, verbose=0)
    seconds = time.perf_counter() - started
    return steps * config.batch_size * config.segment_length / seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus-mb", type=float, default=20)
    parser.add_argument("--presets", nargs="+", default=["tiny"])
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--json", help="file for the results")
    args = parser.parse_args(argv)

    import keras

    from keras_txl import data
    from keras_txl.app.train_config import TrainConfig

    with open(CORPUS, encoding="utf-8") as file:
        text = file.read()
    rows = []
    with tempfile.TemporaryDirectory(prefix="keras_txl_input_") as tmp:
        path = os.path.join(tmp, "corpus.txt")
        repeats = max(1, int(args.corpus_mb * 1e6 / len(text)))
        with open(path, "w", encoding="utf-8") as file:
            file.write(text * repeats)
        corpus = data.load_corpus("builtin", path, 0.0, cache_dir=tmp)
        tokenizer = data.make_tokenizer("char", corpus, cache_dir=tmp)
        ids = data.corpus_ids(tokenizer, corpus.train, cache_dir=tmp)
        size = int(tokenizer.vocabulary_size())
        for preset in args.presets:
            config = TrainConfig(size=preset, steps=100).resolved()
            batch, length = config.batch_size, config.segment_length
            memmap = _read_all(
                data.segment_dataset(ids, batch, length, vocabulary_size=size)
            )
            in_graph = _read_all(
                data.text_segment_dataset([path], tokenizer, batch, length)
            )
            dataset = data.segment_dataset(
                ids, batch, length, vocabulary_size=size
            )
            train = _train_rate(config, size, dataset, args.train_steps)
            row = {
                "preset": preset,
                "batch_size": batch,
                "segment_length": length,
                "corpus_tokens": int(len(ids)),
                "memmap_tokens_per_s": round(memmap),
                "in_graph_tokens_per_s": round(in_graph),
                "train_tokens_per_s": round(train),
                "memmap_over_train": round(memmap / train, 1),
                "in_graph_over_train": round(in_graph / train, 1),
                "backend": keras.backend.backend(),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
