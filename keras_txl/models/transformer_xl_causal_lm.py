import keras
import keras_hub
from keras import ops

from keras_txl.layers.adaptive_embedding import AdaptiveEmbedding
from keras_txl.layers.adaptive_softmax import AdaptiveSoftmax
from keras_txl.layers.adaptive_softmax import check_cluster_order
from keras_txl.metrics.batch_cross_entropy import BatchCrossEntropy
from keras_txl.metrics.bits_per_character import BitsPerCharacter
from keras_txl.models import causal_lm_loss
from keras_txl.models import causal_lm_saving
from keras_txl.models import causal_lm_scoring
from keras_txl.models.causal_lm_adapters import CausalLMAdapters
from keras_txl.models.causal_lm_saving import CausalLMSaving
from keras_txl.models.memory_carry import CarriedMemory
from keras_txl.models.memory_state import MemoryState
from keras_txl.models.step_outputs import StepOutputs
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
    TransformerXLCausalLMPreprocessor,
)
from keras_txl.models.transformer_xl_generation import TransformerXLGeneration
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_token_ids


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLCausalLM(
    CausalLMAdapters,
    CausalLMSaving,
    CarriedMemory,
    TransformerXLGeneration,
    keras_hub.models.CausalLM,
):
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

    With a `CompressiveTransformerXLBackbone` the memory
    dicts also hold `"compressed_memory"` and `"compressed_valid_length"`,
    the carried memory holds the compressed memory too, and `fit` and
    `evaluate` report the attention-reconstruction loss as the metric
    `"reconstruction_loss"` (it enters the training loss only for
    `compression="conv"`, weighted by the backbone's
    `reconstruction_loss_weight`; see docs/compressive.md).

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
        cluster_order: `"tensorflow"` (default) or `"pytorch"`, the
            `AdaptiveSoftmax` argument: which head column scores each tail
            cluster (the authors' TensorFlow code and HuggingFace, or their
            PyTorch code; they differ with two or more tail clusters).
            Used only by adaptive backbones. A config saved before this
            argument existed loads as `"pytorch"`, the order it was saved
            with.
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
    preprocessor_cls = TransformerXLCausalLMPreprocessor

    def __init__(
        self,
        backbone,
        tie_weights=True,
        memory_length=None,
        tie_projections=None,
        tail_capacity=None,
        cluster_order="tensorflow",
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
        self.cluster_order = check_cluster_order(cluster_order)
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
                cluster_order=self.cluster_order,
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
            memory_length=self.carried_memory_length,
            hidden_dim=backbone.hidden_dim,
            compressed_memory_length=(
                backbone.memory_spec.compressed_memory_length
            ),
            dtype=backbone.memory_spec.dtype,
            name="memory_state",
        )
        self.dtype_policy = backbone.dtype_policy
        # What `call` hands to `compute_loss` besides the logits.
        self._step_outputs = StepOutputs()
        if backbone.memory_spec.compressive:
            self.reconstruction_tracker = keras.metrics.Mean(
                name="reconstruction_loss"
            )

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
            # An explicit memory, or independent packed examples (a
            # preprocessor's `padding_mask`), need no carried one.
            carried = "memory" not in input_shape
            carried = carried and "padding_mask" not in input_shape
            input_shape = input_shape["token_ids"] if carried else None
        if input_shape is not None and len(input_shape) == 2:
            if input_shape[0] is not None:  # else built by the first batch
                self.memory_state.build(input_shape[0])
        self.built = True

    def compute_logits(self, hidden_states):
        """Float32 logits `(batch, T, vocabulary_size)` of hidden states
        (log-probabilities with an adaptive softmax)."""
        if self.adaptive_softmax is not None:
            return self.adaptive_softmax(hidden_states)
        if self.tie_weights:
            kernel = self._tied_kernel()  # (V, hidden)
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

    def _tied_kernel(self):
        """The token embedding table `(V, hidden)` as floats. A quantized
        `Embedding` holds integers and scales: its own lookup of every id
        dequantizes them."""
        embedding = self.backbone.token_embedding
        if embedding.quantization_mode is None:
            return embedding.embeddings
        ids = ops.arange(self.backbone.vocabulary_size, dtype="int32")
        return embedding(ids)  # (V, hidden)

    def call(self, inputs, training=None):
        """One segment; what it runs on and returns depends on the type of
        `inputs`:

        - a dict with `"memory"` (`{"token_ids", "memory",
          "valid_length"}`, plus the compressed memory's keys for a
          compressive backbone; `call_with_memory` builds it): the
          explicit memory. Returns a dict: `"logits"`, the new memory's
          keys and, for a compressive backbone, `"reconstruction_loss"`.
        - a dict with `"padding_mask"` (`{"token_ids", "padding_mask"}`,
          a preprocessor's packed examples): independent rows from an
          empty memory, the carried one left as it is. Returns the logits.
        - token ids `(batch, T)` (or a dict `{"token_ids"}`): the carried
          memory (`fit`, `evaluate`, `predict`, `model(token_ids)`; see
          `CarriedMemory`). Returns the logits.

        Logits are float32 `(batch, T, vocabulary_size)`
        (log-probabilities with an adaptive softmax).
        """
        if isinstance(inputs, dict) and "memory" in inputs:
            outputs = self.backbone(inputs, training=training)
            hidden_states = outputs["sequence_output"]
            result = {"logits": self.compute_logits(hidden_states)}
            self._record_step(result["logits"], hidden_states)
            for key in self.backbone.memory_keys:
                result[key] = outputs[key]
            if "reconstruction_loss" in outputs:
                result["reconstruction_loss"] = outputs["reconstruction_loss"]
            return result
        if isinstance(inputs, dict) and "padding_mask" in inputs:
            # Packed examples of a preprocessor: independent strings, run
            # from an empty memory, nothing carried to the next batch.
            return self._call_independent(inputs["token_ids"], training)
        return self._call_carried(inputs, training)

    def _record_step(self, logits, hidden_states, reconstruction_loss=None):
        """Records for `compute_loss` of the same train or test step what
        `logits` do not hold (see `StepOutputs`): with an adaptive
        softmax the hidden states that gave them, and a compressive
        backbone's reconstruction loss."""
        adaptive = self.adaptive_softmax is not None
        self._step_outputs.record(
            logits=logits if adaptive else None,
            hidden_states=hidden_states if adaptive else None,
            reconstruction_loss=reconstruction_loss,
        )

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """A `TransformerXLCausalLM` from a preset.

        `preset` is one of:

        - a keras-hub preset (folder or handle) saved by `save_to_preset`,
          e.g. by `keras-txl train` or `keras-txl convert`: the model, its
          output layer and its preprocessor;
        - a HuggingFace Transformer-XL checkpoint: a folder as
          `save_pretrained` writes it (`config.json` with `model_type`
          `"transfo-xl"`, `model.safetensors`, `vocab.pkl`) or a handle
          such as `"hf://transfo-xl/transfo-xl-wt103"` (downloaded with
          `huggingface_hub`): weights by
          `keras_txl.convert.from_huggingface`, tokenizer by
          `TransformerXLTokenizer.from_huggingface` (its `vocab.pkl` read
          without `pickle.load`);
        - a folder of the authors' TensorFlow checkpoint (`model.ckpt.*`,
          with the `config.json` of their `transformer()` arguments or the
          one tf/sota `.sh` script that trained it, there or in the parent
          folder, as in their `tf_wt103/model/` layout), by
          `keras_txl.convert.from_official_tensorflow`; it has no
          tokenizer.

        Args:
            preset: str, the folder or handle.
            load_weights: bool. `False` keeps random weights (keras-hub
                presets only).
            **kwargs: passed to the task's constructor (keras-hub presets),
                e.g. `preprocessor=None`, or `dtype`. A preset saved under a
                mixed policy (`"mixed_bfloat16"`) loads under it unless
                `dtype` is given; `keras_hub.models.CausalLM.from_preset`
                needs `dtype=` for such a preset (keras-hub 0.32 reads the
                policy's name as a dtype and fails).
        """
        return causal_lm_saving.load_preset(
            super().from_preset, preset, load_weights, **kwargs
        )

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled loss; with an adaptive softmax and the default loss,
        the per-cluster NLL of the hidden states that gave `y_pred`. NaN
        when traced token ids or targets lie outside the vocabulary."""
        step = self._step_outputs.take()
        if "reconstruction_loss" in step:
            self.reconstruction_tracker.update_state(
                step["reconstruction_loss"]
            )
        if (
            "hidden_states" in step
            and step["logits"] is y_pred
            and causal_lm_loss.trains_on_clusters(self.loss, y)
        ):
            loss = causal_lm_loss.cluster_loss(
                self, step["hidden_states"], y, sample_weight
            )
        else:
            loss = super().compute_loss(
                x, y, y_pred, sample_weight, training=training
            )
        return causal_lm_loss.nan_out_of_vocabulary(
            loss, x, y, self.backbone.vocabulary_size
        )

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
            `(logits, new_memory)`: float32 logits `(batch, T, vocab)`
            (log-probabilities with an adaptive softmax) and the memory for
            the next segment.
        """
        token_ids = check_token_ids(token_ids, self.backbone.vocabulary_size)
        batch_size = token_ids.shape[0]
        if memory is None:
            memory = self.backbone.initial_memory(batch_size)
        self.backbone.check_memory(memory, batch_size)
        outputs = self(
            {
                "token_ids": ops.cast(token_ids, "int32"),
                **self.backbone.memory_spec.cast(memory),
            },
            training=training,
        )
        return outputs["logits"], self.backbone.memory_spec.select(outputs)

    def score(
        self,
        token_ids,
        padding_mask=None,
        scoring_mode="logits",
        layer_intercept_fn=None,
        target_ids=None,
        memory_length=None,
        segment_length=None,
        memory_start="empty",
    ):
        """Per-token scores of token ids, as keras-hub's causal LMs'
        `score()`, for a text of any length.

        The text is read in segments of `segment_length` tokens, each
        attending to a memory of the `memory_length` positions before it
        (the paper's evaluation): the memory and the time per token do not
        grow with the text, and the scores are those of a loop of
        `call_with_memory` over the segments. A text of at most
        `segment_length` tokens is one forward pass. Each segment runs as
        one compiled function (XLA on JAX and TensorFlow); with a
        `layer_intercept_fn` the layers run eagerly, one by one, and the
        scores are differentiable tensors.

        Args:
            token_ids: int `(batch, N)`: the text, any `N`.
            padding_mask: optional bool `(batch, N)`, True on tokens then
                False (right padding, as keras-hub pads): padding comes
                after a row's tokens, so it changes none of their scores.
            scoring_mode: `"logits"` (float32 `(batch, N, vocab)`;
                log-probabilities with an adaptive softmax) or `"loss"`
                (the negative log-likelihood of `target_ids`, `(batch,
                N)`, nats).
            layer_intercept_fn: optional `fn(x, i)` returning `x`'s
                replacement: `i = -1` for the scaled token embeddings,
                `i` for the output of layer `i`; what it returns goes on
                to the next layer and into the memory.
            target_ids: int `(batch, N)`, needed for `"loss"`: the token
                each position predicts (for a text `ids`, score
                `ids[:, :-1]` with `target_ids=ids[:, 1:]`).
            memory_length: int >= 0 or `None` (the model's memory length).
            segment_length: int >= 1 or `None` (64).
            memory_start: `"empty"` or `"zeros"`, as
                `backbone.initial_memory(start=...)`.

        Returns:
            The scores: `(batch, N, vocab)` or `(batch, N)`.

        Example:

        >>> import numpy as np
        >>> backbone = TransformerXLBackbone(
        ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
        ...     head_dim=8, intermediate_dim=32, memory_length=8,
        ... )
        >>> lm = TransformerXLCausalLM(backbone)
        >>> ids = np.random.randint(0, 50, size=(1, 1001))
        >>> losses = lm.score(ids[:, :-1], scoring_mode="loss",
        ...                   target_ids=ids[:, 1:], segment_length=100)
        >>> tuple(losses.shape)
        (1, 1000)
        """
        return causal_lm_scoring.score(
            self,
            token_ids,
            padding_mask=padding_mask,
            scoring_mode=scoring_mode,
            layer_intercept_fn=layer_intercept_fn,
            target_ids=target_ids,
            memory_length=memory_length,
            segment_length=segment_length,
            memory_start=memory_start,
        )

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
        # TensorFlow generation uses XLA unless jit_compile=False was asked
        # for (see `make_generate_function`).
        self._generate_with_xla = kwargs.get("jit_compile", "auto") is not False

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tie_weights": self.tie_weights,
                "memory_length": self.memory_length,
                "tie_projections": self.tie_projections,
                "tail_capacity": self.tail_capacity,
                "cluster_order": self.cluster_order,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        # Saved before `cluster_order` existed: the order of that time.
        config.setdefault("cluster_order", "pytorch")
        return super().from_config(config)
