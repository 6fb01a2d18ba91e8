"""Every `>>>` example in the docstrings of the public API runs and prints
what it says (the `Example:` blocks of the classes, their methods and the
public functions of each package's `__all__`)."""

import doctest
import importlib
import inspect

import pytest

PACKAGES = (
    "keras_txl.layers",
    "keras_txl.models",
    "keras_txl.training",
    "keras_txl.data",
    "keras_txl.distribute",
    "keras_txl.export",
    "keras_txl.convert",
    "keras_txl.ablation",
)


def _public_objects():
    """`(name, object, module globals)` of every public class and function
    whose docstrings (or methods' docstrings) hold `>>>` examples."""
    found = {}
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        for name in getattr(package, "__all__", ()):
            value = getattr(package, name)
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            if not value.__module__.startswith("keras_txl"):
                continue
            # A class and the keras_txl classes it is made of (mixins
            # such as `TransformerXLGeneration`, whose methods it shows).
            for part in getattr(value, "__mro__", (value,)):
                if part.__module__.startswith("keras_txl"):
                    key = f"{part.__module__}.{part.__qualname__}"
                    found.setdefault(key, part)
    return sorted(found.items())


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = []
    for key, value in _public_objects():
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
