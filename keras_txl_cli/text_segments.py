"""How `keras-txl train` and `keras-txl evaluate` read a text: its
ordered segments, the streams of an evaluation, and what one token is
when a result is printed in bits per token; and the corpus of `keras-txl
ablate` and `keras-txl recl`."""


def eval_batch_size(num_tokens, batch_size, segment_length):
    """Streams for evaluation: at most `batch_size`, each of at least four
    segments when the text allows it (so that the memory has context)."""
    return max(1, min(batch_size, (num_tokens - 1) // (4 * segment_length)))


def ordered_segments(
    token_ids, batch_size, segment_length, vocabulary_size, part
):
    """The `tf.data` of ordered `(inputs, targets)` batches of
    `token_ids`; a text too short for one batch raises `CorpusError`
    naming `part` ("training", "validation", ...)."""
    from keras_txl import data
    from keras_txl.data.segments import segment_info
    from keras_txl.data.text_source import CorpusError

    try:
        segment_info(len(token_ids), batch_size, segment_length)
    except CorpusError as error:
        raise CorpusError(f"The {part} text is too short. {error}")
    return data.segment_dataset(
        token_ids,
        batch_size,
        segment_length,
        vocabulary_size=vocabulary_size,
    )


def token_unit(tokenizer):
    """What one token of `tokenizer` is, for "bits per ...": `"byte"`,
    `"character"`, `"word"` or `"token"`."""
    import keras_hub

    from keras_txl.models import CharacterTokenizer
    from keras_txl.models import TransformerXLTokenizer

    tokenizers = keras_hub.tokenizers
    if isinstance(tokenizer, tokenizers.ByteTokenizer):
        return "byte"
    if isinstance(
        tokenizer,
        (CharacterTokenizer, tokenizers.UnicodeCodepointTokenizer),
    ):
        return "character"
    if isinstance(
        tokenizer, (tokenizers.WordPieceTokenizer, TransformerXLTokenizer)
    ):
        return "word"
    return "token"


def ablation_corpus(path):
    """The corpus of `keras-txl ablate` and `recl`: the built-in text or
    the file `path`, split 90/5/5."""
    from keras_txl import data

    return data.load_corpus("builtin", path, 0.05, 0.05)
