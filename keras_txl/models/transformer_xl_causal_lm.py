import os

import keras
import keras_hub
from keras import ops

from keras_txl.layers.adaptive_embedding import AdaptiveEmbedding
from keras_txl.layers.adaptive_softmax import AdaptiveSoftmax
from keras_txl.layers.adaptive_softmax import check_cluster_order
from keras_txl.metrics.batch_cross_entropy import BatchCrossEntropy
from keras_txl.metrics.bits_per_character import BitsPerCharacter
from keras_txl.models import causal_lm_scoring
from keras_txl.models import lora
from keras_txl.models.foreign_checkpoints import foreign_checkpoint_kind
from keras_txl.models.foreign_checkpoints import load_foreign_checkpoint
from keras_txl.models.foreign_checkpoints import saved_mixed_policy
from keras_txl.models.memory_carry import CarriedMemory
from keras_txl.models.memory_carry import is_text
from keras_txl.models.memory_state import MemoryState
from keras_txl.models.saved_model_exporter import saved_model_exporter
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
    TransformerXLCausalLMPreprocessor,
)
from keras_txl.models.transformer_xl_generation import TransformerXLGeneration
from keras_txl.utils.damaged_file_error import DamagedFileError
from keras_txl.utils.saved_files import PRESET_WEIGHTS_FILES
from keras_txl.utils.saved_files import check_preset_files
from keras_txl.utils.saved_files import check_weights_fit
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_token_ids
from keras_txl.utils.validation import in_vocabulary
from keras_txl.utils.validation import is_concrete


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLCausalLM(
    CarriedMemory, TransformerXLGeneration, keras_hub.models.CausalLM
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
    the carried state holds the compressed memory too, and `fit` and
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

    def get_build_config(self):
        # The weights depend on no input shape, and the carried memory is
        # built by the first batch: a loaded model rebuilds without a
        # shape, so that it takes any batch size (also for the models of
        # `with_memory_length`, built by sharing weights).
        return {"input_shape": [None, None]} if self.built else None

    def build_from_config(self, config):
        # The build config records the batch size of the data last seen;
        # a loaded model takes the batch size of the data it gets next.
        shape = (config or {}).get("input_shape")
        if isinstance(shape, (list, tuple)) and len(shape) == 2:
            config = {**config, "input_shape": [None, shape[1]]}
        elif isinstance(shape, dict):
            shape = {key: [None, *value[1:]] for key, value in shape.items()}
            config = {**config, "input_shape": shape}
        super().build_from_config(config)

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

    def _check_quantize_args(self, mode, compute_dtype):
        # Keras runs this check before `quantize`, and refuses an unbuilt
        # model; the weights of this one need no input shape.
        if not self.built:
            self.build()
        super()._check_quantize_args(mode, compute_dtype)

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Quantizes the backbone (see `TransformerXLBackbone.quantize`:
        modes `"int8"`, `"int4"`, `"float8"`; every check runs before
        anything changes). The output layer stays float: with tied
        weights it reads the quantized embedding through its lookup. The
        carried memory is activations, never quantized."""
        self.backbone.quantize(mode, config=config, filters=filters, **kwargs)
        self.train_function = None
        self.test_function = None
        self.predict_function = None
        self._post_quantize(mode)

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
        if isinstance(inputs, dict) and "padding_mask" in inputs:
            # Packed examples of a preprocessor: independent strings, run
            # from an empty memory, nothing carried to the next batch.
            return self._call_independent(inputs["token_ids"], training)
        token_ids = inputs["token_ids"] if isinstance(inputs, dict) else inputs
        vocabulary_size = self.backbone.vocabulary_size
        # Dtype and rank always; the range of concrete ids (eager calls).
        token_ids = check_token_ids(token_ids, vocabulary_size)
        in_range = None
        if not is_concrete(token_ids):
            # Traced ids (fit, evaluate, predict) cannot raise on values.
            # Out-of-range ids would be wrapped (negative), NaN (JAX) or an
            # error (TensorFlow on CPU): look them up as id 0 and make
            # their logits NaN, so the loss is NaN on every backend while
            # the gradients and the carried memory stay finite.
            in_range = in_vocabulary(token_ids, vocabulary_size)  # (b, T)
            token_ids = ops.where(in_range, token_ids, 0)
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
            # Kept for the metric that `compute_loss` updates in the same
            # train/test step (a plain attribute, like `_adaptive_outputs`).
            object.__setattr__(
                self, "_reconstruction_loss", outputs["reconstruction_loss"]
            )
        logits = self.compute_logits(outputs["sequence_output"])
        if in_range is not None:
            logits = ops.where(
                in_range[..., None], logits, float("nan")
            )  # (batch, T, V)
            kept = self.__dict__.get("_adaptive_outputs")
            if kept is not None:  # `compute_loss` pairs them by identity
                object.__setattr__(self, "_adaptive_outputs", (logits, kept[1]))
        return logits

    def _call_independent(self, token_ids, training):
        """Logits of examples that share no memory (see the preprocessor):
        a memory of zero slots, and the carried one left as it is."""
        token_ids = check_token_ids(token_ids, self.backbone.vocabulary_size)
        backbone = self.backbone
        # No slot in either memory (the compressed one too, if any).
        memory = backbone.memory_spec.zeros(
            ops.shape(token_ids)[0], memory_length=0, compressed_memory_length=0
        )
        outputs = backbone(
            {"token_ids": ops.cast(token_ids, "int32"), **memory},
            training=training,
        )
        return self.compute_logits(outputs["sequence_output"])

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """The preprocessor's work on strings; token ids (and anything
        else) pass through, so ordered segments keep their carried memory
        with a preprocessor attached."""
        if self.preprocessor is None or not is_text(x):
            return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
        return super().preprocess_samples(x, y, sample_weight)

    def load_task_weights(self, filepath):
        """Loads the weights outside the backbone (the output layer),
        building the model first: its output weights are created in
        `build`, which keras-hub's preset loader does not call."""
        if not self.built:
            self.build()
        super().load_task_weights(filepath)

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
        kind = foreign_checkpoint_kind(preset)
        if kind is not None:
            return load_foreign_checkpoint(preset, kind, load_weights, **kwargs)
        folder = None
        if isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset):
            folder = os.fspath(preset)
            # A damaged file is named, not met deep inside the loader.
            check_preset_files(folder)
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = saved_mixed_policy(preset)
        if folder is None or not load_weights:
            return super().from_preset(
                preset, load_weights=load_weights, **kwargs
            )
        weights = os.path.join(folder, PRESET_WEIGHTS_FILES[0])
        try:
            lm = super().from_preset(preset, load_weights=True, **kwargs)
        except ValueError as error:
            reason = " ".join(str(error).split())[:160]
            raise DamagedFileError(
                weights,
                "holds the weights of another configuration than the "
                f"model of task.json ({reason}). Put back the weights "
                "saved with it.",
            ) from None
        owner = "the model of task.json"
        check_weights_fit(weights, lm.backbone.weights, owner)
        task = os.path.join(folder, PRESET_WEIGHTS_FILES[1])
        if os.path.exists(task):
            backbone = {id(v) for v in lm.backbone.weights}
            own = [v for v in lm.weights if id(v) not in backbone]
            check_weights_fit(task, own, owner, exact=False)
        return lm

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled loss; with an adaptive softmax and the default loss,
        the per-cluster NLL of the hidden states that gave `y_pred`. NaN
        when traced token ids or targets lie outside the vocabulary."""
        reconstruction = self.__dict__.pop("_reconstruction_loss", None)
        if reconstruction is not None:
            self.reconstruction_tracker.update_state(reconstruction)
        loss = self._compiled_loss(x, y, y_pred, sample_weight, training)
        ok = None
        for name, ids in (("x", x), ("y", y)):
            if ids is None or isinstance(ids, dict) or len(ids.shape) != 2:
                continue
            if is_concrete(ids):  # eager steps (torch): a clear error now
                check_token_ids(ids, self.backbone.vocabulary_size, name)
                continue
            # Out-of-range targets would score 0 (JAX) or zeros (TF GPU),
            # and out-of-range ids were looked up as id 0 by `call`.
            in_range = ops.all(
                in_vocabulary(ids, self.backbone.vocabulary_size)
            )
            ok = in_range if ok is None else ops.logical_and(ok, in_range)
        if ok is None:
            return loss
        return ops.where(ok, loss, float("nan"))

    def _compiled_loss(self, x, y, y_pred, sample_weight, training):
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

    def enable_lora(self, rank, target_layer_names=None):
        """`backbone.enable_lora` (see there for the targets), and the
        output layer frozen too: only the LoRA kernels train."""
        self.backbone.enable_lora(rank, target_layer_names)
        self._freeze_all_but_lora()

    def save_lora_weights(self, filepath):
        """`backbone.save_lora_weights`: the LoRA kernels, all that trains
        after `enable_lora`."""
        self.backbone.save_lora_weights(filepath)

    def load_lora_weights(self, filepath):
        """`backbone.load_lora_weights`, the output layer frozen."""
        self.backbone.load_lora_weights(filepath)
        self._freeze_all_but_lora()

    def _freeze_all_but_lora(self):
        # Built first: the output layer's weights are made in `build`.
        if not self.built:
            self.build()
        lora.freeze_all_but_lora(self)

    def export(
        self,
        filepath,
        format="tf_saved_model",
        verbose=None,
        input_signature=None,
        **kwargs,
    ):
        """Keras's `Model.export`, serving the explicit memory: a
        TensorFlow SavedModel whose `serving_default(token_ids, memory,
        valid_length)` returns the logits and the next memory, and
        `initial_memory(batch_size)`; nothing is carried from one call to
        the next. This is `keras_txl.export.export_saved_model` (see it
        for the signatures; it runs from any backend); `kwargs` are its
        `batch_size`, `segment_length`, `memory_length` and `overwrite`.
        Keras's own export would trace the carried memory's path, whose
        serving function keeps a state between calls; other formats and
        an `input_signature` are refused."""
        if format != "tf_saved_model" or input_signature is not None:
            raise ValueError(
                "TransformerXLCausalLM.export writes a SavedModel with the "
                'memory as input and output (format="tf_saved_model", no '
                f"input_signature); received format={format!r}"
                + ("" if input_signature is None else ", an input_signature")
                + ". For another format, export from "
                "`keras_txl.export.export_saved_model`'s SavedModel."
            )
        export_saved_model = saved_model_exporter()
        return export_saved_model(
            self, filepath, verbose=bool(verbose), **kwargs
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

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved (optimizer, loss,
        metrics), so that `keras.saving.load_model` also restores the
        optimizer's state. Keras skips this for models whose `compile` is
        overridden, as `keras_hub` tasks' is."""
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def _carried_memory_arguments(self, method, args, kwargs):
        if getattr(self.backbone, "_lora_enabled_layers", []):
            # `backbone.enable_lora` leaves the output layer trainable.
            self._freeze_all_but_lora()
        return super()._carried_memory_arguments(method, args, kwargs)

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


class _PerTokenLoss(keras.losses.Loss):
    """Reduces per-token losses given as `y_pred` like a compiled loss."""

    def call(self, y_true, y_pred):
        return y_pred
