"""One Billion Word (Chelba et al., 2013) in the setting of the
Transformer-XL paper.

The official archive (`1-billion-word-language-modeling-benchmark-
r13output`) holds 100 training shards
`training-monolingual.tokenized.shuffled/news.en-000NN-of-00100` (NN = 01
to 99; shard 00000 is not in the training folder) and 50 held-out shards
`heldout-monolingual.tokenized.shuffled/news.en.heldout-000NN-of-00050`,
one tokenized sentence per line, the sentences in random order. Facts of
the authors' scripts (`getdata.sh`, `pytorch/data_utils.py`):

- validation and test are both the held-out shard 00000;
- the vocabulary is the benchmark's `1b_word_vocab.txt` (793,470 words,
  first column), and unknown words map to `<UNK>`;
- every sentence is wrapped in `<S> ... <S>`, and each of the batch's
  rows reads shuffled sentences back to back (sentence order and shard
  order are shuffled every epoch), so the memory carries across
  unrelated sentences; the held-out sentences are read in file order.

Here a sentence is its words followed by `<eos>` (the line end of the
`"word"` tokenizer), which gives the same stream as the authors'
`<S> w1 .. wn <S> v1 .. <S>`: a separator between sentences, predicted at
the end of each and read as the context of the next. Within a shard the
shuffled sentences are cut into `batch_size` contiguous streams (the
ordered layout of `segment_dataset`); the authors hand sentences to rows
one at a time instead, which is the same in distribution: every row reads
whole sentences in random order. Each shard is tokenized once into the
token cache (`int32` for the full vocabulary).

Use it with the adaptive softmax (`TransformerXLBackbone(cutoffs=...)`;
the paper's cutoffs for this vocabulary are 60,000, 100,000 and 640,000).

`keras_txl.data.load_corpus("one_billion_word", path)` finds the
official layout; `make_tokenizer("word", corpus)` reads the benchmark's
vocabulary when the copy has it (else counts the training shards);
`corpus_ids` and `segment_dataset` read it as every corpus is read (the
shards one after the other, in the benchmark's shuffled sentence order,
what `keras-txl train --dataset one_billion_word` does), and
`one_billion_word_dataset` reshuffles every pass as the authors do.

Example:

```python
corpus = keras_txl.data.load_corpus("one_billion_word", "data/lm1b")
tokenizer = keras_txl.data.make_tokenizer("word", corpus)
train = keras_txl.data.one_billion_word_dataset(
    corpus, tokenizer, batch_size=32, sequence_length=32, seed=0
)
valid_ids = keras_txl.data.corpus_ids(tokenizer, corpus.valid)
```
"""

import itertools
import os

import numpy as np

from keras_txl.data.text_source import Corpus
from keras_txl.data.text_source import CorpusError
from keras_txl.data.text_source import TextSource
from keras_txl.data.tokenization import END_OF_LINE_TOKEN
from keras_txl.data.tokenization import corpus_ids
from keras_txl.utils.validation import check_positive_int

ARCHIVE_FOLDER = "1-billion-word-language-modeling-benchmark-r13output"
TRAIN_FOLDER = "training-monolingual.tokenized.shuffled"
HELDOUT_FOLDER = "heldout-monolingual.tokenized.shuffled"
HELDOUT_FILE = "news.en.heldout-00000-of-00050"
VOCABULARY_FILE = "1b_word_vocab.txt"
# The paper's adaptive softmax cutoffs for the 793,471-word vocabulary.
PAPER_CUTOFFS = (60_000, 100_000, 640_000)


def one_billion_word_corpus(path):
    """The `Corpus` of the official layout under `path` (the folder of the
    extracted archive, or the folder that holds it, as the authors'
    `getdata.sh` leaves it): the training shards in name order (one part),
    the held-out shard 00000 as validation and test, the vocabulary file
    as `word_list` (or `None`), and a vocabulary counted over the
    training shards only.

    Raises:
        CorpusError: no training shard or no held-out shard 00000.
    """
    path = os.fspath(path)
    root = path
    if os.path.isdir(os.path.join(path, ARCHIVE_FOLDER)):
        root = os.path.join(path, ARCHIVE_FOLDER)
    train_folder = os.path.join(root, TRAIN_FOLDER)
    names = []
    if os.path.isdir(train_folder):
        names = sorted(
            name
            for name in os.listdir(train_folder)
            if name.startswith("news.en-") and "-of-" in name
        )
    heldout = os.path.join(root, HELDOUT_FOLDER, HELDOUT_FILE)
    if not names or not os.path.isfile(heldout):
        raise CorpusError(
            f"'{path}' does not hold the One Billion Word layout: "
            f"{TRAIN_FOLDER}/news.en-000NN-of-00100 and {HELDOUT_FOLDER}/"
            f"{HELDOUT_FILE} (in {ARCHIVE_FOLDER}/ or directly). Extract "
            "1-billion-word-language-modeling-benchmark-r13output.tar.gz."
        )
    vocabulary = None
    for folder in (path, root):
        if os.path.isfile(os.path.join(folder, VOCABULARY_FILE)):
            vocabulary = os.path.join(folder, VOCABULARY_FILE)
            break
    heldout = TextSource(os.path.abspath(heldout))
    return Corpus(
        train=tuple(
            TextSource(os.path.abspath(os.path.join(train_folder, name)))
            for name in names
        ),
        valid=heldout,
        test=heldout,
        word_list=vocabulary,
        counted=("train",),
    )


def _shuffled_sentences(ids, end_of_sentence, rng):
    """The sentences of `ids` (each ends with `end_of_sentence`) in a
    random order, as one array.

    Args:
        ids: 1-D token ids of whole sentences.
        end_of_sentence: int. The id that ends every sentence.
        rng: `np.random.Generator`.

    Returns:
        An array of the same ids and dtype, sentences permuted.

    Example:

    >>> ids = np.array([5, 6, 1, 7, 1, 8, 9, 9, 1])
    >>> out = _shuffled_sentences(ids, 1, np.random.default_rng(0))
    >>> sorted(out.tolist()) == sorted(ids.tolist()), bool(out[-1] == 1)
    (True, True)
    """
    ids = np.asarray(ids)
    ends = np.flatnonzero(ids == end_of_sentence) + 1  # after each <eos>
    if not len(ends) or ends[-1] != len(ids):
        ends = np.append(ends, len(ids))  # a last sentence without <eos>
    starts = np.concatenate([[0], ends[:-1]])
    order = rng.permutation(len(starts))
    lengths = (ends - starts)[order]
    # Index of every output token: its sentence's start plus its offset.
    offsets = np.arange(lengths.sum()) - np.repeat(
        np.cumsum(lengths) - lengths, lengths
    )
    return ids[np.repeat(starts[order], lengths) + offsets]


def one_billion_word_dataset(
    corpus,
    tokenizer,
    batch_size,
    sequence_length,
    seed=0,
    token_cache_dir=None,
    log=None,
):
    """Training batches in the paper's setting: shuffled sentences.

    Every pass over the data (each `repeat()` of the dataset) takes the
    shards in a new random order and the sentences of each shard in a new
    random order; the shard's shuffled sentences are laid out as ordered
    segments of `batch_size` streams, and the batches of the shards follow
    each other, so a row's memory runs on from one sentence, and one
    shard, into the next.

    Args:
        corpus: `load_corpus("one_billion_word", path)`.
        tokenizer: its `make_tokenizer("word", corpus)`.
        batch_size: int. Number of streams.
        sequence_length: int. Segment length `T`.
        seed: int. Seed of the shuffles (pass `p` uses `seed + p`).
        token_cache_dir: optional token cache folder.
        log: optional function that prints a line when a shard is
            tokenized (the first time only).

    Returns:
        A `tf.data.Dataset` of `(inputs, targets)`, `int32`,
        `(batch_size, sequence_length)`.
    """
    import tensorflow as tf

    batch_size = check_positive_int("batch_size", batch_size)
    sequence_length = check_positive_int("sequence_length", sequence_length)
    end_of_sentence = tokenizer.token_to_id(END_OF_LINE_TOKEN)
    passes = itertools.count()

    def batches():
        rng = np.random.default_rng(seed + next(passes))
        for shard in rng.permutation(len(corpus.train)):
            ids = corpus_ids(
                tokenizer, corpus.train[shard], token_cache_dir, log
            )
            stream = _shuffled_sentences(ids, end_of_sentence, rng)
            length = len(stream) // batch_size
            count = (length - 1) // sequence_length
            if count < 1:
                continue
            streams = stream[: batch_size * length].reshape(batch_size, -1)
            for index in range(count):
                start = index * sequence_length
                block = streams[:, start : start + sequence_length + 1]
                block = block.astype(np.int32)  # (B, T + 1)
                yield block[:, :-1], block[:, 1:]

    spec = tf.TensorSpec((batch_size, sequence_length), tf.int32)
    return tf.data.Dataset.from_generator(
        batches, output_signature=(spec, spec)
    ).prefetch(tf.data.AUTOTUNE)
