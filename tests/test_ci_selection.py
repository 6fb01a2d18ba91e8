"""CI runs what the markers promise.

`.ci/run` runs pytest once per backend, each with its `-m` expression.
A test marked for a backend (see `tests/conftest.py`: TensorFlow always,
JAX unless `one_backend`, PyTorch when `torch_ok`) must be selected by
that backend's run, and the test commands of the README and
CONTRIBUTING.md must be CI's. The collected-tests check sees the tests of
this session: the whole suite in CI's TensorFlow run.
"""

import re
import shlex

import pytest

from tests.conftest import COLLECTED_MARKERS
from tests.test_case import REPO

CI_FLAGS = re.compile(r"^(-q|--durations=\d+)$")  # CI's output, not selection


def pytest_commands(text):
    """`KERAS_BACKEND=... python -m pytest ...` commands of `text`, one a
    line or joined by `&&`, without CI's output flags."""
    commands = []
    for line in text.splitlines():
        for part in line.split("&&"):
            if not re.match(r"\s*KERAS_BACKEND=\w+ python -m pytest ", part):
                continue
            words = shlex.split(part)
            commands.append([w for w in words if not CI_FLAGS.match(w)])
    return commands


def ci_runs():
    """`{backend: -m expression, or None for every test}` of `.ci/run`."""
    runs = {}
    for words in pytest_commands((REPO / ".ci" / "run").read_text()):
        backend = words[0].split("=", 1)[1]
        options = words[4:]
        expression = None
        if "-m" in options:
            expression = options[options.index("-m") + 1]
        assert backend not in runs, f".ci/run runs {backend} twice"
        runs[backend] = expression
    assert set(runs) == {"tensorflow", "jax", "torch"}, runs
    return runs


class _Marks(dict):
    def __missing__(self, name):
        return False


def selects(expression, markers):
    """Whether `pytest -m expression` selects a test with `markers`."""
    if expression is None:
        return True
    # pytest's -m grammar here: marker names, and, or, not, parentheses.
    assert re.fullmatch(r"[\w\s()]+", expression), expression
    marks = _Marks({name: True for name in markers})
    return bool(eval(expression, {"__builtins__": {}}, marks))


def promised(markers):
    """The backends whose CI run must run a test with `markers`."""
    backends = {"tensorflow"}
    if "one_backend" not in markers:
        backends.add("jax")
    if "torch_ok" in markers:
        backends.add("torch")
    return backends


def unkept_promises(markers, runs):
    return sorted(
        backend
        for backend in promised(markers)
        if not selects(runs.get(backend, "false"), markers)
    )


def test_ci_keeps_the_promise_of_each_combination_of_markers():
    runs = ci_runs()
    assert unkept_promises(set(), runs) == []
    assert unkept_promises({"torch_ok"}, runs) == []
    assert unkept_promises({"one_backend"}, runs) == []
    assert unkept_promises({"backend_dependent", "torch_ok"}, runs) == []
    assert unkept_promises({"torch_ok", "slow"}, runs) == []
    # What CI cannot keep: PyTorch for a TensorFlow-only test.
    assert unkept_promises({"torch_ok", "one_backend"}, runs) == ["torch"]
    # And the selection is not "everything": one_backend tests stay off
    # JAX and PyTorch, unmarked ones off PyTorch.
    assert not selects(runs["jax"], {"one_backend"})
    assert not selects(runs["torch"], set())


def test_every_collected_test_runs_where_its_markers_say(request):
    runs = ci_runs()
    collected = request.config.stash[COLLECTED_MARKERS]
    assert request.node.nodeid in collected
    broken = [
        f"{nodeid}: never run on {', '.join(backends)}"
        for nodeid, markers in sorted(collected.items())
        if (backends := unkept_promises(markers, runs))
    ]
    assert not broken, (
        "Marked for a CI run that never selects them (tests/conftest.py "
        "says which backends run a test: mark them backend_dependent or "
        "drop torch_ok):\n" + "\n".join(broken)
    )


def _documented_commands(name, heading):
    text = (REPO / name).read_text(encoding="utf-8")
    section = text.split(heading, 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return pytest_commands(block)


@pytest.mark.parametrize(
    "name, heading",
    [("README.md", "## Run the tests"), ("CONTRIBUTING.md", "## Test")],
)
def test_documented_test_commands_are_ci_s(name, heading):
    ci = pytest_commands((REPO / ".ci" / "run").read_text())
    assert _documented_commands(name, heading) == ci


def test_the_files_run_first_exist():
    """`LONGEST_FIRST` (tests/conftest.py) names files of the suite: a
    renamed one would quietly drop back to its alphabetical turn."""
    from tests.conftest import LONGEST_FIRST

    missing = [path for path in LONGEST_FIRST if not (REPO / path).is_file()]
    assert not missing, missing


def test_n_workers_steal_work_in_collection_order(monkeypatch):
    """`pytest -n 2` (xdist's default `--dist load`) hands out tests by
    work stealing (tests/conftest.py): with LONGEST_FIRST, `load` would
    give one worker every long file at once. Another `--dist` is kept."""
    import xdist.scheduler

    from tests.conftest import pytest_xdist_make_scheduler

    class Config:
        def __init__(self, dist):
            self.dist = dist

        def getvalue(self, name):
            assert name == "dist"
            return self.dist

    made = []
    monkeypatch.setattr(
        xdist.scheduler,
        "WorkStealingScheduling",
        lambda config, log: made.append((config, log)) or "worksteal",
    )
    config = Config("load")
    assert pytest_xdist_make_scheduler(config, "log") == "worksteal"
    assert made == [(config, "log")]
    for dist in ("loadfile", "each", "worksteal"):
        assert pytest_xdist_make_scheduler(Config(dist), "log") is None


def test_each_worker_starts_with_its_group(monkeypatch):
    """EACH_WORKER_FIRST (tests/conftest.py): each group leads the share
    WorkStealingScheduling first hands a worker (of `n` tests left for
    `w` workers, the next takes `n // w`); the other tests keep their
    order; alone (no xdist), the groups come first."""
    import pathlib
    import types

    from tests.conftest import EACH_WORKER_FIRST
    from tests.conftest import _EachWorkerFirst

    for path, _ in EACH_WORKER_FIRST:
        assert (REPO / path).is_file(), path
    root = pathlib.Path("/repo")

    def item(path, param=None):
        callspec = types.SimpleNamespace(id=param) if param else None
        return types.SimpleNamespace(path=root / path, callspec=callspec)

    (first, one), (second, other) = EACH_WORKER_FIRST
    rest = [item(f"tests/test_{i}.py") for i in range(7)]
    groups = [[item(first, one) for _ in range(3)]]
    groups.append([item(second, other) for _ in range(3)])
    items = rest[:2] + groups[1] + rest[2:5] + groups[0] + rest[5:]
    config = types.SimpleNamespace(rootpath=root)
    hook = _EachWorkerFirst().pytest_collection_modifyitems
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    ordered = list(items)
    hook(config, ordered)
    # 13 tests: the first worker takes 6, the second 7.
    assert ordered == groups[0] + rest[:3] + groups[1] + rest[3:]
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    ordered = list(items)
    hook(config, ordered)
    assert ordered == groups[0] + groups[1] + rest
