import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.layers import AdaptiveEmbedding
from keras_txl.layers import AdaptiveSoftmax
from tests.test_case import FIXTURES
from tests.test_case import to_numpy

FIXTURE = FIXTURES / "official_adaptive_prelnorm.npz"


def _official_softmax(data, cluster_order="pytorch", reverse_clusters=False):
    """The fixture's adaptive softmax: div_val 2, tie_projs [F, T, T]. The
    authors' PyTorch code reads its clusters in the "pytorch" order;
    `reverse_clusters` stores its cluster rows in the other order."""
    embedding = AdaptiveEmbedding(
        vocabulary_size=200,
        embedding_dim=32,
        output_dim=32,
        cutoffs=[20, 80],
        div_val=2,
    )
    softmax = AdaptiveSoftmax(
        vocabulary_size=200,
        cutoffs=[20, 80],
        div_val=2,
        embedding=embedding,
        tie_weights=True,
        tie_projections=[False, True, True],
        cluster_order=cluster_order,
    )
    softmax.build((None, None, 32))
    for i in range(3):
        embedding.embeddings[i].assign(
            data[f"param/word_emb.emb_layers.{i}.weight"]
        )
        embedding.projections[i].assign(data[f"param/word_emb.emb_projs.{i}"].T)
        softmax.biases[i].assign(data[f"param/crit.out_layers.{i}.bias"])
    softmax.projections[0].assign(data["param/crit.out_projs.0"].T)
    rows = slice(None, None, -1 if reverse_clusters else 1)
    softmax.cluster_kernel.assign(data["param/crit.cluster_weight"][rows])
    softmax.cluster_bias.assign(data["param/crit.cluster_bias"][rows])
    return softmax


@pytest.mark.torch_ok
def test_cluster_orders():
    """Tail cluster i reads head column cutoffs[0] + i - 1 ("tensorflow")
    or -i ("pytorch"): with 2 tail clusters, the "tensorflow" order on the
    cluster rows reversed is the fixture's "pytorch" order, and the wrong
    order is far off."""
    data = np.load(FIXTURE)
    hidden, targets = data["hidden_s1"], data["tokens"][:, 6:11]
    tensorflow = _official_softmax(data, "tensorflow", reverse_clusters=True)
    np.testing.assert_allclose(
        ops.convert_to_numpy(tensorflow(hidden)), data["logprobs_s1"], atol=1e-5
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(tensorflow(hidden, targets)),
        data["nll_s1"],
        atol=1e-5,
    )
    wrong = _official_softmax(data, "tensorflow")
    error = np.abs(ops.convert_to_numpy(wrong(hidden)) - data["logprobs_s1"])
    assert error[..., :20].max() < 1e-5  # the head's own ids agree
    assert error[..., 20:].max() > 0.1  # every tail reads another column
    assert tensorflow.get_config()["cluster_order"] == "tensorflow"
    assert AdaptiveSoftmax(vocabulary_size=9).cluster_order == "tensorflow"
    # A config saved before the argument keeps the order it was built with.
    config = wrong.get_config()
    del config["cluster_order"]
    assert AdaptiveSoftmax.from_config(config).cluster_order == "pytorch"
    with pytest.raises(ValueError, match="cluster_order.*'tensorflow'"):
        AdaptiveSoftmax(vocabulary_size=9, cluster_order="hf")


@pytest.mark.torch_ok
def test_matches_official_log_probs_and_nll():
    data = np.load(FIXTURE)
    softmax = _official_softmax(data)
    # Own weights: 3 biases, projection 0 and the cluster kernel and bias.
    assert len(softmax.projections) == 3 and softmax.projections[1] is None
    assert len(softmax.trainable_weights) == 6 + 6  # + the embedding's
    for s in range(4):
        hidden = data[f"hidden_s{s}"]
        targets = data["tokens"][:, 5 * s + 1 : 5 * s + 6]
        log_probs = ops.convert_to_numpy(softmax(hidden))
        nll = ops.convert_to_numpy(softmax(hidden, targets))
        np.testing.assert_allclose(log_probs, data[f"logprobs_s{s}"], atol=1e-5)
        np.testing.assert_allclose(nll, data[f"nll_s{s}"], atol=1e-5)


def _random_softmax(div_val, embedding_dim, cutoffs, tail_capacity=None):
    return AdaptiveSoftmax(
        vocabulary_size=40,
        cutoffs=cutoffs,
        div_val=div_val,
        embedding_dim=embedding_dim,
        tail_capacity=tail_capacity,
        kernel_initializer="random_normal",
        bias_initializer="random_normal",
    )


# Targets of the tail clusters [10, 25) and [25, 40): 2 and 1 of 12.
TARGETS = np.array([[0, 3, 9, 12, 1, 2], [30, 7, 24, 5, 6, 8]])


@pytest.mark.torch_ok
@pytest.mark.parametrize(
    "div_val, embedding_dim, cutoffs, tail_capacity",
    [
        (1, 8, [10, 25], None),  # sliced kernel, no projection
        (1, 6, [10, 25], 0.2),  # projections; both tails gathered (<= 3)
        (2, 8, [10, 25], 0.05),  # cluster 1: 2 targets > 1, every token
        (2, 8, [], None),  # one cluster: a projected softmax
    ],
)
def test_nll_is_minus_the_log_prob_of_the_target(
    div_val, embedding_dim, cutoffs, tail_capacity
):
    softmax = _random_softmax(div_val, embedding_dim, cutoffs, tail_capacity)
    hidden = np.random.default_rng(0).normal(size=(2, 6, 8)).astype("float32")
    log_probs = ops.convert_to_numpy(softmax(hidden))
    assert log_probs.shape == (2, 6, 40)
    # A distribution over the vocabulary.
    np.testing.assert_allclose(np.exp(log_probs).sum(-1), 1.0, atol=1e-5)
    nll = ops.convert_to_numpy(softmax(hidden, TARGETS))
    expected = -np.take_along_axis(log_probs, TARGETS[..., None], -1)[..., 0]
    np.testing.assert_allclose(nll, expected, atol=1e-5)


@pytest.mark.torch_ok
def test_per_cluster_nll_trains_like_the_full_log_softmax():
    """One SGD step on the per-cluster NLL (compiled, with `tail_capacity`
    gathering the tail tokens) moves every weight as one step on the
    cross-entropy of the full log-probabilities."""
    hidden = np.random.default_rng(1).normal(size=(2, 6, 8)).astype("float32")
    models = []
    for targets_input in (True, False):
        softmax = _random_softmax(2, 8, [10, 25], tail_capacity=0.25)
        inputs = [keras.Input((6, 8))]
        if targets_input:
            inputs.append(keras.Input((6,), dtype="int32"))
        model = keras.Model(inputs, softmax(*inputs))
        model.compile(
            optimizer=keras.optimizers.SGD(1.0),
            loss=(lambda y, nll: nll)
            if targets_input
            else keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        models.append(model)
    models[1].set_weights(models[0].get_weights())
    models[0].train_on_batch([hidden, TARGETS], np.zeros((2, 6)))
    models[1].train_on_batch(hidden, TARGETS)
    for mine, full in zip(models[0].get_weights(), models[1].get_weights()):
        np.testing.assert_allclose(mine, full, atol=1e-5)


def test_tied_variables_are_the_embeddings():
    embedding = AdaptiveEmbedding(
        vocabulary_size=40, embedding_dim=6, output_dim=8, cutoffs=[10, 25]
    )
    softmax = AdaptiveSoftmax(
        vocabulary_size=40,
        cutoffs=[10, 25],
        embedding=embedding,
        tie_weights=True,
        tie_projections=[True, False, True],
    )
    softmax.build((2, 8))
    assert softmax.embedding_dim == 6
    assert softmax._kernel(0) is embedding.embeddings[0]
    # div_val == 1: the embedding's single projection serves clusters 0, 2.
    assert softmax._projection(0) is embedding.projections[0]
    assert softmax._projection(2) is embedding.projections[0]
    assert softmax._projection(1) is softmax.projections[1]
    own = {id(w) for w in softmax._trainable_variables}
    assert id(embedding.embeddings[0]) not in own
    # Tracked once: own weights (one bias and one projection with
    # div_val == 1, the cluster kernel and bias) and the embedding's table
    # and projection.
    assert len(softmax.trainable_weights) == 4 + 2


def test_config_round_trip_with_embedding():
    embedding = AdaptiveEmbedding(
        vocabulary_size=40,
        embedding_dim=8,
        output_dim=8,
        cutoffs=[10],
        div_val=2,
    )
    softmax = AdaptiveSoftmax(
        vocabulary_size=40,
        cutoffs=[10],
        div_val=2,
        embedding=embedding,
        tie_weights=True,
        tie_projections=True,
        tail_capacity=0.5,
    )
    config = softmax.get_config()
    clone = AdaptiveSoftmax.from_config(config)
    assert isinstance(clone.embedding, AdaptiveEmbedding)
    assert clone.embedding is not embedding
    assert clone.tie_projections == [True, True]
    assert clone.get_config() == config
    hidden = np.ones((1, 2, 8), "float32")
    assert tuple(clone(hidden).shape) == (1, 2, 40)


def _tied_functional_model():
    """A user's own functional model: 13 weights, 6 of them the
    embedding's, which the softmax shares."""
    tokens = keras.Input((None,), dtype="int32")
    embedding = AdaptiveEmbedding(
        vocabulary_size=40,
        embedding_dim=8,
        output_dim=8,
        cutoffs=[10, 25],
        div_val=2,
    )
    hidden = keras.layers.Dense(8)(embedding(tokens))  # (batch, T, 8)
    softmax = AdaptiveSoftmax(
        vocabulary_size=40,
        cutoffs=[10, 25],
        div_val=2,
        embedding=embedding,
        tie_weights=True,
        tie_projections=True,
    )
    return keras.Model(tokens, softmax(hidden))


@pytest.mark.torch_ok
def test_clone_model_and_load_model_keep_the_tie(tmp_path):
    model = _tied_functional_model()
    assert len(model.weights) == 13
    model.save(tmp_path / "tied.keras")
    copies = {
        "clone_model": keras.models.clone_model(model),
        "load_model": keras.saving.load_model(tmp_path / "tied.keras"),
    }
    copies["clone of a clone"] = keras.models.clone_model(copies["clone_model"])
    originals = {id(w) for w in model.weights}
    ids = np.array([[1, 12, 39, 0]], "int32")
    for how, copy in copies.items():
        embedding, softmax = copy.layers[1], copy.layers[-1]
        assert len(copy.weights) == 13, how
        assert softmax.embedding is embedding, how
        assert softmax._kernel(2) is embedding.embeddings[2], how
        # A copy, not a view of the original's variables.
        assert not originals & {id(w) for w in copy.weights}, how
        copy.set_weights(model.get_weights())
        np.testing.assert_allclose(
            to_numpy(copy(ids)), to_numpy(model(ids)), atol=1e-6
        )


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"cutoffs": [10, 10]}, "cutoffs"),
        ({"cutoffs": [40]}, "cutoffs"),
        ({"div_val": 0}, "div_val"),
        ({"tie_weights": True}, "embedding"),
        ({"tie_projections": [True]}, "tie_projections"),
        ({"tail_capacity": 0.0}, "tail_capacity"),
        ({"tail_capacity": 1.5}, "tail_capacity"),
        ({"embedding": "table"}, "embedding"),
    ],
)
def test_invalid_arguments_name_the_argument(kwargs, argument):
    arguments = dict(vocabulary_size=40, cutoffs=[10, 25], embedding_dim=8)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=f"`{argument}`"):
        AdaptiveSoftmax(**arguments)


def test_mismatched_embedding_is_refused():
    embedding = AdaptiveEmbedding(
        vocabulary_size=40, embedding_dim=8, output_dim=8, cutoffs=[10]
    )
    with pytest.raises(ValueError, match="`cutoffs`"):
        AdaptiveSoftmax(
            vocabulary_size=40,
            cutoffs=[12],
            embedding=embedding,
            tie_weights=True,
        )
