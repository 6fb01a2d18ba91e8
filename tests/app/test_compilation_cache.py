"""The `keras-txl` command's JAX persistent compilation cache
(`keras_txl_cli/compilation_cache.py`).

One real `keras-txl generate` on JAX, in a new process with a user's
environment (no test-session JAX cache), fills
`$XDG_CACHE_HOME/keras-txl/jax`; in process, `KERAS_TXL_JAX_CACHE=0`
turns the cache off and a JAX cache folder the user chose is kept.
"""

import os
import subprocess
import sys

import jax
import keras
import pytest

from keras_txl.models import Utf8ByteTokenizer
from keras_txl_cli import compilation_cache
from tests.tiny_models import tokenizer_lm

REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
# The test session's own JAX cache (tests/conftest.py), not a user's.
SESSION_ONLY = (
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    "TF_CPP_MIN_LOG_LEVEL",
)


def _files(folder):
    return [
        os.path.join(root, name)
        for root, _, names in os.walk(folder)
        for name in names
    ]


def test_the_command_fills_its_jax_cache(tmp_path):
    # A one-layer, width-8 byte-level run: the cheapest `generate`.
    tokenizer_lm(Utf8ByteTokenizer(), seed=0).save_to_preset(
        str(tmp_path / "run")
    )
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        PYTHONPATH=REPO,
        XDG_CACHE_HOME=str(tmp_path / "xdg"),
    )
    for name in SESSION_ONLY + (compilation_cache.OFF_VARIABLE,):
        env.pop(name, None)
    script = os.path.join(os.path.dirname(sys.executable), "keras-txl")
    result = subprocess.run(
        [script, "generate", "run", "--prompt", "a", "--max-length", "3"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    folder = compilation_cache.jax_cache_folder(env)
    assert folder == str(tmp_path / "xdg" / "keras-txl" / "jax")
    assert _files(folder), "nothing compiled was kept"


@pytest.fixture
def jax_config(monkeypatch):
    """enable_for_command() as on JAX, jax.config restored after."""
    names = (
        "jax_compilation_cache_dir",
        "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes",
    )
    saved = {name: getattr(jax.config, name) for name in names}
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    yield
    for name, value in saved.items():
        jax.config.update(name, value)


@pytest.mark.usefixtures("jax_config")
def test_off_and_a_folder_the_user_chose(tmp_path):
    user = str(tmp_path / "mine")
    xdg = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    jax.config.update("jax_compilation_cache_dir", None)
    for off in ("0", "off", "False"):
        environ = dict(xdg, KERAS_TXL_JAX_CACHE=off)
        assert compilation_cache.enable_for_command(environ) is None
        assert not jax.config.jax_compilation_cache_dir
    folder = compilation_cache.enable_for_command(xdg)
    assert folder == str(tmp_path / "xdg" / "keras-txl" / "jax")
    assert jax.config.jax_compilation_cache_dir == folder
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0
    # JAX_COMPILATION_CACHE_DIR (or jax.config) is the user's choice.
    jax.config.update("jax_compilation_cache_dir", user)
    assert compilation_cache.enable_for_command(xdg) == user
    assert jax.config.jax_compilation_cache_dir == user


def test_other_backends_keep_jax_as_it_is():
    if keras.backend.backend() == "jax":
        pytest.skip("the tests run on another backend too")
    assert compilation_cache.enable_for_command({}) is None
