import numpy as np

from keras_txl.models import ByteTokenizer


def test_byte_tokenizer_decodes_whole_characters_only():
    """Text cut anywhere in its bytes (as a byte-level model writes it)
    detokenizes to whole characters: an incomplete one at the end is held
    back, never U+FFFD; an invalid byte elsewhere is U+FFFD."""
    tokenizer = ByteTokenizer(lowercase=False)
    text = "नमस्ते 你好 déjà vu"
    data = text.encode("utf-8")
    for end in range(len(data) + 1):
        decoded = tokenizer.detokenize(list(data[:end]))
        assert "\ufffd" not in decoded and text.startswith(decoded), end
        assert len(data[:end]) - len(decoded.encode("utf-8")) < 4
    # A batch, padded with zeros.
    rows = np.array([list(data[:4]), list(data[:2]) + [0, 0]])
    assert tokenizer.detokenize(rows) == ["न", ""]
    assert tokenizer.detokenize([104, 255, 105]) == "h\ufffdi"
