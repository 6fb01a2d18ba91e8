"""A corpus's tokenizer and token ids, from the token cache.

`load_corpus_ids(dataset, corpus, kind)` is what `keras-txl train` reads:
the built-in text (small) is split and encoded in memory; a text file and
the benchmarks (enwik8, text8, WikiText-103) are read in chunks, tokenized
once into the token cache (`keras_txl.data.token_cache`) and returned as
memory maps, so a second run starts in seconds and the corpus costs a few
bytes per token however large it is.

Example:

>>> ids = load_corpus_ids("builtin", kind="char", valid_fraction=0.1)
>>> ids.tokenizer.vocabulary_size() > 50, len(ids.valid) > 10_000
(True, True)
"""

from typing import NamedTuple

import numpy as np

from keras_txl.data import corpora
from keras_txl.data import corpus_sources
from keras_txl.data.token_cache import build_tokenizer
from keras_txl.data.token_cache import cached_token_ids
from keras_txl.data.tokenization import encode
from keras_txl.data.tokenization import make_tokenizer

DATASETS = ("builtin", "enwik8", "text8", "wikitext103")


class CorpusIds(NamedTuple):
    """A tokenizer and the ids of the train, validation and test splits
    (1-D arrays: `np.memmap`s of the token cache for files)."""

    tokenizer: object
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray


def dataset_sources(dataset, corpus=None, valid_fraction=0.1, cache_dir=None):
    """The `SourceSplits` of a dataset read from files.

    Args:
        dataset: `"builtin"` (with `corpus`: a text file, split by
            `valid_fraction` from its end), `"enwik8"`, `"text8"` or
            `"wikitext103"`.
        corpus: path of the text file, or the local copy of a benchmark
            (`None`: downloaded once).
        valid_fraction: float. Share of a text file held out.
        cache_dir: optional token cache folder.

    Returns:
        `keras_txl.data.corpus_sources.SourceSplits`.
    """
    if dataset not in DATASETS:
        raise ValueError(
            f"`dataset` must be one of {DATASETS}. Received: {dataset!r}"
        )
    if dataset == "builtin":
        if corpus is None:
            raise ValueError(
                "The built-in corpus is text in memory, not a file: call "
                "`load_corpus_ids`, or pass `corpus`."
            )
        return corpus_sources.text_file_sources(
            corpus, valid_fraction, 0.0, cache_dir=cache_dir
        )
    loaders = {
        "enwik8": corpus_sources.enwik8_sources,
        "text8": corpus_sources.text8_sources,
        "wikitext103": corpus_sources.wikitext103_sources,
    }
    return loaders[dataset](path=corpus)


def load_corpus_ids(
    dataset,
    corpus=None,
    kind="char",
    valid_fraction=0.1,
    tokenizer=None,
    cache_dir=None,
    log=None,
):
    """The tokenizer and the token ids of a corpus's splits.

    Args:
        dataset: `"builtin"`, `"enwik8"`, `"text8"` or `"wikitext103"`.
        corpus: optional path (see `dataset_sources`); `None` with
            `"builtin"` is the built-in text.
        kind: `"byte"`, `"char"` or `"word"`: the tokenizer built from the
            three splits when `tokenizer` is `None`.
        valid_fraction: float. Share of a text (file) held out for
            validation, from its end.
        tokenizer: optional tokenizer to use instead (a resumed run's).
        cache_dir: optional token cache folder.
        log: optional function that prints a line when a cache is built.

    Returns:
        `CorpusIds(tokenizer, train, valid, test)`; `test` is empty for a
        text file or the built-in text (no test part is held out).
    """
    if dataset == "builtin" and corpus is None:
        text = corpora.builtin_corpus()
        splits = corpora.split_text(text, valid_fraction, 0.0)
        if tokenizer is None:
            tokenizer = make_tokenizer(
                kind, splits.train + splits.valid + splits.test
            )
        return CorpusIds(
            tokenizer, *(encode(tokenizer, part) for part in splits)
        )
    sources = dataset_sources(dataset, corpus, valid_fraction, cache_dir)
    if tokenizer is None:
        tokenizer = build_tokenizer(kind, sources, cache_dir=cache_dir)
    return CorpusIds(
        tokenizer,
        *(
            cached_token_ids(tokenizer, source, cache_dir, log)
            for source in sources
        ),
    )
