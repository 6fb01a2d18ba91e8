import keras
import numpy as np
from keras import ops

from keras_txl.utils.validation import check_positive_int


def check_cutoffs(cutoffs, vocabulary_size):
    """Checks adaptive cutoffs and returns them as a tuple of ints.

    Cutoffs split the token ids `[0, vocabulary_size)` into clusters
    `[0, c_0), [c_0, c_1), ..., [c_last, vocabulary_size)`. They must be
    strictly increasing integers in `(0, vocabulary_size)`.
    """
    if cutoffs is None:
        return ()
    if isinstance(cutoffs, (int, np.integer, str, bytes)):
        raise ValueError(
            "`cutoffs` must be a list of integers (the first token id of "
            f"each tail cluster). Received: cutoffs={cutoffs!r}"
        )
    values = list(cutoffs)
    ok = all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool)
        for v in values
    )
    ok = ok and all(0 < v < vocabulary_size for v in values)
    ok = ok and all(a < b for a, b in zip(values, values[1:]))
    if not ok:
        raise ValueError(
            "`cutoffs` must be strictly increasing integers, each > 0 and "
            f"< vocabulary_size={vocabulary_size}. Received: "
            f"cutoffs={cutoffs!r}"
        )
    return tuple(int(v) for v in values)


def check_div_val(div_val, embedding_dim, num_clusters):
    """Checks `div_val`: an int >= 1 that leaves every cluster at least one
    dimension (`embedding_dim // div_val**i >= 1`)."""
    div_val = check_positive_int("div_val", div_val)
    smallest = embedding_dim // div_val ** (num_clusters - 1)
    if smallest < 1:
        raise ValueError(
            f"`div_val` leaves the last of the {num_clusters} clusters no "
            f"dimension: embedding_dim // div_val**{num_clusters - 1} = "
            f"{embedding_dim} // {div_val ** (num_clusters - 1)} = 0. Use a "
            f"smaller `div_val` or fewer `cutoffs`. Received: "
            f"div_val={div_val}"
        )
    return div_val


def cluster_bounds(cutoffs, vocabulary_size):
    """`[(0, c_0), (c_0, c_1), ..., (c_last, vocabulary_size)]`."""
    ends = (0,) + tuple(cutoffs) + (vocabulary_size,)
    return tuple(zip(ends[:-1], ends[1:]))


def cluster_layout(vocabulary_size, embedding_dim, cutoffs, div_val):
    """The authors' adaptive layout: `(tables, dims)`, the shapes
    `(rows, width)` of the tables (one `(vocabulary_size, embedding_dim)`
    with `div_val == 1`, else one per cluster) and the width
    `embedding_dim // div_val**i` of each cluster."""
    dims = [embedding_dim // div_val**i for i in range(len(cutoffs) + 1)]
    if div_val == 1:
        return [(vocabulary_size, embedding_dim)], dims
    bounds = cluster_bounds(cutoffs, vocabulary_size)
    tables = [(end - start, dim) for (start, end), dim in zip(bounds, dims)]
    return tables, dims


@keras.saving.register_keras_serializable(package="keras_txl")
class AdaptiveEmbedding(keras.layers.Layer):
    """Adaptive input embeddings (Baevski & Auli, 2019), as Transformer-XL.

    The token ids are split by `cutoffs` into clusters: the frequent ids
    `[0, cutoffs[0])` first, then `[cutoffs[0], cutoffs[1])`, and so on up
    to `vocabulary_size` (ids must be sorted by frequency, most frequent
    first). Cluster `i` has its own table of width
    `embedding_dim // div_val**i` and a projection to `output_dim`, so rare
    tokens get fewer parameters. This computes what the authors'
    `AdaptiveEmbedding` (kimiyoung/transformer-xl, `mem_transformer.py`)
    computes, without its final scaling by `sqrt(output_dim)`, which
    `TransformerXLBackbone` applies to either embedding.

    With `div_val == 1` there is a single table `(vocabulary_size,
    embedding_dim)` and, only if `embedding_dim != output_dim`, one
    projection. With `div_val > 1` every cluster has a table and a
    projection (also cluster 0, as in the authors' code).

    Every cluster is looked up and projected for every token and the
    results are merged with a mask: static shapes (for `jit`), at a cost of
    `sum_i embedding_dim_i * output_dim` multiply-adds per token.

    Weights, in Keras layout: `embeddings[i]` of shape `(size_i, dim_i)`
    (the authors' `emb_layers.i.weight`) and `projections[i]` of shape
    `(dim_i, output_dim)` (the transpose of the authors' `emb_projs.i`).
    `AdaptiveSoftmax` can share both.

    Args:
        vocabulary_size: int. Number of token ids.
        embedding_dim: int. Width of the table of cluster 0 (`d_embed`).
        output_dim: int. Width of the output (`d_proj`, the model width).
        cutoffs: list of int. First token id of each tail cluster,
            strictly increasing, in `(0, vocabulary_size)`. Empty (default)
            means a single cluster.
        div_val: int >= 1. Cluster `i` has width
            `embedding_dim // div_val**i`.
        embeddings_initializer: initializer of the tables.
        projection_initializer: initializer of the projections.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: int tensor of token ids in `[0, vocabulary_size)`, any
            shape `(...)` (not checked, as `keras.layers.Embedding`: JAX
            clamps out-of-range ids).

    Returns:
        A tensor of shape `(..., output_dim)` in the layer's compute dtype.

    Example:

    >>> import numpy as np
    >>> layer = AdaptiveEmbedding(
    ...     vocabulary_size=100, embedding_dim=16, output_dim=8,
    ...     cutoffs=[10, 40], div_val=2,
    ... )
    >>> tuple(layer(np.array([[1, 20, 99]])).shape)
    (1, 3, 8)
    >>> [tuple(w.shape) for w in layer.embeddings]
    [(10, 16), (30, 8), (60, 4)]
    """

    def __init__(
        self,
        vocabulary_size,
        embedding_dim,
        output_dim,
        cutoffs=(),
        div_val=1,
        embeddings_initializer="uniform",
        projection_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = check_positive_int(
            "vocabulary_size", vocabulary_size
        )
        self.embedding_dim = check_positive_int("embedding_dim", embedding_dim)
        self.output_dim = check_positive_int("output_dim", output_dim)
        self.cutoffs = check_cutoffs(cutoffs, self.vocabulary_size)
        self.div_val = check_div_val(
            div_val, self.embedding_dim, len(self.cutoffs) + 1
        )
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
        )
        self.projection_initializer = keras.initializers.get(
            projection_initializer
        )

    @property
    def cluster_bounds(self):
        """`((start, end), ...)`: the token ids of each cluster."""
        return cluster_bounds(self.cutoffs, self.vocabulary_size)

    def build(self, inputs_shape=None):
        tables, _ = cluster_layout(
            self.vocabulary_size, self.embedding_dim, self.cutoffs, self.div_val
        )
        project = self.div_val != 1 or self.embedding_dim != self.output_dim
        self.embeddings = [
            self.add_weight(
                name=f"embeddings_{i}",
                shape=shape,
                initializer=self.embeddings_initializer,
            )
            for i, shape in enumerate(tables)
        ]
        self.projections = []
        if project:
            self.projections = [
                self.add_weight(
                    name=f"projection_{i}",
                    shape=(dim, self.output_dim),
                    initializer=self.projection_initializer,
                )
                for i, (_, dim) in enumerate(tables)
            ]
        self.built = True

    def _embed(self, table, projection, ids):
        x = ops.take(ops.cast(table, self.compute_dtype), ids, axis=0)
        if projection is not None:
            x = ops.matmul(x, ops.cast(projection, self.compute_dtype))
        return x  # (..., output_dim)

    def call(self, inputs):
        ids = ops.cast(inputs, "int32")
        if self.div_val == 1:
            projection = self.projections[0] if self.projections else None
            return self._embed(self.embeddings[0], projection, ids)
        output = None
        for (start, end), table, projection in zip(
            self.cluster_bounds, self.embeddings, self.projections
        ):
            in_cluster = ops.logical_and(ids >= start, ids < end)  # (...)
            local_ids = ops.clip(ids - start, 0, end - start - 1)
            x = self._embed(table, projection, local_ids)  # (..., output)
            x = ops.where(ops.expand_dims(in_cluster, -1), x, 0.0)
            output = x if output is None else output + x
        return output  # (..., output_dim)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "embedding_dim": self.embedding_dim,
                "output_dim": self.output_dim,
                "cutoffs": list(self.cutoffs),
                "div_val": self.div_val,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
                "projection_initializer": keras.initializers.serialize(
                    self.projection_initializer
                ),
            }
        )
        return config
