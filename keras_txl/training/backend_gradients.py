"""Gradients of a stateless loss on every backend.

Keras 3 computes gradients only inside each backend's `train_step`; a loop
that takes its own gradient steps (dynamic evaluation) needs the
backend's differentiation: `jax.value_and_grad`, `tf.GradientTape` or
`torch.autograd.grad`. These two helpers are the only backend-specific
code of `keras_txl.training`.
"""

import keras


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
            aux = torch.utils._pytree.tree_map(
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
