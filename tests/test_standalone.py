"""The repository stands alone: nothing in it reaches a folder beside the
checkout, and every reference file the tests read is in `tests/fixtures/`
with the checksum its README records."""

import hashlib
import re

import pytest

from tests.test_case import DATA
from tests.test_case import FIXTURES
from tests.test_case import REPO
from tests.test_case import repository_files

# Written in pieces so that this file does not match itself.
OUTSIDE = re.compile(
    "|".join(
        [
            r"\.\./" + "shared",
            r"parents\[\d\]\.parent",
            r"\"" + "shared" + r"\"\s*/",
            r"/\s*\"" + "shared" + r"\"",
            r"\"\.\.\",\s*\"" + "shared",
        ]
    )
)


def test_no_file_reaches_outside_the_repository():
    offenders = []
    for path in repository_files():
        if path.suffix not in {".py", ".md", ".toml", ".sh", ".cfg", ".txt"}:
            if path.name != "run":  # .ci/run
                continue
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        for number, line in enumerate(
            path.read_text(encoding="utf-8", errors="replace").splitlines(), 1
        ):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line}")
    assert not offenders, (
        "These lines read a folder beside the checkout, which a user's "
        "clone does not have; carry the file into the repository "
        "(tests/fixtures/ or data/):\n" + "\n".join(offenders)
    )


def _recorded_checksums():
    sums = {}
    for line in (FIXTURES / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.removeprefix("./")] = digest
    return sums


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fixture_checksums_are_recorded_for_every_file():
    recorded = set(_recorded_checksums())
    present = {
        str(p.relative_to(FIXTURES))
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name not in {"README.md", "SHA256SUMS"}
    }
    assert present == recorded, (
        f"tests/fixtures/SHA256SUMS lists {sorted(recorded - present)} "
        f"that are missing and misses {sorted(present - recorded)}: "
        "update it with the script that made the files (see the README)"
    )


@pytest.mark.parametrize("name", sorted(_recorded_checksums()))
def test_fixture_matches_its_checksum(name):
    assert _sha256(FIXTURES / name) == _recorded_checksums()[name]


def test_corpus_is_the_documented_text():
    text = DATA / "tinyshakespeare.txt"
    assert text.stat().st_size == 1_115_394
    assert _sha256(text) == (
        "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
    )
