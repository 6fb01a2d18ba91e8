import keras
import numpy as np
from keras import ops

from keras_txl.layers.adaptive_embedding import AdaptiveEmbedding
from keras_txl.layers.adaptive_embedding import check_cutoffs
from keras_txl.layers.adaptive_embedding import check_div_val
from keras_txl.layers.adaptive_embedding import cluster_bounds
from keras_txl.layers.adaptive_embedding import cluster_layout
from keras_txl.utils.initializers import fresh_initializer
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int

CLUSTER_ORDERS = ("tensorflow", "pytorch")


def check_cluster_order(cluster_order):
    """Checks the `cluster_order` of an adaptive softmax."""
    if cluster_order not in CLUSTER_ORDERS:
        raise ValueError(
            "`cluster_order` must be 'tensorflow' (tail cluster i reads head "
            "column cutoffs[0] + i - 1: the authors' TensorFlow code, the "
            "released checkpoints and HuggingFace) or 'pytorch' (column "
            "-i: the authors' PyTorch code). Received: "
            f"cluster_order={cluster_order!r}"
        )
    return cluster_order


def _check_tie_projections(tie_projections, num_clusters):
    """A bool for every cluster, from a bool or a list of bools."""
    if isinstance(tie_projections, (bool, np.bool_)):
        return [bool(tie_projections)] * num_clusters
    if isinstance(tie_projections, (list, tuple)) and (
        len(tie_projections) == num_clusters
        and all(isinstance(v, (bool, np.bool_)) for v in tie_projections)
    ):
        return [bool(v) for v in tie_projections]
    raise ValueError(
        "`tie_projections` must be a bool or a list of one bool per "
        f"cluster ({num_clusters} = len(cutoffs) + 1). Received: "
        f"tie_projections={tie_projections!r}"
    )


@keras.saving.register_keras_serializable(package="keras_txl")
class AdaptiveSoftmax(keras.layers.Layer):
    """Projected adaptive softmax (Grave et al., 2017), as Transformer-XL.

    Computes what the authors' `mask_adaptive_logsoftmax` (their
    TensorFlow code, `tf/model.py`) and `ProjectedAdaptiveLogSoftmax`
    (their PyTorch code, `utils/proj_adaptive_softmax.py`) compute.
    The token ids are split by `cutoffs` into clusters, as in
    `AdaptiveEmbedding`. The *head* scores the ids of cluster 0 and one
    logit per tail cluster; a tail token's log-probability is the head's
    log-probability of its cluster plus its log-probability within the
    cluster:

        log p(t) = log p_head(t)                          if t in cluster 0
        log p(t) = log p_head(cluster i) + log p_i(t)     if t in cluster i

    Each cluster's logits are `(hidden @ P_i^T) @ W_i^T + b_i`: a projection
    `P_i` of shape `(dim_i, input_dim)` to the cluster's width
    `dim_i = embedding_dim // div_val**i`, then the cluster's kernel
    `W_i (size_i, dim_i)` and bias.

    The head's logits are those of cluster 0's ids followed by one per
    tail cluster (rows of `cluster_kernel`). Which of these columns belongs
    to tail cluster `i` (1-based) is `cluster_order`: the authors' two
    implementations disagree, and agree only with one tail cluster.

    - `"tensorflow"` (default): column `cutoffs[0] + i - 1`, row `i - 1`
      of `cluster_kernel`. The authors' TensorFlow code, which trained the
      released checkpoints, and HuggingFace's `TransfoXLLMHeadModel`.
    - `"pytorch"`: column `-i`, row `len(cutoffs) - i`: the authors'
      PyTorch code (`keras_txl.convert.from_official_pytorch` sets it).

    A config saved before this argument existed has no `cluster_order`
    key and loads as `"pytorch"`, the order those models were built with.

    Two outputs:

    - `layer(hidden)`: full log-probabilities `(..., vocabulary_size)`,
      for evaluation and generation.
    - `layer(hidden, targets)`: the negative log-likelihood of each target,
      `(...)`, for training. No `(..., vocabulary_size)` tensor is formed.
      The head is scored for every token. Each tail cluster `i` scores its
      tokens, reduces its logits at once to their log-sum-exp and the logit
      at the target's row, and the results are merged by a mask. Shapes
      stay static (for `jit`):

      * `tail_capacity=None`: each tail cluster scores every token, masked
        afterwards. Per token, `d * (size_0 + len(cutoffs))` multiply-adds
        for the head (`d = input_dim`, cluster 0 is `embedding_dim` wide)
        plus `dim_i * (d + size_i)` per tail cluster, against
        `d * vocabulary_size` for a full softmax: only `div_val > 1` makes
        the tails cheaper.
      * `tail_capacity=f`: each tail cluster gathers `ceil(f * N)` of the
        `N` tokens (its own first, `ops.top_k` on its mask), scores those
        and scatters the results back. Tail cost is then `f * N` rows per
        cluster: with Zipf-distributed tokens, where the tails hold few
        tokens, this is most of adaptive softmax's saving. A batch with
        more than `ceil(f * N)` tokens in a cluster takes the
        every-token branch of an `ops.cond`: the result is exact in
        every case, only slower.

    With `div_val == 1` there is one kernel `(vocabulary_size,
    embedding_dim)` sliced by cluster (the authors' layout), and
    projections only if `embedding_dim != input_dim`.

    Weight tying, as the authors' `tie_weight` and `tie_projs`: with
    `tie_weights=True` the cluster kernels are the tables of `embedding`
    (an `AdaptiveEmbedding`); `tie_projections[i]` shares the projection of
    cluster `i` with `embedding.projections[i]` (`div_val > 1`) or with its
    single projection (`div_val == 1`). The variables are the embedding's
    own: training updates both. Biases and `cluster_kernel` are never
    tied. `get_config()` serializes `embedding`. `keras.models.clone_model`
    of a functional model keeps the tie: the cloned layer, called on the
    clone's tensors, ties to the layer of its embedding's name and config
    upstream of its inputs. Loading a `.keras` file keeps it too (Keras
    restores shared objects once). A layer restored alone from its config
    owns a copy of the embedding, and so does one built from its config
    before it is called (`keras.Model.from_config` outside a saving
    scope). `TransformerXLCausalLM` rebuilds its `AdaptiveSoftmax` on its
    backbone's embedding.

    Log-softmax, log-sum-exp and outputs are float32 under any dtype
    policy.

    Args:
        vocabulary_size: int. Number of token ids.
        cutoffs: list of int. First token id of each tail cluster, strictly
            increasing, in `(0, vocabulary_size)`. Empty: a plain
            (projected) softmax.
        div_val: int >= 1. Cluster `i` has width
            `embedding_dim // div_val**i`.
        embedding_dim: int or `None`. Width of cluster 0 (`d_embed`).
            `None`: `embedding.embedding_dim` if `embedding` is given, else
            the width of the input.
        embedding: optional `AdaptiveEmbedding` to tie to. Its
            `vocabulary_size`, `cutoffs`, `div_val` and `embedding_dim` must
            match.
        tie_weights: bool. Share the kernels with `embedding`'s tables.
        tie_projections: bool, or one bool per cluster
            (`len(cutoffs) + 1`). Share the projections with `embedding`'s.
        tail_capacity: `None` or a float in (0, 1]: the share of the
            tokens of a call with `targets` that each tail cluster scores
            (see above). It needs a static number of tokens; otherwise
            every token is scored.
        cluster_order: `"tensorflow"` (default) or `"pytorch"`: the head
            column of each tail cluster (see above).
        kernel_initializer: initializer of the untied kernels,
            projections and of `cluster_kernel`.
        bias_initializer: initializer of the biases. Each weight draws
            its own values, unless an initializer has an integer seed
            (`keras_txl/utils/initializers.py`).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: float tensor `(..., input_dim)`: hidden states.
        targets: optional int tensor `(...)` of token ids in
            `[0, vocabulary_size)` (not checked: JAX clamps out-of-range
            ids).

    Returns:
        Without `targets`, float32 log-probabilities
        `(..., vocabulary_size)`. With `targets`, the float32 negative
        log-likelihood of each target, `(...)`.

    Example:

    >>> import numpy as np
    >>> embedding = AdaptiveEmbedding(
    ...     vocabulary_size=100, embedding_dim=16, output_dim=8,
    ...     cutoffs=[10, 40], div_val=2,
    ... )
    >>> softmax = AdaptiveSoftmax(
    ...     vocabulary_size=100, cutoffs=[10, 40], div_val=2,
    ...     embedding=embedding, tie_weights=True, tie_projections=True,
    ... )
    >>> hidden = np.random.rand(2, 3, 8).astype("float32")
    >>> log_probs = softmax(hidden)
    >>> tuple(log_probs.shape)
    (2, 3, 100)
    >>> nll = softmax(hidden, np.array([[1, 20, 99], [0, 50, 9]]))
    >>> tuple(nll.shape)
    (2, 3)
    """

    def __init__(
        self,
        vocabulary_size,
        cutoffs=(),
        div_val=1,
        embedding_dim=None,
        embedding=None,
        tie_weights=False,
        tie_projections=False,
        tail_capacity=None,
        cluster_order="tensorflow",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = check_positive_int(
            "vocabulary_size", vocabulary_size
        )
        self.cutoffs = check_cutoffs(cutoffs, self.vocabulary_size)
        num_clusters = len(self.cutoffs) + 1
        if embedding is not None and not isinstance(
            embedding, AdaptiveEmbedding
        ):
            raise ValueError(
                "`embedding` must be an `AdaptiveEmbedding` or None. "
                f"Received: embedding={type(embedding).__name__}"
            )
        if embedding_dim is None and embedding is not None:
            embedding_dim = embedding.embedding_dim
        self.embedding_dim = check_optional_positive_int(
            "embedding_dim", embedding_dim
        )
        self.div_val = check_positive_int("div_val", div_val)
        if self.embedding_dim is not None:
            check_div_val(self.div_val, self.embedding_dim, num_clusters)
        self.tie_weights = check_bool("tie_weights", tie_weights)
        self.tie_projections = _check_tie_projections(
            tie_projections, num_clusters
        )
        if embedding is None and (
            self.tie_weights or any(self.tie_projections)
        ):
            raise ValueError(
                "`tie_weights` and `tie_projections` need the "
                "`AdaptiveEmbedding` to tie to: pass `embedding`. Received: "
                f"tie_weights={tie_weights}, "
                f"tie_projections={tie_projections}, embedding=None"
            )
        if embedding is not None:
            mine = (self.vocabulary_size, self.cutoffs, self.div_val)
            theirs = (
                embedding.vocabulary_size,
                embedding.cutoffs,
                embedding.div_val,
            )
            if mine != theirs or self.embedding_dim != embedding.embedding_dim:
                raise ValueError(
                    "`embedding` must have the same `vocabulary_size`, "
                    "`cutoffs`, `div_val` and `embedding_dim` as this "
                    f"layer. Received: {mine + (self.embedding_dim,)} here "
                    f"and {theirs + (embedding.embedding_dim,)} in "
                    "`embedding`."
                )
        if tail_capacity is not None and (
            isinstance(tail_capacity, bool)
            or not isinstance(tail_capacity, (int, float, np.floating))
            or not 0.0 < tail_capacity <= 1.0
        ):
            raise ValueError(
                "`tail_capacity` must be None or a float in (0, 1]: the "
                "share of the tokens of a batch that each tail cluster "
                f"scores. Received: tail_capacity={tail_capacity!r}"
            )
        self.tail_capacity = (
            None if tail_capacity is None else float(tail_capacity)
        )
        self.cluster_order = check_cluster_order(cluster_order)
        # Tracked as a sublayer in `build()`, not here: a layer restored
        # from a config may first trade its copy for the graph's own
        # embedding (see `__call__`), and Keras cannot untrack a sublayer.
        object.__setattr__(self, "_embedding", embedding)
        self._embedding_from_config = False
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    @property
    def embedding(self):
        """The `AdaptiveEmbedding` this layer ties to, or None."""
        return self._embedding

    def __call__(self, *args, **kwargs):
        if self._embedding_from_config and not self.built:
            inputs = args[0] if args else kwargs.get("inputs")
            upstream = _upstream_twin(inputs, self._embedding)
            if upstream is not None:
                object.__setattr__(self, "_embedding", upstream)
        return super().__call__(*args, **kwargs)

    @property
    def cluster_bounds(self):
        """`((start, end), ...)`: the token ids of each cluster."""
        return cluster_bounds(self.cutoffs, self.vocabulary_size)

    def build(self, inputs_shape, targets_shape=None):
        input_dim = inputs_shape[-1]
        if self.embedding_dim is None:
            self.embedding_dim = input_dim
            check_div_val(self.div_val, input_dim, len(self.cutoffs) + 1)
        embedding = self.embedding
        if embedding is not None:
            self._embedding = embedding  # now tracked: its tables are ours
            if not embedding.built:
                embedding.build()
        if embedding is not None and any(self.tie_projections):
            if embedding.output_dim != input_dim:
                raise ValueError(
                    "Tied projections need hidden states as wide as the "
                    f"embedding's output (output_dim="
                    f"{embedding.output_dim}). Received inputs of shape "
                    f"{tuple(inputs_shape)}."
                )
        tables, dims = cluster_layout(
            self.vocabulary_size, self.embedding_dim, self.cutoffs, self.div_val
        )
        project = self.div_val != 1 or self.embedding_dim != input_dim

        # Own variables only; the tied ones stay the embedding's (see
        # `_kernel` and `_projection`). Kernels `(size, dim)`: the layout of
        # the embedding tables.
        self.kernels = []
        if not self.tie_weights:
            self.kernels = [
                self.add_weight(
                    name=f"kernel_{i}",
                    shape=shape,
                    initializer=fresh_initializer(self.kernel_initializer),
                )
                for i, shape in enumerate(tables)
            ]
        self.biases = [
            self.add_weight(
                name=f"bias_{i}",
                shape=shape[:1],
                initializer=fresh_initializer(self.bias_initializer),
            )
            for i, shape in enumerate(tables)
        ]
        # Projections `(dim_i, input_dim)`, one per cluster (None where
        # tied), or none at all.
        self.projections = []
        if project:
            self.projections = [
                None
                if self.tie_projections[i]
                else self.add_weight(
                    name=f"projection_{i}",
                    shape=(dim, input_dim),
                    initializer=fresh_initializer(self.kernel_initializer),
                )
                for i, dim in enumerate(dims)
            ]
        if self.cutoffs:
            self.cluster_kernel = self.add_weight(
                name="cluster_kernel",
                shape=(len(self.cutoffs), self.embedding_dim),
                initializer=fresh_initializer(self.kernel_initializer),
            )
            self.cluster_bias = self.add_weight(
                name="cluster_bias",
                shape=(len(self.cutoffs),),
                initializer=fresh_initializer(self.bias_initializer),
            )
        self.built = True

    def _kernel(self, i):
        if self.tie_weights:
            return self.embedding.embeddings[i]
        return self.kernels[i]

    def _projection(self, i):
        if not self.projections:
            return None
        if self.projections[i] is None:  # tied
            return self.embedding.projections[0 if self.div_val == 1 else i]
        return self.projections[i]

    def _cluster_weights(self, i):
        """Kernel `(size_i, dim_i)`, bias `(size_i,)` and projection
        `(dim_i, input_dim)` or None of cluster `i`, with the head's cluster
        rows appended to cluster 0."""
        if self.div_val == 1:
            start, end = self.cluster_bounds[i]
            kernel = self._kernel(0)[start:end]
            bias = self.biases[0][start:end]
        else:
            kernel, bias = self._kernel(i), self.biases[i]
        if i == 0 and self.cutoffs:
            kernel = ops.concatenate([kernel, self.cluster_kernel], axis=0)
            bias = ops.concatenate([bias, self.cluster_bias], axis=0)
        return kernel, bias, self._projection(i)

    def _logits(self, hidden, i):
        """Float32 logits `(..., size_i)` of cluster `i` (the head for 0)."""
        kernel, bias, projection = self._cluster_weights(i)
        # `matmul`, not an einsum with `...`: TensorFlow's einsum gradient
        # then materializes a (..., size_i, dim_i) tensor.
        if projection is not None:
            projection = ops.cast(projection, self.compute_dtype)
            hidden = ops.matmul(hidden, ops.transpose(projection))  # (.., d_i)
        logits = ops.matmul(
            hidden, ops.transpose(ops.cast(kernel, self.compute_dtype))
        )  # (..., size_i)
        return ops.cast(logits, "float32") + ops.cast(bias, "float32")

    def _head_column(self, i):
        """Column of the head log-probabilities of tail cluster `i`
        (1-based), per `cluster_order`."""
        if self.cluster_order == "tensorflow":
            return self.cutoffs[0] + i - 1
        return self.cutoffs[0] + len(self.cutoffs) - i

    def call(self, inputs, targets=None):
        hidden = ops.cast(inputs, self.compute_dtype)  # (..., input_dim)
        head = ops.log_softmax(self._logits(hidden, 0), axis=-1)
        if targets is None:
            return self._log_probs(hidden, head)
        return self._negative_log_likelihood(hidden, head, targets)

    def _log_probs(self, hidden, head):
        if not self.cutoffs:
            return head  # (..., vocab)
        pieces = [head[..., : self.cutoffs[0]]]
        for i in range(1, len(self.cutoffs) + 1):
            column = self._head_column(i)
            tail = ops.log_softmax(self._logits(hidden, i), axis=-1)
            pieces.append(tail + head[..., column : column + 1])
        return ops.concatenate(pieces, axis=-1)  # (..., vocab)

    def _negative_log_likelihood(self, hidden, head, targets):
        targets = ops.cast(targets, "int32")  # (...)
        first_end = self.cutoffs[0] if self.cutoffs else self.vocabulary_size
        head_ids = ops.clip(targets, 0, first_end - 1)
        log_prob = ops.take_along_axis(
            head, ops.expand_dims(head_ids, -1), axis=-1
        )[..., 0]  # (...)
        for i in range(1, len(self.cutoffs) + 1):
            start, end = self.cluster_bounds[i]
            in_cluster = ops.logical_and(targets >= start, targets < end)
            column = self._head_column(i)
            tail_log_prob = self._tail_log_prob(
                hidden, head[..., column], targets, in_cluster, i
            )  # (...)
            log_prob = ops.where(in_cluster, tail_log_prob, log_prob)
        return -log_prob  # (...)

    def _target_log_prob(self, hidden, cluster_log_prob, targets, i):
        """`log p(cluster i) + log p_i(target)` for targets of cluster `i`
        (a finite value of no meaning for the others)."""
        start, end = self.cluster_bounds[i]
        logits = self._logits(hidden, i)  # (..., size_i)
        local_ids = ops.clip(targets - start, 0, end - start - 1)
        target_logit = ops.take_along_axis(
            logits, ops.expand_dims(local_ids, -1), axis=-1
        )[..., 0]  # (...)
        return (
            cluster_log_prob + target_logit - ops.logsumexp(logits, axis=-1)
        )  # (...)

    def _tail_log_prob(self, hidden, cluster_log_prob, targets, in_cluster, i):
        """`_target_log_prob` of tail cluster `i`, scoring only the tokens
        of the cluster when they fit in `tail_capacity`."""
        shape = tuple(targets.shape)
        count = int(np.prod(shape)) if None not in shape else 0
        capacity = 0
        if self.tail_capacity is not None:
            capacity = int(np.ceil(self.tail_capacity * count))
        if not 0 < capacity < count:  # every token
            return self._target_log_prob(hidden, cluster_log_prob, targets, i)
        hidden = ops.reshape(hidden, (count, hidden.shape[-1]))  # (N, d)
        cluster_log_prob = ops.reshape(cluster_log_prob, (count,))
        targets = ops.reshape(targets, (count,))
        in_cluster = ops.reshape(in_cluster, (count,))

        def gathered():
            # The cluster's tokens first, then others to fill `capacity`.
            _, index = ops.top_k(ops.cast(in_cluster, "float32"), capacity)
            log_prob = self._target_log_prob(
                ops.take(hidden, index, axis=0),  # (capacity, d)
                ops.take(cluster_log_prob, index),
                ops.take(targets, index),
                i,
            )  # (capacity,)
            return ops.scatter(ops.expand_dims(index, -1), log_prob, (count,))

        def every_token():
            return self._target_log_prob(hidden, cluster_log_prob, targets, i)

        fits = ops.sum(ops.cast(in_cluster, "int32")) <= capacity
        log_prob = ops.cond(fits, gathered, every_token)  # (N,)
        return ops.reshape(log_prob, shape)  # (...)

    def compute_output_spec(self, inputs, targets=None):
        if targets is None:
            shape = tuple(inputs.shape[:-1]) + (self.vocabulary_size,)
        else:
            shape = tuple(targets.shape)
        return keras.KerasTensor(shape, dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "cutoffs": list(self.cutoffs),
                "div_val": self.div_val,
                "embedding_dim": self.embedding_dim,
                "embedding": None
                if self.embedding is None
                else keras.saving.serialize_keras_object(self.embedding),
                "tie_weights": self.tie_weights,
                "tie_projections": list(self.tie_projections),
                "tail_capacity": self.tail_capacity,
                "cluster_order": self.cluster_order,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        # Saved before `cluster_order` existed: the order of that time.
        config.setdefault("cluster_order", "pytorch")
        if config.get("embedding") is not None:
            config["embedding"] = keras.saving.deserialize_keras_object(
                config["embedding"]
            )
        layer = cls(**config)
        layer._embedding_from_config = config.get("embedding") is not None
        return layer


def _upstream_twin(inputs, embedding):
    """The layer upstream of `inputs` in a functional graph that has the
    name and config of `embedding`, or None (not symbolic, not found).

    `keras.models.clone_model` and `Functional.from_config` call each new
    layer on the new graph's tensors: a tied `AdaptiveSoftmax` restored
    there finds the embedding it was tied to among its inputs' ancestors.
    """
    config = embedding.get_config()
    stack, seen = list(keras.tree.flatten(inputs)), set()
    while stack:
        # Private: Keras offers no public walk of a KerasTensor's graph
        # (listed in CONTRIBUTING.md, pinned by the clone_model test).
        history = getattr(stack.pop(), "_keras_history", None)
        if history is None or id(history.operation) in seen:
            continue
        layer = history.operation
        seen.add(id(layer))
        if (
            isinstance(layer, AdaptiveEmbedding)
            and layer.name == embedding.name
            and layer.get_config() == config
        ):
            return layer
        node = layer._inbound_nodes[history.node_index]
        stack.extend(node.input_tensors)
    return None


@keras.saving.register_keras_serializable(package="keras_txl")
class PerTokenLoss(keras.losses.Loss):
    """Reduces per-token losses given as `y_pred` as a compiled loss does
    (sample weights, masks, the distribution's scaling).

    `TransformerXLCausalLM.compute_loss` hands it the per-cluster negative
    log-likelihoods of an adaptive softmax `(batch, T)`, computed without
    the `(batch, T, vocabulary_size)` log-probabilities, so that they are
    weighted and averaged exactly as the compiled
    `SparseCategoricalCrossentropy` would average the same values.

    Args:
        name: str. The loss's name. Defaults to `"per_token_loss"`.
        reduction: str or `None`. How the per-token losses are reduced,
            as for any `keras.losses.Loss`. Defaults to
            `"sum_over_batch_size"`.
        dtype: str or `keras.DTypePolicy`. Of the loss computation.
            Defaults to `None` (`keras.config.floatx()`).

    Call arguments:
        y_true: any tensor. Not read: the targets were used when `y_pred`
            was computed.
        y_pred: `(batch, T)` float tensor. The per-token losses.
        sample_weight: optional `(batch, T)` tensor. Weights each token,
            as for any loss.

    Returns:
        The reduced loss: a scalar under the default reduction, the
        per-token losses weighted under `reduction=None`.

    Example:

    >>> import numpy as np
    >>> nll = np.array([[1.0, 3.0]], "float32")
    >>> float(PerTokenLoss()(np.zeros((1, 2)), nll))
    2.0
    """

    def call(self, y_true, y_pred):
        return y_pred
