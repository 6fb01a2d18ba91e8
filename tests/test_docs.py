"""The docs are tests: every ```python block of README.md, CONTRIBUTING.md
and docs/*.md runs as written, in a fresh interpreter (one process for
all the blocks, each block in its own namespace), after the README's own
command `keras-txl train` (made small, `tests.test_case.readme_run`)
wrote `runs/keras-txl` in the working folder. A block that is not meant
to run is not a python block.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.test_case import REPO
from tests.test_case import repository_files

DOCS = ["README.md", "CONTRIBUTING.md"] + sorted(
    os.path.relpath(path, REPO)
    for path in glob.glob(os.path.join(REPO, "docs", "*.md"))
)
FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
# Runs each block of the JSON list on stdin in its own namespace.
RUN_BLOCKS = """
import json, sys, traceback
failed = []
for name, line, code in json.load(sys.stdin):
    try:
        exec(compile(code, f"{name}:{line}", "exec"), {"__name__": "__main__"})
    except BaseException:
        failed.append(f"{name}:{line}\\n{traceback.format_exc()}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def python_blocks(name):
    """`[(line, code)]` of the ```python blocks of the file `name`."""
    blocks, code, indent = [], None, ""
    with open(os.path.join(REPO, name), encoding="utf-8") as file:
        lines = file.read().splitlines()
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if code is None and fence:
            if fence.group(2) == "python":
                code, indent, start = [], fence.group(1), number + 1
            else:
                code, indent, start = False, fence.group(1), None
        elif fence and code is not None:
            if code is not False:
                blocks.append((start, "\n".join(code) + "\n"))
            code = None
        elif code is not None and code is not False:
            code.append(
                line[len(indent) :] if line.startswith(indent) else line
            )
    return blocks


def test_python_blocks_are_found():
    blocks = python_blocks("README.md")
    assert len(blocks) >= 3
    assert any("call_with_memory" in code for _, code in blocks)


@pytest.mark.slow
def test_python_blocks_run_as_written(tmp_path, readme_run):
    blocks = [
        (name, line, code)
        for name in DOCS
        for line, code in python_blocks(name)
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # What the README's commands made before its blocks, small (the
    # session's `keras-txl train` run, which test_command_output.py reads
    # too), in `runs/keras-txl`, the README's --output.
    shutil.copytree(readme_run, tmp_path / "runs/keras-txl")
    assert (tmp_path / "runs" / "keras-txl" / "task.json").is_file()
    result = subprocess.run(
        [sys.executable, "-c", RUN_BLOCKS],
        input=json.dumps(blocks),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    # The README's preset block saved a preset that loads back.
    assert (tmp_path / "my_preset" / "task.json").is_file()


# A path of the repository in the docs: under one of its top folders, or
# a file at its root; "keras_txl/..." and the names relative to it that
# docs/design.md's tables use ("models/memory_spec.py").
TOP = r"(?:keras_txl|tests|benchmarks|examples|tools|docs|data|\.ci)/"
PACKAGES = r"(?:models|layers|metrics|utils|convert|app|data|export"
PACKAGES += r"|training|distribute|ablation)/"
PATH = re.compile(
    rf"(?<![\w./*-])((?:{TOP}|{PACKAGES})[\w./-]*[\w/]"
    r"|[\w-]+\.(?:md|toml|py)\b|\.ci/run)"
)
# Paths the docs name that are not the repository's: written by a run
# (`runs/`, `~/...`), the peers' code, or files a user makes.
ELSEWHERE = re.compile(
    r"^(?:runs|out|my_|OUT|RUN)|^data/(?:enwik8|text8|wikitext)|"
    r"mem_transformer\.py|train\.py|eval\.py|dynamic_eval_opt\.py|"
    r"dynamiceval_tf\.py|^tf/|^pytorch/|hf_exporter|^rnn\.py|^ablation\.md$"
)


def repository_paths(name):
    """`[(line, path)]` of the repository paths that doc `name` names."""
    found = []
    with open(os.path.join(REPO, name), encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            for path in PATH.findall(line):
                path = path.rstrip(".")
                if not ELSEWHERE.search(path):
                    found.append((number, path))
    return found


def _repository_files():
    """Every path of the repository (files and their folders)."""
    listed = [p.relative_to(REPO).as_posix() for p in repository_files()]
    paths = set(listed)
    for path in listed:
        parts = path.split("/")
        paths.update("/".join(parts[:i]) for i in range(1, len(parts)))
    return paths


def _exists(path, doc, files):
    """Whether `path`, as doc `doc` names it, is a path of the repository:
    from its root, from `keras_txl/`, from the doc's folder, a bare file
    name anywhere, or the start of a pattern (`tests/app/test_*.py`)."""
    path = path.split("::")[0]
    if "/" not in path.rstrip("/"):
        return any(f.split("/")[-1] == path for f in files)
    folder = os.path.dirname(doc)
    candidates = [path, f"keras_txl/{path}", os.path.join(folder, path)]
    candidates = [os.path.normpath(c).rstrip("/") for c in candidates]
    return any(
        c in files
        or (path.endswith("_") and any(f.startswith(c) for f in files))
        for c in candidates
    )


def test_docs_name_only_paths_that_exist():
    named = {name: repository_paths(name) for name in DOCS}
    assert sum(map(len, named.values())) > 100  # the pattern finds them
    files = _repository_files()
    missing = [
        f"{name}:{line}: {path}"
        for name, paths in named.items()
        for line, path in paths
        if not _exists(path, name, files)
    ]
    assert not missing, "docs name paths that do not exist:\n" + "\n".join(
        missing
    )
