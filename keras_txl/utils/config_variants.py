"""Old configs that load as a subclass.

`TransformerXLBackbone` and `TransformerXLBlock` once took the arguments of
variants that are now subclasses of their own (the Compressive Transformer,
the ablations). A config saved then names the base class; it must load as
the variant it describes. The base class's `from_config` imports its
variants where it needs them (they import it, so not at the top of its
file) and asks `saved_variant` which one a config describes. Each variant
declares `base_arguments`: `{argument: its value in the base class's
model}` for the arguments the base class once took.
"""


def saved_variant(config, variants):
    """The first of `variants` that `config`, saved under their base
    class, describes, else `None`.

    A variant is described when one of its `base_arguments` holds another
    value than the base class's model's. An argument whose base value is
    `None` decides nothing; two values that are both "off" (`0`, `None`,
    `False`) are the same.
    """
    for variant in variants:
        if any(
            key in config
            and value is not None
            and config[key] != value
            and bool(config[key] or value)
            for key, value in variant.base_arguments.items()
        ):
            return variant
    return None


def drop_variant_arguments(config, variants):
    """`config` without the `base_arguments` of `variants` (a config of
    the base class's own model, saved when it took them)."""
    names = {key for variant in variants for key in variant.base_arguments}
    return {key: value for key, value in config.items() if key not in names}
