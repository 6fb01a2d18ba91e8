"""Checks of the classes that `TransformerXLCausalLM` has as bases before
keras-hub's `CausalLM` (`CarriedMemory`, `TransformerXLGeneration`): each
declares the attributes it reads of the task (`HOST_ATTRIBUTES`), and
these checks name what a class using it lacks, when the class is defined
and when a model is made, instead of an `AttributeError` deep in `fit`
or `generate`."""

import keras_hub


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
