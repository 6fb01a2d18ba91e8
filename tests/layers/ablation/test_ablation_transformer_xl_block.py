import numpy as np
import pytest

from keras_txl.layers import RelativeMultiHeadAttention
from keras_txl.layers import RelativePositionEmbedding
from keras_txl.layers import TransformerXLBlock
from keras_txl.layers.ablation import AblationTransformerXLBlock
from keras_txl.layers.ablation import LearnedRelativeMultiHeadAttention
from tests.test_case import run_layer_round_trip
from tests.test_case import to_numpy

ARGS = {"num_heads": 2, "head_dim": 4, "intermediate_dim": 16}


@pytest.mark.parametrize(
    "options",
    [
        {"position_encoding": "absolute"},
        {"position_encoding": "learned_relative", "max_relative_distance": 3},
    ],
)
def test_round_trip(options):
    rng = np.random.default_rng(0)
    run_layer_round_trip(
        AblationTransformerXLBlock,
        {**ARGS, **options},
        [
            rng.normal(size=(2, 3, 8)).astype("float32"),
            rng.normal(size=(3, 8)).astype("float32"),  # ignored
        ],
    )


def test_attention_follows_the_position_encoding():
    x = np.random.default_rng(0).normal(size=(1, 3, 8)).astype("float32")
    r = RelativePositionEmbedding(8)(x)
    for encoding, attention in (
        ("relative", RelativeMultiHeadAttention),
        ("absolute", LearnedRelativeMultiHeadAttention),
    ):
        block = AblationTransformerXLBlock(**ARGS, position_encoding=encoding)
        block(x, r)
        assert type(block.attention) is attention
    absolute = block.attention
    assert absolute.max_distance is None  # no position terms at all


def test_relative_equals_the_papers_block():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 8)).astype("float32")
    memory = rng.normal(size=(2, 2, 8)).astype("float32")
    r = RelativePositionEmbedding(8)(x, memory)
    paper = TransformerXLBlock(**ARGS)
    ablation = AblationTransformerXLBlock(**ARGS)
    expected = to_numpy(paper(x, r, memory=memory))
    ablation(x, r, memory=memory)
    ablation.set_weights(paper.get_weights())
    np.testing.assert_array_equal(
        to_numpy(ablation(x, r, memory=memory)), expected
    )


def test_block_configs_with_the_old_arguments_still_load():
    """Saved when `TransformerXLBlock` took the ablations' arguments."""
    old = dict(TransformerXLBlock(**ARGS).get_config(), max_relative_distance=2)
    paper = dict(old, position_encoding="relative", max_relative_distance=None)
    assert type(TransformerXLBlock.from_config(paper)) is TransformerXLBlock
    learned = dict(old, position_encoding="learned_relative")
    block = TransformerXLBlock.from_config(learned)
    assert isinstance(block, AblationTransformerXLBlock)
    assert block.max_relative_distance == 2


@pytest.mark.parametrize(
    "options, match",
    [
        ({"position_encoding": "rotary"}, "position_encoding"),
        ({"position_encoding": "learned_relative"}, "max_relative_distance"),
        ({"max_relative_distance": 4}, "only to"),
    ],
)
def test_invalid_arguments(options, match):
    with pytest.raises(ValueError, match=match):
        AblationTransformerXLBlock(**ARGS, **options)
