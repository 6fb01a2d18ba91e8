"""What the `keras-txl` command prints: its own output only.

Absl, grain and Keras add Python warnings and log records that are not
the user's business (the `prefetch_buffer_size` of tf.data, "shuffle
ignored", the float8 quantization modes): `quiet_libraries` silences them
while a subcommand runs. The native libraries' lines written to file
descriptor 2 are hidden before keras_txl loads, by the console script
(`keras_txl_cli.py`). `keras-txl --verbose ...` keeps everything.
"""

import contextlib
import logging
import warnings

# The Python loggers of the libraries the command drives.
_LIBRARY_LOGGERS = ("absl", "tensorflow", "jax", "grain", "keras", "h5py")


@contextlib.contextmanager
def quiet_libraries(verbose):
    """While a subcommand runs: the Python warnings and log records (below
    ERROR) of TensorFlow, absl, grain, JAX and Keras are not shown, unless
    `verbose`. Restores the filters and levels when done."""
    if verbose:
        yield
        return
    loggers = [logging.getLogger(name) for name in _LIBRARY_LOGGERS]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)
