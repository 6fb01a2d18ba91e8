import keras
from keras import ops

from keras_txl.models.carried_memory import build_optimizer_first
from keras_txl.models.carried_memory import prepare_memory_carry
from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM
from keras_txl.utils.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_txl")
class UnrolledSegmentsLM(keras.Model):
    """Runs `k` consecutive segments of a `TransformerXLCausalLM` per batch,
    in one graph: the model the ablations train.

    A batch of `k * T` tokens per row is split into `k` segments of
    `segment_length = T`; segment `s + 1` attends to the memory that
    segment `s` produced, as a tensor of the same graph. Whether gradients
    flow through that memory is the backbone's `stop_memory_gradient`:

    - `True` (the paper): the loss of each segment reaches only its own
      computation; `k` segments per batch train like `k` batches of one.
    - `False` (ablation): the loss of segment `s + 1` backpropagates into
      segments `s, s - 1, ...` of the same batch through the memory, as
      truncated backpropagation through time over `k * T` tokens.

    Between batches the memory is carried in `lm.memory_state` (as
    `TransformerXLCausalLM` does), always under stop-gradient: rows of
    batch `i + 1` must continue rows of batch `i` (ordered segments, e.g.
    `keras_txl.data.segment_dataset(ids, B, k * T)`). The weights are the
    LM's: train this model, then evaluate or save `lm`.

    Args:
        lm: a `TransformerXLCausalLM`.
        segment_length: int. `T`; the batch length must be a multiple.
        **kwargs: other keyword arguments passed to `keras.Model`.

    Call arguments:
        token_ids: int tensor `(batch, k * T)`.
        training: bool. Dropout is active only when True.

    Returns:
        float32 logits `(batch, k * T, vocabulary_size)`.

    Example:

    >>> import numpy as np
    >>> from keras_txl.ablation import AblationTransformerXLBackbone
    >>> backbone = AblationTransformerXLBackbone(
    ...     vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8,
    ...     head_dim=4, intermediate_dim=16, memory_length=4,
    ...     stop_memory_gradient=False,
    ... )
    >>> model = UnrolledSegmentsLM(
    ...     TransformerXLCausalLM(backbone), segment_length=4
    ... )
    >>> tuple(model(np.zeros((2, 12), "int32")).shape)
    (2, 12, 20)
    """

    def __init__(self, lm, segment_length, **kwargs):
        if not isinstance(lm, TransformerXLCausalLM):
            raise ValueError(
                "`lm` must be a `TransformerXLCausalLM`. Received: "
                f"lm={type(lm).__name__}"
            )
        super().__init__(**kwargs)
        self.lm = lm
        self.segment_length = check_positive_int(
            "segment_length", segment_length
        )

    @property
    def memory_state(self):
        """The LM's memory carried between batches."""
        return self.lm.memory_state

    def build_memory(self, batch_size):
        """See `TransformerXLCausalLM.build_memory`."""
        self.lm.build_memory(batch_size)

    def reset_memory(self):
        """Forgets the memory carried between batches."""
        self.lm.reset_memory()

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        epochs=1,
        verbose="auto",
        callbacks=None,
        **kwargs,
    ):
        """`keras.Model.fit`, carrying the memory from batch to batch (see
        `TransformerXLCausalLM.fit`: the memory is built for the batch
        size of `x`, and a `MemoryReset` is added unless given)."""
        x, callbacks = prepare_memory_carry(self, x, batch_size, callbacks)
        return super().fit(
            x, y, batch_size, epochs, verbose, callbacks, **kwargs
        )

    def make_train_function(self, force=False):
        """Keras's, with the optimizer built before the train step's
        first trace: TensorFlow traces the k unrolled segments once
        instead of twice (`build_optimizer_first`)."""
        build_optimizer_first(self)
        return super().make_train_function(force=force)

    def call(self, token_ids, training=None):
        batch_size, length = token_ids.shape[0], token_ids.shape[1]
        T = self.segment_length
        if length is None or length % T:
            raise ValueError(
                "The batch length must be a known multiple of "
                f"`segment_length={T}` (k segments per row). Received "
                f"shape {tuple(token_ids.shape)}."
            )
        state = self.lm.memory_state
        if not state.has_state and batch_size is not None:
            state.build(batch_size)
        spec = self.lm.backbone.memory_spec
        memory = state.read(batch_size)
        token_ids = ops.cast(token_ids, "int32")
        logits = []
        for start in range(0, length, T):
            outputs = self.lm.backbone(
                {"token_ids": token_ids[:, start : start + T], **memory},
                training=training,
            )
            logits.append(self.lm.compute_logits(outputs["sequence_output"]))
            # Gradients flow unless the backbone stops them.
            memory = spec.select(outputs)
        state.write(spec.stop_gradient(memory))
        return ops.concatenate(logits, axis=1)  # (batch, k * T, vocab)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "lm": keras.saving.serialize_keras_object(self.lm),
                "segment_length": self.segment_length,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["lm"] = keras.saving.deserialize_keras_object(config["lm"])
        return cls(**config)
