"""`TransformerXLTextClassifier`: a document read segment by segment with
the memory carried, classified from the hidden state of its last token."""

import json
import os

import keras
import keras_hub
from keras import ops

from keras_txl.models.carried_memory import build_optimizer_first
from keras_txl.models.transformer_xl_backbone import TransformerXLBackbone
from keras_txl.models.transformer_xl_text_classifier_preprocessor import (
    TransformerXLTextClassifierPreprocessor,
)
from keras_txl.utils.saved_files import check_preset_files
from keras_txl.utils.token_data import check_right_padded
from keras_txl.utils.token_data import check_token_ids
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int
from keras_txl.utils.validation import check_rate

# Tokens per segment unless told: as `score` and `generate`'s prompts.
DEFAULT_SEGMENT_LENGTH = 64


@keras.saving.register_keras_serializable(package="keras_txl")
class TransformerXLTextClassifier(keras_hub.models.TextClassifier):
    """Transformer-XL text classifier that reads long documents with its
    memory.

    A document longer than one segment is read as a Transformer-XL reads
    text: in segments of `segment_length` tokens, each segment attending
    to the memory of the ones before it (the backbone's explicit memory,
    `memory_length` slots, carried from segment to segment inside `call`).
    The class is predicted from the hidden state of the document's LAST
    valid token (the last True of `padding_mask`): the backbone is causal,
    so that token is the one whose state has seen the whole document,
    through its own segment and the memory, and the padding after it
    changes nothing. With `memory_length >= (segments - 1) *
    segment_length` the last token attends to every token of the
    document; with `memory_length=0` it sees only its own segment.

    Any document length is accepted: the preprocessor pads (or cuts) each
    document at its end to `sequence_length`, as keras-hub pads, and the
    model pads the token ids at their end to the next multiple of
    `segment_length` (padding that comes after every valid token, so it
    is never read). Each distinct length compiles its own step under
    `jit`: a preprocessor's fixed `sequence_length` compiles one.

    Gradients. The memory is read under stop-gradient (the paper's
    SG(.)), so the loss reaches the weights only through the segment that
    holds each document's last valid token: the segments before it shape
    the prediction through the states they leave in the memory, but no
    gradient flows back into them (Transformer-XL's truncated
    backpropagation, one segment long). Training therefore teaches the
    last segment to read the memory; what earlier segments write there is
    what the weights compute, trained only where those weights also serve
    the last segment.

    Arrays given to `fit` reach it through keras-hub's Grain pipeline,
    which `shuffle=True` does not shuffle (keras-hub 0.32): shuffle
    examples sorted by label before `fit`.

    Args:
        backbone: a `TransformerXLBackbone`.
        num_classes: int >= 1. Number of classes to predict.
        preprocessor: a `TransformerXLTextClassifierPreprocessor` (or
            another keras-hub preprocessor returning `"token_ids"` and
            `"padding_mask"`), or `None` for inputs of token ids.
        activation: `None` (logits, the default), `"softmax"` or any Keras
            activation, applied to the outputs. The default `compile()`
            loss reads logits unless it is `"softmax"`.
        dropout: float in [0, 1). Dropout on the last token's hidden state
            before the output layer.
        segment_length: int >= 1. Tokens per segment.
        memory_length: int >= 0 or `None` (the backbone's). Slots of the
            memory carried from segment to segment; 0 reads each segment
            alone.
        **kwargs: other arguments of `keras_hub.models.Task` (`name`,
            `compile`).

    Call arguments:
        inputs: a dict of `"token_ids"` int `(batch, N)` and optional
            `"padding_mask"` bool `(batch, N)` (True on each document's
            tokens, then False: right padding), or token ids alone (every
            token valid). Any `N` known when the call is traced.
        training: bool. Dropout is active only when True.

    Returns:
        Float32 `(batch, num_classes)`: logits, or the `activation`'s
        outputs.

    Example:

    >>> import numpy as np
    >>> backbone = TransformerXLBackbone(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
    ...     head_dim=8, intermediate_dim=32, memory_length=24,
    ... )
    >>> classifier = TransformerXLTextClassifier(
    ...     backbone, num_classes=3, segment_length=8
    ... )
    >>> ids = np.random.randint(0, 50, size=(2, 30))  # 4 segments, padded
    >>> mask = np.arange(30) < np.array([[30], [11]])  # lengths 30 and 11
    >>> logits = classifier.predict(
    ...     {"token_ids": ids, "padding_mask": mask}, verbose=0
    ... )
    >>> logits.shape
    (2, 3)
    """

    backbone_cls = TransformerXLBackbone
    preprocessor_cls = TransformerXLTextClassifierPreprocessor

    def __init__(
        self,
        backbone,
        num_classes,
        preprocessor=None,
        activation=None,
        dropout=0.1,
        segment_length=DEFAULT_SEGMENT_LENGTH,
        memory_length=None,
        **kwargs,
    ):
        if not isinstance(backbone, TransformerXLBackbone):
            raise ValueError(
                "`backbone` must be a `TransformerXLBackbone`. Received: "
                f"backbone={type(backbone).__name__}"
            )
        num_classes = check_positive_int("num_classes", num_classes)
        dropout = check_rate("dropout", dropout)
        segment_length = check_positive_int("segment_length", segment_length)
        memory_length = check_optional_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        activation_fn = keras.activations.get(activation)
        # Compiled below, once the activation is known (the default loss
        # reads it); keras-hub's tasks are functional, this one is
        # subclassed, so its layers are set after `Model.__init__`, where
        # Keras tracks them.
        compile_now = kwargs.pop("compile", True)
        super().__init__(compile=False, **kwargs)
        self.dtype_policy = backbone.dtype_policy

        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=backbone.dtype_policy, name="classifier_dropout"
        )
        self.output_dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=keras.initializers.RandomNormal(
                stddev=backbone.initializer_range
            ),
            activation=activation_fn,
            dtype=backbone.dtype_policy,
            name="logits",
        )
        # Every weight exists once the model is constructed.
        self.output_dense.build((None, backbone.hidden_dim))

        # === Config ===
        self.num_classes = num_classes
        self.activation = activation_fn
        self.dropout = dropout
        self.segment_length = segment_length
        self.memory_length = memory_length
        self.built = True
        if compile_now:
            self.compile()

    @property
    def read_memory_length(self):
        """The memory slots the segments carry: `memory_length`, or the
        backbone's when it is `None`."""
        if self.memory_length is None:
            return self.backbone.memory_length
        return self.memory_length

    def read_document(self, token_ids, padding_mask=None, training=False):
        """The hidden state of each document's last valid token, the
        document read in segments with the memory carried.

        Equal to a loop of `backbone.call_with_memory` over the segments
        from an empty memory of `read_memory_length` slots, taking the
        output at the last True of `padding_mask`.

        Args:
            token_ids: int `(batch, N)`, any `N` known when traced.
            padding_mask: optional bool `(batch, N)`, True on tokens then
                False; `None`: every token is valid. A row without any
                valid token is read at position 0.
            training: bool. Dropout in the backbone is active only when
                True.

        Returns:
            `(batch, hidden_dim)` in the backbone's compute dtype.
        """
        backbone = self.backbone
        token_ids = check_token_ids(token_ids, backbone.vocabulary_size)
        length = token_ids.shape[1]
        if length is None or length == 0:
            raise ValueError(
                "`token_ids` must have a known, non-zero length (axis 1) "
                "when the classifier is called or traced. Received shape "
                f"{tuple(token_ids.shape)}. Pad the documents to a fixed "
                "`sequence_length`, as the preprocessor does."
            )
        if padding_mask is not None:
            check_right_padded(
                padding_mask, tuple(token_ids.shape), item="document"
            )
        T = self.segment_length
        num_segments = -(-length // T)
        token_ids = ops.cast(token_ids, "int32")
        pad = num_segments * T - length
        if pad:
            # After every valid token: a causal model never reads it.
            token_ids = ops.pad(token_ids, [[0, 0], [0, pad]])  # (batch, S*T)
        spec = backbone.memory_spec
        memory = spec.zeros(ops.shape(token_ids)[0], self.read_memory_length)
        states = []
        for start in range(0, num_segments * T, T):
            outputs = backbone(
                {"token_ids": token_ids[:, start : start + T], **memory},
                training=training,
            )
            memory = spec.select(outputs)  # under stop-gradient
            states.append(outputs["sequence_output"])  # (batch, T, hidden)
        states = ops.concatenate(states, axis=1)[:, :length]  # (batch, N, d)
        if padding_mask is None:
            return states[:, -1]  # (batch, hidden)
        valid = ops.sum(ops.cast(padding_mask, "int32"), axis=1)  # (batch,)
        last = ops.one_hot(ops.maximum(valid - 1, 0), length)  # (batch, N)
        return ops.einsum("bn,bnd->bd", ops.cast(last, states.dtype), states)

    def call(self, inputs, training=None):
        if isinstance(inputs, dict):
            token_ids = inputs["token_ids"]
            padding_mask = inputs.get("padding_mask")
        else:
            token_ids, padding_mask = inputs, None
        x = self.read_document(
            token_ids, padding_mask, training=bool(training)
        )  # (batch, hidden)
        x = self.output_dropout(x, training=training)
        return ops.cast(self.output_dense(x), "float32")  # (batch, classes)

    def make_train_function(self, force=False):
        # The optimizer built before the step's first trace: TensorFlow
        # traces it once instead of twice (`build_optimizer_first`).
        build_optimizer_first(self)
        return super().make_train_function(force=force)

    def build(self, input_shape=None):
        # Every weight exists after construction.
        self.built = True

    def build_from_config(self, config):
        pass

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "activation": keras.activations.serialize(self.activation),
                "dropout": self.dropout,
                "segment_length": self.segment_length,
                "memory_length": self.memory_length,
            }
        )
        return config

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """A classifier from a keras-hub preset: a run of `keras-txl train`
        (or any `TransformerXLCausalLM.save_to_preset` folder) with
        `num_classes=...` (its backbone's weights, a new output layer and
        a `TransformerXLTextClassifierPreprocessor` over its tokenizer),
        or a classifier's own `save_to_preset` folder (its output layer
        too, unless `num_classes` is given).

        Args:
            preset: str, the folder or handle.
            load_weights: bool. `False` keeps random weights.
            **kwargs: passed to the constructor: `num_classes`,
                `segment_length`, `memory_length`, `dropout`,
                `activation`, `preprocessor`, `dtype`.

        Example:

        ```python
        classifier = TransformerXLTextClassifier.from_preset(
            "runs/keras-txl", num_classes=2, segment_length=64
        )
        classifier.preprocessor.sequence_length = 512
        classifier.fit(texts, labels, batch_size=8)
        ```
        """
        if isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset):
            folder = os.fspath(preset)
            check_preset_files(folder)  # a damaged file is named, here
            if "num_classes" not in kwargs and not _holds_classifier(folder):
                raise ValueError(
                    f"{folder} holds no `TransformerXLTextClassifier` (its "
                    "task.json is another task's, or there is none): pass "
                    "`num_classes=...` to put a new output layer on its "
                    "backbone."
                )
        return super().from_preset(preset, load_weights=load_weights, **kwargs)


def _holds_classifier(folder):
    """Whether the preset in `folder` saved a `TransformerXLTextClassifier`
    (its `task.json` names the class)."""
    path = os.path.join(folder, "task.json")
    if not os.path.isfile(path):
        return False
    with open(path, encoding="utf-8") as file:
        name = json.load(file).get("registered_name", "")
    return name == "keras_txl>TransformerXLTextClassifier"
