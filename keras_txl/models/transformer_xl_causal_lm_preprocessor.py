import keras
import keras_hub
import numpy as np

from keras_txl.models.character_tokenizer import CharacterTokenizer
from keras_txl.models.character_tokenizer import unknown_characters_message
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_tokenizer import END_OF_LINE_TOKEN
from keras_txl.models.transformer_xl_tokenizer import TransformerXLTokenizer
from keras_txl.models.transformer_xl_tokenizer import boundary_token_ids
from keras_txl.models.transformer_xl_tokenizer import is_whole_word_tokenizer
from keras_txl.models.transformer_xl_tokenizer import join_words
from keras_txl.models.transformer_xl_tokenizer import split_words


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLCausalLMPreprocessor(keras_hub.models.CausalLMPreprocessor):
    """Strings to token ids for `TransformerXLCausalLM`, and back.

    keras-hub's `CausalLMPreprocessor` for Transformer-XL: `lm.fit(strings)`
    trains on text, `lm.generate("text")` returns text. It works with the
    word tokenizer of the WikiText-103 models (`TransformerXLTokenizer`) and
    with `keras_txl.models.CharacterTokenizer` (or any keras-hub tokenizer):
    the start, end and padding tokens are those the tokenizer names
    (`start_token_id`, `end_token_id`, `pad_token_id`); a tokenizer without
    them (the character tokenizer) gets none added and pads with id 0,
    which `padding_mask` marks.

    **Tokenizers of whole words.** The `"word"` tokenizer of `keras-txl
    train --tokenizer word` (keras-hub's `WordPieceTokenizer` with
    `split=False`) takes words, not text. Here its strings are cut into
    words at whitespace first, each line break `"\\n"` becoming `<eos>`,
    the token that ends every line of the training text (also inside
    `tf.data`; see `split_words`); `<eos>`, when the
    vocabulary has it, is the start and end token of each string, as
    with `TransformerXLTokenizer`. Generated text is the words one space
    apart, each `<eos>` a line break (the start token is dropped), as
    `keras-txl generate` prints it.

    **What `fit` on strings does.** Each string is one example: tokenized,
    given the start token (`<eos>` for the word tokenizer, as a line of
    WikiText-103 follows the `<eos>` of the line before) and the end token,
    then cut or padded to `sequence_length + 1` tokens; `x` is
    `{"token_ids", "padding_mask"}` of the first `sequence_length`, `y` the
    same shifted by one, `sample_weight` the padding mask of `y`. Strings
    are independent: `TransformerXLCausalLM` runs a batch that has a
    `padding_mask` from an empty memory and carries nothing to the next
    batch, so the memory never mixes unrelated strings, and padding never
    enters it. Segment-level recurrence over a long text (the memory
    carried from batch to batch) is for ordered segments of token ids
    (`keras_txl.data.segment_dataset`, `keras-txl train`): token ids given
    to a model with a preprocessor pass through it untouched.

    Args:
        tokenizer: a `TransformerXLTokenizer`, a `CharacterTokenizer` or
            another keras-hub tokenizer.
        sequence_length: int. Length of the packed examples.
        add_start_token: bool. Put the tokenizer's start token (if it has
            one) before each string, in training and in `generate` (where
            keras-hub's own preprocessors always add it). Settable;
            `generate(memory=...)` sets it False for its call, as a prompt
            that follows a memory continues its text.
        add_end_token: bool. Put its end token (if any) after each string.
        **kwargs: other arguments of `keras_hub.models.Preprocessor`.

    Call arguments:
        x: a string or a batch of strings.
        y: must be `None` (the targets are `x` shifted by one).
        sample_weight: must be `None`.
        sequence_length: int, overrides `sequence_length` for this call.

    Returns:
        `(x, y, sample_weight)` as described above.

    Example:

    >>> tokenizer = TransformerXLTokenizer(["<eos>", "<unk>", "a", "b"])
    >>> preprocessor = TransformerXLCausalLMPreprocessor(
    ...     tokenizer, sequence_length=5
    ... )
    >>> x, y, weight = preprocessor("a b c")
    >>> x, y, weight = keras.tree.map_structure(
    ...     keras.ops.convert_to_numpy, (x, y, weight)
    ... )  # TensorFlow tensors under the TensorFlow backend
    >>> x["token_ids"].tolist(), y.tolist(), weight.tolist()
    ([0, 2, 3, 1, 0], [2, 3, 1, 0, 0], [True, True, True, True, False])
    """

    backbone_cls = TransformerXLBackbone
    tokenizer_cls = TransformerXLTokenizer

    def __init__(
        self,
        tokenizer,
        sequence_length=1024,
        add_start_token=True,
        add_end_token=True,
        **kwargs,
    ):
        if (
            isinstance(sequence_length, bool)
            or not isinstance(sequence_length, int)
            or sequence_length < 1
        ):
            raise ValueError(
                "`sequence_length` must be an integer >= 1. Received: "
                f"sequence_length={sequence_length!r}"
            )
        super().__init__(
            tokenizer=tokenizer,
            sequence_length=sequence_length,
            add_start_token=add_start_token,
            add_end_token=add_end_token,
            **kwargs,
        )

    def build(self, input_shape):
        # The base class reads `start_token_id` & co., which the character
        # tokenizer does not have: its examples get no start or end token.
        tokenizer = self.tokenizer
        start, end, pad = boundary_token_ids(tokenizer)
        self._end_of_line = None
        if is_whole_word_tokenizer(tokenizer):
            self._end_of_line = start
        self._start_token_id, self._end_token_id = start, end
        self.packer = keras_hub.layers.StartEndPacker(
            start_value=start,
            end_value=end,
            pad_value=pad,
            sequence_length=self.sequence_length,
            return_padding_mask=True,
        )
        self.built = True

    def _build_for_start(self):
        """Builds, and gives the packer a start value only while
        `add_start_token` is True: keras-hub's `generate_preprocess` adds
        the packer's start value whatever `add_start_token` says
        (`generate(memory=...)` sets it False, and so may a user)."""
        if not self.built:
            self.build(None)
        start = self._start_token_id if self.add_start_token else None
        self.packer.start_value = None if start is None else [start]

    @property
    def end_token_id(self):
        """The id that ends a string (and stops `generate` by default):
        the tokenizer's end token, `<eos>` for a tokenizer of whole words,
        `None` if there is none."""
        if not self.built:
            self.build(None)
        return self._end_token_id

    def _words(self, x):
        """`x` as the tokenizer takes it: text, or its whitespace words
        for a tokenizer of whole words."""
        self._build_for_start()
        if not is_whole_word_tokenizer(self.tokenizer):
            return x
        eos = self._end_of_line
        return split_words(x, None if eos is None else END_OF_LINE_TOKEN)

    def call(self, x, y=None, sample_weight=None, sequence_length=None):
        return super().call(
            self._words(x),
            y=y,
            sample_weight=sample_weight,
            sequence_length=sequence_length,
        )

    def generate_preprocess(self, x, sequence_length=None):
        tokenizer = self.tokenizer
        texts = [x] if isinstance(x, (str, bytes)) else x
        if (
            isinstance(tokenizer, CharacterTokenizer)
            and tokenizer.oov_token is None
            and isinstance(texts, (list, tuple))
            and all(isinstance(text, (str, bytes)) for text in texts)
        ):
            # Python strings are checked here, not inside the tokenizer's
            # call, so that the error reaches the user of
            # `generate("text")` as it is (Keras wraps an error of a
            # layer's call with its arguments and terminal codes).
            unknown = tokenizer.unknown_characters(texts)
            if unknown:
                raise ValueError(unknown_characters_message(tokenizer, unknown))
        return super().generate_preprocess(
            self._words(x), sequence_length=sequence_length
        )

    def generate_postprocess(self, x):
        self._build_for_start()
        if not is_whole_word_tokenizer(self.tokenizer):
            return super().generate_postprocess(x)
        token_ids = keras.ops.convert_to_numpy(x["token_ids"])
        padding_mask = keras.ops.convert_to_numpy(x["padding_mask"])
        batched = token_ids.ndim == 2
        vocabulary = self.tokenizer.get_vocabulary()
        start = self._start_token_id if self.add_start_token else None
        texts = []
        for row, keep in zip(
            np.atleast_2d(token_ids), np.atleast_2d(padding_mask)
        ):
            row = row[keep.astype(bool)]  # (length,)
            if start is not None and len(row) and row[0] == start:
                row = row[1:]
            texts.append(join_words(vocabulary, row))
        return texts if batched else texts[0]

    def load_preset_assets(self, preset):
        # keras-hub's byte tokenizer has no assets (`file_assets` None),
        # which its own `load_preset_assets` does not allow for.
        if getattr(self.tokenizer, "file_assets", None):
            super().load_preset_assets(preset)
