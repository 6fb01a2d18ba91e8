"""One initializer argument, a fresh draw for every weight.

A layer takes one `kernel_initializer` (or `bias_initializer`, ...) and
makes several weights with it: the query, key and value projections, the
two feed-forward kernels, one projection per adaptive cluster. A Keras
initializer instance without a seed picks one when it is created and
draws from it at every call, so the same instance gives the same values
each time: handed as it is to each weight, it makes the query, key and
value kernels equal, and every layer of a backbone a copy of the first.
`fresh_initializer` gives each weight what Keras gives the sublayers of
its `MultiHeadAttention`, which clones its initializers for the same
reason, with one difference for a `SeedGenerator` seed. By the seed of
the initializer a layer was given:

- none (every initializer keras-txl makes): a new instance of the same
  class and configuration, with a seed of its own (drawn from Python's
  `random`, so `keras.utils.set_random_seed` repeats the model): every
  weight distinct, as in Keras.
- a `keras.random.SeedGenerator`: the instance itself. Each call draws
  the generator's next seed, which Keras documents as the way to get
  other values at every call: every weight distinct, and the same model
  from the same generator seed. (Keras's clone would start a copy of the
  generator for each weight, and every weight would get the first draw.)
- an integer: kept, as Keras keeps it. An integer-seeded Keras
  initializer gives the same values at every call (Keras's documented
  meaning of the seed), so the weights of the same shape start equal,
  as in Keras's `MultiHeadAttention`. For reproducible, distinct weights,
  pass `seed=keras.random.SeedGenerator(n)` or call
  `keras.utils.set_random_seed(n)` before building the model.

A string or a callable that is not a Keras initializer is returned as it
is (Keras makes a new instance of a string for each weight).
"""

import keras


def fresh_initializer(initializer):
    """The initializer of one weight made from a layer's `initializer`.

    Args:
        initializer: a `keras.initializers.Initializer`, or anything
            `keras.initializers.get` accepts.

    Returns:
        `initializer` itself when it draws its seeds from a
        `keras.random.SeedGenerator` or is not a Keras initializer;
        otherwise a new `keras.initializers.Initializer` of the same class
        and configuration (a seed of its own when `initializer` had none,
        its integer seed when it had one).

    Example:

    >>> import keras
    >>> from keras_txl.utils.initializers import fresh_initializer
    >>> normal = keras.initializers.RandomNormal(stddev=0.02)
    >>> a = fresh_initializer(normal)((4, 4))
    >>> b = fresh_initializer(normal)((4, 4))
    >>> bool(keras.ops.all(a == b))
    False
    """
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    if isinstance(
        getattr(initializer, "seed", None), keras.random.SeedGenerator
    ):
        return initializer
    return initializer.__class__.from_config(initializer.get_config())
