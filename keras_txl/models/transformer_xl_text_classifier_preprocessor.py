"""`TransformerXLTextClassifierPreprocessor`: strings and labels to the
padded token ids of `TransformerXLTextClassifier`."""

import keras
import keras_hub

from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_tokenizer import END_OF_LINE_TOKEN
from keras_txl.models.transformer_xl_tokenizer import TransformerXLTokenizer
from keras_txl.models.transformer_xl_tokenizer import boundary_token_ids
from keras_txl.models.transformer_xl_tokenizer import is_whole_word_tokenizer
from keras_txl.models.transformer_xl_tokenizer import split_words
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLTextClassifierPreprocessor(
    keras_hub.models.TextClassifierPreprocessor
):
    """Documents to token ids for `TransformerXLTextClassifier`.

    keras-hub's `TextClassifierPreprocessor` for Transformer-XL: each
    string is one document, tokenized, given the tokenizer's start and end
    tokens (if it has them: `<eos>` for the word tokenizers, as a line of
    WikiText-103 follows the `<eos>` of the line before; none for the
    character and byte tokenizers), then cut to its first
    `sequence_length` tokens or padded at its end, as keras-hub pads.
    `sequence_length` need not be a multiple of the classifier's
    `segment_length`: the classifier pads the last segment itself.

    A tokenizer of whole words (`keras-txl train --tokenizer word`, or
    `TransformerXLTokenizer`) gets the whitespace words of each string,
    each line break becoming `<eos>`, as with
    `TransformerXLCausalLMPreprocessor`.

    Args:
        tokenizer: a `TransformerXLTokenizer`, a `CharacterTokenizer`, a
            `Utf8ByteTokenizer` or another keras-hub tokenizer.
        sequence_length: int >= 1. Tokens per document after padding or
            truncation: the longest document the classifier reads whole.
        add_start_token: bool. Put the tokenizer's start token (if it has
            one) before each document.
        add_end_token: bool. Put its end token (if any) after each
            document (also after a document cut to `sequence_length`).
        **kwargs: other arguments of `keras_hub.models.Preprocessor`.

    Call arguments:
        x: a string or a batch of strings (one document each; pairs of
            texts are refused).
        y: optional labels, passed through unaltered.
        sample_weight: optional sample weights, passed through unaltered.

    Returns:
        `x`, `(x, y)` or `(x, y, sample_weight)`, where `x` is a dict of
        `"token_ids"` and `"padding_mask"`, each `(batch, sequence_length)`
        (or `(sequence_length,)` for one string): True on the document's
        tokens, then False.

    Example:

    >>> from keras_txl.models import CharacterTokenizer
    >>> tokenizer = CharacterTokenizer(vocabulary=[" ", "a", "b"])
    >>> preprocessor = TransformerXLTextClassifierPreprocessor(
    ...     tokenizer, sequence_length=5
    ... )
    >>> x, y = preprocessor(["ab a", "ba"], [1, 0])
    >>> x = keras.tree.map_structure(keras.ops.convert_to_numpy, x)
    >>> x["token_ids"].tolist()
    [[1, 2, 0, 1, 0], [2, 1, 0, 0, 0]]
    >>> x["padding_mask"].astype(int).tolist()
    [[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]]
    """

    backbone_cls = TransformerXLBackbone
    tokenizer_cls = TransformerXLTokenizer

    def __init__(
        self,
        tokenizer,
        sequence_length=512,
        add_start_token=True,
        add_end_token=True,
        **kwargs,
    ):
        sequence_length = check_positive_int("sequence_length", sequence_length)
        super().__init__(
            tokenizer=tokenizer, sequence_length=sequence_length, **kwargs
        )
        self.add_start_token = check_bool("add_start_token", add_start_token)
        self.add_end_token = check_bool("add_end_token", add_end_token)

    def build(self, input_shape):
        # The character tokenizer names no start or end token, and pads
        # with id 0, an ordinary character: `padding_mask` marks it.
        start, end, pad = boundary_token_ids(self.tokenizer)
        self._end_of_line = None
        if is_whole_word_tokenizer(self.tokenizer):
            self._end_of_line = start
        self.packer = keras_hub.layers.StartEndPacker(
            start_value=start if self.add_start_token else None,
            end_value=end if self.add_end_token else None,
            pad_value=pad,
            sequence_length=self.sequence_length,
            return_padding_mask=True,
        )
        self.built = True

    def call(self, x, y=None, sample_weight=None):
        if isinstance(x, tuple):
            raise ValueError(
                "`TransformerXLTextClassifierPreprocessor` takes one text "
                "per example (a string or a batch of strings), not a tuple "
                f"of {len(x)} texts. Join the texts into one document."
            )
        if not self.built:
            self.build(None)
        if is_whole_word_tokenizer(self.tokenizer):
            eos = None if self._end_of_line is None else END_OF_LINE_TOKEN
            x = split_words(x, eos)
        token_ids, padding_mask = self.packer(self.tokenizer(x))
        x = {"token_ids": token_ids, "padding_mask": padding_mask}
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "add_start_token": self.add_start_token,
                "add_end_token": self.add_end_token,
            }
        )
        return config

    def load_preset_assets(self, preset):
        # A tokenizer without assets (`file_assets` None: the byte
        # tokenizer), which keras-hub's own `load_preset_assets` does not
        # allow for.
        if getattr(self.tokenizer, "file_assets", None):
            super().load_preset_assets(preset)
