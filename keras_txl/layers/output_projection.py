"""`OutputProjection`: the logits of hidden states, with the output kernel
tied to a token embedding or of its own, and a bias."""

import keras
from keras import ops

from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_txl")
class OutputProjection(keras.layers.Layer):
    """The output layer of a language model: float32 logits of hidden
    states.

    Tied (`tie_weights=True`, the authors' default), the kernel is a token
    embedding's table `(vocabulary_size, hidden_dim)`, given to each call
    (so the layer owns only its bias, and a quantized embedding gives its
    dequantized table); untied, the layer has a kernel `(hidden_dim,
    vocabulary_size)` of its own. The bias is the layer's either way, as in
    the authors' code. The logits are float32 under any dtype policy (the
    product runs in the compute dtype, the bias is added in float32).

    `TransformerXLCausalLM` holds one (`lm.output_projection`) unless its
    backbone is adaptive (then `lm.adaptive_softmax`).

    Args:
        vocabulary_size: int >= 1. Number of logits per position.
        tie_weights: bool. Read the kernel from the `embeddings` of each
            call instead of holding one.
        kernel_initializer: initializer of the kernel (untied only).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`
            (`name`, `dtype`).

    Call arguments:
        hidden_states: float tensor `(batch, T, hidden_dim)`.
        embeddings: the tied kernel, a token embedding's table
            `(vocabulary_size, hidden_dim)`; required when tied, refused
            when not.

    Returns:
        Float32 logits `(batch, T, vocabulary_size)`.

    Example:

    >>> import numpy as np
    >>> embedding = keras.layers.Embedding(50, 16)
    >>> embedding.build((None,))
    >>> projection = OutputProjection(vocabulary_size=50)
    >>> hidden = np.random.normal(size=(2, 4, 16)).astype("float32")
    >>> logits = projection(hidden, embedding.embeddings)
    >>> tuple(logits.shape), keras.backend.standardize_dtype(logits.dtype)
    ((2, 4, 50), 'float32')
    """

    def __init__(
        self,
        vocabulary_size,
        tie_weights=True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = check_positive_int(
            "vocabulary_size", vocabulary_size
        )
        self.tie_weights = check_bool("tie_weights", tie_weights)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, hidden_states_shape, embeddings_shape=None):
        hidden_dim = hidden_states_shape[-1]
        # The kernel first, then the bias: the order in which files saved
        # before this layer existed hold them (`load_saved_before`).
        if not self.tie_weights:
            self.output_kernel = self.add_weight(
                shape=(hidden_dim, self.vocabulary_size),
                initializer=self.kernel_initializer,
                name="output_kernel",
            )
        self.output_bias = self.add_weight(
            shape=(self.vocabulary_size,),
            initializer="zeros",
            name="output_bias",
        )
        self.built = True

    def call(self, hidden_states, embeddings=None):
        if self.tie_weights != (embeddings is not None):
            raise ValueError(
                f"{self.name} is "
                + (
                    "tied: pass the token embedding's table as `embeddings`."
                    if self.tie_weights
                    else "untied (its own kernel): pass no `embeddings`."
                )
            )
        if self.tie_weights:
            kernel, equation = embeddings, "btd,vd->btv"  # (V, hidden)
        else:
            kernel, equation = self.output_kernel, "btd,dv->btv"  # (hidden, V)
        logits = ops.einsum(
            equation, hidden_states, ops.cast(kernel, hidden_states.dtype)
        )  # (batch, T, V)
        return ops.cast(logits, "float32") + ops.cast(
            self.output_bias, "float32"
        )

    def compute_output_shape(self, hidden_states_shape, embeddings_shape=None):
        return (*hidden_states_shape[:-1], self.vocabulary_size)

    def compute_output_spec(self, hidden_states, embeddings=None):
        shape = self.compute_output_shape(hidden_states.shape)
        return keras.KerasTensor(shape, dtype="float32")

    def load_saved_before(self, store):
        """Loads the variables as files saved before this layer existed
        hold them: among the variables of the model that owned them (the
        kernel, if untied, then the bias; `TransformerXLCausalLM.
        load_own_variables` hands them here). This layer's own entry in
        such a file is then empty, and its next `load_own_variables`
        accepts that, once."""
        super().load_own_variables(store)
        self._loaded_before = True

    def load_own_variables(self, store):
        if not len(store.keys()) and getattr(self, "_loaded_before", False):
            self._loaded_before = False  # `load_saved_before` loaded them
            return
        super().load_own_variables(store)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "tie_weights": self.tie_weights,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
