"""Dynamic evaluation (Krause, Kahembwe, Murray and Renals, 2019,
arXiv:1904.08378): a text scored segment by segment, the memory carried,
with a gradient step on each segment once it has been scored.

Keras 3 computes gradients only inside each backend's `train_step`; a loop
that takes its own gradient steps needs the backend's differentiation
(`value_and_grad` below: `jax.value_and_grad`, `tf.GradientTape` or
`torch.autograd.grad`), the only backend-specific code of
`keras_txl.training`.
"""

import math
import weakref

import keras

from keras_txl.training.evaluation import evaluate_segments
from keras_txl.training.evaluation import evaluation_model
from keras_txl.training.evaluation import segment_bounds
from keras_txl.training.evaluation import segments_result
from keras_txl.training.evaluation import text_streams

METHODS = ("sgd", "rms")


def dynamic_evaluation(
    lm,
    token_ids,
    segment_length,
    learning_rate,
    method="sgd",
    decay=0.0,
    segments_per_update=1,
    batch_size=1,
    memory_length=None,
    clamp_length=None,
    same_length=None,
    start="empty",
    calibration_ids=None,
    calibration_segments=100,
    epsilon=1e-5,
    return_token_losses=False,
    log=None,
):
    """The mean loss per token of a text under dynamic evaluation.

    The text is read as `evaluate_segments` reads it (`batch_size`
    contiguous streams, segments of `segment_length`, the memory carried
    from `start`), and every segment is first scored with the current
    weights, then (every `segments_per_update` segments) the weights take
    a gradient step on the mean loss of the segments scored since the last
    step. No token is scored by weights that have trained on it, and the
    memory carried is the one of the scoring pass. With one stream (the
    paper's setting) the weights have seen only the text before the
    segment they score; with `B` streams, also the text of the other
    streams up to the same step. Dropout is off. `lm` is not changed: the
    adapted weights are tensors of this function, so a second call gives
    the same result. `learning_rate=0` is `evaluate_segments`.

    The updates, `g` the gradient, `theta0` the weights of `lm`:

    - `"sgd"`: `theta <- theta - lr * g + decay * (theta0 - theta)`;
    - `"rms"` (the paper's update, as its released code writes it): `theta
      <- theta - lr * g / (sqrt(MS) + epsilon) + min(1, decay * sqrt(MS))
      * (theta0 - theta)`, element-wise. `MS`, the mean square of the
      gradients of one segment, comes from `calibration_ids` (the paper
      collects it on the training data: pass a part of it) at the
      weights of `lm`, before the text is scored; without one it is the
      running mean over the segments of the text scored so far (nothing
      ahead of the text is read). The decay toward `theta0` is faster for
      weights with large gradients; its factor is capped at 1 so that no
      step passes `theta0`. A weight with no gradient in the calibration
      text (the embedding of a token it lacks) would step by
      `lr * g / epsilon`: calibrate on a text that holds the vocabulary.

    Args:
        lm: a `TransformerXLCausalLM` (any output layer, adaptive softmax
            too).
        token_ids: 1-D int array: the text.
        segment_length: int. Tokens per segment (and per gradient step).
        learning_rate: float >= 0.
        method: `"sgd"` or `"rms"`.
        decay: float >= 0: pull toward the weights of `lm` (`lambda`).
        segments_per_update: int >= 1. Segments scored between two steps;
            the step is on their mean loss.
        batch_size: int. Number of streams (1: the paper's).
        memory_length: as `evaluate_segments`.
        clamp_length: as `evaluate_segments`.
        same_length: as `evaluate_segments`.
        start: as `evaluate_segments`.
        calibration_ids: `"rms"` only: optional 1-D int array (training
            text) for `MS`, read as the text is (streams, segments, memory).
        calibration_segments: int >= 1: at most this many segments of
            `calibration_ids`.
        epsilon: float in (0, 1]: `"rms"` only.
        return_token_losses: if True, the result has `token_losses`, the
            loss of every scored token, a float array `(batch_size, n)`.
        log: optional function that prints a progress line per tenth.

    Returns:
        A dict as `evaluate_segments`'s (`loss`, `bits_per_character`,
        `perplexity`, `tokens` and the settings), with `method`,
        `learning_rate`, `decay`, `segments_per_update`, `updates` (steps
        taken), `epsilon` and `rms_statistics` (`"calibration"`,
        `"online"` or None).

    Example:

    >>> import numpy as np
    >>> from keras_txl.models import (
    ...     TransformerXLBackbone, TransformerXLCausalLM)
    >>> lm = TransformerXLCausalLM(TransformerXLBackbone(
    ...     vocabulary_size=8, num_layers=1, num_heads=2, hidden_dim=8,
    ...     head_dim=4, intermediate_dim=16, memory_length=4))
    >>> text = np.arange(200) % 8
    >>> static = dynamic_evaluation(lm, text, 8, learning_rate=0.0)
    >>> dynamic = dynamic_evaluation(lm, text, 8, learning_rate=0.1)
    >>> dynamic["loss"] < static["loss"], dynamic["tokens"]
    (True, 199)
    """
    import numpy as np

    from keras_txl.utils.token_data import check_token_ids
    from keras_txl.utils.validation import check_positive_float
    from keras_txl.utils.validation import check_positive_int

    settings = _check_settings(
        method, learning_rate, decay, calibration_ids, epsilon
    )
    segment_length = check_positive_int("segment_length", segment_length)
    batch_size = check_positive_int("batch_size", batch_size)
    segments_per_update = check_positive_int(
        "segments_per_update", segments_per_update
    )
    calibration_segments = check_positive_int(
        "calibration_segments", calibration_segments
    )
    epsilon = check_positive_float("epsilon", epsilon)
    dynamic = dict(
        method=settings["method"],
        learning_rate=settings["learning_rate"],
        decay=settings["decay"],
        segments_per_update=segments_per_update,
        epsilon=epsilon if settings["method"] == "rms" else None,
    )
    if settings["learning_rate"] == 0.0:  # the one static evaluation
        result = evaluate_segments(
            lm,
            token_ids,
            batch_size,
            segment_length,
            memory_length=memory_length,
            clamp_length=clamp_length,
            same_length=same_length,
            start=start,
            log=log,
            return_token_losses=return_token_losses,
        )
        return {**result, **dynamic, "updates": 0, "rms_statistics": None}
    model = evaluation_model(lm, clamp_length, same_length)
    if memory_length is None:
        memory_length = model.backbone.memory_length
    vocabulary_size = model.backbone.vocabulary_size
    streams = text_streams(token_ids, batch_size)
    check_token_ids(streams, vocabulary_size)
    stepper = _stepper(model)
    weights = [v.value for v in model.trainable_variables]
    mean_square, statistics = None, None
    if settings["method"] == "rms":
        statistics = "online"
        if calibration_ids is not None:
            calibration = text_streams(calibration_ids, batch_size)
            check_token_ids(calibration, vocabulary_size, "calibration_ids")
            mean_square = stepper.mean_square(
                weights,
                calibration,
                segment_length,
                calibration_segments,
                model.backbone.initial_memory(
                    batch_size, memory_length=memory_length, start=start
                ),
            )
            statistics = "calibration"
    memory = model.backbone.initial_memory(
        batch_size, memory_length=memory_length, start=start
    )
    memory = model.backbone.memory_spec.cast(memory)
    bounds = segment_bounds(streams, segment_length)
    total, count, updates = 0.0, 0, 0
    token_losses = []
    pending, accumulated = 0, None
    current = list(weights)
    for k, (t, end) in enumerate(bounds):
        inputs = streams[:, t:end]
        targets = streams[:, t + 1 : end + 1]
        if end - t < segment_length:
            # The last segment, padded to the compiled shape (the padding
            # comes after the tokens scored, and no step follows).
            pad = ((0, 0), (0, segment_length - (end - t)))
            inputs, targets = np.pad(inputs, pad), np.pad(targets, pad)
        token_nll, memory, grads = stepper.score_and_gradients(
            current, inputs, targets, memory
        )
        token_nll = np.asarray(token_nll, "float64")[:, : end - t]  # (B, T)
        if not np.isfinite(token_nll).all():
            raise FloatingPointError(
                f"Dynamic evaluation diverged: non-finite losses in segment "
                f"{k + 1} of {len(bounds)} after {updates} steps of "
                f"learning_rate={settings['learning_rate']:g}. Lower "
                f"`learning_rate` (or raise `decay`)."
            )
        total += float(token_nll.sum())
        count += token_nll.size
        if return_token_losses:
            token_losses.append(token_nll)
        if log is not None and (k + 1) % max(1, len(bounds) // 10) == 0:
            log(f"segment {k + 1}/{len(bounds)}: loss {total / count:.4f}")
        if k == len(bounds) - 1:
            continue  # Nothing left to score after a step.
        if statistics == "online":
            mean_square = stepper.running_mean_square(mean_square, grads, k)
        accumulated = stepper.accumulate(accumulated, grads)
        pending += 1
        if pending == segments_per_update:
            current = stepper.update(
                settings["method"],
                current,
                weights,
                accumulated,
                mean_square,
                (
                    settings["learning_rate"] / pending,
                    settings["decay"],
                    epsilon,
                ),
            )
            pending, accumulated = 0, None
            updates += 1
    result = segments_result(
        total / count,
        count,
        model,
        batch_size,
        segment_length,
        memory_length,
        start,
    )
    result.update(dynamic, updates=updates, rms_statistics=statistics)
    if return_token_losses:
        result["token_losses"] = np.concatenate(token_losses, axis=1)
    return result


def _check_settings(method, learning_rate, decay, calibration_ids, epsilon):
    if method not in METHODS:
        raise ValueError(
            f"`method` must be one of {METHODS} (plain gradient steps, or "
            f"steps scaled by the gradients' RMS). Received: method={method!r}"
        )
    values = {}
    for name, value in (("learning_rate", learning_rate), ("decay", decay)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0.0 <= value < math.inf  # False for NaN
        ):
            raise ValueError(
                f"`{name}` must be a finite float >= 0 (0: no "
                f"{'step' if name == 'learning_rate' else 'decay'}). "
                f"Received: {name}={value!r}"
            )
        values[name] = float(value)
    if method == "sgd" and calibration_ids is not None:
        raise ValueError(
            "`calibration_ids` gives the gradient statistics of "
            "method='rms'; method='sgd' uses none. Drop it or pass "
            "method='rms'."
        )
    return {"method": method, **values}


def _stepper(model):
    """The `_Stepper` of `model`, made once: its compiled functions serve
    every later call (another learning rate too)."""
    stepper = _STEPPERS.get(model)
    if stepper is None:
        stepper = _STEPPERS[model] = _Stepper(model)
    return stepper


# `{model: _Stepper}`. Weak: a stepper refers to its model only weakly,
# so the cache never keeps a model alive.
_STEPPERS = weakref.WeakKeyDictionary()


class _Stepper:
    """The compiled pieces of dynamic evaluation for one model: the loss
    and gradients of a segment, and the element-wise updates."""

    def __init__(self, model):
        from keras import ops

        self._model = weakref.ref(model)
        select = model.backbone.memory_spec.select

        def segment_loss(trainable, non_trainable, token_ids, targets, memory):
            outputs, _ = self.model.stateless_call(
                trainable,
                non_trainable,
                {"token_ids": token_ids, **memory},
                training=False,
            )
            # Log-probabilities of adaptive softmaxes pass unchanged.
            log_probs = ops.log_softmax(outputs["logits"], axis=-1)
            picked = ops.take_along_axis(
                log_probs, ops.expand_dims(targets, -1), axis=-1
            )  # (B, T, 1)
            token_nll = -picked[..., 0]  # (B, T)
            return ops.mean(token_nll), (token_nll, select(outputs))

        def sgd(weights, origin, grads, mean_square, hyper):
            del mean_square
            rate, decay, _ = hyper
            return [
                w - rate * g + decay * (w0 - w)
                for w, w0, g in zip(weights, origin, grads)
            ]

        def rms(weights, origin, grads, mean_square, hyper):
            rate, decay, epsilon = hyper
            new = []
            for w, w0, g, ms in zip(weights, origin, grads, mean_square):
                root = ops.sqrt(ms)
                pull = ops.minimum(decay * root, 1.0)
                new.append(w - rate * g / (root + epsilon) + pull * (w0 - w))
            return new

        def accumulate(total, grads):
            return [a + g for a, g in zip(total, grads)]

        def running(mean_square, grads, weight):
            return [
                ms + (g * g - ms) * weight for ms, g in zip(mean_square, grads)
            ]

        self._gradients = value_and_grad(segment_loss)
        self._updates = {
            "sgd": compile_function(sgd),
            "rms": compile_function(rms),
        }
        self._accumulate = compile_function(accumulate)
        self._running = compile_function(running)

    @property
    def model(self):
        """The model (held weakly: see `_STEPPERS`)."""
        return self._model()

    def score_and_gradients(self, weights, token_ids, targets, memory):
        """`(token losses (B, T) numpy, new memory, gradients)` of a
        segment, the non-trainable variables as they are now."""
        from keras import ops

        _, (token_nll, memory), grads = self._gradients(
            weights, *self._arguments(token_ids, targets, memory)
        )
        return ops.convert_to_numpy(token_nll), memory, grads

    def _arguments(self, token_ids, targets, memory):
        from keras import ops

        return (
            [v.value for v in self.model.non_trainable_variables],
            ops.convert_to_tensor(token_ids, "int32"),
            ops.convert_to_tensor(targets, "int32"),
            memory,
        )

    def accumulate(self, total, grads):
        if total is None:
            return list(grads)
        return self._accumulate(total, grads)

    def running_mean_square(self, mean_square, grads, index):
        """The mean of `g * g` over the `index + 1` gradients seen."""
        from keras import ops

        if mean_square is None:
            mean_square = [ops.zeros_like(g) for g in grads]
        weight = ops.convert_to_tensor(1.0 / (index + 1), "float32")
        return self._running(mean_square, grads, weight)

    def mean_square(self, weights, streams, segment_length, limit, memory):
        """`MS` of the gradients of the first `limit` full segments of
        `streams`, at `weights`, the memory carried."""
        memory = self.model.backbone.memory_spec.cast(memory)
        bounds = segment_bounds(streams, segment_length)
        bounds = [(t, end) for t, end in bounds if end - t == segment_length]
        if not bounds:
            raise ValueError(
                f"`calibration_ids` must hold at least one segment of "
                f"{segment_length} tokens per stream. Received "
                f"{streams.size} tokens in {streams.shape[0]} streams."
            )
        mean_square = None
        for k, (t, end) in enumerate(bounds[:limit]):
            _, memory, grads = self.score_and_gradients(
                weights, streams[:, t:end], streams[:, t + 1 : end + 1], memory
            )
            mean_square = self.running_mean_square(mean_square, grads, k)
        return mean_square

    def update(self, method, weights, origin, grads, mean_square, hyper):
        """The weights after one step of `method`; `hyper` is
        `(learning_rate / segments, decay, epsilon)`."""
        from keras import ops

        hyper = tuple(ops.convert_to_tensor(h, "float32") for h in hyper)
        return self._updates[method](weights, origin, grads, mean_square, hyper)


def value_and_grad(loss_fn):
    """A compiled `f(trainable, *args) -> (loss, aux, grads)`.

    Args:
        loss_fn: `loss_fn(trainable, *args) -> (loss, aux)`: a scalar loss
            of the list of trainable values `trainable` (e.g. through
            `model.stateless_call`), with any auxiliary outputs `aux`
            (not differentiated).

    Returns:
        A function of the same arguments returning `(loss, aux, grads)`,
        `grads` a list like `trainable` (zeros for values the loss does
        not use). Compiled with `jax.jit` (JAX) or `tf.function`
        (TensorFlow); eager on torch.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

        def jax_step(trainable, *args):
            (loss, aux), grads = grad_fn(trainable, *args)
            return loss, aux, grads

        return jax.jit(jax_step)
    if backend == "tensorflow":
        import tensorflow as tf

        def tf_step(trainable, *args):
            with tf.GradientTape() as tape:
                tape.watch(trainable)
                loss, aux = loss_fn(trainable, *args)
            grads = tape.gradient(loss, trainable)
            return loss, aux, _zeros_for_none(grads, trainable)

        return tf.function(tf_step, reduce_retracing=True)
    if backend == "torch":
        import torch

        def torch_step(trainable, *args):
            trainable = [t.detach().requires_grad_(True) for t in trainable]
            loss, aux = loss_fn(trainable, *args)
            grads = torch.autograd.grad(loss, trainable, allow_unused=True)
            aux = keras.tree.map_structure(
                lambda t: t.detach() if torch.is_tensor(t) else t, aux
            )
            return loss.detach(), aux, _zeros_for_none(grads, trainable)

        return torch_step
    raise ValueError(
        f"Gradient steps need the JAX, TensorFlow or torch backend. "
        f"Received KERAS_BACKEND={backend!r}."
    )


def compile_function(fn):
    """`fn` compiled for the backend (`jax.jit`, `tf.function`), or run
    without autograd (torch): for element-wise updates of lists of
    tensors."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.jit(fn)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, reduce_retracing=True)
    if backend == "torch":
        import torch

        return torch.no_grad()(fn)
    return fn


def _zeros_for_none(grads, values):
    return [
        keras.ops.zeros_like(v) if g is None else g
        for g, v in zip(grads, values)
    ]
