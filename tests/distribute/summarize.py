"""Prints how far the distributed runs of `two_device_run.py` are from the
single-device run (the numbers of `docs/distributed.md`).

    python tests/distribute/summarize.py REPORT [WORKER_0 WORKER_1]
"""

import json
import sys

import numpy as np


def largest_gap(runs, single):
    """Largest gap in per-step loss and in memory, over runs whose local
    replicas hold consecutive blocks of rows."""
    losses = np.array(single["losses"])
    memory = np.array(single["memory"][0]["memory"])
    loss_gap = memory_gap = 0.0
    row = 0
    for run in runs:
        loss_gap = max(loss_gap, np.abs(np.array(run["losses"]) - losses).max())
        for replica in run["memory"]:
            held = np.array(replica["memory"])
            block = memory[row : row + len(held)]
            memory_gap = max(memory_gap, np.abs(held - block).max())
            row += len(held)
    assert row == len(memory), "the replicas do not hold every row"
    return {
        "max_loss_gap": float(loss_gap),
        "max_memory_gap": float(memory_gap),
    }


def main(paths):
    with open(paths[0]) as file:
        report = json.load(file)
    single = report["single"]
    summary = {
        "backend": report["backend"],
        "strategy": report["strategy"],
        "steps": len(single["losses"]),
        "first_loss": round(single["losses"][0], 4),
        "last_loss": round(single["losses"][-1], 4),
        "two_replicas": largest_gap([report["multi"]], single),
    }
    if "model_parallel" in report:
        summary["model_parallel"] = largest_gap(
            [report["model_parallel"]], single
        )
    if len(paths) == 3:
        workers = []
        for path in paths[1:]:
            with open(path) as file:
                workers.append(json.load(file)["multi"])
        summary["two_processes"] = largest_gap(workers, single)
    print(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1:])
