"""What a SavedModel of `export_saved_model` says about itself, in its
`assets/` folder, so that a server needs neither Keras nor keras-txl to
turn text into ids and back, nor to know the signatures' shapes.

`assets/vocabulary.json` (when the model's tokenizer is known), one JSON
object:

- `"format"`: `"keras_txl.vocabulary/1"`;
- `"kind"`: `"character"` (a token per character), `"byte"` (a token per
  UTF-8 byte) or `"word"` (a token per word of the WikiText-103 rules:
  words and punctuation, split on spaces; a line ends with `end_token`);
- `"vocabulary"`: the list of tokens, the id of a token being its index
  (`null` for `"byte"`: the id of a byte is its value, 0-255);
- `"oov_token"`: the token that a character or word outside the
  vocabulary is read as (`null`: the run has none; leave such characters
  out);
- `"end_token"`: the token that ends a line (`"word"` only, else
  `null`).

`assets/signatures.json`: `{signature name: {"inputs": [...], "outputs":
[...]}}`, each tensor as `{"name", "dtype", "shape"}` with `null` for an
axis of any size, in the order the signature takes and returns them.
"""

import json
import os

import keras_hub

from keras_txl.models import CharacterTokenizer
from keras_txl.models import TransformerXLTokenizer

FORMAT = "keras_txl.vocabulary/1"
VOCABULARY_ASSET = "vocabulary.json"
SIGNATURES_ASSET = "signatures.json"


def vocabulary_asset(tokenizer):
    """The `vocabulary.json` object of `tokenizer`, or `None` for a
    tokenizer of another kind (its ids cannot be described here)."""
    if isinstance(tokenizer, keras_hub.tokenizers.ByteTokenizer):
        kind, vocabulary, oov_token, end_token = "byte", None, None, None
    elif isinstance(tokenizer, CharacterTokenizer):
        kind, oov_token, end_token = "character", tokenizer.oov_token, None
        vocabulary = list(tokenizer.get_vocabulary())
    elif isinstance(tokenizer, TransformerXLTokenizer):
        kind, vocabulary = "word", list(tokenizer.get_vocabulary())
        oov_token, end_token = tokenizer.unknown_token, tokenizer.end_token
    else:
        return None
    return {
        "format": FORMAT,
        "kind": kind,
        "vocabulary": vocabulary,
        "oov_token": oov_token,
        "end_token": end_token,
    }


def _tensor(name, shape, dtype):
    return {
        "name": name,
        "dtype": str(getattr(dtype, "name", dtype)),
        "shape": list(shape),
    }


def signatures_asset(
    memory_signature,
    token_shape,
    vocabulary_size,
    serving_signature,
    initial_memory_signature,
):
    """The `signatures.json` object of an export whose memory is
    `memory_signature` (`MemorySpec.signature`) and whose tokens have
    `token_shape`; `batch_size` is an input of the initial memory when
    the batch axis is free."""
    memory = [_tensor(*entry) for entry in memory_signature]
    logits_shape = (*token_shape, vocabulary_size)
    # `initial_memory(batch_size)`, or `initial_memory()` for a batch
    # size fixed at export.
    batch = (
        [_tensor("batch_size", (), "int32")] if token_shape[0] is None else []
    )
    return {
        serving_signature: {
            "inputs": [_tensor("token_ids", token_shape, "int32"), *memory],
            "outputs": [_tensor("logits", logits_shape, "float32"), *memory],
        },
        initial_memory_signature: {
            "inputs": batch,
            "outputs": memory,
        },
    }


def write_serving_assets(folder, signatures, tokenizer=None):
    """Writes `assets/signatures.json` (the object `signatures`) and, when
    `tokenizer` is one of keras-txl's kinds, `assets/vocabulary.json` into
    the SavedModel `folder`."""
    assets = os.path.join(os.fspath(folder), "assets")
    os.makedirs(assets, exist_ok=True)
    files = {SIGNATURES_ASSET: signatures}
    vocabulary = None if tokenizer is None else vocabulary_asset(tokenizer)
    if vocabulary is not None:
        files[VOCABULARY_ASSET] = vocabulary
    for name, value in files.items():
        with open(os.path.join(assets, name), "w", encoding="utf-8") as file:
            json.dump(value, file, ensure_ascii=False, indent=1)
