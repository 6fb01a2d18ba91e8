import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import pytest

from tests.test_case import free_port_pair
from tests.tiny_models import backbone_config

SCRIPT = Path(__file__).with_name("two_device_run.py")
ROOT = Path(__file__).resolve().parents[2]


def _script_env(backend=None):
    """Environment of a subprocess: this checkout first on the path."""
    env = dict(os.environ)
    env["KERAS_BACKEND"] = backend or keras.backend.backend()
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH")) if p
    )
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return env


def _start_script(out, *args, backend=None):
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(out), *map(str, args)],
        env=_script_env(backend),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process, out, timeout=600):
    _, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 0, stderr[-4000:]
    return json.loads(Path(out).read_text())


@pytest.fixture(scope="session")
def two_device_report(tmp_path_factory):
    """The report of `two_device_run.py` for this backend, made once per
    test session even under pytest-xdist (the workers share the file)."""
    backend = keras.backend.backend()
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this session's folder, shared by workers
    out = shared / f"two_device_report_{backend}.json"
    with open(shared / f"two_device_report_{backend}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            partial = shared / f"two_device_report_{backend}.partial"
            _finish(_start_script(partial), partial)
            partial.rename(out)
    return json.loads(out.read_text())


@pytest.fixture
def two_process_reports(tmp_path):
    """Reports of two processes on localhost, one CPU replica each:
    TensorFlow `multiworker` (`TF_CONFIG`), JAX `jax-data-parallel` over
    `jax.distributed` (`KERAS_DISTRIBUTION_*`)."""
    port = free_port_pair()
    outs = [tmp_path / f"worker_{i}.json" for i in (0, 1)]
    workers = [
        _start_script(out, "worker", i, port) for i, out in enumerate(outs)
    ]
    try:
        return [_finish(w, out) for w, out in zip(workers, outs)]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


@pytest.fixture
def tiny_config():
    """Keyword arguments of a tiny `TransformerXLBackbone`."""
    return backbone_config()


@pytest.fixture
def subprocess_env():
    """`subprocess_env(backend)`: the environment of a Python subprocess
    that imports this checkout under `backend`."""
    return _script_env
