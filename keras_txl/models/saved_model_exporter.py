"""The writer of `TransformerXLCausalLM.export`: `keras_txl.export`'s
`export_saved_model`, which registers itself here when
`keras_txl.export` is imported (`import keras_txl` imports it): the
export package sits above the models."""

_EXPORTERS = []


def register_saved_model_exporter(export):
    """Sets `export(lm, path, **kwargs)` as the SavedModel writer."""
    _EXPORTERS[:] = [export]


def saved_model_exporter():
    """The registered SavedModel writer."""
    if not _EXPORTERS:
        raise RuntimeError(
            "No SavedModel writer is registered: `import keras_txl.export` "
            "(or `import keras_txl`) first."
        )
    return _EXPORTERS[0]
