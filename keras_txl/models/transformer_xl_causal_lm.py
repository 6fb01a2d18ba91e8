"""`TransformerXLCausalLM`: a backbone, its output layer, and the memory
carried from batch to batch.

This file holds `call` (its three paths), the loss, `compile`, saving and
presets, LoRA and quantization. Two bases before keras-hub's `CausalLM`
add what their files are named for, each declaring what it needs of this
class and checking it at construction: `CarriedMemory`
(`carried_memory.py`: how the memory crosses the batches of `fit`,
`evaluate` and `predict`) and `TransformerXLGeneration`
(`transformer_xl_generation.py`: `generate`). `score` runs
`transformer_xl_scoring.py`; the output layer is
`keras_txl.layers.OutputProjection` (or `AdaptiveSoftmax`).
"""

import os
import types

import keras
import keras_hub
from keras import ops

from keras_txl.layers.adaptive_embedding import AdaptiveEmbedding
from keras_txl.layers.adaptive_softmax import AdaptiveSoftmax
from keras_txl.layers.adaptive_softmax import PerTokenLoss
from keras_txl.layers.adaptive_softmax import check_cluster_order
from keras_txl.layers.output_projection import OutputProjection
from keras_txl.metrics.batch_cross_entropy import BatchCrossEntropy
from keras_txl.metrics.bits_per_character import BitsPerCharacter
from keras_txl.models.carried_memory import CarriedMemory
from keras_txl.models.memory_state import MemoryState
from keras_txl.models.piece_buckets import pads_to_bucket
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_backbone import freeze_all_but_lora
from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
    TransformerXLCausalLMPreprocessor,
)
from keras_txl.models.transformer_xl_generation import TransformerXLGeneration
from keras_txl.models.transformer_xl_layout_map import check_vocabulary_layout
from keras_txl.models.transformer_xl_scoring import score
from keras_txl.utils.saved_files import check_preset_files
from keras_txl.utils.saved_files import check_task_weights
from keras_txl.utils.saved_files import saved_mixed_policy
from keras_txl.utils.token_data import check_token_ids
from keras_txl.utils.token_data import in_vocabulary
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import is_concrete


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLCausalLM(
    CarriedMemory, TransformerXLGeneration, keras_hub.models.CausalLM
):
    """Transformer-XL language model: a backbone and an output layer.

    Two ways to call it:

    - **Explicit memory**, `call_with_memory(token_ids, memory)`: returns
      `(logits, new_memory)`; nothing is kept between calls (your own
      loops, serving, exact comparisons).
    - **Carried memory**, `model(token_ids)` and so `fit`, `evaluate` and
      `predict`: the model keeps the memory of the last batch (`lm.
      memory_state`) and attends to it, so consecutive batches of ordered
      segments (row `b` of batch `i + 1` continues row `b` of batch `i`)
      see the text before them. The first batch fixes the batch size;
      `reset_memory()` forgets, and a `keras_txl.models.MemoryReset`
      callback (added unless given) does at each epoch start and before
      each evaluation and prediction.

    Every weight exists once the model is constructed. `compile()`
    defaults to the paper's training: the mean negative log-likelihood per
    token (nats), Adam with global gradient-norm clipping at 0.25, and
    bits per character, perplexity and the last batch's loss as metrics.
    The output layer (`lm.output_projection`, an `OutputProjection` of
    `keras_txl/layers/output_projection.py`) is tied to the token
    embedding, with a bias, as in the authors' code, or has its own
    kernel; logits are float32 under any dtype policy. With a
    `CompressiveTransformerXLBackbone` the memory holds the compressed
    memory too, and `fit` and `evaluate` report the
    attention-reconstruction loss as the metric `"reconstruction_loss"`.

    With an adaptive backbone (`cutoffs`, `div_val` or `embedding_dim`),
    the output layer is an `AdaptiveSoftmax` (`lm.adaptive_softmax`) and
    the "logits" are its log-probabilities (unchanged by `log_softmax`).
    With the default loss, `fit` and `evaluate` then train on the
    per-cluster negative log-likelihood of the hidden states, without the
    gradient of a `(batch, T, vocab)` tensor; compile with
    `weighted_metrics=[]` to skip the metrics' full log-probabilities.

    Args:
        backbone: a `TransformerXLBackbone`.
        tie_weights: bool. Share the output kernel with the token embedding
            (with an adaptive backbone, every cluster's kernel with its
            table: the authors' `tie_weight`).
        memory_length: int >= 0 or `None` (the backbone's). Length of the
            memory carried between batches; `with_memory_length(M)` gives
            a model on the same weights with another.
        tie_projections: adaptive backbones only: bool or one bool per
            cluster; share each cluster's output projection with the
            embedding's (`tie_projs`). `None` ties all but cluster 0, as
            the authors' training script.
        tail_capacity: adaptive backbones only: `None` or a float in
            (0, 1], the share of a batch's tokens each tail cluster scores
            in training (exact either way; see `AdaptiveSoftmax`).
        cluster_order: `"tensorflow"` (default) or `"pytorch"`: which head
            column scores each tail cluster (the authors' TensorFlow code
            and HuggingFace, or their PyTorch code). Configs saved before
            this argument load as `"pytorch"`.
        preprocessor: optional keras-hub preprocessor, for `fit` and
            `generate()` on strings.
        output_layer: optional output layer of another model on this
            backbone (its `output_projection` or `adaptive_softmax`), to
            share: a change of its weights shows in both (what
            `with_memory_length` does). Not in the config: a loaded model
            makes its own. `None` (default) makes one.
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
        output_layer=None,
        **kwargs,
    ):
        if not isinstance(backbone, TransformerXLBackbone):
            raise ValueError(
                "`backbone` must be a `TransformerXLBackbone`. Received: "
                f"backbone={type(backbone).__name__}"
            )
        # keras-hub's tasks are functional; this one is subclassed, so its
        # layers are set after `Model.__init__`, where Keras tracks them.
        super().__init__(**kwargs)
        self.tie_weights = check_bool("tie_weights", tie_weights)
        self.memory_length = check_optional_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        self.cluster_order = check_cluster_order(cluster_order)
        adaptive = isinstance(backbone.token_embedding, AdaptiveEmbedding)
        if not adaptive and (tie_projections, tail_capacity) != (None, None):
            raise ValueError(
                "`tie_projections` and `tail_capacity` apply to adaptive "
                "backbones only (built with `cutoffs`, `div_val` or "
                f"`embedding_dim`). Received: tie_projections="
                f"{tie_projections!r}, tail_capacity={tail_capacity!r}"
            )
        self.tail_capacity = tail_capacity
        self.dtype_policy = backbone.dtype_policy
        initializer = keras.initializers.RandomNormal(
            stddev=backbone.initializer_range
        )

        # === Layers ===
        if output_layer is not None:
            self._check_output_layer(output_layer, backbone, adaptive)
        self.adaptive_softmax = None
        self.output_projection = None
        if not adaptive:
            # Tracked before the backbone: its variables lead the model's,
            # as when they were the model's own (the order in which the
            # optimizer's slots of runs saved then are).
            if output_layer is None:
                for name, axis in (("output_kernel", 1), ("output_bias", 0)):
                    check_vocabulary_layout(
                        f"output_projection/{name}",
                        backbone.vocabulary_size,
                        axis,
                    )
                output_layer = OutputProjection(
                    vocabulary_size=backbone.vocabulary_size,
                    tie_weights=self.tie_weights,
                    kernel_initializer=initializer,
                    dtype=backbone.dtype_policy,
                    name="output_projection",
                )
                output_layer.build((None, None, backbone.hidden_dim))
            self.output_projection = output_layer
        self.backbone = backbone
        self.preprocessor = preprocessor
        if adaptive and output_layer is not None:
            self.adaptive_softmax = output_layer
            tie_projections = output_layer.tie_projections
        elif adaptive:
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
                kernel_initializer=initializer,
                dtype=backbone.dtype_policy,
                name="adaptive_softmax",
            )
            self.adaptive_softmax.build((None, None, backbone.hidden_dim))
            # One bool per cluster.
            tie_projections = self.adaptive_softmax.tie_projections
        self.tie_projections = tie_projections
        spec = backbone.memory_spec
        self.memory_state = MemoryState(
            num_layers=backbone.num_layers,
            memory_length=self.carried_memory_length,
            hidden_dim=backbone.hidden_dim,
            compressed_memory_length=spec.compressed_memory_length,
            dtype=spec.dtype,
            name="memory_state",
        )
        if spec.compressive:
            self.reconstruction_tracker = keras.metrics.Mean(
                name="reconstruction_loss"
            )
        # What `call` hands to `compute_loss` of the same step besides the
        # logits (Keras passes it only `y_pred`): an adaptive softmax's
        # hidden states, a compressive backbone's reconstruction loss. In a
        # plain object, out of Keras's tracking.
        self._step_record = types.SimpleNamespace(tensors={})
        # Every weight exists after construction.
        self.built = True
        self.check_carried_memory_host()
        self.check_generation_host()

    def _check_output_layer(self, output_layer, backbone, adaptive):
        """Raises unless `output_layer` fits this model's backbone."""
        expected = AdaptiveSoftmax if adaptive else OutputProjection
        fits = isinstance(output_layer, expected) and (
            output_layer.vocabulary_size == backbone.vocabulary_size
        )
        if adaptive and fits:
            fits = output_layer.embedding is backbone.token_embedding
        elif fits:
            fits = output_layer.tie_weights == self.tie_weights
        if not fits:
            raise ValueError(
                "`output_layer` must be the output layer of a model on this "
                f"backbone (a `{expected.__name__}` of "
                f"{backbone.vocabulary_size} tokens, tie_weights="
                f"{self.tie_weights}), to share. Received: {output_layer!r}. "
                "Pass `None` for a new one."
            )

    def build(self, input_shape=None):
        # The weights exist; a shape with a batch size builds the carried
        # memory for it (explicit memories and a preprocessor's packed
        # examples carry none).
        if isinstance(input_shape, dict):
            carried = not {"memory", "padding_mask"} & set(input_shape)
            input_shape = input_shape["token_ids"] if carried else None
        if input_shape is not None and len(input_shape) == 2:
            if input_shape[0] is not None:
                self.memory_state.build(input_shape[0])

    def compute_logits(self, hidden_states):
        """Float32 logits `(batch, T, vocabulary_size)` of hidden states
        (log-probabilities with an adaptive softmax)."""
        if self.adaptive_softmax is not None:
            return self.adaptive_softmax(hidden_states)
        table = None
        if self.tie_weights:
            embedding = self.backbone.token_embedding
            if embedding.quantization_mode is None:
                table = embedding.embeddings  # (V, hidden)
            else:  # integers and scales: its own lookup dequantizes them
                ids = ops.arange(self.backbone.vocabulary_size, dtype="int32")
                table = embedding(ids)  # (V, hidden)
        return self.output_projection(hidden_states, table)  # (batch, T, V)

    def call(self, inputs, training=None):
        """One segment; what it runs on depends on the type of `inputs`:

        - a dict with `"memory"` (`call_with_memory` builds it): the
          explicit memory. Returns a dict: `"logits"`, the new memory's
          keys and, for a compressive backbone, `"reconstruction_loss"`.
        - a dict with `"padding_mask"` (a preprocessor's packed examples):
          independent rows from an empty memory, the carried one left as
          it is. Returns the logits.
        - token ids `(batch, T)` (or `{"token_ids"}`): the carried memory
          (`fit`, `evaluate`, `predict`). Returns the logits.

        Logits are float32 `(batch, T, vocabulary_size)`.
        """
        if isinstance(inputs, dict) and "memory" in inputs:
            outputs = self.backbone(inputs, training=training)
            hidden_states = outputs["sequence_output"]
            result = {"logits": self.compute_logits(hidden_states)}
            self._record_step(result["logits"], hidden_states)
            for key in (*self.backbone.memory_spec.keys, "reconstruction_loss"):
                if key in outputs:
                    result[key] = outputs[key]
            return result
        if isinstance(inputs, dict) and "padding_mask" in inputs:
            return self._call_independent(inputs["token_ids"], training)
        return self._call_carried(inputs, training)

    def _call_carried(self, inputs, training):
        """`call` on token ids: reads the carried memory, runs the
        backbone on it and writes the new memory back (step 3 of
        `carried_memory.py`). Returns the logits."""
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
        hidden_states = outputs["sequence_output"]
        logits = self.compute_logits(hidden_states)
        if in_range is not None:
            logits = ops.where(
                in_range[..., None], logits, float("nan")
            )  # (batch, T, V)
        self._record_step(
            logits, hidden_states, outputs.get("reconstruction_loss")
        )
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
        hidden_states = outputs["sequence_output"]
        logits = self.compute_logits(hidden_states)
        self._record_step(logits, hidden_states)
        return logits

    def _record_step(self, logits, hidden_states, reconstruction_loss=None):
        """Records what `compute_loss` of the same train or test step
        needs besides `logits` (`call` and `compute_loss` run in one traced
        function on JAX and TensorFlow, one after the other on torch)."""
        record = self._step_record.tensors
        if self.adaptive_softmax is not None:
            record.update(logits=logits, hidden_states=hidden_states)
        if reconstruction_loss is not None:
            record["reconstruction_loss"] = reconstruction_loss

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled loss; with an adaptive softmax and the default loss,
        the per-cluster NLL of the hidden states that gave `y_pred`. NaN
        when traced token ids or targets lie outside the vocabulary."""
        step, self._step_record.tensors = self._step_record.tensors, {}
        if "reconstruction_loss" in step:
            self.reconstruction_tracker.update_state(
                step["reconstruction_loss"]
            )
        loss_fn = self.loss
        if (
            step.get("logits") is y_pred is not None
            and y is not None
            and isinstance(loss_fn, keras.losses.SparseCategoricalCrossentropy)
            and loss_fn.from_logits
            and loss_fn.ignore_class is None
        ):
            nll = self.adaptive_softmax(step["hidden_states"], y)  # (b, T)
            reduce = PerTokenLoss(reduction=loss_fn.reduction, name="nll")
            loss = reduce(y, nll, sample_weight)
            for extra in self.losses:  # `add_loss` losses, as Keras sums them
                loss = loss + ops.sum(ops.cast(extra, loss.dtype))
        else:
            loss = super().compute_loss(
                x, y, y_pred, sample_weight, training=training
            )
        # Out-of-range targets would score 0 (JAX) or zeros (TF GPU), and
        # out-of-range ids were looked up as id 0 by `call`: NaN instead.
        # Concrete ones (eager steps, as on torch) raise a clear error.
        in_range = []
        for name, ids in (("x", x), ("y", y)):
            if ids is None or isinstance(ids, dict) or len(ids.shape) != 2:
                continue
            if is_concrete(ids):
                check_token_ids(ids, self.backbone.vocabulary_size, name)
            else:
                ok = in_vocabulary(ids, self.backbone.vocabulary_size)
                in_range.append(ops.all(ok))
        for ok in in_range:
            loss = ops.where(ok, loss, float("nan"))
        return loss

    def call_with_memory(
        self, token_ids, memory=None, training=False, pad_to_bucket=None
    ):
        """Runs one segment with an explicit memory.

        Pieces of any length: on JAX a piece of a new length would
        compile every operation again, so by default (`pad_to_bucket=
        None`, inference) the piece runs padded at its end to
        `bucket_length(T)`, the next power of two (at least 8), with the
        same logits and next memory as unpadded: pieces of 1 to `N`
        tokens compile at most `max(1, ceil(log2(N)) - 2)` times
        (`backbone.call_with_memory`, `piece_buckets.py`).

        Args:
            token_ids: int tensor `(batch, T)`.
            memory: the memory dict from `backbone.initial_memory()` or the
                previous call; `None` starts empty.
            training: bool. Dropout is active only when True.
            pad_to_bucket: bool or `None`: pad the piece to its bucket
                length (`None`: on JAX, when not training).

        Returns:
            `(logits, new_memory)`: float32 `(batch, T, vocab)` and the
            memory for the next segment.
        """
        token_ids = check_token_ids(token_ids, self.backbone.vocabulary_size)
        batch_size = token_ids.shape[0]
        if memory is None:
            memory = self.backbone.initial_memory(batch_size)
        if pads_to_bucket(self.backbone, pad_to_bucket, training):
            hidden_states, memory = self.backbone.call_with_memory(
                token_ids, memory, pad_to_bucket=True
            )  # (batch, T, hidden)
            return self.compute_logits(hidden_states), memory
        self.backbone.check_memory(memory, batch_size)
        spec = self.backbone.memory_spec
        outputs = self(
            {"token_ids": ops.cast(token_ids, "int32"), **spec.cast(memory)},
            training=training,
        )
        return outputs["logits"], spec.select(outputs)

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
        memory=None,
        return_memory=False,
        pad_to_bucket=True,
        strategy=None,
    ):
        """Per-token scores of a text of any length, as keras-hub's causal
        LMs' `score()`, read in segments with the memory carried (the
        paper's evaluation; see `keras_txl/models/transformer_xl_scoring.
        py`).

        A text may come in pieces: `return_memory=True` returns the memory
        after the text, and `memory=` starts from it. Scoring A, then B
        with A's memory, gives the scores of scoring A and B joined in one
        call (to float rounding, 1e-5) when the one call's segments split
        at the same places: A's length a multiple of `segment_length`.

        Args:
            token_ids: int `(batch, N)`: the text, any `N`.
            padding_mask: optional bool `(batch, N)`, True on tokens then
                False (right padding changes no token's score).
            scoring_mode: `"logits"` (float32 `(batch, N, vocab)`) or
                `"loss"` (the NLL of `target_ids`, `(batch, N)`, nats).
            layer_intercept_fn: optional `fn(x, i)` returning `x`'s
                replacement: `i = -1` for the scaled token embeddings, `i`
                for layer `i`'s output (it goes on, and into the memory).
                The layers then run eagerly and the scores are
                differentiable.
            target_ids: int `(batch, N)`, needed for `"loss"`: for a text
                `ids`, score `ids[:, :-1]` with `target_ids=ids[:, 1:]`.
            memory_length: int >= 0 or `None` (the model's).
            segment_length: int >= 1 or `None` (64).
            memory_start: `"empty"` or `"zeros"`, as
                `backbone.initial_memory(start=...)`, when no `memory` is
                given.
            memory: `None` or a memory dict to start from, one row per
                text (what `score` or `generate` with `return_memory=True`,
                `call_with_memory` or `backbone.initial_memory` return);
                its slots are the memory length.
            return_memory: bool. Also return the memory after the text
                (rows of one length: no `padding_mask` with padding). The
                memory is exact with `pad_to_bucket` (the padding never
                enters it); a backbone that does not count tokens then
                runs the last segment at its own length.
            pad_to_bucket: bool. True (default): a segment shorter than
                `segment_length` (a short text, the last segment) runs
                padded at its end to `bucket_length(n, segment_length)`
                (a power of two, at least 8, at most `segment_length`),
                with the same scores and memory as unpadded: texts of any
                length compile at most `max(1, ceil(log2(S)) - 2)` steps
                for `S = segment_length` (per batch size and memory
                length), where each new length would compile one (about
                2 to 5 s on a shared CPU, JAX and TensorFlow). False
                runs every segment at its own length.
            strategy: optional `keras_txl.distribute.ReplicaStrategy`:
                its replicas score the rows, replica `r` rows
                `[r * b, (r + 1) * b)` with their memory, as in training
                (build or load the model in its `scope()`); the scores
                and the returned memory are of every row, those of one
                device. On several processes (hosts) each calls `score`
                with the same rows and places only its replicas' share;
                every process gets every row's scores (a collective).
                The rows must be a multiple of the replicas (else a
                `ValueError` names the counts that split); not with
                `layer_intercept_fn`. See docs/distributed.md.

        Returns:
            The scores: `(batch, N, vocab)` or `(batch, N)`; with
            `return_memory=True`, `(scores, memory)`.

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

        The same text in two pieces (the first a multiple of 100 long):

        >>> first, memory = lm.score(
        ...     ids[:, :600], scoring_mode="loss", target_ids=ids[:, 1:601],
        ...     segment_length=100, return_memory=True,
        ... )
        >>> rest = lm.score(
        ...     ids[:, 600:-1], scoring_mode="loss", target_ids=ids[:, 601:],
        ...     segment_length=100, memory=memory,
        ... )
        >>> joined = np.concatenate([first, rest], axis=1)
        >>> bool(np.allclose(joined, losses, atol=1e-5))
        True
        """
        return score(
            self,
            token_ids,
            padding_mask=padding_mask,
            scoring_mode=scoring_mode,
            layer_intercept_fn=layer_intercept_fn,
            target_ids=target_ids,
            memory_length=memory_length,
            segment_length=segment_length,
            memory_start=memory_start,
            memory=memory,
            return_memory=return_memory,
            pad_to_bucket=pad_to_bucket,
            strategy=strategy,
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
                True)`: the mean NLL per token, nats) or a Keras loss.
            weighted_metrics: `"auto"` (`BitsPerCharacter`,
                `keras_hub.metrics.Perplexity`, `BatchCrossEntropy`, all
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
        # Saved before `cluster_order` existed: the order of that time.
        return super().from_config({"cluster_order": "pytorch", **config})

    # === Saving and presets ===

    def load_own_variables(self, store):
        """Keras's load of this model's own variables (it has none since
        its output layer is `OutputProjection`). Files saved before hold
        that layer's variables as this model's: they go to it."""
        if len(store.keys()) and self.output_projection is not None:
            self.output_projection.load_saved_before(store)
            return
        super().load_own_variables(store)

    def build_from_config(self, config):
        # Built at construction. A save records the batch size of the data
        # last seen; a loaded model's carried memory takes the batch size
        # of the data it gets next.
        pass

    def get_compile_config(self):
        """Keras's compile config, with whether the optimizer was built
        (holds its slot variables) when the model was saved, which
        `compile_from_config` reads."""
        config = super().get_compile_config()
        if config is not None and self.optimizer is not None:
            config["optimizer_built"] = bool(self.optimizer.built)
        return config

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved, so that
        `keras.saving.load_model` restores the optimizer's state too
        (Keras skips this for an overridden `compile`, as keras-hub's).

        A saved optimizer has its slot variables only if it was built
        (the model was trained); one that was not has just its 2 scalars.
        The optimizer is built here when the saved one was
        (`get_compile_config` records it), so that the variables Keras
        hands it next match: built up front, an untrained save would be
        skipped with a warning, and left unbuilt, a trained one would lose
        its state. Files saved before that record build it, as Keras's own
        `compile_from_config` does."""
        config = dict(config)
        built = config.pop("optimizer_built", True)
        self.compile(**keras.saving.deserialize_keras_object(config))
        if built:
            self.optimizer.build(self.trainable_variables)

    def export(
        self,
        filepath,
        format="tf_saved_model",
        verbose=None,
        input_signature=None,
        **kwargs,
    ):
        """`keras.Model.export` serving the explicit memory: a SavedModel
        whose `serving_default(token_ids, memory, valid_length)` returns
        the logits and the next memory, and `initial_memory(batch_size)`;
        nothing is carried between calls. This is
        `keras_txl.export.export_saved_model` (see it for the signatures
        and `kwargs`; it runs from any backend). Keras's own export would
        trace the carried memory's path, whose serving function keeps a
        state between calls.

        `format="onnx"`: `filepath` is a directory that receives
        `model.onnx`, the same inputs and outputs for ONNX Runtime
        (`keras_txl.export.export_onnx`, which checks the file with ONNX
        Runtime; the `onnx` extra). Other formats are refused."""
        if format not in ("tf_saved_model", "onnx") or (
            input_signature is not None
        ):
            raise ValueError(
                "TransformerXLCausalLM.export writes a SavedModel "
                '(format="tf_saved_model") or an ONNX file (format="onnx") '
                "with the memory as input and output, and takes no "
                f"input_signature; received format={format!r}"
                + ("" if input_signature is None else ", an input_signature")
                + ". For LiteRT, use `keras_txl.export.export_litert`."
            )
        # The writers live in `keras_txl.export`, above the models.
        if format == "onnx":
            from keras_txl.export.onnx import export_onnx

            return export_onnx(self, filepath, verbose=bool(verbose), **kwargs)
        from keras_txl.export.saved_model import export_saved_model

        return export_saved_model(
            self, filepath, verbose=bool(verbose), **kwargs
        )

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """A `TransformerXLCausalLM` from a preset: a keras-hub preset
        (folder or handle) saved by `save_to_preset` (`keras-txl train`,
        `keras-txl convert`), a HuggingFace Transformer-XL folder or
        handle (`"hf://transfo-xl/transfo-xl-wt103"`; its tokenizer read
        without `pickle.load`), or a folder of the authors' TensorFlow
        checkpoint with the `config.json` of their `transformer()`
        arguments or the tf/sota script that trained it (no tokenizer).

        Args:
            preset: str, the folder or handle.
            load_weights: bool. `False` keeps random weights (keras-hub
                presets only).
            **kwargs: passed to the task's constructor, e.g.
                `preprocessor=None` or `dtype`. A local preset saved under
                a mixed policy loads under it unless `dtype` is given.
        """
        # Checkpoints of other implementations: their converters live in
        # `keras_txl.convert`, above the models (as keras-hub's
        # `get_preset_loader` finds its converters).
        from keras_txl.convert.preset_loader import get_preset_loader

        foreign = get_preset_loader(preset)
        if foreign is not None:
            kind, load = foreign
            if not load_weights or set(kwargs) - {"preprocessor"}:
                raise ValueError(
                    f"{preset!r} is a {kind} checkpoint, converted with "
                    "its weights and its own settings: only "
                    "`preprocessor` may be given. Received: "
                    f"load_weights={load_weights}, {sorted(kwargs)}"
                )
            return load(preset, **kwargs)
        folder = None
        if isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset):
            folder = os.fspath(preset)
            check_preset_files(folder)  # a damaged file is named, here
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = saved_mixed_policy(preset)
        if folder is None or not load_weights:
            return super().from_preset(
                preset, load_weights=load_weights, **kwargs
            )
        try:
            lm = super().from_preset(preset, **kwargs)
        except ValueError as error:
            if keras.distribution.distribution() is not None:
                raise  # a layout (e.g. an uneven split), not damage
            check_task_weights(folder, error=error)  # raises, naming it
            raise
        check_task_weights(folder, lm)
        return lm

    # === LoRA and quantization: the backbone's, the output layer kept ===

    def enable_lora(self, rank, target_layer_names=None):
        """`backbone.enable_lora` (see there), the output layer frozen
        too: only the LoRA kernels train."""
        self.backbone.enable_lora(rank, target_layer_names)
        freeze_all_but_lora(self)

    def save_lora_weights(self, filepath):
        """`backbone.save_lora_weights`: all that trains after
        `enable_lora`."""
        self.backbone.save_lora_weights(filepath)

    def load_lora_weights(self, filepath):
        """`backbone.load_lora_weights`, the output layer frozen."""
        self.backbone.load_lora_weights(filepath)
        freeze_all_but_lora(self)

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Quantizes the backbone (see `TransformerXLBackbone.quantize`;
        every check runs before anything changes). The output layer stays
        float: tied, it reads the quantized embedding through its lookup.
        The carried memory is activations, never quantized."""
        self.backbone.quantize(mode, config=config, filters=filters, **kwargs)
        # Traced before, they hold the float layers' calls.
        self.train_function = None
        self.test_function = None
        self.predict_function = None
        self.generate_function = None
