"""The two pieces of the API reference site that configuration cannot say
(`mkdocs.yml` names this file twice).

As an MkDocs hook: the site's pages are `docs/*.md` plus the repository's
top-level `README.md` (the home page, `index.md`), `CONTRIBUTING.md` and
`CHANGELOG.md` (where it exists), read where they are, not copied. The
links between them are written for GitHub, from each file's place in the
repository (`docs/data.md` in the README, `../README.md` in a doc); each
is rewritten to the page's place in the site, so that one text is right in
both. A link to any other file stays as written, and `mkdocs build
--strict` refuses it if the site lacks its target.

As a griffe extension: the docstrings follow Keras's layout (`Args:`,
`Call arguments:`, `Returns:`, `Example:` followed by a blank line and
doctest lines). griffe's Google parser knows `Args:` and `Examples:`
only: `Call arguments:` would be an admonition of plain text and the
`>>>` lines of `Example:` Markdown quotes. Before parsing, this renames
them to sections it knows, keeping their titles: `Other Parameters: Call
arguments:` (a list of names, never checked against `__init__`'s
signature) and `Examples: Example:` (indented, so that its doctest lines
render as code).
"""

import os
import posixpath
import re

import griffe
from mkdocs.structure.files import File

# Repository files that are pages of the site: repository path -> page.
TOP_LEVEL_PAGES = {
    "README.md": "index.md",
    "CONTRIBUTING.md": "CONTRIBUTING.md",
    "CHANGELOG.md": "CHANGELOG.md",
}
DOCS = "docs"
# `](target)` or `](target#anchor)` of a relative Markdown link or image.
LINK = re.compile(r"\]\((?![a-z][\w+.-]*:|#|/)([^)\s#]+)((?:#[^)\s]*)?\))")
SECTION_TITLE = re.compile(r"^[A-Z][\w ]*:\s*$")


def _repository(config):
    return os.path.dirname(os.path.abspath(config["config_file_path"]))


def on_files(files, config, **kwargs):
    """Adds the top-level Markdown files as pages, from where they are."""
    root = _repository(config)
    for name, page in TOP_LEVEL_PAGES.items():
        path = os.path.join(root, name)
        if os.path.isfile(path):
            files.append(File.generated(config, page, abs_src_path=path))
    return files


def _repository_path(page):
    """`docs/x.md` or `README.md`: the repository path of site page `page`."""
    for name, site_page in TOP_LEVEL_PAGES.items():
        if page == site_page:
            return name
    return posixpath.join(DOCS, page)


def _site_path(path):
    """The site page of repository path `path`, or None if not a page."""
    if path in TOP_LEVEL_PAGES:
        return TOP_LEVEL_PAGES[path]
    if path.startswith(DOCS + "/"):
        return path[len(DOCS) + 1 :]
    return None


def site_links(markdown, page):
    """`markdown` of site page `page` with its GitHub-relative links to
    other pages rewritten relative to `page`'s place in the site."""
    here = posixpath.dirname(_repository_path(page))
    site_here = posixpath.dirname(page)

    def rewrite(match):
        target = posixpath.normpath(posixpath.join(here, match.group(1)))
        site = _site_path(target)
        if site is None:
            return match.group(0)
        relative = posixpath.relpath(site, site_here or ".")
        return f"]({relative}{match.group(2)}"

    return LINK.sub(rewrite, markdown)


def on_page_markdown(markdown, page, **kwargs):
    return site_links(markdown, page.file.src_uri)


def keras_sections(text):
    """Docstring `text` with Keras's `Call arguments:` and `Example:`
    renamed to sections that griffe's Google parser reads."""
    lines = text.splitlines()
    out, index = [], 0
    while index < len(lines):
        line = lines[index]
        if line.rstrip() == "Call arguments:":
            out.append("Other Parameters: Call arguments:")
        elif line.rstrip() in ("Example:", "Examples:"):
            out.append(f"Examples: {line.rstrip()}")
            index += 1
            while index < len(lines) and not lines[index].strip():
                index += 1  # griffe wants no blank line below a title
            block = []
            while index < len(lines) and not SECTION_TITLE.match(lines[index]):
                block.append(lines[index])
                index += 1
            indent = "" if block and block[0].startswith(" ") else "    "
            out += [indent + b if b.strip() else b for b in block]
            continue
        else:
            out.append(line)
        index += 1
    return "\n".join(out)


class KerasDocstrings(griffe.Extension):
    """Reads Keras's docstring sections (see the module docstring)."""

    def on_object(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = keras_sections(obj.docstring.value)
