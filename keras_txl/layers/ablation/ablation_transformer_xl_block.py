import keras

from keras_txl.layers.ablation.learned_relative_multi_head_attention import (
    LearnedRelativeMultiHeadAttention,
)
from keras_txl.layers.transformer_xl_block import TransformerXLBlock
from keras_txl.utils.validation import check_positive_int

POSITION_ENCODINGS = ("relative", "absolute", "learned_relative")


def check_position_encoding(position_encoding, max_relative_distance):
    """Checks the ablation options `position_encoding` and
    `max_relative_distance` together; returns them."""
    if position_encoding not in POSITION_ENCODINGS:
        raise ValueError(
            f"`position_encoding` must be one of {POSITION_ENCODINGS}. "
            f"Received: position_encoding={position_encoding!r}"
        )
    if position_encoding == "learned_relative":
        if max_relative_distance is None:
            raise ValueError(
                "`position_encoding='learned_relative'` needs "
                "`max_relative_distance`, the clipping distance of the "
                "learned embeddings (e.g. memory_length + segment length)."
            )
        return position_encoding, check_positive_int(
            "max_relative_distance", max_relative_distance, allow_zero=True
        )
    if max_relative_distance is not None:
        raise ValueError(
            "`max_relative_distance` applies only to "
            "`position_encoding='learned_relative'`. Received: "
            f"max_relative_distance={max_relative_distance!r} with "
            f"position_encoding={position_encoding!r}"
        )
    return position_encoding, None


@keras.saving.register_keras_serializable(package="keras_txl")
class AblationTransformerXLBlock(TransformerXLBlock):
    """A `TransformerXLBlock` whose attention encodes positions another way
    (Dai et al., 2019, Table 6): the ablations' block, not the paper's.

    Args:
        position_encoding: `"relative"`: the paper's attention,
            `RelativeMultiHeadAttention` (this block is then
            `TransformerXLBlock`). `"absolute"`: attention without position
            terms (the model adds absolute encodings to its embeddings).
            `"learned_relative"`: Shaw et al. (2018), learned relative
            positions clipped at `max_relative_distance`. Both ablations use
            `LearnedRelativeMultiHeadAttention`, which ignores the call's
            `position_embedding`.
        max_relative_distance: int >= 0. Clipping distance of
            `"learned_relative"`; must be `None` otherwise.
        **kwargs: the arguments of `TransformerXLBlock`.

    Call arguments, returns: those of `TransformerXLBlock`.

    Example:

    >>> import numpy as np
    >>> x = np.random.rand(2, 4, 16).astype("float32")
    >>> memory = np.random.rand(2, 6, 16).astype("float32")
    >>> block = AblationTransformerXLBlock(
    ...     num_heads=2, head_dim=8, intermediate_dim=32,
    ...     position_encoding="learned_relative", max_relative_distance=5,
    ... )
    >>> tuple(block(x, None, memory=memory).shape)
    (2, 4, 16)
    """

    # Configs of `TransformerXLBlock` that hold other positions load here.
    base_arguments = {
        "position_encoding": "relative",
        "max_relative_distance": None,
    }

    def __init__(
        self,
        position_encoding="relative",
        max_relative_distance=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.position_encoding, self.max_relative_distance = (
            check_position_encoding(position_encoding, max_relative_distance)
        )

    def _make_attention(self, hidden_dim):
        if self.position_encoding == "relative":
            return super()._make_attention(hidden_dim)
        return LearnedRelativeMultiHeadAttention(
            num_heads=self.num_heads,
            head_dim=self.head_dim,
            max_distance=self.max_relative_distance,
            output_dim=hidden_dim,
            dropout=self.attention_dropout,
            same_length=self.same_length,
            kernel_initializer=self.kernel_initializer,
            embeddings_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="attention",
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "position_encoding": self.position_encoding,
                "max_relative_distance": self.max_relative_distance,
            }
        )
        return config
