"""Adds the timings of one `.ci/run` to the table in CONTRIBUTING.md.

    bash .ci/run 2>&1 | tee ci.log
    python .ci/timings.py ci.log --note "idle 2-core VM"

reads the stage times and test counts that `.ci/run` prints and appends a
row (date, commit, minutes per stage, tests per backend, note, and the
machine's speed that `.ci/machine_speed.py` measured at the start) to the
table between the `ci-timings` markers of CONTRIBUTING.md. `--dry-run`
prints the row instead. The table, not prose, is where CI times live.
"""

import argparse
import datetime
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONTRIBUTING = os.path.join(os.path.dirname(HERE), "CONTRIBUTING.md")
START, END = "<!-- ci-timings:start -->", "<!-- ci-timings:end -->"
HEADER = (
    "| date | commit | install | TensorFlow | JAX | torch | total "
    "| note | machine: new / touched memory, Python loop |"
    "\n|---|---|---:|---:|---:|---:|---:|---|---|"
)
# What `.ci/run` prints (see that file).
INSTALLED = re.compile(r"=== installed after (\d+) s")
STAGE = re.compile(r"\[(tensorflow|jax) took (\d+) s\]")
TORCH = re.compile(r"^torch took (\d+) s", re.M)
TOTAL = re.compile(r"^CI took (\d+) s", re.M)
MACHINE = re.compile(
    r"^=== machine: .*; new memory ([\d.]+) GB/s, touched ([\d.]+) GB/s; "
    r"Python loop ([\d.]+) s$",
    re.M,
)
SUMMARY = re.compile(r"^=* ?(?:(\d+) failed, )?(\d+) passed.* in [\d.]+s", re.M)


def parse(log):
    """`{"install", "tensorflow", "jax", "torch", "total"}` in seconds and
    `{"tensorflow", "jax", "torch"}` test counts (passed, failed) of a
    `.ci/run` log; raises `ValueError` naming what the log lacks."""
    seconds, missing = {}, []
    for name, pattern in (
        ("install", INSTALLED),
        ("torch", TORCH),
        ("total", TOTAL),
    ):
        found = pattern.search(log)
        if found is None:
            missing.append(name)
        else:
            seconds[name] = int(found.group(1))
    for backend, value in STAGE.findall(log):
        seconds[backend] = int(value)
    missing += [b for b in ("tensorflow", "jax") if b not in seconds]
    counts = [
        (int(passed), int(failed or 0))
        for failed, passed in SUMMARY.findall(log)
    ]
    if len(counts) != 3:
        missing.append(f"3 pytest summaries (found {len(counts)})")
    if missing:
        raise ValueError(
            "Not a whole `.ci/run` log: it lacks " + ", ".join(missing)
        )
    return seconds, dict(zip(("tensorflow", "jax", "torch"), counts))


def machine(log):
    """The speed `.ci/machine_speed.py` printed in `log`, as the table's
    cell ("0.45 / 9.7 GB/s, 0.30 s"), or "" for a log without it."""
    found = MACHINE.search(log)
    if found is None:
        return ""
    new, touched, loop = found.groups()
    return f"{new} / {touched} GB/s, {loop} s"


def row(seconds, counts, commit, note, date, speed=""):
    def stage(backend):
        passed, failed = counts[backend]
        tests = f"{passed}" + (f" +{failed} failed" if failed else "")
        return f"{seconds[backend] / 60:.1f} ({tests})"

    return (
        f"| {date} | {commit} | {seconds['install'] / 60:.1f} "
        f"| {stage('tensorflow')} | {stage('jax')} | {stage('torch')} "
        f"| **{seconds['total'] / 60:.1f}** | {note} | {speed} |"
    )


def add_row(text, new_row):
    """CONTRIBUTING.md's text with `new_row` appended to its table."""
    if START not in text or END not in text:
        raise ValueError(f"CONTRIBUTING.md lacks the markers {START} {END}")
    head, rest = text.split(START, 1)
    table, tail = rest.split(END, 1)
    rows = [line for line in table.strip().splitlines()[2:] if line]
    body = "\n".join([HEADER, *rows, new_row])
    return f"{head}{START}\n{body}\n{END}{tail}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log", help="the output of `bash .ci/run`")
    parser.add_argument("--note", default="", help="the machine, its load")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    with open(args.log, encoding="utf-8", errors="replace") as file:
        log = file.read()
    seconds, counts = parse(log)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=HERE,
    ).stdout.strip()
    date = datetime.date.today().isoformat()
    new_row = row(seconds, counts, commit or "?", args.note, date, machine(log))
    if args.dry_run:
        print(new_row)
        return 0
    with open(CONTRIBUTING, encoding="utf-8") as file:
        text = file.read()
    with open(CONTRIBUTING, "w", encoding="utf-8") as file:
        file.write(add_row(text, new_row))
    print(new_row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
