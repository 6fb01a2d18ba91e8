"""Corpora, tokenizers and ordered segment datasets for Transformer-XL.

A run from a corpus to `model.fit`:

```python
from keras_txl import data

corpus = data.load_corpus("builtin", valid_fraction=0.05)  # or "enwik8", ...
tokenizer = data.make_tokenizer("char", corpus)
ids = data.corpus_ids(tokenizer, corpus)  # files: memory-mapped, cached
dataset = data.segment_dataset(
    ids.train, batch_size=16, sequence_length=128,
    vocabulary_size=tokenizer.vocabulary_size(),
)
steps = len(dataset)  # batches per pass over `ids.train`
```

The modules import without TensorFlow; the datasets are `tf.data`
pipelines (TensorFlow is imported when one is built) that feed `fit` on
every Keras backend. The tokenizer classes are in `keras_txl.models`.
`load_corpus` raises `CorpusError` (a `ValueError`) for a corpus it
cannot read. The token cache (`token_cache.py`) and the helpers of
`keras-txl` (`encode`, `decode`, `segment_info`, ...) stay in their
modules.
"""

from keras_txl.data.corpora import load_corpus
from keras_txl.data.one_billion_word import one_billion_word_dataset
from keras_txl.data.segments import segment_dataset
from keras_txl.data.text_pipeline import text_segment_dataset
from keras_txl.data.tokenization import corpus_ids
from keras_txl.data.tokenization import make_tokenizer

__all__ = [
    "corpus_ids",
    "load_corpus",
    "make_tokenizer",
    "one_billion_word_dataset",
    "segment_dataset",
    "text_segment_dataset",
]
