"""The API reference site builds with `mkdocs build --strict` and
documents the call arguments of the layers (CONTRIBUTING.md, "Docs
site")."""

import html
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.test_layout import PUBLIC

REPO = Path(__file__).resolve().parents[1]


def _section(page, anchor):
    """The text of the API entry `anchor` on `page`, up to the next
    class entry."""
    start = page.index(f'id="{anchor}"')
    end = page.find('class="doc doc-object doc-class"', start)
    text = re.sub(r"<[^>]+>", " ", page[start : end if end > 0 else None])
    return " ".join(html.unescape(text).split())


def test_mkdocs_build_strict_documents_call_arguments(tmp_path):
    # A fresh process, as `mkdocs build --strict` runs in CI: a broken
    # link, a missing page or an unresolved reference fails it.
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"]
        + ["--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", **os.environ},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Each package's page documents its public names, and no other.
    for package, names in PUBLIC.items():
        page = (tmp_path / f"site/api/{package}/index.html").read_text()
        # (A function that shares its module's name is rendered from the
        # module: `keras_txl.training.dynamic_evaluation.dynamic_evaluation`.)
        pattern = rf'id="keras_txl\.{package}\.(?:(\w+)\.)?(\w+)"'
        entries = {
            name
            for module, name in re.findall(pattern, page)
            if module in ("", name)
        }
        assert sorted(entries) == sorted(names), package
    page = (tmp_path / "site/api/layers/index.html").read_text()
    rmha = _section(page, "keras_txl.layers.RelativeMultiHeadAttention")
    # The "Call arguments:" section is rendered as one, with each
    # argument and its description.
    call = rmha[rmha.index("Call arguments:") :]
    assert re.search(r"\bmemory\b .*optional tensor of shape", call), call
    assert re.search(
        r"\bmemory_valid_length\b .*number of valid memory slots", call
    ), call
