"""The `keras-txl` command's persistent compilation cache on JAX.

JAX compiles every jitted function and every eager op of a new shape
once per process; a short command (`keras-txl generate` of 200
characters) spends most of its time there. With JAX's persistent
compilation cache the second run of a command reads those programs from
disk instead.

The command, and only the command, turns it on: importing `keras_txl`
as a library changes no JAX setting. The folder is
`$XDG_CACHE_HOME/keras-txl/jax` (else `~/.cache/keras-txl/jax`); a JAX
cache folder the user chose (`JAX_COMPILATION_CACHE_DIR`, or
`jax.config`) is kept; `KERAS_TXL_JAX_CACHE=0` turns the cache off.
TensorFlow keeps its own settings (`TF_XLA_FLAGS`).
"""

import os

OFF_VARIABLE = "KERAS_TXL_JAX_CACHE"
_OFF_VALUES = ("0", "off", "false", "no")


def jax_cache_folder(environ=None):
    """The command's JAX cache folder: `$XDG_CACHE_HOME/keras-txl/jax`,
    else `~/.cache/keras-txl/jax`."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return os.path.join(base, "keras-txl", "jax")


def enable_for_command(environ=None):
    """On the JAX backend, unless `$KERAS_TXL_JAX_CACHE` is `0` (or
    `off`): JAX's persistent compilation cache in `jax_cache_folder()`,
    for every program however fast it compiled. Returns the folder in
    use, or `None` (another backend, or the cache turned off). Call it
    after `import keras`, before the first computation."""
    environ = os.environ if environ is None else environ
    import keras

    if keras.backend.backend() != "jax":
        return None
    if environ.get(OFF_VARIABLE, "").strip().lower() in _OFF_VALUES:
        return None
    import jax

    folder = jax.config.jax_compilation_cache_dir
    if not folder:  # the user's own JAX_COMPILATION_CACHE_DIR is kept
        folder = jax_cache_folder(environ)
        jax.config.update("jax_compilation_cache_dir", folder)
    # JAX's defaults store only programs that took a second to compile;
    # a short command's are many small ones (each eager op of a new
    # shape), and together they are the start-up.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder
