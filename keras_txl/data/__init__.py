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
steps = data.num_batches(ids.train, batch_size=16, sequence_length=128)
```

The modules import without TensorFlow; the datasets are `tf.data`
pipelines (TensorFlow is imported when one is built) that feed `fit` on
every Keras backend. The tokenizer classes are in `keras_txl.models`.
"""

from keras_txl.data.corpora import CORPORA
from keras_txl.data.corpora import load_corpus
from keras_txl.data.one_billion_word import one_billion_word_dataset
from keras_txl.data.segments import num_batches
from keras_txl.data.segments import segment_dataset
from keras_txl.data.segments import segment_info
from keras_txl.data.segments import shard_streams
from keras_txl.data.text_pipeline import text_segment_dataset
from keras_txl.data.text_source import CorpusError
from keras_txl.data.token_cache import clear_token_cache
from keras_txl.data.token_cache import token_cache_entries
from keras_txl.data.token_cache import token_cache_folder
from keras_txl.data.token_cache import token_cache_writes
from keras_txl.data.tokenization import corpus_ids
from keras_txl.data.tokenization import decode
from keras_txl.data.tokenization import encode
from keras_txl.data.tokenization import make_tokenizer

__all__ = [
    "CORPORA",
    "CorpusError",
    "clear_token_cache",
    "corpus_ids",
    "decode",
    "encode",
    "load_corpus",
    "make_tokenizer",
    "num_batches",
    "one_billion_word_dataset",
    "segment_dataset",
    "segment_info",
    "shard_streams",
    "text_segment_dataset",
    "token_cache_entries",
    "token_cache_folder",
    "token_cache_writes",
]
