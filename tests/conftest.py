import atexit
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The tests' models are tiny: XLA's compile time, not the run, dominates a
# jitted step. Without LLVM's backend optimizations the JAX suite runs about
# a quarter faster (measured on 2 cores); results match the optimized
# build to the tests' tolerances (the conformance tests run with it). Set
# XLA_FLAGS yourself to test the optimized build.
# One thread per op, as `pytest -n 2` on 2 cores wants (a core per worker;
# torch's threads are set below for the same reason): XLA's and
# TensorFlow's intra-op pools otherwise hand each tiny op to threads that
# wait against the other worker's. Measured back to back on a loaded
# 2-core machine, CPU seconds of tests/models/test_carried_memory.py:
# JAX 66.1 -> 53.3 and 38.3 -> 35.4, TensorFlow 33.4 -> 29.5 and
# 30.5 -> 28.3. The children the tests start inherit both settings (a
# test that gives a child a device count adds it to these XLA_FLAGS:
# `tests.test_case.xla_flags`).
os.environ.setdefault(
    "XLA_FLAGS",
    "--xla_backend_optimization_level=0 --xla_cpu_multi_thread_eigen=false",
)
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
# The token cache of the tests (and of the commands they run) is theirs,
# not the user's ~/.keras/keras_txl_cache.
os.environ["KERAS_TXL_CACHE"] = tempfile.mkdtemp(prefix="keras_txl_cache_")
# JAX compiles each program once per process: a jitted step, and each
# eager op of a new shape (every initializer of a new model). The tests
# compile the same tiny programs again and again, in both pytest workers
# and in the processes they start (the `keras-txl` command, the examples,
# the fresh-process children). One persistent compilation cache per test
# session, shared by all of them, compiles each program once: measured on
# 2 cores, a fresh-process child that loads four runs 164 s -> 37 s, and
# tests/models/test_transformer_xl_generation.py (then test_generate.py)
# 224 s -> 65 s with the cache filled. The
# first process that imports this file (the xdist controller) makes it;
# the workers and children inherit the variable.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _jax_cache = tempfile.mkdtemp(prefix="keras_txl_jax_cache_")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _jax_cache
    atexit.register(shutil.rmtree, _jax_cache, ignore_errors=True)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# TensorFlow's XLA compiles (generation, `jit_compile=True` steps) too, in
# a cache of its own kept on disk, which TensorFlow writes for GPUs and
# TPUs only unless told: a new model's `generate()` in a second process,
# 9.8 s -> 2.9 s of CPU (a tiny byte-level run).
if "--tf_xla_persistent_cache_directory" not in os.environ.get(
    "TF_XLA_FLAGS", ""
):
    _tf_cache = tempfile.mkdtemp(prefix="keras_txl_tf_xla_cache_")
    os.environ["TF_XLA_FLAGS"] = " ".join(
        [
            os.environ.get("TF_XLA_FLAGS", ""),
            f"--tf_xla_persistent_cache_directory={_tf_cache}",
            "--tf_xla_persistent_cache_device_types=CPU,XLA_CPU",
        ]
    ).strip()
    atexit.register(shutil.rmtree, _tf_cache, ignore_errors=True)

import gc  # noqa: E402

# The imports of the session (Keras, keras-hub, the backend, the library)
# run with the garbage collector paused, as a `keras-txl` command's start
# does (`keras_txl_cli.cli.import_library`: its collections walked every
# object the imports had made so far); it is on again below.
gc.disable()

import keras  # noqa: E402
import keras_hub  # noqa: E402, F401
import pytest  # noqa: E402

import keras_txl  # noqa: E402, F401
from tests import test_case  # noqa: E402

# Keras collects garbage on every `clear_session()` (each test) and on
# every variable a layer deletes (`quantize()`: one per kernel); each
# collection walks every object alive, TensorFlow's, JAX's and Keras's
# modules first: half a second each on a 2-core machine (9 of the 10
# seconds of a `quantize()` test). What is alive after a collection is
# moved out of the collector's reach (`gc.freeze()`): here, and after the
# collection of each test's `clear_session()`. Measured: the TensorFlow
# suite 740 s -> 629 s, the quantization tests 72 s -> 20 s, a JAX subset
# 190 s -> 119 s. (Objects frozen while alive that a later test frees in
# a reference cycle are not reclaimed: a little memory, never a result.)
gc.collect()
gc.freeze()
gc.enable()


@pytest.fixture(autouse=True)
def _clean_keras_state():
    """Each test starts from float32 and fresh layer names."""
    keras.config.set_dtype_policy("float32")
    keras.utils.clear_session()  # collects garbage
    gc.freeze()  # see above
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture(scope="session")
def readme_run(tmp_path_factory):
    """The folder of the README's tiny `keras-txl train` run
    (`tests.test_case.readme_run`): read it only."""
    return test_case.readme_run(tmp_path_factory)


@pytest.fixture(autouse=True, scope="session")
def _readme_run_started(request, tmp_path_factory):
    """Where a test of the session asks for `readme_run`, its training
    starts with the session, in a process of its own
    (`tests.test_case.start_readme_run`), while this worker runs its
    tests; the process is waited for before the worker exits."""
    items = request.session.items
    if not any("readme_run" in item.fixturenames for item in items):
        yield
        return
    process = test_case.start_readme_run(tmp_path_factory)
    yield
    if process is not None:
        process.wait()


@pytest.fixture
def float64():
    """Lets a test compute in float64 on every backend: JAX does only with
    x64 enabled (else silently in float32), TensorFlow and torch always."""
    if keras.backend.backend() != "jax":
        yield
        return
    import jax

    with jax.enable_x64(True):
        yield


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """torch's default intra-op threads spin against the other pytest
    worker on a 2-core machine (measured: 1 s a step instead of 0.07 s);
    one thread per worker is what `pytest -n 2` wants."""
    if keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(1)


# Which backends run a test (CI: `.ci/run`; `tests/test_ci_selection.py`
# checks the rule against it):
# - a test outside the folders below runs on TensorFlow and JAX, and also
#   on PyTorch when marked `torch_ok`;
# - a test in these folders is marked `one_backend` here: its result does
#   not depend on KERAS_BACKEND (the `keras-txl` application, the
#   SavedModel export, which is always TensorFlow's, the data pipelines,
#   the benchmark helpers, the docs and the repository checks), so CI runs
#   it under TensorFlow only (TensorFlow runs these tiny models about
#   twice as fast as JAX on CPU);
# - unless it is marked `backend_dependent` (a CLI run on several
#   devices, a JAX-only branch, `fit` on the backend): then it runs like a
#   test outside these folders (TensorFlow, JAX, and PyTorch if
#   `torch_ok`).
# `torch_ok` on a `one_backend` test would promise a PyTorch run that CI
# never makes: `tests/test_ci_selection.py` fails on it.
ONE_BACKEND = (
    "tests/app/",
    "tests/export/",
    "tests/data/",
    "tests/benchmarks/",
    "tests/test_ci_selection.py",
    "tests/test_ci_timings.py",
    "tests/test_docs.py",
    "tests/test_docs_site.py",
    "tests/test_docstring_examples.py",
    "tests/test_fixture_scripts.py",
    "tests/test_layout.py",
    "tests/test_package_graph.py",
    "tests/test_standalone.py",
)
# The markers of every collected test, by node id, before `-m` deselects
# any: what `tests/test_ci_selection.py` checks.
COLLECTED_MARKERS = pytest.StashKey[dict]()


# The files that took longest in CI (worker seconds on 2026-12-04,
# TensorFlow / JAX pass; below the line, the slowest tests of the clean
# clone of 0275699 on 2026-12-05, which named files longer than some
# above), run first: `pytest -n 2` hands out tests in collection order
# (below), so a long file collected last (tests/training/ comes last
# alphabetically) leaves one worker alone at the end of a pass; a long
# test that work stealing hands out last does the same, for its length.
# Files keep their own order; the others follow in theirs.
LONGEST_FIRST = (
    "tests/app/test_fresh_process.py",  # 160 s (both backends and torch)
    "tests/app/test_cli.py",  # 186 / 138
    "tests/training/test_interrupt.py",  # 116 / 58
    "tests/models/test_transformer_xl_generation.py",  # 105 / 98
    "tests/distribute/test_two_devices.py",  # 93 / 82
    "tests/reliability/test_properties.py",  # 12 / 89
    "tests/test_docs.py",  # 72
    "tests/examples/test_distributed_training.py",  # 25 / 53
    "tests/export/test_keras_round_trip.py",  # 51
    "tests/models/test_keras_hub_harness.py",  # 21 / 50
    "tests/examples/test_export_and_serve.py",  # 49
    "tests/training/test_krause_dynamic_eval.py",  # 46
    # 2026-12-05, the slowest tests' seconds (TensorFlow / JAX):
    "tests/app/test_command_output.py",  # 46
    "tests/models/test_transformer_xl_text_classifier.py",  # 43 / 11
    "tests/models/test_quantization.py",  # - / 29
    "tests/examples/test_train_char_lm.py",  # 11 / 18
    "tests/examples/test_finetune_pretrained.py",  # 17
    "tests/examples/test_compressive_memory.py",  # 16
    "tests/models/test_carried_memory.py",  # 16 / 10
    "tests/ablation/test_study.py",  # 15 / 13
    "tests/app/test_run_options.py",  # 14 (JAX)
    "tests/export/test_model_export.py",  # 14
    "tests/convert/test_huggingface_generation.py",  # - / 13
    "tests/app/test_train_command.py",  # 12
    "tests/examples/test_custom_model.py",  # - / 12
    "tests/training/test_compressive_resume.py",  # - / 10
)


def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(
        key=lambda item: rank.get(
            item.path.relative_to(root).as_posix(), len(rank)
        )
    )
    for item in items:
        path = item.path.relative_to(root).as_posix()
        if path.startswith(ONE_BACKEND) and not item.get_closest_marker(
            "backend_dependent"
        ):
            item.add_marker(pytest.mark.one_backend)
    config.stash[COLLECTED_MARKERS] = {
        item.nodeid: {mark.name for mark in item.iter_markers()}
        for item in items
    }


# The longest module fixtures of all, which start processes that wait on
# each other (tests/app/test_multi_process_train.py, per backend: about
# half of a worker's pass in CI): each group, a test file and its module
# fixture's parameter, leads the share of another worker, so that both
# start at once and neither waits behind the other. (LONGEST_FIRST names
# files, which puts all of them on the first worker: the scheduler below
# first hands each worker a contiguous share of the collection, in order;
# a test at the head of a share is never stolen.)
EACH_WORKER_FIRST = (
    ("tests/app/test_multi_process_train.py", "jax"),
    ("tests/app/test_multi_process_train.py", "tensorflow"),
)


def _group(item, root):
    path = item.path.relative_to(root).as_posix()
    params = getattr(item, "callspec", None)
    ids = params.id.split("-") if params else ()
    for index, (file, param) in enumerate(EACH_WORKER_FIRST):
        if path == file and param in ids:
            return index
    return None


class _EachWorkerFirst:
    """Puts each group of EACH_WORKER_FIRST at the head of a worker's
    first share, once `-m` and `-k` deselected (the shares are of the
    tests that run): a hook of its own that runs last (this file's
    `pytest_collection_modifyitems` runs before the deselection, which
    reads the markers it sets). The shares are those of
    WorkStealingScheduling (below): of `n` tests left for `w` workers,
    the next worker takes `n // w`."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        groups = [[] for _ in EACH_WORKER_FIRST]
        rest = []
        for item in items:
            index = _group(item, config.rootpath)
            (rest if index is None else groups[index]).append(item)
        groups = [group for group in groups if group]
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        ordered, left = [], len(items)
        for worker in range(workers):
            share = left // (workers - worker)
            left -= share
            if worker == workers - 1:  # the last share: every group left
                head = [item for group in groups for item in group]
                groups = []
            else:
                head = groups.pop(0) if groups else []
            fill = max(0, share - len(head))
            ordered += head + rest[:fill]
            del rest[:fill]
        items[:] = ordered + rest


def pytest_configure(config):
    config.pluginmanager.register(_EachWorkerFirst(), "each_worker_first")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`pytest -n 2` hands out tests by work stealing: each worker starts
    with half of them, in collection order, and a worker out of tests
    takes half of those the other has not started. xdist's own `load`
    gives the first worker a quarter of the tests by count at once (the
    JAX pass: 65 of 521), which with LONGEST_FIRST is every long file:
    then that worker's share bounds the pass while the other runs out of
    tests. (Only in place of `load`, the default of `-n`; another `--dist`
    is kept.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)
