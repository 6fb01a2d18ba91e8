"""Every `>>>` example in the library's docstrings runs and prints what it
says: the `Example:` blocks of every class, method and function of every
module (the public API's and the internal helpers' alike)."""

import doctest
import importlib
import inspect
import pkgutil

import pytest

import keras_txl


def _library_objects():
    """`(name, object)` of every class and function defined in a module
    of the library (`keras_txl.__main__`, which runs the command, aside)."""
    found = {}
    for info in pkgutil.walk_packages(keras_txl.__path__, "keras_txl."):
        if info.name.endswith(".__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            if value.__module__ == info.name:
                found.setdefault(f"{info.name}.{value.__qualname__}", value)
    return sorted(found.items())


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = []
    for key, value in _library_objects():
        module = importlib.import_module(value.__module__)
        for test in finder.find(value, key, module=module):
            if test.examples:
                tests.append(test)
    return tests


DOCTESTS = _doctests()


def test_the_public_api_has_examples():
    assert len(DOCTESTS) >= 20, [t.name for t in DOCTESTS]


@pytest.mark.slow
@pytest.mark.parametrize("test", DOCTESTS, ids=[t.name for t in DOCTESTS])
def test_docstring_example_runs(test, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write here
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    test.globs = dict(test.globs)
    result = runner.run(test, out=_collect(messages := []))
    assert result.failed == 0, "".join(messages)


def _collect(messages):
    return messages.append
