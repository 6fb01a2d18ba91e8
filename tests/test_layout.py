"""The house's shape, kept: no file past 800 lines, one benchmark per
question, and a public surface that docs/design.md lists (no count of
files: a package is split by concept, issue 52). Read from the files:
nothing is imported but the packages' `__all__`."""

import ast
import re

from tests.test_case import REPO
from tests.test_case import repository_files

MAX_LINES = 800


def _python_files(folder):
    return [
        p
        for p in repository_files()
        if p.suffix == ".py" and p.is_relative_to(REPO / folder)
    ]


def _lines(path):
    with open(path, encoding="utf-8") as file:
        return sum(1 for _ in file)


def test_no_module_of_the_library_or_benchmarks_passes_800_lines():
    files = _python_files("keras_txl") + _python_files("benchmarks")
    assert len(files) > 50
    long = {
        p.relative_to(REPO).as_posix(): n
        for p in files
        if (n := _lines(p)) > MAX_LINES
    }
    assert not long, f"split these (at most {MAX_LINES} lines): {long}"


def test_benchmarks_answer_a_question_each():
    files = [
        p for p in repository_files() if p.is_relative_to(REPO / "benchmarks")
    ]
    lines = sum(_lines(p) for p in files if p.suffix == ".py")
    assert len(files) <= 12, sorted(p.name for p in files)
    assert lines <= 3500, lines


def _all(tree):
    """The names of a module's `__all__`, read from its syntax tree."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "__all__" for t in node.targets
        ):
            return [ast.literal_eval(e) for e in node.value.elts]
    return []


def _package_all(package=None):
    parts = ["keras_txl"] + ([package] if package else []) + ["__init__.py"]
    return _all(ast.parse(REPO.joinpath(*parts).read_text(encoding="utf-8")))


def test_the_top_level_all_names_every_public_package():
    packages = sorted(
        p.parent.name
        for p in (REPO / "keras_txl").glob("*/__init__.py")
        if p.parent.name not in {"app", "utils"}
    )
    assert set(packages) <= set(_package_all()), packages


def test_design_md_lists_every_public_name():
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    words = set(re.findall(r"`([A-Za-z_][\w.]*)`", design))
    missing = {
        package: [n for n in _package_all(package) if n not in words]
        for package in (
            "layers",
            "metrics",
            "models",
            "training",
            "data",
            "distribute",
            "export",
            "convert",
        )
    }
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, f"docs/design.md's package map lacks {missing}"
