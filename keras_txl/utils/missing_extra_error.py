import importlib


class MissingExtraError(ImportError):
    """An optional feature whose package is not installed.

    Its message is one line: what needs the package and the
    `pip install` that brings it (the extra of keras-txl that declares it
    in pyproject.toml). The `keras-txl` command prints it as its error,
    without a traceback. It is an `ImportError`, so code that catches an
    import's failure catches it too.

    Args:
        module: str. The module that could not be imported
            (`"matplotlib"`).
        extra: str. The extra of keras-txl that installs it (`"plot"`).
        needed_for: str. What needs it, the subject of "... needs
            matplotlib" ("Drawing a run's pictures").

    Example:

    >>> error = MissingExtraError("matplotlib", "plot", "Drawing a picture")
    >>> str(error)
    "Drawing a picture needs matplotlib: pip install 'keras-txl[plot]'."
    >>> error.extra
    'plot'
    """

    def __init__(self, module, extra, needed_for):
        self.module = str(module)
        self.extra = str(extra)
        self.needed_for = str(needed_for)
        super().__init__(
            f"{self.needed_for} needs {self.module}: pip install "
            f"'keras-txl[{self.extra}]'.",
            name=self.module,
        )


def import_extra(module, extra, needed_for):
    """`importlib.import_module(module)`, or `MissingExtraError` naming
    `extra` when the module (or a package it needs) is not installed.

    Args:
        module: str. The module to import (`"pyarrow.parquet"`).
        extra: str. The extra of keras-txl that installs it.
        needed_for: str. What needs it (see `MissingExtraError`).

    Returns:
        The module.

    Example:

    >>> import_extra("json", "none", "Reading JSON").dumps([1])
    '[1]'
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(
            module.split(".")[0], extra, needed_for
        ) from error
