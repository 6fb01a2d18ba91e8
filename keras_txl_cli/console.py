"""What the `keras-txl` command prints: its own output only.

TensorFlow, XLA and CUDA's native libraries write start-up lines straight
to file descriptor 2 (oneDNN, "Could not find cuda drivers", cuInit, the
CPU feature guard, "All log messages before absl::InitializeLog()"),
whatever `TF_CPP_MIN_LOG_LEVEL` says in TensorFlow 2.21, while `import
keras_txl` loads Keras and TensorFlow. The console script
(`keras_txl_cli.main`) calls `quiet_native_logs` before that: descriptor
2 goes to `/dev/null`, Python's `sys.stderr` stays on a copy of the real
descriptor, so the command's own errors and the traceback of a bug still
show. Absl, grain and Keras add Python warnings and log records that are
not the user's business (the `prefetch_buffer_size` of tf.data, "shuffle
ignored", the float8 quantization modes): `quiet_libraries` silences
them while a subcommand runs. `keras-txl --verbose ...` keeps everything.
"""

import contextlib
import io
import logging
import os
import re
import sys
import unicodedata
import warnings

VERBOSE_FLAG = "--verbose"
_native_logs = {"quiet": False}


def wants_verbose(argv):
    """Whether `argv` (the command's arguments, without the program) asks
    for `--verbose` before the subcommand."""
    for argument in argv:
        if argument == VERBOSE_FLAG:
            return True
        if not argument.startswith("-"):
            return False
    return False


def quiet_native_logs(argv=None):
    """Unless `argv` (default: `sys.argv[1:]`) asks for `--verbose`:
    descriptor 2 to `/dev/null`, `sys.stderr` on a copy of the real one.
    Does nothing the second time. Call it before Keras is imported."""
    argv = sys.argv[1:] if argv is None else argv
    if _native_logs["quiet"] or wants_verbose(argv):
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
    _native_logs["quiet"] = True


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


# `--progress` -> the Keras verbosity of `fit` and `evaluate` (2: one line
# per epoch or pass, with no carriage return or terminal code).
PROGRESS = {"bar": 1, "lines": 2, "none": 0}


def progress_flag(what):
    """The keyword arguments of the `--progress` flag of a command whose
    progress is `what` ("bar: ...; lines: ...")."""
    return dict(
        choices=("auto", *PROGRESS),
        default="auto",
        help=f"{what}, no terminal codes (for a log file); none: the "
        "results only (default auto: bar on a terminal, else lines)",
    )


def progress_verbosity(progress):
    """The Keras verbosity of `--progress` (auto: bars when standard output
    is a terminal)."""
    if progress == "auto":
        progress = "bar" if sys.stdout.isatty() else "lines"
    return PROGRESS[progress]


# The library's argument names -> the flags of the commands that set them.
_FLAG_WORDS = {
    "batch_size": "--batch-size",
    "sequence_length": "--segment-length",
    "segment_length": "--segment-length",
    "memory_length": "--memory-length",
}
_FLAG_COMMANDS = ("train", "evaluate", "export", "ablate")


def in_flag_words(command, message):
    """`message`, an error of the library, in the words of `keras-txl
    command`: `batch_size` is `--batch-size`, `sequence_length` the
    `--segment-length`; a text that is not UTF-8 points to the byte
    tokenizer, which reads any file."""
    if command in _FLAG_COMMANDS:
        for name, flag in _FLAG_WORDS.items():
            message = re.sub(rf"`{name}`|\b{name}\b(?==)", flag, message)
            message = message.replace(f"{flag}=", f"{flag} ")
            message = re.sub(rf"(?<![\w-]){name}\b", flag, message)
    if command == "train" and "as utf-8" in message:
        message += " Or train on its bytes: --tokenizer byte."
    return message


def printable(text):
    """`text` safe for a terminal: control characters (a byte-level model
    writes any byte: bell, escape, backspace) as `\\x07`-style escapes;
    line breaks and tabs kept."""
    return "".join(
        char
        if char in "\n\t" or unicodedata.category(char) != "Cc"
        else f"\\x{ord(char):02x}"
        for char in text
    )
