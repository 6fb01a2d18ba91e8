"""Train a character language model on a text file with `model.fit`.

What this shows, top to bottom:

1. A `tf.data` pipeline of **ordered segments**, built by hand from a text
   file: the file is read and tokenized inside the graph (tensorflow-text
   splits it into Unicode characters, a `tf.lookup` table maps them to
   ids), cut into `batch_size` long streams, and served one segment of
   each stream per batch, so that row `b` of batch `i + 1` continues row
   `b` of batch `i`.
2. `TransformerXLCausalLM.fit` on it: the model keeps the memory of the
   last batch and attends to it in the next one (segment-level
   recurrence), with no code of yours.
3. Validation with a **longer memory** than in training
   (`lm.with_memory_length(M)`: the same weights, its own memory), and
   without memory, to see what the memory buys.
4. The model and its tokenizer saved as a **keras-hub preset**, loaded
   back with `keras_hub.models.CausalLM.from_preset` and asked for text.

`keras_txl.data.text_segment_dataset` builds the same pipeline in one
call; it is written out here so that you can adapt it (another
tokenizer, several files, your own split).

Run it (any Keras backend; the pipeline itself is TensorFlow's `tf.data`):

    python examples/train_char_lm.py                # data/tinyshakespeare.txt
    python examples/train_char_lm.py --text my.txt --epochs 3
    KERAS_BACKEND=jax python examples/train_char_lm.py --smoke   # seconds

Defaults: a 2-layer, 128-wide model, segments and memory of 64
characters, 16 streams, one pass over 90% of tinyshakespeare (about 980
steps), validation on the last 10% with memories of 0, 64 and 128.

The output of a full run on a 2-core CPU (2026-12-01): docs/examples.md.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import keras
import keras_hub
import numpy as np
import tensorflow as tf
import tensorflow_text

from keras_txl.models import CharacterTokenizer
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from keras_txl.models import TransformerXLCausalLMPreprocessor
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
    parser.add_argument("--output", default="runs/char_lm_preset")
    parser.add_argument("--batch-size", type=int, default=16)  # streams
    parser.add_argument("--segment-length", type=int, default=64)  # T
    parser.add_argument("--memory-length", type=int, default=64)  # M
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument(
        "--max-chars", type=int, default=0, help="read only the first N"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, a few steps"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.batch_size, args.segment_length, args.memory_length = 4, 16, 16
        args.num_layers, args.hidden_dim, args.max_chars = 1, 32, 3000
    return args


# ---------------------------------------------------------------------------
# 1. Ordered segments, tokenized in the graph.
# ---------------------------------------------------------------------------


def character_vocabulary(path, max_chars):
    """The characters of the text, in code point order. Read once in
    Python: the vocabulary is part of the model (its embedding has one row
    per character) and is saved with it."""
    text = Path(path).read_text(encoding="utf-8")
    if max_chars:
        text = text[:max_chars]
    return sorted(set(text))


def text_to_ids_fn(vocabulary):
    """A TensorFlow function: the whole text (a scalar string) -> its ids
    `(num_chars,)`. Every op runs in the graph, so the pipeline can run on
    the input workers of a TPU or of `tf.distribute`."""
    codepoints = tf.constant([ord(c) for c in vocabulary], tf.int32)
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            codepoints, tf.range(len(vocabulary), dtype=tf.int32)
        ),
        default_value=-1,  # a character outside the vocabulary
    )
    splitter = tensorflow_text.UnicodeCharTokenizer()

    def text_to_ids(text):
        chars = tf.cast(splitter.tokenize(text), tf.int32)  # (num_chars,)
        ids = table.lookup(chars)  # (num_chars,)
        check = tf.debugging.assert_non_negative(
            ids, message="a character outside the vocabulary"
        )
        with tf.control_dependencies([check]):
            return tf.identity(ids)

    return text_to_ids


def ordered_segments(ids, batch_size, segment_length):
    """`(inputs, targets)` batches `(batch_size, T)` of ordered segments.

    The ids are cut into `batch_size` contiguous streams; batch `i` holds
    positions `[i * T, (i + 1) * T)` of every stream, the targets one
    position later. Never shuffle this dataset: the carried memory of row
    `b` must be the text just before row `b` of the next batch.
    """
    stream_length = tf.size(ids) // batch_size
    streams = tf.reshape(
        ids[: batch_size * stream_length], [batch_size, stream_length]
    )  # (B, L)
    num_batches = (stream_length - 1) // segment_length

    def batch(index):
        start = tf.cast(index, tf.int32) * segment_length
        inputs = streams[:, start : start + segment_length]  # (B, T)
        targets = streams[:, start + 1 : start + segment_length + 1]  # (B, T)
        # Static shapes: the carried memory is built for this batch size.
        return (
            tf.ensure_shape(inputs, (batch_size, segment_length)),
            tf.ensure_shape(targets, (batch_size, segment_length)),
        )

    return tf.data.Dataset.range(tf.cast(num_batches, tf.int64)).map(batch)


def make_datasets(args, vocabulary):
    """Train on the first 90% of the text, validate on the last 10%."""
    text_to_ids = text_to_ids_fn(vocabulary)
    texts = tf.data.Dataset.from_tensors(args.text).map(tf.io.read_file)
    if args.max_chars:  # the first characters only (not bytes)
        texts = texts.map(
            lambda t: tf.strings.substr(t, 0, args.max_chars, "UTF8_CHAR")
        )
    ids = texts.map(text_to_ids)  # one element: the whole text's ids
    ids = ids.cache()  # read and tokenize the file once

    def part(low, high):
        def cut(x):
            n = tf.size(x)
            return x[n * low // 10 : n * high // 10]

        return ids.map(cut).flat_map(
            lambda x: ordered_segments(x, args.batch_size, args.segment_length)
        )

    # The number of batches, counted once, so that Keras shows progress and
    # knows where a pass ends.
    def counted(dataset):
        count = int(dataset.reduce(0, lambda n, _: n + 1))
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(count))
        return dataset.prefetch(tf.data.AUTOTUNE)

    return counted(part(0, 9)), counted(part(9, 10))


# ---------------------------------------------------------------------------
# 2. The model, trained with `fit`: the memory crosses the batches.
# ---------------------------------------------------------------------------


def build_model(args, tokenizer, total_steps):
    backbone = TransformerXLBackbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_layers=args.num_layers,
        num_heads=4,
        hidden_dim=args.hidden_dim,
        head_dim=args.hidden_dim // 4,
        intermediate_dim=4 * args.hidden_dim,
        memory_length=args.memory_length,  # carried between batches
    )
    # The preprocessor turns strings into ids for `generate` (and for `fit`
    # on independent strings); its tokenizer is saved with the preset.
    preprocessor = TransformerXLCausalLMPreprocessor(
        tokenizer, sequence_length=args.segment_length
    )
    # The output layer is tied to the token embedding, as in the paper.
    lm = TransformerXLCausalLM(backbone, preprocessor=preprocessor)
    # The paper's optimizer: Adam, global norm clip 0.25, warmup + cosine.
    lm.compile(
        optimizer=transformer_xl_optimizer(
            args.learning_rate,
            total_steps=total_steps,
            warmup_steps=min(200, total_steps // 10),
        )
    )  # default loss: NLL per token; metrics: bits per character & co.
    return lm


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(0)
    vocabulary = character_vocabulary(args.text, args.max_chars)
    train, valid = make_datasets(args, vocabulary)
    inputs, _ = next(train.as_numpy_iterator())  # (B, T)
    first = "".join(vocabulary[i] for i in inputs[0])
    print(
        f"{len(vocabulary)} characters; batches {inputs.shape}; "
        f"row 0 starts {first[:40]!r}"
    )
    # The in-graph ids are the ids of the tokenizer saved with the model.
    tokenizer = CharacterTokenizer(vocabulary)
    assert tokenizer(first).tolist() == inputs[0].tolist()

    steps = int(train.cardinality()) * args.epochs
    lm = build_model(args, tokenizer, steps)
    print(
        f"{lm.backbone.count_params():,} parameters, {steps} training "
        "steps, "
        f"backend {keras.backend.backend()}"
    )
    started = time.time()
    # `fit` builds the carried memory for the batch size of `train`
    # (memory: (B, num_layers, M, hidden), valid_length: (B,)), carries it
    # from each batch to the next, and empties it at each epoch start.
    history = lm.fit(
        train,
        epochs=args.epochs,
        shuffle=False,  # the batches' order is the text's
        verbose=FIT_PROGRESS,
    )
    seconds = time.time() - started
    tokens = steps * args.batch_size * args.segment_length
    print(
        f"trained in {seconds:.0f} s ({tokens / seconds:,.0f} tokens/s); "
        f"last epoch {history.history['bits_per_character'][-1]:.3f} bits "
        "per character"
    )

    # -----------------------------------------------------------------------
    # 3. Validation with no memory, the training memory, a longer one.
    # -----------------------------------------------------------------------
    # `with_memory_length(M)` is a second model on the same weights with its
    # own memory (empty at the start); the paper evaluates with a longer
    # memory than it trains with.
    results = {}
    for memory_length in (0, args.memory_length, 2 * args.memory_length):
        evaluator = lm.with_memory_length(memory_length)
        logs = evaluator.evaluate(valid, verbose=0, return_dict=True)
        results[memory_length] = logs["bits_per_character"]
        print(
            f"validation, memory {memory_length:4d}: "
            f"{results[memory_length]:.4f} bits per character"
        )

    # -----------------------------------------------------------------------
    # 4. A keras-hub preset: the weights, the config and the tokenizer.
    # -----------------------------------------------------------------------
    # keras-hub's `save_to_preset` of a compiled task also writes its
    # optimizer's variables; `with_memory_length` gives a model on the same
    # weights without them (and without the carried memory, never saved).
    os.makedirs(args.output, exist_ok=True)
    lm.with_memory_length(lm.carried_memory_length).save_to_preset(args.output)
    loaded = keras_hub.models.CausalLM.from_preset(args.output)
    assert isinstance(loaded, TransformerXLCausalLM)
    probe = inputs[:1]  # (1, T)
    expected, _ = lm.call_with_memory(probe)  # (1, T, vocab)
    got, _ = loaded.call_with_memory(probe)
    difference = np.max(np.abs(keras.ops.convert_to_numpy(expected - got)))
    print(f"saved to {args.output}; reloaded logits differ by {difference:.1e}")
    prompt = "ROMEO:" if all(c in vocabulary for c in "ROMEO:") else first[:4]
    length = 40 if args.smoke else 300
    sample = loaded.generate(prompt, max_length=length)
    print(f"sample (top-k sampling, {length} characters):\n{sample}")
    return {"bits_per_character": results, "reload_difference": difference}


if __name__ == "__main__":
    main()
