"""The API reference site builds with `mkdocs build --strict` as users
and CI run it, with no warning, and documents the call arguments of the
layers one entry each (CONTRIBUTING.md, "Docs site")."""

import html
import os
import re
import subprocess
import sys
from pathlib import Path

from keras_txl.layers import RelativeMultiHeadAttention
from tests.test_layout import PUBLIC

REPO = Path(__file__).resolve().parents[1]
# One rendered entry of a docstring section: `<li ...><b><code>NAME</code>
# </b> – <div ...>DESCRIPTION</div></li>`.
ENTRY = re.compile(
    r'<li class="doc-section-item[^"]*">\s*<b><code>([^<]+)</code></b>'
    r"(.*?)</li>",
    re.S,
)
ARGUMENT = re.compile(r"^ {8}(\w+): (.*)$")


def _text(markup):
    """The text of HTML `markup`, tags dropped, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", markup)).split())


def _rendered_call_arguments(page, anchor):
    """`[(name, description)]` of the "Call arguments:" list of the API
    entry `anchor` on `page`, each rendered entry as one pair."""
    start = page.index(f'id="{anchor}"')
    end = page.find('class="doc doc-object doc-class"', start)
    entry = page[start : end if end > 0 else None]
    title = entry.index('doc-section-title">Call arguments:<')
    section = entry[title : entry.index("</ul>", title)]
    return [
        (name, _text(rest).lstrip("–").strip())
        for name, rest in ENTRY.findall(section)
    ]


def _docstring_call_arguments(cls):
    """`[(name, description)]` of `cls`'s "Call arguments:" section as
    written (backticks dropped, spaces collapsed)."""
    lines = cls.__doc__.splitlines()
    lines = lines[lines.index("    Call arguments:") + 1 :]
    found = []
    for line in lines:
        if not line.strip():
            break
        match = ARGUMENT.match(line)
        if match:
            found.append([match.group(1), match.group(2)])
        else:
            found[-1][1] += " " + line.strip()
    return [(n, " ".join(d.replace("`", "").split())) for n, d in found]


def test_mkdocs_build_strict_documents_call_arguments(tmp_path):
    # A fresh process, the command CONTRIBUTING gives, without `--quiet`
    # (under which mkdocs emits no warning, so that `--strict` counts
    # none): a page outside the nav, a broken link, a missing page or an
    # unresolved reference fails it.
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict"]
        + ["--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", **os.environ},
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert "Documentation built" in log, log[-3000:]
    # mkdocs's warnings (a plugin's, a hook's too), which --strict may
    # not count.
    assert not re.search(r"^WARNING +-", log, re.M), log[-3000:]
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
    # The "Call arguments:" section is a list with one entry per
    # argument, named, with its own description and no other's.
    rendered = _rendered_call_arguments(
        page, "keras_txl.layers.RelativeMultiHeadAttention"
    )
    expected = _docstring_call_arguments(RelativeMultiHeadAttention)
    assert [name for name, _ in expected][:4] == [
        "query",
        "position_embedding",
        "memory",
        "memory_valid_length",
    ], expected
    assert rendered == expected
