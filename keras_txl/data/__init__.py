"""Corpora, tokenizers and ordered segment datasets for Transformer-XL.

A run from text to `model.fit`:

```python
from keras_txl import data

train, valid, test = data.split_text(data.builtin_corpus(), 0.05, 0.05)
tokenizer = data.make_tokenizer("char", train + valid + test)
train_ids = data.encode(tokenizer, train)
dataset = data.segment_dataset(
    train_ids, batch_size=16, sequence_length=128,
    vocabulary_size=tokenizer.vocabulary_size(),
)
steps = data.num_batches(train_ids, batch_size=16, sequence_length=128)
```

The pipelines use `tf.data` and the keras-hub tokenizers (TensorFlow must
be installed); the datasets feed `fit` on every Keras backend.
"""

from keras_txl.data.byte_tokenizer import ByteTokenizer
from keras_txl.data.character_tokenizer import CharacterTokenizer
from keras_txl.data.corpora import TextSplits
from keras_txl.data.corpora import builtin_corpus
from keras_txl.data.corpora import load_enwik8
from keras_txl.data.corpora import load_text
from keras_txl.data.corpora import load_text8
from keras_txl.data.corpora import load_wikitext103
from keras_txl.data.corpora import split_text
from keras_txl.data.corpus_error import CorpusError
from keras_txl.data.corpus_ids import CorpusIds
from keras_txl.data.corpus_ids import dataset_sources
from keras_txl.data.corpus_ids import load_corpus_ids
from keras_txl.data.corpus_sources import SourceSplits
from keras_txl.data.corpus_sources import enwik8_sources
from keras_txl.data.corpus_sources import text8_sources
from keras_txl.data.corpus_sources import text_file_sources
from keras_txl.data.corpus_sources import wikitext103_sources
from keras_txl.data.one_billion_word import OneBillionWordFiles
from keras_txl.data.one_billion_word import one_billion_word_dataset
from keras_txl.data.one_billion_word import one_billion_word_files
from keras_txl.data.one_billion_word import one_billion_word_tokenizer
from keras_txl.data.segments import SegmentInfo
from keras_txl.data.segments import num_batches
from keras_txl.data.segments import segment_dataset
from keras_txl.data.segments import segment_info
from keras_txl.data.segments import shard_streams
from keras_txl.data.text_pipeline import text_segment_dataset
from keras_txl.data.text_source import TextSource
from keras_txl.data.token_cache import PendingWrites
from keras_txl.data.token_cache import build_tokenizer
from keras_txl.data.token_cache import cache_entries
from keras_txl.data.token_cache import cached_token_ids
from keras_txl.data.token_cache import clear_cache
from keras_txl.data.tokenization import decode
from keras_txl.data.tokenization import encode
from keras_txl.data.tokenization import make_tokenizer

__all__ = [
    "ByteTokenizer",
    "CharacterTokenizer",
    "CorpusError",
    "CorpusIds",
    "SourceSplits",
    "PendingWrites",
    "TextSource",
    "build_tokenizer",
    "cache_entries",
    "cached_token_ids",
    "clear_cache",
    "dataset_sources",
    "enwik8_sources",
    "load_corpus_ids",
    "OneBillionWordFiles",
    "one_billion_word_dataset",
    "one_billion_word_files",
    "one_billion_word_tokenizer",
    "text_segment_dataset",
    "text8_sources",
    "text_file_sources",
    "wikitext103_sources",
    "SegmentInfo",
    "TextSplits",
    "builtin_corpus",
    "decode",
    "encode",
    "load_enwik8",
    "load_text",
    "load_text8",
    "load_wikitext103",
    "make_tokenizer",
    "num_batches",
    "segment_dataset",
    "segment_info",
    "shard_streams",
    "split_text",
]
