"""`VocabularyTokenizer`: what `CharacterTokenizer` and
`TransformerXLTokenizer` share (a list of tokens, and two paths: Python
and NumPy when called eagerly, TensorFlow inside `tf.data` or a
`tf.function`)."""

import keras_hub


class VocabularyTokenizer(keras_hub.tokenizers.Tokenizer):
    """A keras-hub tokenizer of a list of tokens, `self.vocabulary` (id
    order; `None` until set), and `self._token_to_id` (a dict), set by the
    subclass's `set_vocabulary`. Eager calls run `_tokenize_python` and
    `_detokenize_python`; inside `tf.data` or a `tf.function` (keras-hub's
    `_use_tf_workflow`, as for its own tokenizers) `_tokenize_tf` and
    `_detokenize_tf`. `how_to_set` ends the error of a missing
    vocabulary."""

    how_to_set = "Pass `vocabulary=`."

    def __init__(self, dtype="int32", **kwargs):
        if "int" not in str(dtype):
            raise ValueError(
                "`dtype` must be an integer dtype such as 'int32'. "
                f"Received: dtype={dtype!r}"
            )
        super().__init__(dtype=dtype, **kwargs)

    def _check_vocabulary(self):
        if self.vocabulary is None:
            raise ValueError(
                "No vocabulary has been set for "
                f"{type(self).__name__}. {self.how_to_set}"
            )

    def get_vocabulary(self):
        """The tokens, in id order."""
        self._check_vocabulary()
        return list(self.vocabulary)

    def vocabulary_size(self):
        """The number of tokens."""
        self._check_vocabulary()
        return len(self.vocabulary)

    def id_to_token(self, id):
        """The token of an id."""
        self._check_vocabulary()
        if not 0 <= id < len(self.vocabulary):
            raise ValueError(
                f"`id` must be in [0, {len(self.vocabulary)}). Received: {id}"
            )
        return self.vocabulary[id]

    def token_to_id(self, token):
        """The id of a token."""
        self._check_vocabulary()
        if token not in self._token_to_id:
            raise ValueError(f"Token {token!r} is not in the vocabulary.")
        return self._token_to_id[token]

    def tokenize(self, inputs):
        self._check_vocabulary()
        if self._use_tf_workflow():
            return self._tokenize_tf(inputs)
        return self._tokenize_python(inputs)

    def detokenize(self, inputs):
        self._check_vocabulary()
        if self._use_tf_workflow():
            return self._detokenize_tf(inputs)
        return self._detokenize_python(inputs)

    def call(self, inputs, *args, training=None, **kwargs):
        return self.tokenize(inputs, *args, **kwargs)
