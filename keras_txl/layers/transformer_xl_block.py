import weakref

import keras
from keras import ops

from keras_txl.layers.packed_dropout import PackedDropout
from keras_txl.layers.relative_multi_head_attention import (
    RelativeMultiHeadAttention,
)
from keras_txl.layers.relative_multi_head_attention import check_same_length
from keras_txl.utils.config_variants import drop_variant_arguments
from keras_txl.utils.config_variants import saved_variant
from keras_txl.utils.initializers import fresh_initializer
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_positive_float
from keras_txl.utils.validation import check_positive_int
from keras_txl.utils.validation import check_rate


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLBlock(keras.layers.Layer):
    """One Transformer-XL layer: relative attention over memory, then a
    position-wise feed-forward network, each with a residual connection.

    Post-norm (the paper; `pre_norm=False`):

        h = LayerNorm(x + Dropout(Attention(x, memory)))
        y = LayerNorm(h + Dropout(W2 Dropout(ReLU(W1 h))))

    Pre-norm (`pre_norm=True`, the authors' `pre_lnorm`): the attention
    reads `LayerNorm(concat(memory, x))` and the feed-forward network
    `LayerNorm(h)`; the residuals add the un-normalized inputs. Dropout sits
    where the authors' code has it.

    Args:
        num_heads: int. Number of attention heads.
        head_dim: int. Size of each attention head.
        intermediate_dim: int. Width of the feed-forward network.
        dropout: float in [0, 1). Dropout after the attention output, in
            the feed-forward network and after it.
        attention_dropout: float in [0, 1). Dropout on the attention
            probabilities.
        pre_norm: bool. Layer normalization before each sublayer instead of
            after the residual.
        same_length: False, True or `"tensorflow"`. See
            `RelativeMultiHeadAttention`.
        activation: activation of the feed-forward network.
        layer_norm_epsilon: float. Epsilon of the layer normalizations
            (1e-5, the PyTorch default, matches the authors' code).
        kernel_initializer: initializer of every kernel.
        bias_initializer: initializer of `u` and `v` of the attention.
            Each weight draws its own values, unless an initializer has
            an integer seed (`keras_txl/utils/initializers.py`).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: tensor of shape `(batch, T, hidden_dim)`.
        position_embedding: tensor of shape `(M + T, hidden_dim)`.
        memory: optional tensor of shape `(batch, M, hidden_dim)`: the
            INPUT of this layer for earlier segments.
        memory_valid_length: optional int tensor of shape `(batch,)`.
        attention_mask: optional boolean tensor of shape `(batch, T, M + T)`.
        training: bool. Dropout is active only when True.
        key_values: optional tensor of shape `(batch, M + T, 2 *
            num_heads * head_dim)`: the attention's keys and values of
            `concat(memory, inputs)`, from `key_values()`, in place of
            `memory` (generation keeps the memory's instead of projecting
            the memory again for every new token).
        position_keys: optional tensor of shape `(num_heads, head_dim,
            M + T + 1)`: `position_keys(position_embedding)`, computed
            once for many calls; `position_embedding` is then not read.

    Returns:
        A tensor of shape `(batch, T, hidden_dim)`.

    Example:

    >>> import numpy as np
    >>> from keras_txl.layers import RelativePositionEmbedding
    >>> x = np.random.rand(2, 4, 16).astype("float32")
    >>> memory = np.random.rand(2, 6, 16).astype("float32")
    >>> position = RelativePositionEmbedding(hidden_dim=16)(x, memory)
    >>> block = TransformerXLBlock(
    ...     num_heads=2, head_dim=8, intermediate_dim=32
    ... )
    >>> tuple(block(x, position, memory=memory).shape)
    (2, 4, 16)
    """

    def __init__(
        self,
        num_heads,
        head_dim,
        intermediate_dim,
        dropout=0.0,
        attention_dropout=0.0,
        pre_norm=False,
        same_length=False,
        activation="relu",
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.intermediate_dim = check_positive_int(
            "intermediate_dim", intermediate_dim
        )
        self.dropout = check_rate("dropout", dropout)
        self.attention_dropout = check_rate(
            "attention_dropout", attention_dropout
        )
        self.pre_norm = check_bool("pre_norm", pre_norm)
        self.same_length = check_same_length(same_length)
        self.activation = keras.activations.get(activation)
        self.layer_norm_epsilon = check_positive_float(
            "layer_norm_epsilon", layer_norm_epsilon
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self._bias_owner = None  # see `share_relative_biases`

    def share_relative_biases(self, owner):
        """Makes this block's attention read `u` and `v` from `owner`'s
        (`RelativeMultiHeadAttention.share_biases`): how the backbone's
        `tie_relative_biases` gives all layers one pair. Call it before
        either block is built; `owner` is built first.

        Args:
            owner: a `TransformerXLBlock` of the same heads.
        """
        if not isinstance(owner, TransformerXLBlock) or self.built:
            raise ValueError(
                "`share_relative_biases` takes a `TransformerXLBlock`, "
                f"before {self.name} is built. Received: {owner!r}"
            )
        self._bias_owner = weakref.ref(owner)  # untracked: see the attention

    def _make_attention(self, hidden_dim):
        """The attention sublayer (the ablations' block overrides it)."""
        return RelativeMultiHeadAttention(
            num_heads=self.num_heads,
            head_dim=self.head_dim,
            output_dim=hidden_dim,
            dropout=self.attention_dropout,
            same_length=self.same_length,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="attention",
        )

    def build(self, inputs_shape, position_embedding_shape=None, *a, **kw):
        hidden_dim = inputs_shape[-1]
        policy = self.dtype_policy
        self.attention = self._make_attention(hidden_dim)
        if self._bias_owner is not None:
            self.attention.share_biases(self._bias_owner().attention)
        self.attention.build(
            inputs_shape, position_embedding_shape or (None, hidden_dim)
        )
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="attention_norm"
        )
        self.attention_norm.build(inputs_shape)
        self.attention_dropout_layer = PackedDropout(self.dropout, dtype=policy)
        self.intermediate_dense = keras.layers.Dense(
            self.intermediate_dim,
            kernel_initializer=fresh_initializer(self.kernel_initializer),
            dtype=policy,
            name="intermediate",
        )
        self.intermediate_dense.build(inputs_shape)
        self.output_dense = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=fresh_initializer(self.kernel_initializer),
            dtype=policy,
            name="output",
        )
        self.output_dense.build(
            tuple(inputs_shape[:-1]) + (self.intermediate_dim,)
        )
        self.feedforward_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=policy,
            name="feedforward_norm",
        )
        self.feedforward_norm.build(inputs_shape)
        self.intermediate_dropout = PackedDropout(self.dropout, dtype=policy)
        self.output_dropout = PackedDropout(self.dropout, dtype=policy)
        self.built = True

    def call(
        self,
        inputs,
        position_embedding,
        memory=None,
        memory_valid_length=None,
        attention_mask=None,
        training=None,
        key_values=None,
        position_keys=None,
    ):
        x = ops.cast(inputs, self.compute_dtype)  # (batch, T, hidden)
        if memory is not None:
            memory = ops.cast(memory, self.compute_dtype)  # (batch, M, hidden)
        if self.pre_norm:
            query = self.attention_norm(x)
            context = None if memory is None else self.attention_norm(memory)
        else:
            query, context = x, memory
        # Generation's caches, passed only when given: the ablations'
        # attentions (`AblationTransformerXLBlock`) take neither.
        caches = {
            name: value
            for name, value in (
                ("key_values", key_values),
                ("position_keys", position_keys),
            )
            if value is not None
        }
        attended = self.attention(
            query,
            position_embedding,
            memory=context,
            memory_valid_length=memory_valid_length,
            attention_mask=attention_mask,
            training=training,
            **caches,
        )  # (batch, T, hidden)
        attended = self.attention_dropout_layer(attended, training=training)
        if self.pre_norm:
            h = x + attended
            core = self.feedforward_norm(h)
        else:
            h = self.attention_norm(x + attended)
            core = h
        core = self._feedforward(core, training)  # (batch, T, hidden)
        core = self.output_dropout(core, training=training)
        if self.pre_norm:
            return h + core
        return self.feedforward_norm(h + core)

    def _feedforward(self, states, training):
        """`W2 Dropout(activation(W1 states))` of `states` `(batch, T,
        hidden)`, computed on its rows `(batch * T, hidden)`.

        The same numbers as on `(batch, T, hidden)` (dropout draws for
        each element in the same order), but JAX's 2-D matmuls take
        their weight gradients without the copies that XLA:CPU makes
        for a 3-D operand: a JAX training step at 0.91x the time
        (docs/benchmarks.md, "Round five")."""
        batch, length = ops.shape(states)[0], ops.shape(states)[1]
        hidden_dim = states.shape[-1]
        rows = ops.reshape(states, (-1, hidden_dim))  # (batch * T, hidden)
        rows = self.activation(self.intermediate_dense(rows))  # (b * T, ff)
        rows = self.intermediate_dropout(rows, training=training)
        rows = self.output_dense(rows)  # (batch * T, hidden)
        return ops.reshape(rows, (batch, length, hidden_dim))

    def key_values(self, states):
        """The attention's keys and values `(batch, L, 2 * num_heads *
        head_dim)` of states `(batch, L, hidden_dim)` of this layer's input
        (normalized first with `pre_norm`, as `call` does): what the
        call's `key_values` takes."""
        states = ops.cast(states, self.compute_dtype)
        if self.pre_norm:
            states = self.attention_norm(states)
        return self.attention.key_values(states)

    def position_keys(self, position_embedding):
        """The attention's projected `position_embedding`: what
        `position_keys` takes (see `RelativeMultiHeadAttention`)."""
        return self.attention.position_keys(position_embedding)

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "head_dim": self.head_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "pre_norm": self.pre_norm,
                "same_length": self.same_length,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        if cls is TransformerXLBlock:
            # Configs saved when this block took the ablation block's
            # arguments load as it (`utils/config_variants.py`); it imports
            # this module, so it is imported here, where it is needed.
            from keras_txl.layers.ablation import ablation_transformer_xl_block

            variants = (
                ablation_transformer_xl_block.AblationTransformerXLBlock,
            )
            variant = saved_variant(config, variants)
            if variant is not None:
                return variant.from_config(config)
            config = drop_variant_arguments(config, variants)
        return super().from_config(config)
