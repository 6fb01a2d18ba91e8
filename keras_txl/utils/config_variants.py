"""Old configs that load as a subclass, without the base class importing it.

`TransformerXLBackbone` and `TransformerXLBlock` once took the arguments of
variants that are now subclasses of their own (the Compressive Transformer,
the ablations). A config saved then names the base class; it must load as
the variant it describes. The base class cannot import its subclasses (they
import it), so each variant registers itself when its module is imported
(`import keras_txl` imports every variant).
"""


class ConfigVariants:
    """Mixin for a base class whose saved configs may describe a subclass.

    The base class sets `_config_variants = []` in its body. A subclass
    that sets `_variant_arguments`, `{argument: its value in the base
    class's model}` for the arguments the base class once took, is added
    to the list of the nearest base that has one. The base class's
    `from_config` loads a config where one of those arguments holds
    another value as that variant, and otherwise drops the arguments. An
    argument whose base value is `None` decides nothing (it is only
    dropped); two values that are both "off" (`0`, `None`, `False`) are
    the same.
    """

    _variant_arguments = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_variant_arguments" not in cls.__dict__:
            return
        for base in cls.__mro__[1:]:
            if "_config_variants" in base.__dict__:
                base._config_variants.append(cls)
                return

    @classmethod
    def _claims_config(cls, config):
        """Whether a config saved under the base class describes `cls`."""
        return any(
            key in config
            and value is not None
            and config[key] != value
            and bool(config[key] or value)
            for key, value in cls._variant_arguments.items()
        )

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "_config_variants" not in cls.__dict__:
            return super().from_config(config)
        for variant in cls._config_variants:
            if variant._claims_config(config):
                return variant.from_config(config)
        for variant in cls._config_variants:
            for key in variant._variant_arguments:
                config.pop(key, None)
        return super().from_config(config)
