"""What the `keras-txl` command prints: its own output only.

TensorFlow, XLA and CUDA's native libraries write start-up lines straight
to file descriptor 2 (oneDNN, "Could not find cuda drivers", cuInit, the
CPU feature guard, "All log messages before absl::InitializeLog()"),
whatever `TF_CPP_MIN_LOG_LEVEL` says in TensorFlow 2.21, and absl, grain
and Keras add Python warnings that are not the user's business (the
`prefetch_buffer_size` of tf.data, "shuffle ignored", the float8
quantization modes). Run as the command, keras-txl sends descriptor 2 to
`/dev/null` before Keras loads TensorFlow, keeps Python's `sys.stderr` (so
its own errors and any traceback of a bug still show) on a copy of the
real descriptor, and silences the libraries' Python warnings and logs
while a subcommand runs. `keras-txl --verbose ...` keeps everything.

Nothing changes when keras_txl is imported as a library.
"""

import contextlib
import io
import logging
import os
import sys
import warnings

VERBOSE_FLAG = "--verbose"
# The Python loggers of the libraries the command drives.
_LIBRARY_LOGGERS = ("absl", "tensorflow", "jax", "grain", "keras", "h5py")
_state = {"quiet": False}


def is_command():
    """Whether this process is the `keras-txl` command (the console script
    or `python -m keras_txl`)."""
    name = os.path.basename(sys.argv[0] if sys.argv else "")
    if name in ("keras-txl", "keras-txl.exe", "keras-txl-script.py"):
        return True
    original = list(getattr(sys, "orig_argv", []))
    return "-m" in original and (
        original[original.index("-m") + 1 :][:1] == ["keras_txl"]
    )


def wants_verbose(argv):
    """Whether `argv` (the command's arguments, without the program) asks
    for `--verbose` before the subcommand."""
    for argument in argv:
        if argument == VERBOSE_FLAG:
            return True
        if not argument.startswith("-"):
            return False
    return False


def quiet_native_logs():
    """In the `keras-txl` command without `--verbose`: descriptor 2 to
    `/dev/null`, `sys.stderr` on a copy of the real one. Does nothing in
    any other process, and nothing the second time."""
    if _state["quiet"] or not is_command():
        return
    if wants_verbose(sys.argv[1:]):
        return
    try:
        sys.stderr.flush()
        real = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, AttributeError, ValueError):
        return  # no descriptor 2 to tidy up
    os.dup2(devnull, 2)
    os.close(devnull)
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    sys.stderr = io.TextIOWrapper(
        os.fdopen(real, "wb", buffering=0),
        encoding=encoding,
        errors="backslashreplace",
        line_buffering=True,
    )
    _state["quiet"] = True


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
