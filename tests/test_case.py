"""Shared helpers of the test suite: fixtures on disk, gradients on each
backend, a round trip every layer must survive, and the README's tiny
`keras-txl train` run, made once per test session."""

import fcntl
import functools
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import keras
import numpy as np
from keras import ops

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"  # see tests/fixtures/README.md
DATA = REPO / "data"  # see data/README.md


def repository_files():
    """Absolute paths of the repository's files: those git tracks and the
    new ones it does not ignore (every file, outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        return [REPO / name for name in out if name]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        # What .gitignore leaves out (CI's copy has no .git).
        skip = {".git", ".venv", ".ci-venv", "runs", "build", "dist"}
        skip |= {"__pycache__", ".pytest_cache", ".ruff_cache", ".whl"}
        return [
            p
            for p in REPO.rglob("*")
            if p.is_file()
            and not skip & set(parts := p.relative_to(REPO).parts)
            and not any(part.endswith(".egg-info") for part in parts)
        ]


# The README's `keras-txl train` (the built-in text, its default size),
# made small: the run that the docs' blocks and the command-output tests
# read (validated without and with memory only: each memory length is a
# compile).
TINY_TRAIN = (
    "train --steps 2 --segment-length 8 --batch-size 2 --memory-length 8 "
    "--eval-memory-length 8 --steps-per-epoch 2 --valid-tokens 32 "
    "--validation-memory-lengths 0,8 --sample-tokens 0 --progress none"
).split()


# The README run's training process (`start_readme_run`), `python -c
# _TRAIN_IN_BACKGROUND COMMAND... PARTIAL FOLDER FAILED`: runs COMMAND
# (`keras-txl TINY_TRAIN --output PARTIAL`), then renames PARTIAL FOLDER;
# on failure, writes its stderr to FAILED. It holds the run's file lock
# (the descriptor it inherits) until it exits.
_TRAIN_IN_BACKGROUND = """
import os, subprocess, sys
*command, partial, folder, failed = sys.argv[1:]
trained = subprocess.run(command, capture_output=True)
if trained.returncode == 0:
    os.rename(partial, folder)
else:
    with open(failed, "wb") as file:
        file.write(trained.stderr[-3000:])
"""


def _readme_paths(tmp_path_factory):
    """`(folder, lock, failed)` of this session's README run, shared by
    the pytest-xdist workers."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this session's folder, shared by workers
    return (
        shared / "readme_run",
        shared / "readme_run.lock",
        shared / "readme_run.failed",
    )


def start_readme_run(tmp_path_factory):
    """Starts training the README run (`readme_run`) in a process of its
    own, unless a process of this session has (or is doing it): the
    tests that read the run find it trained, or wait for the rest, and
    in the meantime this worker goes on with its other tests (before, a
    test that asked for the run while the other worker trained it waited
    for a minute, its core idle). Returns the process (to wait for before
    this worker exits), or `None`."""
    folder, lock_path, failed = _readme_paths(tmp_path_factory)
    lock = open(lock_path, "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another worker's process trains it now
        lock.close()
        return None
    with lock:  # the child holds the lock from here on, until it exits
        if folder.exists() or failed.exists():
            return None
        script = os.path.join(os.path.dirname(sys.executable), "keras-txl")
        partial = folder.with_name("readme_run_training")
        return subprocess.Popen(
            [sys.executable, "-c", _TRAIN_IN_BACKGROUND]
            + [script, *TINY_TRAIN, "--output", str(partial)]
            + [str(partial), str(folder), str(failed)],
            cwd=folder.parent,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            pass_fds=(lock.fileno(),),
        )


def readme_run(tmp_path_factory):
    """The folder of `keras-txl TINY_TRAIN --output FOLDER`, trained once
    per test session, also under pytest-xdist (the workers share it,
    behind a file lock; a failed train fails each test that asks). Read
    it only: copy it to write beside it. Waits for the training that
    `start_readme_run` started, or starts it."""
    process = start_readme_run(tmp_path_factory)
    folder, lock_path, failed = _readme_paths(tmp_path_factory)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # while a process trains it
    if process is not None:
        process.wait()
    if not folder.exists():
        raise AssertionError(
            failed.read_text(errors="replace")
            if failed.exists()
            else "The README run's training process left no result."
        )
    return folder


def free_port_pair():
    """A port `p` such that `p` and `p + 1` are free on localhost (for two
    processes that talk over localhost: JAX's coordinator takes `p`,
    TensorFlow's two workers both)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("localhost", 0))
            port = probe.getsockname()[1]
        try:
            with socket.socket() as second:
                second.bind(("localhost", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("No two consecutive free ports on localhost.")


DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def xla_flags(devices=None):
    """`XLA_FLAGS` for a child process: this session's settings
    (tests/conftest.py: one thread, no LLVM optimizations), less any
    device count, plus `devices` CPU devices when given."""
    flags = [
        flag
        for flag in os.environ.get("XLA_FLAGS", "").split()
        if not flag.startswith(DEVICE_COUNT_FLAG)
    ]
    if devices:
        flags.append(f"{DEVICE_COUNT_FLAG}={devices}")
    return " ".join(flags)


def torch_threads():
    """The environment that gives a child this process's torch threads
    (tests/conftest.py: one per pytest worker), under the torch backend;
    else nothing.

    torch's CPU kernels split a sum among their intra-op threads, so that
    the number of threads decides the order of the additions: the layer
    norms' gradients of gamma and beta and the full sum of a 512 x 128
    gradient (`global_clipnorm`) differ in their last bits between one
    and two threads (whichever CPU kernels, `ATEN_CPU_CAPABILITY`). A
    child left to torch's default takes one thread per core, which on 2
    cores also waits against the other pytest worker."""
    if keras.backend.backend() != "torch":
        return {}
    import torch

    return {"OMP_NUM_THREADS": str(torch.get_num_threads())}


# The statements after which a tiny LM (`model`) must be freed: a
# compiled step that a function keeps for a model (not on it) must not
# keep the model alive. Checked by `models_freed_after`, one fresh
# process for all of them.
FREED_AFTER = {
    "score": "model.score(np.zeros((1, 5), 'int32'), segment_length=4)",
    "dynamic_evaluation": (
        "from keras_txl.training import dynamic_evaluation\n"
        "dynamic_evaluation(model, np.arange(40) % 20, segment_length=8, "
        "learning_rate=0.01)"
    ),
}


@functools.cache
def models_freed_after():
    """`{name: freed}` for each statement of `FREED_AFTER`: whether a tiny
    LM of its own is freed after the statement (on `model`) and `del
    model`. In one fresh Python on this backend, made once per test
    process (under pytest, TensorFlow keeps models alive for reasons of
    its own): one import of keras, keras-hub and TensorFlow for all."""
    script = "import gc, weakref\nimport numpy as np\n"
    script += "from tests.tiny_models import tiny_lm\n"
    for name, statement in FREED_AFTER.items():
        script += (
            "model = tiny_lm(seed=1)\n"
            f"{statement}\n"
            "gone = weakref.ref(model)\n"
            "del model\n"
            "gc.collect()\n"
            f"print({name!r}, 'freed' if gone() is None else 'alive')\n"
        )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = result.stdout.splitlines()[-len(FREED_AFTER) :]
    freed = dict(line.split() for line in lines)
    assert freed.keys() == FREED_AFTER.keys(), result.stdout
    return {name: state == "freed" for name, state in freed.items()}


def to_numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def dtype_name(x):
    """'float32', 'bfloat16', ... of a tensor on any backend."""
    return keras.backend.standardize_dtype(x.dtype)


def gradients(loss_fn, tensors):
    """d loss_fn(*tensors) / d tensors, on the current backend.

    `loss_fn` takes backend tensors and returns a scalar. Trainable Keras
    variables inside `loss_fn` are constants here.
    """
    backend = keras.config.backend()
    tensors = [ops.convert_to_tensor(t) for t in tensors]
    if backend == "jax":
        import jax

        grads = jax.grad(
            lambda *a: loss_fn(*a), argnums=tuple(range(len(tensors)))
        )(*tensors)
        return [to_numpy(g) for g in grads]
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            for t in tensors:
                tape.watch(t)
            loss = loss_fn(*tensors)
        grads = tape.gradient(loss, tensors)
        return [
            np.zeros(t.shape, "float32") if g is None else to_numpy(g)
            for g, t in zip(grads, tensors)
        ]
    if backend == "torch":
        import torch

        tensors = [t.detach().clone().requires_grad_(True) for t in tensors]
        loss = loss_fn(*tensors)
        if not loss.requires_grad:  # every path to the inputs is stopped
            return [np.zeros(t.shape, "float32") for t in tensors]
        grads = torch.autograd.grad(loss, tensors, allow_unused=True)
        return [
            np.zeros(t.shape, "float32") if g is None else to_numpy(g)
            for g, t in zip(grads, tensors)
        ]
    raise NotImplementedError(backend)


def variable_gradients(loss_fn, variables):
    """d loss_fn() / d variables (Keras variables), on the current backend."""
    backend = keras.config.backend()
    if backend == "jax":
        import jax

        def pure(values):
            mapping = list(zip(variables, values))
            with keras.StatelessScope(state_mapping=mapping):
                return loss_fn()

        grads = jax.grad(pure)([v.value for v in variables])
        return [to_numpy(g) for g in grads]
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = loss_fn()
        grads = tape.gradient(loss, [v.value for v in variables])
        return [
            np.zeros(v.shape, "float32") if g is None else to_numpy(g)
            for g, v in zip(grads, variables)
        ]
    if backend == "torch":
        import torch

        loss = loss_fn()
        grads = torch.autograd.grad(
            loss, [v.value for v in variables], allow_unused=True
        )
        return [
            np.zeros(v.shape, "float32") if g is None else to_numpy(g)
            for g, v in zip(grads, variables)
        ]
    raise NotImplementedError(backend)


def run_layer_round_trip(
    layer_cls,
    init_kwargs,
    inputs,
    call_kwargs=None,
    atol=1e-5,
    mixed_precision=True,
):
    """The round trip every layer of the library must survive.

    1. `from_config(get_config())` gives the same config.
    2. In a functional model, a `.keras` save and load gives the same
       outputs on the same inputs.
    3. The model trains one `fit` step (the loss is finite and some
       trainable weight changes).
    4. Under `mixed_bfloat16` and `mixed_float16` the outputs are finite and
       in the policy's compute dtype.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        inputs: list of numpy arrays, the layer's positional call inputs
            (the first one sets the batch size).
        call_kwargs: dict of non-tensor call arguments.
    """
    call_kwargs = call_kwargs or {}
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    for key, value in init_kwargs.items():
        assert hasattr(layer, key), f"{layer_cls.__name__} lacks .{key}"

    def make_model():
        symbolic = [
            keras.Input(shape=x.shape[1:], batch_size=x.shape[0], dtype=x.dtype)
            for x in inputs
        ]
        out = layer_cls(**init_kwargs)(*symbolic, **call_kwargs)
        if isinstance(out, (tuple, list)):
            out = out[0]
        return keras.Model(symbolic, out)

    model = make_model()
    expected = to_numpy(model(inputs))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(to_numpy(loaded(inputs)), expected, atol=atol)

    if model.trainable_weights:
        before = [to_numpy(w).copy() for w in model.trainable_weights]
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        target = np.random.default_rng(0).normal(size=expected.shape)
        loss = model.train_on_batch(inputs, target.astype("float32"))
        assert np.isfinite(loss)
        after = [to_numpy(w) for w in model.trainable_weights]
        assert any(not np.allclose(a, b) for a, b in zip(before, after))

    if mixed_precision:
        for policy in ("mixed_bfloat16", "mixed_float16"):
            keras.config.set_dtype_policy(policy)
            try:
                out = make_model()(inputs)
                compute = layer_cls(**init_kwargs).compute_dtype
                assert dtype_name(out) == compute, (policy, out.dtype)
                assert np.all(np.isfinite(to_numpy(ops.cast(out, "float32"))))
            finally:
                keras.config.set_dtype_policy("float32")
