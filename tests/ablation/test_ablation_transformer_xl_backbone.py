"""`AblationTransformerXLBackbone`: position encodings and
backpropagation through the memory."""

import functools

import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.ablation import AblationTransformerXLBackbone
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from tests.layers.reference import sinusoid
from tests.test_case import gradients
from tests.test_case import to_numpy
from tests.tiny_models import PAPER_BACKBONE
from tests.tiny_models import tiny_backbone

# The backbone tests' tiny model, as the ablations build it.
_backbone = functools.partial(
    tiny_backbone,
    backbone_class=AblationTransformerXLBackbone,
    **PAPER_BACKBONE,
)


def _segments_equal_full_pass(backbone, tokens, T):
    total = tokens.shape[1]
    full, _ = backbone.call_with_memory(
        tokens, backbone.initial_memory(tokens.shape[0], memory_length=0)
    )
    memory = backbone.initial_memory(tokens.shape[0], memory_length=total)
    outputs = []
    for start in range(0, total, T):
        out, memory = backbone.call_with_memory(
            tokens[:, start : start + T], memory
        )
        outputs.append(to_numpy(out))
    gap = np.abs(np.concatenate(outputs, 1) - to_numpy(full)).max()
    return gap < 1e-4


@pytest.mark.parametrize(
    "options, consistent",
    [
        ({}, True),
        (
            {
                "position_encoding": "learned_relative",
                "max_relative_distance": 12,
            },
            True,
        ),
        ({"position_encoding": "absolute"}, False),
    ],
)
def test_only_relative_encodings_survive_recurrence(options, consistent):
    """Segments read one after another with a memory holding all earlier
    tokens compute one pass over the whole text when positions are
    relative. With absolute positions every segment restarts at 0: the
    memory's tokens and the segment's collide, and the outputs differ."""
    backbone = _backbone(num_layers=1, **options)
    tokens = np.random.default_rng(0).integers(0, 30, (1, 8))
    assert _segments_equal_full_pass(backbone, tokens, T=4) == consistent


def test_absolute_positions_restart_in_every_segment():
    """Shifting the text by a segment does not shift its positions: memory
    entry 0 (the embedding layer's output) holds emb * sqrt(d) + PE(p) with
    p = 0 ... T-1 for every segment."""
    backbone = _backbone(position_encoding="absolute", memory_length=8)
    tokens = np.random.default_rng(1).integers(0, 30, (1, 8))
    _, memory = backbone.call_with_memory(tokens[:, :4])
    _, memory = backbone.call_with_memory(tokens[:, 4:], memory)
    table = to_numpy(backbone.token_embedding.embeddings) * 4.0  # sqrt(16)
    positions = sinusoid(np.arange(4), 16)
    expected = np.concatenate(
        [table[tokens[0, :4]] + positions, table[tokens[0, 4:]] + positions]
    )
    np.testing.assert_allclose(
        to_numpy(memory["memory"])[0, 0], expected, atol=1e-5
    )


def test_learned_relative_clips_at_max_distance():
    """Beyond `max_relative_distance` the model cannot tell memory slots
    apart by position: with distance 0 as the clip, the output is
    invariant to shuffling the memory, unlike with a larger clip."""
    tokens = np.random.default_rng(2).integers(0, 30, (1, 2))
    states = np.random.default_rng(3).normal(size=(1, 2, 6, 16))
    order = [4, 2, 0, 5, 1, 3]
    valid = np.array([6], "int32")
    gaps = []
    for clip in (0, 7):
        backbone = _backbone(
            position_encoding="learned_relative",
            max_relative_distance=clip,
            num_layers=1,
        )
        memory = states[:, :1].astype("float32")
        a, _ = backbone.call_with_memory(
            tokens, {"memory": memory, "valid_length": valid}
        )
        b, _ = backbone.call_with_memory(
            tokens, {"memory": memory[:, :, order], "valid_length": valid}
        )
        gaps.append(np.abs(to_numpy(a) - to_numpy(b)).max())
    assert gaps[0] < 1e-5 < 1e-3 < gaps[1]


@pytest.mark.torch_ok
@pytest.mark.parametrize("stop_memory_gradient", [True, False])
def test_gradient_reaches_the_previous_segment_only_without_stop_gradient(
    stop_memory_gradient,
):
    """Loss of segment 2 after segment 1, both in one graph: its gradient
    with respect to the memory that segment 1 read is zero under the
    paper's stop-gradient and non-zero without it."""
    backbone = _backbone(stop_memory_gradient=stop_memory_gradient)
    lm = TransformerXLCausalLM(backbone)
    lm.build()
    rng = np.random.default_rng(4)
    tokens = rng.integers(0, 30, (2, 8)).astype("int32")
    targets = ops.convert_to_tensor(rng.integers(0, 30, (2, 4)), "int32")
    start = rng.normal(size=(2, 2, 8, 16)).astype("float32")
    valid = ops.convert_to_tensor(np.array([8, 3], "int32"))

    def second_segment_loss(memory):
        _, memory = lm.call_with_memory(
            tokens[:, :4], {"memory": memory, "valid_length": valid}
        )
        logits, _ = lm.call_with_memory(tokens[:, 4:], memory)
        return ops.mean(
            keras.losses.sparse_categorical_crossentropy(
                targets, logits, from_logits=True
            )
        )

    (grad,) = gradients(second_segment_loss, [start])
    if stop_memory_gradient:
        np.testing.assert_array_equal(grad, 0.0)
    else:
        assert np.abs(grad).max() > 1e-6
        # Invalid (empty) slots of example 1 get nothing.
        np.testing.assert_array_equal(grad[1, :, :5], 0.0)


def test_ablation_configs_save_and_load(tmp_path):
    # Both new layer classes (learned positions, memory without SG).
    backbone = _backbone(
        num_layers=1,
        position_encoding="learned_relative",
        max_relative_distance=5,
        stop_memory_gradient=False,
    )
    config = backbone.get_config()
    restored = AblationTransformerXLBackbone.from_config(config)
    assert restored.get_config() == config
    # Saved when `TransformerXLBackbone` took these arguments: still loads.
    assert TransformerXLBackbone.from_config(config).get_config() == config
    tokens = np.random.default_rng(5).integers(0, 30, (2, 4))
    expected, _ = backbone.call_with_memory(tokens)
    path = str(tmp_path / "backbone.keras")
    backbone.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    got, _ = loaded.call_with_memory(tokens)
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), atol=1e-6)
    absolute = _backbone(position_encoding="absolute").get_config()
    assert TransformerXLBackbone.from_config(absolute).get_config() == absolute
    paper = _backbone().get_config()  # the paper's setting: the paper's model
    assert (
        type(TransformerXLBackbone.from_config(paper)) is TransformerXLBackbone
    )


def test_default_adds_no_weights():
    names = [w.path for w in _backbone().weights]
    assert not any("distance" in name for name in names)
    assert any("position/kernel" in name for name in names)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"position_encoding": "rotary"}, "position_encoding"),
        ({"position_encoding": "learned_relative"}, "max_relative_distance"),
        ({"max_relative_distance": 4}, "only to"),
        ({"stop_memory_gradient": 0}, "stop_memory_gradient"),
    ],
)
def test_invalid_ablation_arguments(options, match):
    with pytest.raises(ValueError, match=match):
        _backbone(**options)
