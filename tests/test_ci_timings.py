"""`.ci/timings.py` reads what `.ci/run` prints and extends the table of
CI times in CONTRIBUTING.md."""

import importlib.util
import re

import pytest

from tests.test_case import REPO

SPEC = importlib.util.spec_from_file_location(
    "ci_timings", REPO / ".ci" / "timings.py"
)
timings = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(timings)
SPEED_SPEC = importlib.util.spec_from_file_location(
    "machine_speed", REPO / ".ci" / "machine_speed.py"
)
machine_speed = importlib.util.module_from_spec(SPEED_SPEC)
SPEED_SPEC.loader.exec_module(machine_speed)
SPEED = {
    "cpu": "Intel(R) Xeon(R) Processor (family 6 model 167)",
    "new_memory": 0.4512,
    "touched_memory": 9.71,
    "python_loop": 0.2951,
}


def _log_of_ci_run(seconds):
    """The lines `.ci/run` echoes, its `$(( ... ))` arithmetic replaced by
    `seconds`, and pytest's three summaries."""
    script = (REPO / ".ci" / "run").read_text()
    echoes = re.findall(r'^\s*echo "(.*)"$', script, re.M)
    lines = [re.sub(r"\$\(\(.*?\)\)", str(seconds), e) for e in echoes]
    # What `python3 .ci/machine_speed.py`, which `.ci/run` calls, prints.
    assert "python3 .ci/machine_speed.py" in script
    lines.insert(1, machine_speed.line(SPEED))
    lines += [
        "675 passed, 35 warnings in 1074.05s (0:17:54)",
        "434 passed, 32 warnings in 709.30s (0:11:49)",
        "1 failed, 148 passed, 16 warnings in 34.90s",
    ]
    return "\n".join(lines)


def test_reads_the_stage_times_that_ci_prints():
    seconds, counts = timings.parse(_log_of_ci_run(120))
    assert seconds == dict.fromkeys(
        ("install", "tensorflow", "jax", "torch", "total"), 120
    )
    assert counts == {
        "tensorflow": (675, 0),
        "jax": (434, 0),
        "torch": (148, 1),
    }
    speed = timings.machine(_log_of_ci_run(120))
    assert speed == "0.45 / 9.7 GB/s, 0.30 s"
    row = timings.row(seconds, counts, "abc1234", "idle", "2026-12-01", speed)
    assert row == (
        "| 2026-12-01 | abc1234 | 2.0 | 2.0 (675) | 2.0 (434) "
        "| 2.0 (148 +1 failed) | **2.0** | idle | 0.45 / 9.7 GB/s, 0.30 s |"
    )
    # A log of a `.ci/run` from before the machine's line: an empty cell.
    assert timings.machine(_log_of_ci_run(120).replace("===", "")) == ""


def test_the_machine_speed_is_measured_and_printed_as_one_line():
    speed = machine_speed.measure()
    assert speed["new_memory"] > 0 and speed["touched_memory"] > 0
    assert speed["python_loop"] > 0 and speed["cpu"]
    line = machine_speed.line(speed)
    assert "\n" not in line
    assert timings.MACHINE.search(line), line


def test_a_cut_log_is_refused_and_rows_are_appended():
    cut = _log_of_ci_run(60).split("torch took")[0]
    with pytest.raises(ValueError, match="torch, total"):
        timings.parse(cut)
    text = (REPO / "CONTRIBUTING.md").read_text()
    rows = text.split(timings.START)[1].split(timings.END)[0].strip()
    extended = timings.add_row(text, "| new |")
    new_rows = extended.split(timings.START)[1].split(timings.END)[0]
    assert new_rows.strip() == rows + "\n| new |"
    assert extended.split(timings.END)[1] == text.split(timings.END)[1]
