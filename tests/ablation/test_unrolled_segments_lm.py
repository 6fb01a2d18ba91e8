import functools

import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.ablation import AblationTransformerXLBackbone
from keras_txl.ablation import UnrolledSegmentsLM
from tests.test_case import to_numpy
from tests.test_case import variable_gradients
from tests.tiny_models import PLAIN_LM
from tests.tiny_models import tiny_lm

_lm = functools.partial(tiny_lm, **PLAIN_LM)


@pytest.mark.torch_ok
def test_k_segments_in_one_call_equal_k_calls():
    lm = _lm()
    model = UnrolledSegmentsLM(lm, segment_length=4)
    tokens = np.random.default_rng(0).integers(0, 20, (2, 16)).astype("int32")
    model.reset_memory()
    unrolled = [to_numpy(model(tokens[:, :8])), to_numpy(model(tokens[:, 8:]))]
    unrolled_memory = to_numpy(lm.memory_state.read(2)["memory"])
    lm.reset_memory()
    one_by_one = [to_numpy(lm(tokens[:, s : s + 4])) for s in range(0, 16, 4)]
    np.testing.assert_allclose(
        np.concatenate(unrolled, 1), np.concatenate(one_by_one, 1), atol=1e-5
    )
    np.testing.assert_allclose(
        unrolled_memory, to_numpy(lm.memory_state.read(2)["memory"]), atol=1e-5
    )


@pytest.mark.torch_ok
@pytest.mark.parametrize("stop_memory_gradient", [True, False])
def test_second_segment_backpropagates_into_the_first_only_without_sg(
    stop_memory_gradient,
):
    """The gradient of segment 2's loss in the unrolled graph equals the
    gradient with segment 1's memory held constant exactly when the
    memory's gradient is stopped."""
    lm = _lm(
        backbone_class=AblationTransformerXLBackbone,
        stop_memory_gradient=stop_memory_gradient,
    )
    model = UnrolledSegmentsLM(lm, segment_length=4)
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 20, (2, 8)).astype("int32")
    targets = ops.convert_to_tensor(rng.integers(0, 20, (2, 4)), "int32")
    _, memory = lm.call_with_memory(tokens[:, :4])
    frozen = {k: ops.convert_to_tensor(to_numpy(v)) for k, v in memory.items()}

    def loss(logits):
        return ops.mean(
            keras.losses.sparse_categorical_crossentropy(
                targets, logits, from_logits=True
            )
        )

    def unrolled():
        model.reset_memory()
        return loss(model(tokens)[:, 4:])

    def held():
        return loss(lm.call_with_memory(tokens[:, 4:], frozen)[0])

    weights = lm.backbone.trainable_weights
    a = variable_gradients(unrolled, weights)
    b = variable_gradients(held, weights)
    gap = max(np.abs(x - y).max() for x, y in zip(a, b))
    if stop_memory_gradient:
        assert gap < 1e-5
    else:
        assert gap > 1e-4


def test_batch_length_must_be_a_multiple_of_the_segment():
    model = UnrolledSegmentsLM(_lm(), segment_length=4)
    # `fit` builds the optimizer before the step's first trace
    # (`build_optimizer_first`): TensorFlow traces it once.
    model.compile(optimizer="sgd", loss="mse")
    model.make_train_function()
    assert model.optimizer.built
    with pytest.raises(ValueError, match="multiple"):
        model(np.zeros((2, 6), "int32"))
    with pytest.raises(ValueError, match="TransformerXLCausalLM"):
        UnrolledSegmentsLM(keras.Sequential([]), segment_length=4)
