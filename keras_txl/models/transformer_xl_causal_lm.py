import warnings

import keras
import keras_hub
from keras import ops

from keras_txl.layers.memory_state import MemoryState
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_token_ids
from keras_txl.utils.validation import ensure_batch_size
from keras_txl.utils.validation import in_vocabulary
from keras_txl.utils.validation import is_concrete
from keras_txl.utils.validation import is_dataset
from keras_txl.utils.validation import shuffles
from keras_txl.utils.validation import static_batch_size
from keras_txl.utils.validation import with_batch_size


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
            # An explicit memory needs no carried one.
            input_shape = (
                None if "memory" in input_shape else input_shape["token_ids"]
            )
        if input_shape is not None and len(input_shape) == 2:
            if input_shape[0] is not None:  # else built by the first batch
                self.memory_state.build(input_shape[0])
        self.built = True

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

    def build_memory(self, batch_size):
        """Creates the memory carried between batches for `batch_size`
        streams. Needed only when the first batch has no static batch size
        (e.g. numpy arrays fed to `fit` on TensorFlow)."""
        if self.memory_state.has_state:
            self.memory_state.build(batch_size)  # raises on another size
            return
        self.memory_state.build(batch_size)
        # Functions traced before (e.g. by a `fit` that failed for want of
        # a batch size) do not know the new variables: trace them again.
        self.train_function = None
        self.test_function = None
        self.predict_function = None

    def fit(self, x=None, y=None, batch_size=None, **kwargs):
        x = self._check_data(x, y, batch_size)
        validation_data = kwargs.get("validation_data")
        if is_dataset(validation_data):
            kwargs["validation_data"] = self._check_data(
                validation_data, name="validation_data"
            )
        elif isinstance(validation_data, (tuple, list)):
            self._check_data(*validation_data[:2], name="validation_data")
        return super().fit(x, y, batch_size=batch_size, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        if not kwargs.get("_use_cached_eval_dataset", False):
            x = self._check_data(x, y, batch_size)
        return super().evaluate(x, y, batch_size=batch_size, **kwargs)

    def predict(self, x=None, batch_size=None, **kwargs):
        x = self._check_data(x, None, batch_size)
        return super().predict(x, batch_size=batch_size, **kwargs)

    def _check_data(self, x, y=None, batch_size=None, name="x"):
        """Checks data for the carried memory before any step is traced:
        token ids, one batch size (which builds the memory) and order.
        Returns `x`, with a check of every batch's size when it is a
        dataset without a static batch size."""
        vocabulary_size = self.backbone.vocabulary_size
        rows = static_batch_size(x, batch_size, vocabulary_size, name)
        if y is not None and hasattr(y, "shape") and not is_dataset(y):
            check_token_ids(y, vocabulary_size, name="y")
        if is_dataset(x) and shuffles(x):
            warnings.warn(
                f"The dataset passed as `{name}` shuffles its elements (it "
                "has a `.shuffle()`). The memory carried between batches "
                "assumes that row b of each batch continues row b of the "
                "batch before (`keras_txl.data.segment_dataset`): shuffled "
                "segments give the model unrelated context. Shuffle only "
                "before the text is cut into streams, if at all.",
                stacklevel=3,
            )
        if rows is not None and not self.memory_state.has_state:
            self.build_memory(rows)
        elif rows is not None or is_dataset(x):
            self.memory_state._check_batch(rows)  # raises, naming the fix
        if is_dataset(x) and rows is None:
            x = with_batch_size(
                x,
                self.memory_state.batch_size,
                f"`{name}`: {self.memory_state.batch_size_message()}",
            )
        return x

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
            return {
                "logits": self.compute_logits(outputs["sequence_output"]),
                "memory": outputs["memory"],
                "valid_length": outputs["valid_length"],
            }
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
        if batch_size is None:  # TensorFlow graphs: checked at run time
            token_ids = ensure_batch_size(
                token_ids,
                self.memory_state.batch_size,
                self.memory_state.batch_size_message(),
            )
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
        logits = self.compute_logits(outputs["sequence_output"])
        if in_range is not None:
            logits = ops.where(
                in_range[..., None], logits, float("nan")
            )  # (batch, T, V)
        return logits

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        loss = super().compute_loss(
            x, y, y_pred, sample_weight, training=training
        )
        if y is None or isinstance(y, dict) or len(y.shape) != 2:
            return loss
        vocabulary_size = self.backbone.vocabulary_size
        if is_concrete(y):  # eager steps (torch): a clear error now
            check_token_ids(y, vocabulary_size, name="y (the targets)")
            return loss
        # Targets out of range would score as 0 (JAX) or zeros (TensorFlow
        # on GPU): make the loss NaN instead.
        targets_ok = ops.all(in_vocabulary(y, vocabulary_size))
        return ops.where(targets_ok, loss, float("nan"))

    def call_with_memory(self, token_ids, memory=None, training=False):
        """Runs one segment with an explicit memory.

        Args:
            token_ids: int tensor `(batch, T)`.
            memory: `{"memory", "valid_length"}` from
                `backbone.initial_memory()` or the previous call; `None`
                starts empty (length `backbone.memory_length`).
            training: bool. Dropout is active only when True.

        Returns:
            `(logits, new_memory)`: float32 logits `(batch, T, vocab)` and
            the memory for the next segment.
        """
        token_ids = check_token_ids(token_ids, self.backbone.vocabulary_size)
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

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tie_weights": self.tie_weights,
                "memory_length": self.memory_length,
            }
        )
        return config
