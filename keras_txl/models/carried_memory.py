"""How the memory crosses the batches of `fit`, `evaluate` and `predict`.

Read top to bottom; this is the whole path:

1. `TransformerXLCausalLM.fit` (and `evaluate`, `predict`: `CarriedMemory`
   below) names its arguments and calls `carry_memory` with them (strings
   for a preprocessor carry nothing).
2. `prepare_memory_carry` finds the batch size of the data (a static
   `tf.data` shape, the first batch, or the rows of arrays), divides it
   between `tf.distribute` replicas, builds the model's `MemoryState` for
   it (or checks it is the same), guards a `tf.data.Dataset` whose batch
   size is not static (`guard_batch_size`), and adds a `MemoryReset`
   callback unless one is given.
3. Keras runs one step per batch; `TransformerXLCausalLM.call` reads the
   memory from `MemoryState`, runs the backbone on it and writes the new
   memory back (`memory_state.py`: non-trainable variables, the one
   pattern Keras carries through `fit` on every backend).
4. `MemoryReset` empties the memory at each epoch start (or every
   `reset_every` steps) and before evaluation and prediction; around the
   validation pass of `fit` it stashes the training memory and puts it
   back.

What the memory holds is `MemorySpec`'s (`memory_spec.py`).

`CarriedMemory` and `TransformerXLGeneration` are the bases that
`TransformerXLCausalLM` has before keras-hub's `CausalLM`: each declares
the attributes it reads of the task (`HOST_ATTRIBUTES`), and
`check_before_causal_lm` and `check_host_attributes` (at the end) name
what a class using it lacks, when the class is defined and when a model
is made, instead of an `AttributeError` deep in `fit` or `generate`.
"""

import inspect

import keras
import keras_hub
import numpy as np
from keras import ops

from keras_txl.models.memory_reset import MemoryReset
from keras_txl.models.transformer_xl_backbone import freeze_all_but_lora
from keras_txl.models.transformer_xl_backbone import lora_enabled
from keras_txl.utils.token_data import check_token_data
from keras_txl.utils.validation import check_optional_positive_int


def bind_arguments(method, args, kwargs):
    """The arguments of a call of `method` (e.g. Keras's `fit`), all by
    name: its signature names the positional ones (the order of
    `keras_hub` tasks differs from `keras.Model`'s after `batch_size`)."""
    arguments = dict(inspect.signature(method).bind(*args, **kwargs).arguments)
    arguments.update(arguments.pop("kwargs", {}))
    return arguments


def carry_memory(model, arguments):
    """The arguments of `fit`, `evaluate` or `predict`, readied for the
    memory carried between batches.

    Args:
        model: a `TransformerXLCausalLM`.
        arguments: the call's arguments by name (`bind_arguments`).

    Returns:
        The keyword arguments to call Keras's method with: `x` (a
        `tf.data` input guarded on TensorFlow), `callbacks` (with a
        `MemoryReset`) and `validation_data` readied by
        `prepare_memory_carry`, the others as they came.
    """
    arguments = dict(arguments)
    callbacks = arguments.get("callbacks")
    if isinstance(callbacks, keras.callbacks.CallbackList):
        return arguments  # The evaluation inside `fit`: ready.
    x = arguments.get("x")
    check_token_data(x, arguments.get("y"), model.backbone.vocabulary_size)
    arguments["x"], arguments["callbacks"] = prepare_memory_carry(
        model, x, arguments.get("batch_size"), callbacks
    )
    validation_data = arguments.get("validation_data")
    if validation_data is not None and not isinstance(
        validation_data, (tuple, list)
    ):
        arguments["validation_data"], _ = prepare_memory_carry(
            model, validation_data
        )
    return arguments


def _is_tf_dataset(x):
    return type(x).__module__.startswith("tensorflow") and hasattr(
        x, "element_spec"
    )


def _first_leaf(structure):
    if isinstance(structure, dict):
        if "token_ids" in structure:
            return structure["token_ids"]
        return _first_leaf(next(iter(structure.values())))
    if isinstance(structure, (tuple, list)):
        return _first_leaf(structure[0])
    return structure


def _static_batch_size(dataset):
    shape = _first_leaf(dataset.element_spec).shape
    if shape.rank and shape[0] is not None:
        return int(shape[0])
    return None


def guard_batch_size(dataset, batch_size):
    """Makes every batch of a `tf.data.Dataset` have `batch_size` rows,
    statically, and fails with a clear message at the first one that does
    not.

    On the TensorFlow backend a batch dimension of `None` reaches the
    traced train step, where the model cannot see the batch size; this
    check runs in the input pipeline instead.

    Args:
        dataset: a `tf.data.Dataset` of tensors, tuples or dicts.
        batch_size: int. The expected size of axis 0 of every tensor.

    Returns:
        The dataset with static batch shapes.
    """
    import tensorflow as tf

    message = (
        f"A batch of another size than {batch_size}, the batch size of the "
        "carried memory (kept between batches): ordered-segment data needs "
        "one batch size; drop the remainder (`drop_remainder=True`)."
    )

    def check(*element):
        def fix(tensor):
            if tensor.shape.rank is None or tensor.shape.rank == 0:
                return tensor
            with tf.control_dependencies(
                [
                    tf.debugging.assert_equal(
                        tf.shape(tensor)[0], batch_size, message=message
                    )
                ]
            ):
                tensor = tf.identity(tensor)
            return tf.ensure_shape(
                tensor, [batch_size] + tensor.shape.as_list()[1:]
            )

        element = tf.nest.map_structure(fix, element)
        return element if len(element) > 1 else element[0]

    return dataset.map(check)


def _infer_batch_size(x, batch_size):
    """The batch size of `x`, or `None` if it cannot be known up front."""
    if _is_tf_dataset(x):
        static = _static_batch_size(x)
        if static is not None:
            return static
        for element in x.take(1):
            return int(_first_leaf(element).shape[0])
        return None
    leaf = _first_leaf(x) if x is not None else None
    if isinstance(leaf, np.ndarray) or (
        leaf is not None and keras.ops.is_tensor(leaf)
    ):
        rows = int(leaf.shape[0])
        size = batch_size or 32  # Keras's default.
        # Rows that all fit in one batch are one batch: one batch size.
        if rows > size and rows % size:
            raise ValueError(
                f"{rows} rows do not split into batches of {size}: the last "
                f"batch would have {rows % size} rows, but the carried "
                "memory (kept between batches) needs one batch size (the "
                "batch axis is the streams of text). Pass `batch_size` "
                "dividing the number of rows, or build the data with "
                "`keras_txl.data.segment_dataset`."
            )
        return min(size, rows)
    return None


def _tf_replicas(model):
    """Replicas in sync of the model's `tf.distribute` strategy (else 1)."""
    if keras.backend.backend() != "tensorflow":
        return 1
    strategy = getattr(model, "distribute_strategy", None)
    return int(getattr(strategy, "num_replicas_in_sync", 1) or 1)


def prepare_memory_carry(model, x, batch_size=None, callbacks=None):
    """Readies `model` and the data for carried memory.

    Builds the model's memory for the batch size of `x` (when it can be
    known up front), checks that arrays split into equal batches, guards a
    `tf.data.Dataset` on the TensorFlow backend (see `guard_batch_size`),
    and adds a default `MemoryReset` to `callbacks` unless one is there.

    Args:
        model: a `TransformerXLCausalLM`.
        x: the data given to `fit`, `evaluate` or `predict`.
        batch_size: the `batch_size` given with arrays, or `None`.
        callbacks: a list of callbacks, `None`, or Keras's own
            `CallbackList` (the evaluation inside `fit`, left as is).

    Returns:
        `(x, callbacks)` to hand to Keras.
    """
    size = _infer_batch_size(x, batch_size)
    state = model.memory_state
    # Under `tf.distribute` each replica carries the memory of its own rows:
    # the state holds the per-replica batch (see `keras_txl.distribute`).
    replicas = _tf_replicas(model)
    if size is not None and size % replicas == 0:
        size //= replicas
    if size is not None:
        if not state.has_state:
            model.build_memory(size)
        else:
            state.check_batch_size(size)  # Raises on another batch size.
    if (
        _is_tf_dataset(x)
        and keras.backend.backend() == "tensorflow"
        and state.has_state
        and _static_batch_size(x) is None
    ):
        x = guard_batch_size(x, state.batch_size * replicas)
    if isinstance(callbacks, keras.callbacks.CallbackList):
        return x, callbacks
    callbacks = list(callbacks or [])
    if not any(isinstance(c, MemoryReset) for c in callbacks):
        callbacks.insert(0, MemoryReset())
    return x, callbacks


def build_optimizer_first(model):
    """Builds `model.optimizer` over the model's trainable variables, if it
    is not built yet: called when `fit` makes the train function, before
    that function is traced.

    Under TensorFlow without a distribution strategy, Keras builds the
    optimizer inside the first trace of the train step; a `tf.function`
    whose first trace creates variables is traced a second time, so the
    first `fit` traced the whole model and its gradient twice (of a
    classifier reading 4 segments, 18 of the first fit's 33 seconds).
    Built here, from the variables the step will update (after any
    freezing `fit` does), it is traced once. Under JAX and PyTorch, and
    under a TensorFlow strategy, Keras has built it already: nothing to
    do.

    Args:
        model: a compiled Keras model.
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)


class CarriedMemory:
    """The memory that `TransformerXLCausalLM` carries across the batches
    of `fit`, `evaluate` and `predict`: the methods that build it, reset
    it and ready those calls for it (steps 1 and 2 above).

    A base class of the task, before keras-hub's `CausalLM` (whose `fit`,
    `evaluate`, `predict` and `preprocess_samples` it extends): a class
    that puts it elsewhere fails when it is defined. The task provides the
    attributes of `HOST_ATTRIBUTES` and calls `check_carried_memory_host()`
    at the end of its `__init__`, which names any that is missing.
    """

    # What this class reads of the task that it is a base of.
    HOST_ATTRIBUTES = (
        "backbone",  # a `TransformerXLBackbone`
        "memory_state",  # the `MemoryState` carried between batches
        "memory_length",  # int or None (the backbone's)
        "preprocessor",  # a keras-hub preprocessor or None
    )

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        check_before_causal_lm(cls, CarriedMemory)

    def check_carried_memory_host(self):
        """Raises a `TypeError` naming the `HOST_ATTRIBUTES` this object
        lacks (call it at the end of the task's `__init__`)."""
        check_host_attributes(self, CarriedMemory)

    @property
    def carried_memory_length(self):
        """Length of the memory carried between batches: `memory_length`,
        or the backbone's when it is `None`."""
        if self.memory_length is None:
            return self.backbone.memory_length
        return self.memory_length

    def build_memory(self, batch_size):
        """Creates the memory carried between batches for `batch_size`
        streams. Needed only when the first batch has no static batch size
        (e.g. numpy arrays fed to `fit` on TensorFlow)."""
        if self.memory_state.has_state:
            self.memory_state.build(batch_size)  # raises on another size
            return
        self.memory_state.build(batch_size)
        # Functions traced before (e.g. by a `fit` that failed for want of
        # a batch size) do not know the new variables: trace them again.
        self.train_function = None
        self.test_function = None
        self.predict_function = None

    def reset_memory(self):
        """Forgets the memory carried between batches."""
        self.memory_state.reset()

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """The preprocessor's work on strings; token ids (and anything
        else) pass through, so ordered segments keep their carried memory
        with a preprocessor attached."""
        if self.preprocessor is None or not is_text(x):
            return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
        return super().preprocess_samples(x, y, sample_weight)

    def with_memory_length(self, memory_length):
        """A model on the same weights that carries a memory of another
        length, e.g. to evaluate with a longer memory than in training (the
        paper's setting) or with none (`memory_length=0`).

        The returned model shares the backbone and the output layer (a
        change of the weights of one shows in the other) but has its own
        memory, empty, whose batch size is set by its first batch. It is
        compiled with the default loss and metrics if this model is
        compiled.

        Args:
            memory_length: int >= 0. Length of the carried memory.

        Returns:
            A `TransformerXLCausalLM`.
        """
        memory_length = check_optional_positive_int(
            "memory_length", memory_length, allow_zero=True
        )
        if memory_length is None:
            raise ValueError(
                "`memory_length` must be an integer >= 0. Received: None"
            )
        return evaluation_copy(
            self, memory_length, name=f"{self.name}_memory_{memory_length}"
        )

    def _carried_memory_arguments(self, method, args, kwargs):
        """The arguments of `method` (Keras's `fit`, `evaluate` or
        `predict`), by name, readied for the carried memory."""
        if lora_enabled(self.backbone):
            # `backbone.enable_lora` leaves the output layer trainable.
            freeze_all_but_lora(self)
        arguments = bind_arguments(method, args, kwargs)
        if self.preprocessor is not None and is_text(arguments.get("x")):
            return arguments  # Independent strings: no memory carried.
        if method.__name__ == "fit":
            # Ordered segments are never shuffled: Keras's default
            # `shuffle=True` is ignored for them, with a warning each fit.
            arguments.setdefault("shuffle", False)
        return carry_memory(self, arguments)

    def fit(self, *args, **kwargs):
        """`fit` of `keras_hub` tasks, carrying the memory from batch to
        batch.

        Also builds the memory for the batch size of `x`, checks that it
        stays the same (on every backend), and adds a `MemoryReset`
        callback unless `callbacks` holds one. `validation_data` must have
        the same batch size (it uses the same memory, reset before and put
        back after); evaluate other batch sizes with `with_memory_length`.
        """
        return super().fit(
            **self._carried_memory_arguments(super().fit, args, kwargs)
        )

    def make_train_function(self, force=False):
        """Keras's, with the optimizer built before the train step's
        first trace: TensorFlow traces it once instead of twice
        (`build_optimizer_first`)."""
        build_optimizer_first(self)
        return super().make_train_function(force=force)

    def evaluate(self, *args, **kwargs):
        """`evaluate`, carrying the memory from batch to batch from an
        empty one (see `fit`)."""
        return super().evaluate(
            **self._carried_memory_arguments(super().evaluate, args, kwargs)
        )

    def predict(self, *args, **kwargs):
        """`predict`, carrying the memory from batch to batch from an empty
        one (see `fit`). Returns float32 logits."""
        return super().predict(
            **self._carried_memory_arguments(super().predict, args, kwargs)
        )


def is_text(x):
    """Whether `x` (data given to `fit`, `evaluate`, `predict` or met by
    `preprocess_samples`) holds strings rather than token ids."""
    if isinstance(x, (tuple, list)) and x and not hasattr(x, "shape"):
        if isinstance(x[0], (str, bytes)):
            return True
        if isinstance(x, tuple):
            return is_text(x[0])
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, dict):
        return False
    spec = getattr(x, "element_spec", None)  # a tf.data.Dataset
    if spec is not None:
        while isinstance(spec, (tuple, list)) and spec:
            spec = spec[0]
        dtype = getattr(spec, "dtype", None)
        return dtype is not None and getattr(dtype, "name", "") == "string"
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return False
    name = getattr(dtype, "name", str(dtype))
    return name == "string" or getattr(dtype, "kind", None) in ("O", "U", "S")


def evaluation_copy(lm, memory_length=None, name=None, **backbone_changes):
    """A model with the weights of `lm`, for evaluation: the one way to a
    copy with another carried memory length (`with_memory_length`), other
    evaluation settings of the backbone (`same_length`, `clamp_length`:
    `keras_txl.training.evaluate_segments`), or both.

    Without `backbone_changes` the copy shares `lm`'s backbone and output
    layer (the same variables). With them the copy has a new backbone of
    `lm`'s config with those changes, and its own variables holding a copy
    of `lm`'s weights (a copy, not the same buffers: JAX's `predict` may
    donate the buffers it reads). Either way the copy has its own carried
    memory, empty, keeps `lm`'s preprocessor, and is compiled with the
    defaults if `lm` is compiled.

    Args:
        lm: a `TransformerXLCausalLM`.
        memory_length: int >= 0 or `None` (`lm.memory_length`).
        name: the copy's name; `None` for `"{lm.name}_copy"`.
        **backbone_changes: backbone arguments to change.

    Returns:
        A `TransformerXLCausalLM`.
    """
    if memory_length is None:
        memory_length = lm.memory_length
    backbone = lm.backbone
    if backbone_changes:
        config = {**backbone.get_config(), **backbone_changes}
        backbone = type(backbone).from_config(config)
    adaptive = lm.adaptive_softmax is not None
    shared = lm.adaptive_softmax if adaptive else lm.output_projection
    copy = type(lm)(
        backbone,
        tie_weights=lm.tie_weights,
        memory_length=memory_length,
        tie_projections=lm.tie_projections if adaptive else None,
        tail_capacity=lm.tail_capacity if adaptive else None,
        cluster_order=lm.cluster_order,
        preprocessor=lm.preprocessor,
        name=f"{lm.name}_copy" if name is None else name,
        # The same output layer, unless the backbone is new.
        output_layer=None if backbone_changes else shared,
    )
    if backbone_changes:
        lora = [w for w in lm.backbone.weights if "lora_kernel_a" in w.path]
        if lora:
            # The copy's backbone comes from the config, which has no LoRA:
            # the same targets and rank give it the same weights.
            names = sorted({weight.path.split("/")[-2] for weight in lora})
            copy.enable_lora(int(lora[0].shape[-1]), names)
        # All weights but the carried memory's: the copy's starts empty.
        sources, targets = _model_weights(lm), _model_weights(copy)
        if [tuple(w.shape) for w in sources] != [
            tuple(w.shape) for w in targets
        ]:
            raise ValueError(
                "The evaluation copy does not have the weights of the model "
                f"({len(targets)} vs {len(sources)}, or their shapes differ)."
            )
        for target, source in zip(targets, sources):
            target.assign(ops.convert_to_numpy(source))
    if lm.compiled:
        copy.compile()
    return copy


def _model_weights(lm):
    """`lm.weights` without the carried memory's state."""
    carried = {id(weight) for weight in lm.memory_state.weights}
    return [weight for weight in lm.weights if id(weight) not in carried]


def check_before_causal_lm(cls, base):
    """Raises a `TypeError` unless `base` (a class that extends keras-hub's
    `CausalLM` through `super()`) comes before `CausalLM` among the bases
    of `cls`, a `CausalLM`."""
    mro = cls.__mro__
    if keras_hub.models.CausalLM not in mro:
        raise TypeError(
            f"{cls.__name__} has `{base.__name__}` as a base, which extends "
            "`keras_hub.models.CausalLM`: make it a subclass of "
            f"`CausalLM` too, listing `{base.__name__}` before it."
        )
    if mro.index(base) > mro.index(keras_hub.models.CausalLM):
        raise TypeError(
            f"{cls.__name__} lists `{base.__name__}` after "
            f"`keras_hub.models.CausalLM` among its bases: list it before, "
            "so that its methods extend keras-hub's."
        )


def check_host_attributes(host, base):
    """Raises a `TypeError` naming the `base.HOST_ATTRIBUTES` that `host`
    lacks."""
    missing = [name for name in base.HOST_ATTRIBUTES if not hasattr(host, name)]
    if missing:
        raise TypeError(
            f"{type(host).__name__} has `{base.__name__}` as a base but "
            f"lacks {missing}, which it reads: set them in `__init__` "
            "before calling the check."
        )
