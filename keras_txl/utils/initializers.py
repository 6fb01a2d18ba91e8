"""One initializer argument, a fresh draw for every weight.

A layer takes one `kernel_initializer` (or `bias_initializer`, ...) and
makes several weights with it: the query, key and value projections, the
two feed-forward kernels, one projection per adaptive cluster. A Keras
initializer instance draws from its own seed, fixed when it is created,
so the same instance gives the same values at every call: handed as it is
to each weight, it makes the query, key and value kernels equal, and every
layer of a backbone a copy of the first. `fresh_initializer` gives each
weight an instance of its own, as Keras's `MultiHeadAttention` does for
its sublayers: one of the same class and configuration, with its own seed
when the argument had none. An initializer with an explicit seed keeps it
(its values repeat, as the user asked), and a string or a callable that
is not a Keras initializer is returned as it is.
"""

import keras


def fresh_initializer(initializer):
    """A new instance of `initializer` for one weight.

    Args:
        initializer: a `keras.initializers.Initializer`, or anything
            `keras.initializers.get` accepts.

    Returns:
        A `keras.initializers.Initializer` of the same class and
        configuration (a new default seed when `initializer` had no
        seed), or `initializer` itself when it is not one.

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
    return initializer.__class__.from_config(initializer.get_config())
