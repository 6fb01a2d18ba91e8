"""Old configs that load as a subclass, without the base class importing it.

`TransformerXLBackbone` and `TransformerXLBlock` once took the arguments of
variants that are now subclasses of their own (the Compressive Transformer,
the ablations). A config saved then names the base class; it must load as
the variant it describes. The base class cannot import its subclasses (they
import it), so each subclass that claims such configs registers itself when
its module is imported, and `import keras_txl` imports every variant.
"""


class ConfigVariants:
    """Mixin for a base class whose saved configs may describe a subclass.

    The base class sets `_config_variants = []` in its body. A subclass
    that defines `_claims_config(config)` is added to the list of the
    nearest base that has one; `_config_variant(config)` returns the first
    variant that claims a config, else `None`.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_claims_config" not in cls.__dict__:
            return
        for base in cls.__mro__[1:]:
            if "_config_variants" in base.__dict__:
                base._config_variants.append(cls)
                return

    @classmethod
    def _claims_config(cls, config):
        """Whether a config saved under the base class describes `cls`."""
        return False

    @classmethod
    def _config_variant(cls, config):
        """The registered subclass that claims `config`, else `None`."""
        for variant in cls._config_variants:
            if variant._claims_config(config):
                return variant
        return None
