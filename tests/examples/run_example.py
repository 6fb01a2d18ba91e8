"""Runs an example script the way a user does: `python examples/NAME.py
ARGS` in a fresh process, from the repository root."""

import re

from tests.export.txl_export_testing import run_python


def run_example(name, *args, backend=None, timeout=600):
    """Runs `examples/NAME` with `args`; returns its stdout (raises with
    its stderr when it fails)."""
    command = [f"examples/{name}", *map(str, args)]
    return run_python(command, backend=backend, timeout=timeout)


def numbers(pattern, text):
    """The floats of every match of `pattern` (one group) in `text`."""
    return [float(value) for value in re.findall(pattern, text, re.M)]
