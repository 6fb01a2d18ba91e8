import keras
import keras_hub
from keras import ops

from keras_txl.layers.adaptive_embedding import AdaptiveEmbedding
from keras_txl.layers.adaptive_softmax import AdaptiveSoftmax
from keras_txl.layers.memory_state import MemoryState
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.training.batch_cross_entropy import BatchCrossEntropy
from keras_txl.training.bits_per_character import BitsPerCharacter
from keras_txl.training.memory_carry import prepare_memory_carry
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
      by the first batch. `reset_memory()` forgets the context; `fit`,
      `evaluate` and `predict` add a `keras_txl.training.MemoryReset`
      callback (unless given one) that does so at each epoch start and
      before each evaluation and prediction.

    `compile()` defaults to the paper's training: the mean negative
    log-likelihood per token (nats) as the loss, Adam with global gradient
    norm clipping at 0.25, and bits per character, perplexity and the last
    batch's loss as metrics (`keras_txl.training.transformer_xl_optimizer`
    adds the warmup and cosine schedule).

    The output layer is tied to the token embedding, with a bias, as in the
    authors' code (`tie_weights=True`), or has its own kernel.
    `ops.log_softmax(logits)` are the model's log-probabilities; logits are
    float32 under any dtype policy.

    With an adaptive backbone (`cutoffs`, `div_val` or `embedding_dim`
    set, so its `token_embedding` is an `AdaptiveEmbedding`), the output
    layer is an `AdaptiveSoftmax` (`lm.adaptive_softmax`) and the "logits"
    are its log-probabilities (`log_softmax` leaves them unchanged, so
    samplers and the loss read them as logits). `fit` and `evaluate` then
    train on the per-cluster negative log-likelihood of the targets, from
    the hidden states, without the gradient of a `(batch, T, vocab)`
    tensor, as long as the loss is the default (a
    `SparseCategoricalCrossentropy(from_logits=True)` without
    `ignore_class`); another loss gets the log-probabilities. Metrics
    still read the full log-probabilities: compile with
    `weighted_metrics=[]` to skip them (the compiled JAX step then does
    not compute them).

    Args:
        backbone: a `TransformerXLBackbone`.
        tie_weights: bool. Share the output kernel with the token embedding
            (with an adaptive backbone: every cluster's kernel with its
            embedding table, the authors' `tie_weight`).
        memory_length: int >= 0 or `None`. Length of the memory carried
            between batches; `None` uses `backbone.memory_length`. Evaluate
            with a longer memory with `with_memory_length(M)`: a second
            model on the same weights.
        tie_projections: adaptive backbones only: bool, or one bool per
            cluster (`len(cutoffs) + 1`): share the output projection of
            each cluster with the embedding's (the authors' `tie_projs`).
            `None` (default) ties all but cluster 0, as the authors'
            training script does.
        tail_capacity: adaptive backbones only: `None` or a float in
            (0, 1], the `AdaptiveSoftmax` argument: the share of a batch's
            tokens that each tail cluster scores in training (exact in any
            case: a batch with more tokens in a cluster scores every
            token). `None` scores every token.
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
        tie_projections=None,
        tail_capacity=None,
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
        self.tie_projections = tie_projections
        self.adaptive_softmax = None
        if isinstance(backbone.token_embedding, AdaptiveEmbedding):
            if tie_projections is None:
                tie_projections = [False] + [True] * len(backbone.cutoffs)
            self.adaptive_softmax = AdaptiveSoftmax(
                vocabulary_size=backbone.vocabulary_size,
                cutoffs=backbone.cutoffs,
                div_val=backbone.div_val,
                embedding=backbone.token_embedding,
                tie_weights=self.tie_weights,
                tie_projections=tie_projections,
                tail_capacity=tail_capacity,
                kernel_initializer=keras.initializers.RandomNormal(
                    stddev=backbone.initializer_range
                ),
                dtype=backbone.dtype_policy,
                name="adaptive_softmax",
            )
            # Stores the normalized value, one bool per cluster.
            self.tie_projections = self.adaptive_softmax.tie_projections
        elif tie_projections is not None or tail_capacity is not None:
            raise ValueError(
                "`tie_projections` and `tail_capacity` apply to adaptive "
                "backbones only (built with `cutoffs`, `div_val` or "
                f"`embedding_dim`). Received: tie_projections="
                f"{tie_projections!r}, tail_capacity={tail_capacity!r}"
            )
        self.tail_capacity = tail_capacity
        self.memory_state = MemoryState(
            num_layers=backbone.num_layers,
            memory_length=self._state_memory_length,
            hidden_dim=backbone.hidden_dim,
            name="memory_state",
        )
        self.dtype_policy = backbone.dtype_policy

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
        if self.adaptive_softmax is not None:
            self.adaptive_softmax.build((None, None, hidden_dim))
        elif not self.tie_weights:
            self.output_kernel = self.add_weight(
                name="output_kernel",
                shape=(hidden_dim, vocabulary_size),
                initializer=keras.initializers.RandomNormal(
                    stddev=self.backbone.initializer_range
                ),
            )
        if self.adaptive_softmax is None:
            self.output_bias = self.add_weight(
                name="output_bias",
                shape=(vocabulary_size,),
                initializer="zeros",
            )
        if isinstance(input_shape, dict):
            input_shape = input_shape.get("token_ids")
        if input_shape is not None and len(input_shape) == 2:
            self.memory_state.build(input_shape[0])
        self.built = True

    def get_build_config(self):
        # The weights depend on no input shape, and the carried memory is
        # built by the first batch: a loaded model rebuilds without a
        # shape, so that it takes any batch size (also for the models of
        # `with_memory_length`, built by sharing weights).
        return {"input_shape": None} if self.built else None

    def build_memory(self, batch_size):
        """Creates the memory carried between batches for `batch_size`
        streams. Needed only when the first batch has no static batch size
        (e.g. numpy arrays fed to `fit` on TensorFlow)."""
        self.memory_state.build(batch_size)

    def compute_logits(self, hidden_states):
        """Float32 logits `(batch, T, vocabulary_size)` of hidden states
        (log-probabilities with an adaptive softmax)."""
        if self.adaptive_softmax is not None:
            log_probs = self.adaptive_softmax(hidden_states)
            # Kept for `compute_loss` in the same train/test step, which
            # trains on the per-cluster NLL of these hidden states. A plain
            # attribute, like the `add_loss` losses that Keras keeps on the
            # layers between `call` and `compute_loss`.
            object.__setattr__(
                self, "_adaptive_outputs", (log_probs, hidden_states)
            )
            return log_probs
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
            return {
                "logits": self.compute_logits(outputs["sequence_output"]),
                "memory": outputs["memory"],
                "valid_length": outputs["valid_length"],
            }
        token_ids = inputs["token_ids"] if isinstance(inputs, dict) else inputs
        if is_concrete(token_ids):  # eager calls; fit feeds checked data
            check_token_ids(token_ids, self.backbone.vocabulary_size)
        batch_size = token_ids.shape[0]
        if not self.memory_state.has_state and batch_size is not None:
            self.memory_state.build(batch_size)
        memory = self.memory_state.read(batch_size)
        outputs = self.backbone(
            {
                "token_ids": ops.cast(token_ids, "int32"),
                "memory": memory["memory"],
                "valid_length": memory["valid_length"],
            },
            training=training,
        )
        self.memory_state.write(
            {
                "memory": outputs["memory"],
                "valid_length": outputs["valid_length"],
            }
        )
        return self.compute_logits(outputs["sequence_output"])

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled loss; with an adaptive softmax and the default loss,
        the per-cluster NLL of the hidden states that gave `y_pred`."""
        kept = self.__dict__.pop("_adaptive_outputs", None)
        loss = self.loss
        if (
            kept is None
            or kept[0] is not y_pred
            or y is None
            or not isinstance(loss, keras.losses.SparseCategoricalCrossentropy)
            or not loss.from_logits
            or loss.ignore_class is not None
        ):
            return super().compute_loss(
                x, y, y_pred, sample_weight, training=training
            )
        nll = self.adaptive_softmax(kept[1], y)  # (batch, T)
        # The reduction (sample weights, masks, distribution) of the
        # compiled loss, applied to the NLL.
        total = _PerTokenLoss(reduction=loss.reduction, name="nll")(
            y, nll, sample_weight
        )
        for extra in self.losses:
            total = total + self._aggregate_additional_loss(extra)
        return total

    def call_with_memory(self, token_ids, memory=None, training=False):
        """Runs one segment with an explicit memory.

        Args:
            token_ids: int tensor `(batch, T)`.
            memory: `{"memory", "valid_length"}` from
                `backbone.initial_memory()` or the previous call; `None`
                starts empty (length `backbone.memory_length`).
            training: bool. Dropout is active only when True.

        Returns:
            `(logits, new_memory)`: float32 logits `(batch, T, vocab)`
            (log-probabilities with an adaptive softmax) and the memory for
            the next segment.
        """
        check_token_ids(token_ids, self.backbone.vocabulary_size)
        batch_size = token_ids.shape[0]
        if memory is None:
            memory = self.backbone.initial_memory(batch_size)
        self.backbone.check_memory(memory, batch_size)
        outputs = self(
            {
                "token_ids": ops.cast(token_ids, "int32"),
                "memory": ops.cast(memory["memory"], "float32"),
                "valid_length": ops.cast(memory["valid_length"], "int32"),
            },
            training=training,
        )
        return outputs["logits"], {
            "memory": outputs["memory"],
            "valid_length": outputs["valid_length"],
        }

    def reset_memory(self):
        """Forgets the memory carried between batches."""
        self.memory_state.reset()

    def with_memory_length(self, memory_length):
        """A model on the same weights that carries a memory of another
        length, e.g. to evaluate with a longer memory than in training (the
        paper's setting) or with none (`memory_length=0`).

        The returned model shares the backbone and the output layer (a
        change of the weights of one shows in the other) but has its own
        memory, empty, whose batch size is set by its first batch. It is
        compiled with the default loss and metrics if this model is
        compiled.

        Args:
            memory_length: int >= 0. Length of the carried memory.

        Returns:
            A `TransformerXLCausalLM`.
        """
        memory_length = check_optional_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        if memory_length is None:
            raise ValueError(
                "`memory_length` must be an integer >= 0. Received: None"
            )
        if not self.built:
            self.build()
        other = TransformerXLCausalLM(
            self.backbone,
            tie_weights=self.tie_weights,
            memory_length=memory_length,
            preprocessor=self.preprocessor,
            name=f"{self.name}_memory_{memory_length}",
        )
        # Share the output layer: the same variables, not copies.
        if self.adaptive_softmax is not None:
            other.adaptive_softmax = self.adaptive_softmax
        else:
            other.output_bias = self.output_bias
            if not self.tie_weights:
                other.output_kernel = self.output_kernel
        other.built = True
        if self.compiled:
            other.compile()
        return other

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        weighted_metrics="auto",
        sampler="top_k",
        **kwargs,
    ):
        """Configures the model for training, with the paper's defaults.

        Args:
            optimizer: `"auto"` (Adam, learning rate 2.5e-4, global
                gradient-norm clipping 0.25, as the paper on enwik8) or a
                Keras optimizer.
            loss: `"auto"` (`SparseCategoricalCrossentropy(from_logits=
                True)`: the mean negative log-likelihood per token, in
                nats) or a Keras loss.
            weighted_metrics: `"auto"` (`BitsPerCharacter`,
                `keras_hub.metrics.Perplexity` and `BatchCrossEntropy`, all
                weighted by tokens) or a list of metrics.
            sampler: passed to `keras_hub.models.CausalLM.compile`.
            **kwargs: passed to `keras.Model.compile`.
        """
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(2.5e-4, global_clipnorm=0.25)
        if loss == "auto":
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        if weighted_metrics == "auto":
            weighted_metrics = [
                BitsPerCharacter(),
                keras_hub.metrics.Perplexity(from_logits=True),
                BatchCrossEntropy(),
            ]
        super().compile(
            optimizer=optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            sampler=sampler,
            **kwargs,
        )

    def _prepare_memory_carry(self, args, kwargs):
        # Arguments are passed on as they came: the positional order of
        # `keras_hub` tasks differs from `keras.Model`'s after `batch_size`.

        callbacks = kwargs.get("callbacks")
        if isinstance(callbacks, keras.callbacks.CallbackList):
            return args, kwargs  # The evaluation inside `fit`: ready.
        args = list(args)
        x = args[0] if args else kwargs.get("x")
        batch_size = args[2] if len(args) > 2 else kwargs.get("batch_size")
        x, kwargs["callbacks"] = prepare_memory_carry(
            self, x, batch_size, callbacks
        )
        if args:
            args[0] = x
        else:
            kwargs["x"] = x
        validation_data = kwargs.get("validation_data")
        if validation_data is not None and not isinstance(
            validation_data, (tuple, list)
        ):
            kwargs["validation_data"], _ = prepare_memory_carry(
                self, validation_data
            )
        return args, kwargs

    def fit(self, *args, **kwargs):
        """`fit` of `keras_hub` tasks, carrying the memory from batch to
        batch.

        Also builds the memory for the batch size of `x`, checks that it
        stays the same (on every backend), and adds a `MemoryReset`
        callback unless `callbacks` holds one. `validation_data` must have
        the same batch size (it uses the same memory, reset before and put
        back after); evaluate other batch sizes with `with_memory_length`.
        """
        args, kwargs = self._prepare_memory_carry(args, kwargs)
        return super().fit(*args, **kwargs)

    def evaluate(self, *args, **kwargs):
        """`evaluate`, carrying the memory from batch to batch from an
        empty one (see `fit`)."""
        args, kwargs = self._prepare_memory_carry(args, kwargs)
        return super().evaluate(*args, **kwargs)

    def predict(self, *args, **kwargs):
        """`predict`, carrying the memory from batch to batch from an empty
        one (see `fit`). Returns float32 logits."""
        args, kwargs = self._prepare_memory_carry(args, kwargs)
        return super().predict(*args, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tie_weights": self.tie_weights,
                "memory_length": self.memory_length,
                "tie_projections": self.tie_projections,
                "tail_capacity": self.tail_capacity,
            }
        )
        return config


class _PerTokenLoss(keras.losses.Loss):
    """Reduces per-token losses given as `y_pred` like a compiled loss."""

    def call(self, y_true, y_pred):
        return y_pred
