"""`ConfigError`: the error of a command-line option, raised by every
subcommand."""


class ConfigError(ValueError):
    """A bad option value, or options that do not go together: the
    message names the option and the fix. The command prints it as one
    line (`keras-txl SUBCOMMAND: error: ...`) with exit status 1."""
