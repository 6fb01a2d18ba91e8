import functools

import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.layers import AdaptiveEmbedding
from keras_txl.layers import AdaptiveSoftmax
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from tests.tiny_models import tiny_backbone

_backbone = functools.partial(
    tiny_backbone, seed=None, vocabulary_size=40, num_layers=1
)


def test_plain_backbone_keeps_its_embedding_and_output():
    backbone = _backbone()
    assert type(backbone.token_embedding) is keras.layers.Embedding
    assert backbone.token_embedding.name == "token_embedding"
    assert TransformerXLCausalLM(backbone).adaptive_softmax is None
    with pytest.raises(ValueError, match="`tie_projections`"):
        TransformerXLCausalLM(backbone, tie_projections=True)


def test_adaptive_backbone_config_round_trip():
    backbone = _backbone(cutoffs=[10, 25], div_val=2, embedding_dim=8)
    assert isinstance(backbone.token_embedding, AdaptiveEmbedding)
    config = backbone.get_config()
    assert config["cutoffs"] == [10, 25] and config["div_val"] == 2
    clone = TransformerXLBackbone.from_config(config)
    assert clone.token_embedding.cutoffs == (10, 25)
    # `embedding_dim` alone makes the embedding adaptive (projected).
    projected = _backbone(embedding_dim=4)
    assert len(projected.token_embedding.projections) == 1


def _fit_data():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 40, size=(2, 6)).astype("int32")
    y = np.array([[0, 3, 12, 30, 1, 2], [39, 7, 24, 5, 10, 8]], "int32")
    return x, y


@pytest.mark.torch_ok
def test_fit_trains_on_the_per_cluster_nll():
    lm = TransformerXLCausalLM(
        _backbone(cutoffs=[10, 25], div_val=2), tail_capacity=0.25
    )
    assert isinstance(lm.adaptive_softmax, AdaptiveSoftmax)
    assert lm.tie_projections == [False, True, True]  # the default
    lm.build_memory(2)
    traced = []
    nll = lm.adaptive_softmax._negative_log_likelihood

    def spy(*args):
        traced.append(1)
        return nll(*args)

    lm.adaptive_softmax._negative_log_likelihood = spy
    x, y = _fit_data()
    lm.compile(optimizer="sgd", weighted_metrics=[])
    before = ops.convert_to_numpy(lm.backbone.token_embedding.embeddings[1])
    lm.fit(x, y, batch_size=2, verbose=0)
    assert traced, "fit did not use the per-cluster NLL"
    after = ops.convert_to_numpy(lm.backbone.token_embedding.embeddings[1])
    assert not np.allclose(before, after)  # the tied tail table trains
    # evaluate: the mean NLL of the log-probabilities, same memory.
    lm.reset_memory()
    loss = lm.evaluate(x, y, batch_size=2, verbose=0)
    lm.reset_memory()
    log_probs = ops.convert_to_numpy(lm.predict(x, batch_size=2, verbose=0))
    expected = -np.take_along_axis(log_probs, y[..., None], -1).mean()
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


@pytest.fixture(scope="module")
def tied_lm():
    return TransformerXLCausalLM(
        _backbone(cutoffs=[10, 25], div_val=2, embedding_dim=8),
        tie_projections=[True, False, True],
    )


@pytest.mark.torch_ok
def test_compute_loss_matches_the_compiled_loss(tied_lm):
    lm = tied_lm
    lm.build_memory(2)
    x, y = _fit_data()
    weights = np.array([[1, 1, 1, 0, 0, 1], [1, 0, 1, 1, 1, 1]], "float32")
    log_probs = lm(x)
    assert lm._step_record.tensors["logits"] is log_probs
    loss = lm.compute_loss(x, y, log_probs, sample_weight=weights)
    assert lm._step_record.tensors == {}  # consumed
    expected = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
        y, log_probs, sample_weight=weights
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(loss), ops.convert_to_numpy(expected), rtol=1e-5
    )
    # Without the hidden states of `log_probs`: the compiled loss itself.
    again = lm.compute_loss(x, y, log_probs, sample_weight=weights)
    np.testing.assert_allclose(
        ops.convert_to_numpy(again), ops.convert_to_numpy(expected), rtol=1e-5
    )


@pytest.mark.torch_ok
def test_saving_keeps_the_tied_weights(tied_lm, tmp_path):
    lm = tied_lm
    tokens = np.array([[1, 12, 39, 3]])
    expected, _ = lm.call_with_memory(tokens)
    lm.save(tmp_path / "lm.keras")
    loaded = keras.models.load_model(tmp_path / "lm.keras")
    softmax = loaded.adaptive_softmax
    assert softmax.embedding is loaded.backbone.token_embedding
    assert softmax._kernel(2) is softmax.embedding.embeddings[2]
    assert softmax._projection(2) is softmax.embedding.projections[2]
    assert loaded.tie_projections == [True, False, True]
    got, _ = loaded.call_with_memory(tokens)
    np.testing.assert_allclose(
        ops.convert_to_numpy(got), ops.convert_to_numpy(expected), atol=1e-6
    )


def test_cluster_order_is_saved_and_old_configs_keep_theirs():
    """New models use the TensorFlow/HuggingFace cluster order; a config
    saved before `cluster_order` existed loads with the PyTorch order it
    was built with; a copy from a config keeps the order."""
    backbone = _backbone(cutoffs=[10, 25], div_val=2)
    lm = TransformerXLCausalLM(backbone)
    assert lm.cluster_order == "tensorflow"
    assert lm.adaptive_softmax.cluster_order == "tensorflow"
    config = lm.get_config()
    assert config["cluster_order"] == "tensorflow"
    clone = TransformerXLCausalLM.from_config(config)
    assert clone.adaptive_softmax.cluster_order == "tensorflow"
    del config["cluster_order"]
    old = TransformerXLCausalLM.from_config(config)
    assert old.adaptive_softmax.cluster_order == "pytorch"
    pytorch = TransformerXLCausalLM(backbone, cluster_order="pytorch")
    assert pytorch.with_memory_length(2).cluster_order == "pytorch"
    with pytest.raises(ValueError, match="cluster_order"):
        TransformerXLCausalLM(backbone, cluster_order="PyTorch")


def test_zero_starting_memory_and_tensorflow_mask():
    backbone = _backbone(same_length="tensorflow", layer_norm_epsilon=1e-12)
    config = backbone.get_config()
    assert config["same_length"] == "tensorflow"
    assert config["layer_norm_epsilon"] == 1e-12
    clone = TransformerXLBackbone.from_config(config)
    assert clone.transformer_layers[0].attention.same_length == "tensorflow"
    empty = backbone.initial_memory(3)
    zeros = backbone.initial_memory(3, memory_length=5, start="zeros")
    assert ops.convert_to_numpy(empty["valid_length"]).tolist() == [0] * 3
    assert ops.convert_to_numpy(zeros["valid_length"]).tolist() == [5] * 3
    assert not np.any(ops.convert_to_numpy(zeros["memory"]))
    tokens = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], "int32")
    a, _ = backbone.call_with_memory(tokens, empty)
    b, _ = backbone.call_with_memory(tokens, zeros)
    # Attended zero vectors change the output.
    assert (
        np.abs(ops.convert_to_numpy(a) - ops.convert_to_numpy(b)).max() > 1e-4
    )
    with pytest.raises(ValueError, match="'zeros'"):
        backbone.initial_memory(3, start="zero")
