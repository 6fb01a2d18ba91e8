import numpy as np
import pytest
from keras import ops

from keras_txl.layers import AdaptiveEmbedding
from tests.test_case import FIXTURES

FIXTURE = FIXTURES / "official_adaptive_prelnorm.npz"


def _reference(layer, ids):
    """The authors' AdaptiveEmbedding (unscaled), in numpy."""
    tables = [ops.convert_to_numpy(t) for t in layer.embeddings]
    projections = [ops.convert_to_numpy(p) for p in layer.projections]
    if layer.div_val == 1:
        out = tables[0][ids]
        return out @ projections[0] if projections else out
    out = np.zeros(ids.shape + (layer.output_dim,), "float32")
    for i, (start, end) in enumerate(layer.cluster_bounds):
        mask = (ids >= start) & (ids < end)
        out[mask] = tables[i][ids[mask] - start] @ projections[i]
    return out


@pytest.mark.torch_ok
def test_matches_official_embedding_output():
    data = np.load(FIXTURE)
    layer = AdaptiveEmbedding(
        vocabulary_size=200,
        embedding_dim=32,
        output_dim=32,
        cutoffs=[20, 80],
        div_val=2,
    )
    layer.build()
    for i in range(3):
        layer.embeddings[i].assign(
            data[f"param/word_emb.emb_layers.{i}.weight"]
        )
        # torch [d_proj, dim] -> keras (dim, d_proj)
        layer.projections[i].assign(data[f"param/word_emb.emb_projs.{i}"].T)
    tokens = data["tokens"][:, :5]
    # The model scales by sqrt(d_model); mems_s0[0] is the scaled output.
    output = ops.convert_to_numpy(layer(tokens)) * np.sqrt(32.0)
    np.testing.assert_allclose(output, data["mems_s0"][0], atol=1e-5)


@pytest.mark.parametrize(
    "embedding_dim, cutoffs, div_val, num_projections",
    [
        (8, [], 1, 0),  # a plain embedding
        (6, [5, 12], 1, 1),  # one table, one projection
        (8, [5, 12], 2, 3),  # one table and projection per cluster
        (8, [], 2, 1),  # div_val > 1 always projects
    ],
)
def test_layout_and_values(embedding_dim, cutoffs, div_val, num_projections):
    layer = AdaptiveEmbedding(
        vocabulary_size=20,
        embedding_dim=embedding_dim,
        output_dim=8,
        cutoffs=cutoffs,
        div_val=div_val,
        embeddings_initializer="random_normal",
    )
    ids = np.array([[0, 4, 5, 11], [12, 19, 3, 7]])
    output = ops.convert_to_numpy(layer(ids))
    assert output.shape == (2, 4, 8)
    assert len(layer.projections) == num_projections
    np.testing.assert_allclose(output, _reference(layer, ids), atol=1e-6)
    if div_val > 1:
        expected = [
            (end - start, embedding_dim // div_val**i)
            for i, (start, end) in enumerate(layer.cluster_bounds)
        ]
        assert [tuple(t.shape) for t in layer.embeddings] == expected


def test_config_round_trip():
    layer = AdaptiveEmbedding(
        vocabulary_size=20,
        embedding_dim=8,
        output_dim=4,
        cutoffs=[5, 12],
        div_val=2,
        name="emb",
    )
    config = layer.get_config()
    clone = AdaptiveEmbedding.from_config(config)
    assert clone.get_config() == config
    assert clone.cutoffs == (5, 12) and clone.div_val == 2


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"cutoffs": [12, 5]}, "cutoffs"),
        ({"cutoffs": [5, 5]}, "cutoffs"),
        ({"cutoffs": [0, 5]}, "cutoffs"),
        ({"cutoffs": [5, 20]}, "cutoffs"),
        ({"cutoffs": [2.5]}, "cutoffs"),
        ({"cutoffs": 5}, "cutoffs"),
        ({"div_val": 0}, "div_val"),
        ({"div_val": 1.5}, "div_val"),
        ({"cutoffs": [5, 10], "div_val": 4}, "div_val"),  # 8 // 16 == 0
        ({"embedding_dim": 0}, "embedding_dim"),
    ],
)
def test_invalid_arguments_name_the_argument(kwargs, argument):
    arguments = dict(vocabulary_size=20, embedding_dim=8, output_dim=4)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=f"`{argument}`"):
        AdaptiveEmbedding(**arguments)
