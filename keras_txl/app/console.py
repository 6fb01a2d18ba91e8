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
import re
import unicodedata
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
