"""Dropout that takes two keep decisions from each random number."""

import math
import random

import keras
from keras import ops

# Each draw is a float32 uniform in [0, 1): on every backend a multiple of
# 2**-23 (JAX, TensorFlow) or 2**-24 (torch) from one 32-bit random word,
# so its top 22 bits are exact; they make two independent uniform
# decisions in [0, 2**11).
_DECISION_BITS = 11
_DECISIONS = 1 << _DECISION_BITS


@keras.saving.register_keras_serializable(package="keras_txl")
class PackedDropout(keras.layers.Dropout):
    """`keras.layers.Dropout` at half the random numbers.

    Keras's dropout draws one random number per element; under
    TensorFlow's XLA those draws are most of dropout's cost. This layer
    draws one float32 uniform per two elements and takes two keep
    decisions from its top 22 bits (11 each: every backend's float32
    uniform in [0, 1) is a multiple of `2**-23` or finer, so those bits
    are exact).

    The keep probability is `1 - rate` rounded to a multiple of `2**-11`
    (`keep_probability`; for `rate=0.1`, 1,843 / 2,048 = 0.89990), and
    kept elements are scaled by its exact inverse, so the output's
    expectation is the input, as with `keras.layers.Dropout`. A rate that
    rounding would move by more than 1% of itself (or of `1 - rate`;
    below about 0.025 or above 0.975) is not rounded: the layer then
    draws one number per element, as Keras does.

    The random stream is not Keras's: the same seed drops other
    elements. The state is the same `SeedGenerator` under the same
    attribute (`seed_generator`), advanced once per call as Keras's, so
    weights saved from a model with `keras.layers.Dropout` in this place
    load unchanged, and a resumed run continues its stream exactly.

    On JAX and torch it is Keras's dropout, one draw per element, with
    a seed. On JAX, once the backbone has made XLA compile JAX's random
    bits without a loop on a CPU (`keras_txl/utils/threefry_lowering.py`),
    XLA fuses the per-element draw into the mask, and a training step
    takes 0.94x the time of the packed draw (docs/benchmarks.md, "Round
    three"). On torch, Keras runs an unseeded `Dropout` as torch's fused
    kernel on torch's global generator, which no checkpoint holds, so a
    resumed run would drop other elements than the uninterrupted one.
    Without `seed`, the layer draws one as Keras does for an unseeded
    layer (Python's `random`, which `keras.utils.set_random_seed` seeds)
    and keeps `seed=None` in its config. (Packed decisions made of
    separate eager ops do not beat torch's kernels: measured 0.9x to 3x
    the fused one's time.)

    Measured at the reference size (docs/benchmarks.md, "Peers in the
    same pass, and generation against the output length", the item "JAX
    attention layouts and dropout bits"): a training step at 0.85 of its
    time with Keras's dropout on TensorFlow with XLA (`jit_compile=True`),
    unchanged on TensorFlow without XLA (its default on a CPU).

    Args:
        rate: float in [0, 1). Fraction of the input units to drop.
        noise_shape: 1D tuple of ints or None, as in
            `keras.layers.Dropout`: the shape of the binary mask, with
            1 on the axes where one decision is shared.
        seed: int or None. The random seed.
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: a tensor of any rank.
        training: bool. Dropout is applied only when True.

    Returns:
        A tensor of the inputs' shape and dtype.

    Example:

    >>> import numpy as np
    >>> layer = PackedDropout(0.5, seed=0)
    >>> out = layer(np.ones((2, 8), "float32"), training=True)
    >>> sorted(set(np.asarray(out).ravel().tolist()))
    [0.0, 2.0]
    >>> layer.keep_probability
    0.5
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        drawn = seed
        if seed is None and rate > 0 and keras.backend.backend() == "torch":
            drawn = random.randint(1, int(1e9))  # Keras's own draw
        super().__init__(rate, noise_shape=noise_shape, seed=drawn, **kwargs)
        self.seed = seed  # the config's: None draws again
        threshold = round((1.0 - rate) * _DECISIONS)
        error = abs(threshold / _DECISIONS - (1.0 - rate))
        # None: Keras's per-element draw (`Dropout.call`), for rate 0 or
        # 1, a `1 - rate` not close enough to a multiple of 2**-11, and
        # on JAX and torch.
        packs = (
            0 < threshold < _DECISIONS
            and error <= 0.01 * min(rate, 1.0 - rate)
            and keras.backend.backend() not in ("jax", "torch")
        )
        self._threshold = threshold if packs else None

    @property
    def keep_probability(self):
        """The probability that an element is kept: `1 - rate`, or its
        nearest multiple of `2**-11` where decisions are packed (on
        TensorFlow)."""
        if self._threshold is None:
            return 1.0 - self.rate
        return self._threshold / _DECISIONS

    def call(self, inputs, training=False):
        if not training or self._threshold is None:
            return super().call(inputs, training=training)
        shape = self._mask_shape(inputs)
        size = math.prod(shape)
        draws = keras.random.uniform(
            ((size + 1) // 2,), dtype="float32", seed=self.seed_generator
        )  # (ceil(size / 2),)
        draws = ops.cast(draws * (1 << 2 * _DECISION_BITS), "int32")
        decisions = ops.concatenate(
            [
                ops.right_shift(draws, _DECISION_BITS),
                ops.bitwise_and(draws, _DECISIONS - 1),
            ]
        )[:size]  # (size,), uniform in [0, 2**11)
        keep = ops.reshape(decisions < self._threshold, shape)
        scale = ops.cast(_DECISIONS / self._threshold, inputs.dtype)
        return ops.where(keep, inputs * scale, ops.zeros_like(inputs))

    def _mask_shape(self, inputs):
        """The mask's shape: `noise_shape` with its Nones (or, without
        one, every axis) taken from `inputs`."""
        shape = ops.shape(inputs)
        if self.noise_shape is None:
            return tuple(shape)
        return tuple(
            shape[i] if dim is None else dim
            for i, dim in enumerate(self.noise_shape)
        )
