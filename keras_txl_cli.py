"""The `keras-txl` console script: hides the native libraries' start-up
lines, then runs `keras_txl.app.cli.main`.

TensorFlow, XLA and CUDA's native libraries write start-up lines straight
to file descriptor 2 (oneDNN, "Could not find cuda drivers", cuInit, the
CPU feature guard, "All log messages before absl::InitializeLog()"),
whatever `TF_CPP_MIN_LOG_LEVEL` says in TensorFlow 2.21. They do so while
`import keras_txl` loads Keras and TensorFlow, so the command tidies up
before that: this module is outside the `keras_txl` package (importing any
`keras_txl.x` runs `keras_txl/__init__.py`, which loads them) and imports
nothing of it until descriptor 2 goes to `/dev/null`. Python's
`sys.stderr` stays on a copy of the real descriptor, so the command's own
errors and the traceback of a bug still show. `keras-txl --verbose ...`
keeps everything; `keras_txl.app.console.quiet_libraries` silences the
libraries' Python warnings and logs while a subcommand runs.

`python -m keras_txl` is the same command: `keras_txl/__init__.py` calls
`quiet_native_logs` first when the process is the command
(`started_as_command`; a second call does nothing). Importing keras_txl
as a library changes nothing.
"""

import io
import os
import sys

VERBOSE_FLAG = "--verbose"
_state = {"quiet": False}


def wants_verbose(argv):
    """Whether `argv` (the command's arguments, without the program) asks
    for `--verbose` before the subcommand."""
    for argument in argv:
        if argument == VERBOSE_FLAG:
            return True
        if not argument.startswith("-"):
            return False
    return False


def started_as_command():
    """Whether this process is the `keras-txl` command: its console script
    (this module's `main`, or an older install's script that imports
    `keras_txl.app.cli` first) or `python -m keras_txl`."""
    name = os.path.basename(sys.argv[0] if sys.argv else "")
    if name in ("keras-txl", "keras-txl.exe", "keras-txl-script.py"):
        return True
    original = list(getattr(sys, "orig_argv", []))
    return "-m" in original and (
        original[original.index("-m") + 1 :][:1] == ["keras_txl"]
    )


def quiet_native_logs(argv=None):
    """Unless `argv` (default: `sys.argv[1:]`) asks for `--verbose`:
    descriptor 2 to `/dev/null`, `sys.stderr` on a copy of the real one.
    Does nothing the second time."""
    argv = sys.argv[1:] if argv is None else argv
    if _state["quiet"] or wants_verbose(argv):
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


def main(argv=None):
    """The `keras-txl` command: returns its exit status."""
    quiet_native_logs(argv)
    from keras_txl.app.cli import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
