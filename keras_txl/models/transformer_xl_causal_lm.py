import keras
import keras_hub
from keras import ops

from keras_txl.layers.memory_state import MemoryState
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_backbone import cast_memory
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_token_ids
from keras_txl.utils.validation import is_concrete


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLCausalLM(keras_hub.models.CausalLM):
    """Transformer-XL language model: a backbone and an output layer.

    Two ways to call it:

    - **Explicit memory**, `call_with_memory(token_ids, memory)`: returns
      `(logits, new_memory)`. Nothing is kept between calls: this is the
      path for your own loops, for serving and for exact comparisons.
    - **Carried memory**, `model(token_ids)` and so `fit`, `evaluate` and
      `predict`: the model keeps the memory of the last batch in a
      `MemoryState` and attends to it, so consecutive batches of an
      ordered-segment dataset (row `b` of batch `i + 1` continues row `b`
      of batch `i`) see the text before them. The batch size is then fixed
      by the first batch. `reset_memory()` forgets the context.

    With a compressive backbone (`compressed_memory_length > 0`) the memory
    dicts also hold `"compressed_memory"` and `"compressed_valid_length"`,
    the carried state holds the compressed memory too, and `fit` and
    `evaluate` report the attention-reconstruction loss as the metric
    `"reconstruction_loss"` (it enters the training loss only for
    `compression="conv"`, weighted by the backbone's
    `reconstruction_loss_weight`).

    The output layer is tied to the token embedding, with a bias, as in the
    authors' code (`tie_weights=True`), or has its own kernel.
    `ops.log_softmax(logits)` are the model's log-probabilities; logits are
    float32 under any dtype policy.

    Args:
        backbone: a `TransformerXLBackbone`.
        tie_weights: bool. Share the output kernel with the token embedding.
        memory_length: int >= 0 or `None`. Length of the memory carried
            between batches; `None` uses `backbone.memory_length`. Evaluate
            with a longer memory by building a second model on the same
            backbone (see `with_memory_length`).
        preprocessor: optional `keras_hub` preprocessor, kept for
            `generate()` on strings.
        **kwargs: other keyword arguments passed to `keras.Model`.

    Example:

    >>> import numpy as np
    >>> backbone = TransformerXLBackbone(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
    ...     head_dim=8, intermediate_dim=32, memory_length=8,
    ... )
    >>> lm = TransformerXLCausalLM(backbone)
    >>> tokens = np.random.randint(0, 50, size=(2, 4))
    >>> logits, memory = lm.call_with_memory(tokens)
    >>> tuple(logits.shape), [int(v) for v in memory["valid_length"]]
    ((2, 4, 50), [4, 4])
    """

    backbone_cls = TransformerXLBackbone

    def __init__(
        self,
        backbone,
        tie_weights=True,
        memory_length=None,
        preprocessor=None,
        **kwargs,
    ):
        if not isinstance(backbone, TransformerXLBackbone):
            raise ValueError(
                "`backbone` must be a `TransformerXLBackbone`. Received: "
                f"backbone={type(backbone).__name__}"
            )
        # `keras_hub` tasks route attribute tracking through the functional
        # graph; this model is subclassed, so its layers are set after
        # `Model.__init__`, where Keras tracks them on every backend.
        super().__init__(**kwargs)
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.tie_weights = check_bool("tie_weights", tie_weights)
        self.memory_length = check_optional_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        self.memory_state = MemoryState(
            num_layers=backbone.num_layers,
            memory_length=self._state_memory_length,
            hidden_dim=backbone.hidden_dim,
            compressed_memory_length=backbone.compressed_memory_length,
            name="memory_state",
        )
        self.dtype_policy = backbone.dtype_policy
        if backbone.compressed_memory_length:
            self.reconstruction_tracker = keras.metrics.Mean(
                name="reconstruction_loss"
            )
            # The last carried call's loss, read by `compute_loss` in the
            # same train/test step (as Keras keeps `_losses_override`).
            self._reconstruction_loss = None

    @property
    def _state_memory_length(self):
        if self.memory_length is None:
            return self.backbone.memory_length
        return self.memory_length

    def build(self, input_shape=None):
        if self.built:
            return
        hidden_dim = self.backbone.hidden_dim
        vocabulary_size = self.backbone.vocabulary_size
        if not self.tie_weights:
            self.output_kernel = self.add_weight(
                name="output_kernel",
                shape=(hidden_dim, vocabulary_size),
                initializer=keras.initializers.RandomNormal(
                    stddev=self.backbone.initializer_range
                ),
            )
        self.output_bias = self.add_weight(
            name="output_bias", shape=(vocabulary_size,), initializer="zeros"
        )
        if isinstance(input_shape, dict):
            input_shape = input_shape.get("token_ids")
        if input_shape is not None and len(input_shape) == 2:
            self.memory_state.build(input_shape[0])
        self.built = True

    def build_memory(self, batch_size):
        """Creates the memory carried between batches for `batch_size`
        streams. Needed only when the first batch has no static batch size
        (e.g. numpy arrays fed to `fit` on TensorFlow)."""
        self.memory_state.build(batch_size)

    def compute_logits(self, hidden_states):
        """Float32 logits `(batch, T, vocabulary_size)` of hidden states."""
        if self.tie_weights:
            kernel = self.backbone.token_embedding.embeddings  # (V, hidden)
            equation = "btd,vd->btv"
        else:
            kernel = self.output_kernel  # (hidden, V)
            equation = "btd,dv->btv"
        logits = ops.einsum(
            equation, hidden_states, ops.cast(kernel, hidden_states.dtype)
        )  # (batch, T, V)
        return ops.cast(logits, "float32") + ops.cast(
            self.output_bias, "float32"
        )

    def call(self, inputs, training=None):
        if isinstance(inputs, dict) and "memory" in inputs:
            outputs = self.backbone(inputs, training=training)
            result = {
                "logits": self.compute_logits(outputs["sequence_output"]),
            }
            for key in self.backbone.memory_keys:
                result[key] = outputs[key]
            if "reconstruction_loss" in outputs:
                result["reconstruction_loss"] = outputs["reconstruction_loss"]
            return result
        token_ids = inputs["token_ids"] if isinstance(inputs, dict) else inputs
        if is_concrete(token_ids):  # eager calls; fit feeds checked data
            check_token_ids(token_ids, self.backbone.vocabulary_size)
        batch_size = token_ids.shape[0]
        if not self.memory_state.has_state and batch_size is not None:
            self.memory_state.build(batch_size)
        memory = self.memory_state.read(batch_size)
        outputs = self.backbone(
            {"token_ids": ops.cast(token_ids, "int32"), **memory},
            training=training,
        )
        self.memory_state.write(outputs)
        if "reconstruction_loss" in outputs:
            self._reconstruction_loss = outputs["reconstruction_loss"]
        return self.compute_logits(outputs["sequence_output"])

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        loss = super().compute_loss(
            x, y, y_pred, sample_weight=sample_weight, training=training
        )
        reconstruction = getattr(self, "_reconstruction_loss", None)
        if reconstruction is not None:
            self._reconstruction_loss = None
            self.reconstruction_tracker.update_state(reconstruction)
        return loss

    def call_with_memory(self, token_ids, memory=None, training=False):
        """Runs one segment with an explicit memory.

        Args:
            token_ids: int tensor `(batch, T)`.
            memory: `{"memory", "valid_length"}` (plus the compressed
                memory's keys for a compressive backbone) from
                `backbone.initial_memory()` or the previous call; `None`
                starts empty (length `backbone.memory_length`).
            training: bool. Dropout is active only when True.

        Returns:
            `(logits, new_memory)`: float32 logits `(batch, T, vocab)` and
            the memory for the next segment.
        """
        check_token_ids(token_ids, self.backbone.vocabulary_size)
        batch_size = token_ids.shape[0]
        if memory is None:
            memory = self.backbone.initial_memory(batch_size)
        self.backbone.check_memory(memory, batch_size)
        outputs = self(
            {"token_ids": ops.cast(token_ids, "int32"), **cast_memory(memory)},
            training=training,
        )
        return outputs["logits"], {
            key: outputs[key] for key in self.backbone.memory_keys
        }

    def reset_memory(self):
        """Forgets the memory carried between batches."""
        self.memory_state.reset()

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tie_weights": self.tie_weights,
                "memory_length": self.memory_length,
            }
        )
        return config
