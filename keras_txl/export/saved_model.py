"""TensorFlow SavedModel export of a `TransformerXLCausalLM` for serving.

The exported model is stateless: the memory is an input and an output of
the serving signature, so a server (TF Serving, or any process that runs
`tf.saved_model.load`) threads it from one call to the next, stream by
stream. Nothing of Keras or keras-txl is needed to load or run it.

Signatures (TF Serving names):

- `serving_default(token_ids, memory, valid_length)` -> `{"logits",
  "memory", "valid_length"}`:
    - `token_ids`: int32 `(batch_size, segment_length)`.
    - `memory`: float32 `(batch_size, num_layers, memory_length,
      hidden_dim)`; entry `l` holds the inputs of layer `l` for the last
      `memory_length` positions.
    - `valid_length`: int32 `(batch_size,)`, in `[0, memory_length]`: how
      many of the memory slots (the last ones) hold states.
    - returns float32 `logits` `(batch_size, segment_length,
      vocabulary_size)` and the `memory` and `valid_length` to pass to the
      next call.
- `initial_memory()` -> `{"memory", "valid_length"}`: the empty memory (all
  zeros), to start a stream or to reset one.

Shapes are those given at export (`segment_length=None` accepts any
length, e.g. a prompt, then steps of one token). Inputs of other shapes,
or a `valid_length` outside `[0, memory_length]`, fail at run time with an
`InvalidArgumentError` that names the input and the shape expected.

TF Serving loads `MODEL_BASE_PATH/<version>/saved_model.pb`: the numbered
version directory is the caller's choice, e.g.
`export_saved_model(lm, "serving/txl/1", ...)`.

Export runs under the TensorFlow backend. A model trained on JAX or torch
is exported the same way: `export_saved_model` called under another backend
saves the model to a temporary `.keras` file and runs the export again in a
child process with `KERAS_BACKEND=tensorflow` (the `.keras` format is the
same on every backend), so the call works from any backend.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import keras

from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int

SERVING_SIGNATURE = "serving_default"
INITIAL_MEMORY_SIGNATURE = "initial_memory"
MODEL_FILENAME = "model.keras"


def _check_export_args(batch_size, segment_length, memory_length):
    batch_size = check_positive_int("batch_size", batch_size)
    segment_length = check_optional_positive_int(
        "segment_length", segment_length
    )
    # The memory is what the signature threads: at least one slot.
    memory_length = check_positive_int("memory_length", memory_length)
    return batch_size, segment_length, memory_length


def _check_destination(path, overwrite):
    path = os.fspath(path)
    check_bool("overwrite", overwrite)
    exists = os.path.exists(path)
    empty_dir = exists and os.path.isdir(path) and not os.listdir(path)
    if exists and not empty_dir and not overwrite:
        raise FileExistsError(
            f"The export destination {path!r} already exists. Pass "
            "`overwrite=True` (`--overwrite` on the command line) to "
            "replace it, or choose another path (e.g. a new version "
            "directory `.../2`)."
        )
    return path


def export_saved_model(
    lm,
    path,
    batch_size,
    segment_length,
    memory_length,
    overwrite=False,
    verbose=False,
):
    """Exports `lm` as a SavedModel with an explicit memory.

    See the module documentation for the signatures. Under a backend other
    than TensorFlow the model is saved to a temporary `.keras` file and the
    export runs in a child process with `KERAS_BACKEND=tensorflow`.

    Args:
        lm: a `TransformerXLCausalLM`.
        path: str or path-like. Directory to write (for TF Serving, a
            numbered version directory such as `models/txl/1`). Must not
            exist, or be an empty directory, unless `overwrite=True`.
        batch_size: int >= 1. Number of streams per call.
        segment_length: int >= 1, or `None` for any length. Tokens per
            call.
        memory_length: int >= 1. Memory slots carried between calls (may
            differ from the memory the model was trained with).
        overwrite: bool. Replace an existing export at `path`.
        verbose: bool. Print the signatures that were written.

    Returns:
        The path written, as a string.

    Example:

    >>> import tempfile, os
    >>> from keras_txl.models import TransformerXLBackbone
    >>> backbone = TransformerXLBackbone(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
    ...     head_dim=8, intermediate_dim=32, memory_length=8,
    ... )
    >>> lm = TransformerXLCausalLM(backbone)
    >>> path = os.path.join(tempfile.mkdtemp(), "txl", "1")
    >>> path == export_saved_model(
    ...     lm, path, batch_size=2, segment_length=4, memory_length=8
    ... )
    True
    """
    if not isinstance(lm, TransformerXLCausalLM):
        raise ValueError(
            "`lm` must be a `keras_txl.models.TransformerXLCausalLM`. "
            f"Received: lm={type(lm).__name__}"
        )
    batch_size, segment_length, memory_length = _check_export_args(
        batch_size, segment_length, memory_length
    )
    path = _check_destination(path, overwrite)
    if not lm.built:
        lm.build()
    if keras.config.backend() != "tensorflow":
        with tempfile.TemporaryDirectory(prefix="keras_txl_export_") as tmp:
            lm.save(os.path.join(tmp, MODEL_FILENAME))
            _export_in_tensorflow_process(
                tmp,
                path,
                batch_size,
                segment_length,
                memory_length,
                overwrite,
                verbose,
            )
        return path
    archive = _make_archive(lm, batch_size, segment_length, memory_length)
    _write_archive(archive, path, verbose)
    return path


def export_main(
    model_dir,
    out_dir,
    batch_size,
    segment_length,
    memory_length,
    overwrite=False,
    verbose=False,
):
    """Exports the model saved in `model_dir`, a keras-hub preset (or the
    `model.keras` of older runs) (the CLI's
    `keras-txl export MODEL_DIR OUT_DIR --batch-size B --segment-length T
    --memory-length M [--overwrite]`).

    The model may have been trained and saved on any backend; it is loaded
    with `safe_mode=True`. Under a backend other than TensorFlow the export
    runs in a child process with `KERAS_BACKEND=tensorflow`.

    Args:
        model_dir: directory of a keras-hub preset of a
            `TransformerXLCausalLM` (or that holds `model.keras`).
        out_dir: directory of the SavedModel (see `export_saved_model`).
        batch_size, segment_length, memory_length, overwrite, verbose: see
            `export_saved_model`.

    Returns:
        `out_dir`, as a string.
    """
    batch_size, segment_length, memory_length = _check_export_args(
        batch_size, segment_length, memory_length
    )
    model_path = os.path.join(os.fspath(model_dir), MODEL_FILENAME)
    preset = os.path.isfile(os.path.join(os.fspath(model_dir), "task.json"))
    if not preset and not os.path.isfile(model_path):
        raise FileNotFoundError(
            f"No model in {os.fspath(model_dir)!r}: neither a keras-hub "
            f"preset (task.json, from `lm.save_to_preset(model_dir)`, "
            f"`keras-txl train` or `keras-txl convert`) nor {MODEL_FILENAME}."
        )
    out_dir = _check_destination(out_dir, overwrite)
    if keras.config.backend() != "tensorflow":
        _export_in_tensorflow_process(
            model_dir,
            out_dir,
            batch_size,
            segment_length,
            memory_length,
            overwrite,
            verbose,
        )
        return out_dir
    if preset:
        lm = TransformerXLCausalLM.from_preset(
            os.fspath(model_dir), preprocessor=None
        )
    else:
        lm = keras.saving.load_model(model_path, safe_mode=True)
    return export_saved_model(
        lm,
        out_dir,
        batch_size,
        segment_length,
        memory_length,
        overwrite=overwrite,
        verbose=verbose,
    )


def _export_in_tensorflow_process(
    model_dir,
    out_dir,
    batch_size,
    segment_length,
    memory_length,
    overwrite,
    verbose,
):
    """Runs `keras-txl export` (`python -m keras_txl export`) with
    `KERAS_BACKEND=tensorflow`."""
    package_root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    )
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, env.get("PYTHONPATH")) if p
    )
    command = [
        sys.executable,
        "-m",
        "keras_txl",
        "export",
        os.fspath(model_dir),
        os.fspath(out_dir),
        "--batch-size",
        str(batch_size),
        "--memory-length",
        str(memory_length),
    ]
    if segment_length is not None:
        command += ["--segment-length", str(segment_length)]
    if overwrite:
        command.append("--overwrite")
    if verbose:
        command.append("--verbose")
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if verbose and result.stdout:
        print(result.stdout, end="")
    if result.returncode != 0:
        raise RuntimeError(
            "The export under KERAS_BACKEND=tensorflow failed (command: "
            f"{' '.join(command)}). Its last output:\n"
            f"{result.stderr[-3000:]}"
        )


def _make_archive(lm, batch_size, segment_length, memory_length):
    import tensorflow as tf

    spec = lm.backbone.memory_spec
    memory_shape = spec.shapes(batch_size, memory_length)["memory"]
    # The signatures thread the paper's memory, `serve`'s arguments (not
    # yet the compressed memory of a compressive backbone).
    memory_signature = [
        entry
        for entry in spec.signature(batch_size, memory_length)
        if entry[0] in ("memory", "valid_length")
    ]
    token_shape = (batch_size, segment_length)

    def serve(token_ids, memory, valid_length):
        # The signature's shapes are not enforced when it is called:
        # `ensure_shape` fails with the input's name and both shapes.
        token_ids = tf.ensure_shape(token_ids, token_shape)
        memory = tf.ensure_shape(memory, memory_shape)
        valid_length = tf.ensure_shape(valid_length, (batch_size,))
        checks = [
            tf.debugging.assert_non_negative(
                valid_length, message="valid_length must be >= 0"
            ),
            tf.debugging.assert_less_equal(
                valid_length,
                tf.constant(memory_length, tf.int32),
                message=(
                    f"valid_length must be <= memory_length={memory_length}"
                ),
            ),
        ]
        with tf.control_dependencies(checks):
            valid_length = tf.identity(valid_length)
        outputs = lm(
            {
                "token_ids": token_ids,
                "memory": memory,
                "valid_length": valid_length,
            },
            training=False,
        )
        return {
            "logits": outputs["logits"],  # (batch, T, vocab), float32
            "memory": outputs["memory"],  # (batch, layers, M, hidden)
            "valid_length": outputs["valid_length"],  # (batch,)
        }

    def initial_memory():
        memory = spec.zeros(batch_size, memory_length)
        return {key: memory[key] for key in ("memory", "valid_length")}

    if not lm.memory_state.has_state:
        # Keras traces the model's own default signature while writing the
        # archive; its carried-memory path needs a batch size. The exported
        # signatures above do not read this state.
        lm.build_memory(batch_size)
    archive = keras.export.ExportArchive()
    archive.track(lm)
    archive.add_endpoint(
        SERVING_SIGNATURE,
        serve,
        input_signature=[
            tf.TensorSpec(token_shape, tf.int32, name="token_ids"),
            *(
                tf.TensorSpec(shape, dtype, name=key)
                for key, shape, dtype in memory_signature
            ),
        ],
    )
    archive.add_endpoint(
        INITIAL_MEMORY_SIGNATURE, initial_memory, input_signature=[]
    )
    return archive


def _write_archive(archive, path, verbose):
    """Writes next to `path`, then moves into place (no half-written
    export at `path` if writing fails)."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", dir=parent)
    try:
        os.chmod(staging, 0o755)  # `mkdtemp` makes it private to its owner
        archive.write_out(staging, verbose=verbose)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
        os.replace(staging, path)
    finally:
        if os.path.exists(staging):
            shutil.rmtree(staging)
