"""`TransformerXLCausalLM`: a backbone, its output layer, and the memory
carried from batch to batch.

The task lives in four files: this one (the output layer, `call`, the
loss, `compile`, saving and presets, LoRA and quantization),
`carried_memory.py` (how the memory crosses the batches of `fit`,
`evaluate` and `predict`), `transformer_xl_generation.py` (`generate`) and
`transformer_xl_scoring.py` (`score`).
"""

import json
import os
import types

import keras
import keras_hub
from keras import ops

from keras_txl.layers.adaptive_embedding import AdaptiveEmbedding
from keras_txl.layers.adaptive_softmax import AdaptiveSoftmax
from keras_txl.layers.adaptive_softmax import check_cluster_order
from keras_txl.metrics.batch_cross_entropy import BatchCrossEntropy
from keras_txl.metrics.bits_per_character import BitsPerCharacter
from keras_txl.models.carried_memory import CarriedMemory
from keras_txl.models.memory_state import MemoryState
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_backbone import check_vocabulary_layout
from keras_txl.models.transformer_xl_backbone import freeze_all_but_lora
from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
    TransformerXLCausalLMPreprocessor,
)
from keras_txl.models.transformer_xl_generation import TransformerXLGeneration
from keras_txl.models.transformer_xl_scoring import score
from keras_txl.utils.damaged_file_error import DamagedFileError
from keras_txl.utils.saved_files import PRESET_WEIGHTS_FILES
from keras_txl.utils.saved_files import check_preset_files
from keras_txl.utils.saved_files import check_weights_fit
from keras_txl.utils.tensor_values import is_concrete
from keras_txl.utils.token_data import check_token_ids
from keras_txl.utils.token_data import in_vocabulary
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int


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
    The output layer is tied to the token embedding, with a bias, as in the
    authors' code, or has its own kernel; logits are float32 under any
    dtype policy. With a `CompressiveTransformerXLBackbone` the memory
    holds the compressed memory too, and `fit` and `evaluate` report the
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
        # A model on the same backbone whose output variables this one
        # shares (`carried_memory.evaluation_copy`): not an argument of the
        # config, as a model made so is never saved on its own.
        output_layer_of = kwargs.pop("_output_layer_of", None)
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
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.adaptive_softmax = None
        if output_layer_of is not None:
            if output_layer_of.backbone is not backbone:
                raise ValueError(
                    "`output_layer_of` must be a model on this backbone, "
                    "whose output layer this one shares. Received a model "
                    f"on another backbone ({output_layer_of.backbone.name})."
                )
            self.adaptive_softmax = output_layer_of.adaptive_softmax
            tie_projections = output_layer_of.tie_projections
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

        # === Weights, made here: every weight exists after construction ===
        shape = (backbone.hidden_dim, backbone.vocabulary_size)
        if adaptive:
            pass
        elif output_layer_of is not None:
            self.output_bias = output_layer_of.output_bias
            if not self.tie_weights:
                self.output_kernel = output_layer_of.output_kernel
        else:
            for name, axis in (("output_kernel", 1), ("output_bias", 0)):
                check_vocabulary_layout(
                    f"{self.name}/{name}", backbone.vocabulary_size, axis
                )
            if not self.tie_weights:
                self.output_kernel = self.add_weight(
                    shape=shape, initializer=initializer, name="output_kernel"
                )
            self.output_bias = self.add_weight(
                shape=shape[1:], initializer="zeros", name="output_bias"
            )
        self.built = True

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
        if self.tie_weights:
            embedding = self.backbone.token_embedding
            if embedding.quantization_mode is None:
                kernel = embedding.embeddings  # (V, hidden)
            else:  # integers and scales: its own lookup dequantizes them
                ids = ops.arange(self.backbone.vocabulary_size, dtype="int32")
                kernel = embedding(ids)  # (V, hidden)
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
            reduce = _PerTokenLoss(reduction=loss_fn.reduction, name="nll")
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

    def call_with_memory(self, token_ids, memory=None, training=False):
        """Runs one segment with an explicit memory.

        Args:
            token_ids: int tensor `(batch, T)`.
            memory: the memory dict from `backbone.initial_memory()` or the
                previous call; `None` starts empty.
            training: bool. Dropout is active only when True.

        Returns:
            `(logits, new_memory)`: float32 `(batch, T, vocab)` and the
            memory for the next segment.
        """
        token_ids = check_token_ids(token_ids, self.backbone.vocabulary_size)
        batch_size = token_ids.shape[0]
        if memory is None:
            memory = self.backbone.initial_memory(batch_size)
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
    ):
        """Per-token scores of a text of any length, as keras-hub's causal
        LMs' `score()`, read in segments with the memory carried (the
        paper's evaluation; see `keras_txl/models/transformer_xl_scoring.
        py`).

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
        # TensorFlow generation uses XLA unless `jit_compile=False` was
        # asked for (see `make_generate_function`).
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
        # Saved before `cluster_order` existed: the order of that time.
        return super().from_config({"cluster_order": "pytorch", **config})

    # === Saving and presets ===

    def build_from_config(self, config):
        # Built at construction. A save records the batch size of the data
        # last seen; a loaded model's carried memory takes the batch size
        # of the data it gets next.
        pass

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved, so that
        `keras.saving.load_model` restores the optimizer's state too
        (Keras skips this for an overridden `compile`, as keras-hub's).

        A saved optimizer has its slot variables only if it was built
        (the model was trained); one that was not has just its 2 scalars.
        Which one was saved is known only when Keras hands the optimizer
        its saved variables, so the optimizer is built then, to match:
        built up front, an untrained save would be skipped with a
        warning, and left unbuilt, a trained one would lose its state."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        optimizer = self.optimizer
        variables = self.trainable_variables

        def load_own_variables(store):
            del optimizer.load_own_variables  # Once, for this load.
            if not optimizer.built and len(store.keys()) > len(
                optimizer.variables
            ):
                optimizer.build(variables)
            optimizer.load_own_variables(store)

        optimizer.load_own_variables = load_own_variables

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
        state between calls; other formats are refused."""
        if format != "tf_saved_model" or input_signature is not None:
            raise ValueError(
                "TransformerXLCausalLM.export writes a SavedModel with the "
                'memory as input and output (format="tf_saved_model", no '
                f"input_signature); received format={format!r}"
                + ("" if input_signature is None else ", an input_signature")
                + ". For another format, export from "
                "`keras_txl.export.export_saved_model`'s SavedModel."
            )
        if not _EXPORTERS:
            raise RuntimeError(
                "No SavedModel writer is registered: `import keras_txl` first."
            )
        return _EXPORTERS[0](self, filepath, verbose=bool(verbose), **kwargs)

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
        for kind, (detect, load) in _FOREIGN_CHECKPOINTS.items():
            if detect(preset):
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
            kwargs["dtype"] = _saved_mixed_policy(preset)
        if folder is None or not load_weights:
            return super().from_preset(
                preset, load_weights=load_weights, **kwargs
            )
        weights = os.path.join(folder, PRESET_WEIGHTS_FILES[0])
        try:
            lm = super().from_preset(preset, **kwargs)
        except ValueError as error:
            if keras.distribution.distribution() is not None:
                raise  # a layout (e.g. an uneven split), not damage
            reason = " ".join(str(error).split())
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


class _PerTokenLoss(keras.losses.Loss):
    """Reduces per-token losses given as `y_pred` as a compiled loss does
    (sample weights, masks, the distribution's scaling)."""

    def call(self, y_true, y_pred):
        return y_pred


# Loaders of checkpoints that are not keras-hub presets, which
# `from_preset` reads: kind -> (detect(preset), load(preset,
# preprocessor=...)). `keras_txl.convert` registers them when imported
# (`import keras_txl` does): the models import no converter, as
# keras-hub's models import none of theirs.
_FOREIGN_CHECKPOINTS = {}
# The SavedModel writer of `export`: `keras_txl.export` registers it.
_EXPORTERS = []


def register_foreign_checkpoint(kind, detect, load):
    """Lets `from_preset` read checkpoints of `kind`: a folder or handle
    for which `detect(preset)` is true loads as `load(preset)` (a
    `TransformerXLCausalLM`, with the `preprocessor` keyword if given)."""
    _FOREIGN_CHECKPOINTS[kind] = (detect, load)


def register_saved_model_exporter(export):
    """Sets `export(lm, path, **kwargs)` as the writer of `lm.export`."""
    _EXPORTERS[:] = [export]


def _saved_mixed_policy(preset):
    """The mixed dtype policy a local keras-hub preset was saved under,
    else `None`: keras-hub 0.32 loads a preset in the current global
    policy and fails on a mixed one (it reads the policy's name as a
    dtype). keras-hub has no public reader of a remote preset's files:
    for a remote mixed preset, pass `dtype=`."""
    if not isinstance(preset, (str, os.PathLike)):
        return None
    path = os.path.join(os.fspath(preset), "config.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        policy = json.load(file).get("config", {}).get("dtype")
    if isinstance(policy, dict):
        policy = policy.get("config", {}).get("name")
    if isinstance(policy, str) and policy.startswith("mixed_"):
        return policy
    return None
