"""TensorFlow SavedModel export of a `TransformerXLCausalLM` for serving.

The exported model is stateless: the memory is an input and an output of
the serving signature, so a server (TF Serving, or any process that runs
`tf.saved_model.load`) threads it from one call to the next, stream by
stream. Nothing of Keras or keras-txl is needed to load or run it.

Signatures (TF Serving names):

- `serving_default(token_ids, memory, valid_length)` -> `{"logits",
  "memory", "valid_length"}`:
    - `token_ids`: int32 `(batch_size, segment_length)`. The batch size is
      dynamic (any number of streams per call, as TF Serving batches
      requests) unless one is fixed at export; the memory shapes are
      static.
    - `memory`: `(batch_size, num_layers, memory_length, hidden_dim)`, of
      the backbone's memory dtype (`backbone.memory_spec.dtype`: float32,
      bfloat16 for a model saved under `"mixed_bfloat16"`); entry `l`
      holds the inputs of layer `l` for the last `memory_length`
      positions.
    - `valid_length`: int32 `(batch_size,)`, in `[0, memory_length]`: how
      many of the memory slots (the last ones) hold states.
    - returns float32 `logits` `(batch_size, segment_length,
      vocabulary_size)` and the `memory` and `valid_length` to pass to the
      next call.
- With a `CompressiveTransformerXLBackbone` the memory
  also holds `compressed_memory` (`(batch_size, num_layers,
  compressed_memory_length, hidden_dim)`, of the same dtype) and
  `compressed_valid_length` (int32 `(batch_size,)`): inputs and outputs
  of `serving_default` and outputs of `initial_memory`, threaded like the
  memory.
- `initial_memory(batch_size)` -> `{"memory", "valid_length"}`: the empty
  memory (all zeros) of `batch_size` streams (an int32 scalar), to start a
  stream or to reset one. With a batch size fixed at export it takes no
  input: `initial_memory()`.

Shapes are those given at export (`segment_length=None` accepts any
length, e.g. a prompt, then steps of one token). Inputs of other shapes,
or a `valid_length` outside `[0, memory_length]`, fail at run time with an
`InvalidArgumentError` that names the input and the shape expected.

The SavedModel describes itself in its `assets/` folder
(`keras_txl.export.serving_assets`): `vocabulary.json`, the tokenizer's
tokens (the id of a token is its index) when the model's tokenizer is
known, and `signatures.json`, the inputs and outputs above with their
dtypes and shapes. docs/serving.md serves it from text to text with
TensorFlow alone.

TF Serving loads `MODEL_BASE_PATH/<version>/saved_model.pb`: the numbered
version directory is the caller's choice, e.g.
`export_saved_model(lm, "serving/txl/1", ...)`.

Export runs under the TensorFlow backend. A model trained on JAX or torch
is exported the same way: `export_saved_model` called under another backend
saves the model to a temporary `.keras` file and runs the export again in a
child process with `KERAS_BACKEND=tensorflow` (the `.keras` format is the
same on every backend), so the call works from any backend.
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

import keras

from keras_txl.export.export_arguments import check_destination
from keras_txl.export.export_arguments import check_export_args
from keras_txl.export.export_arguments import check_exported_lm
from keras_txl.export.serving_assets import signatures_asset
from keras_txl.export.serving_assets import write_serving_assets
from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM
from keras_txl.utils import run_folder
from keras_txl.utils.atomic_folder import AtomicFolder

SERVING_SIGNATURE = "serving_default"
INITIAL_MEMORY_SIGNATURE = "initial_memory"
# `export_main`'s formats: a TensorFlow SavedModel, a LiteRT flatbuffer,
# an ONNX file.
EXPORT_FORMATS = ("saved_model", "litert", "onnx")


def export_saved_model(
    lm,
    path,
    batch_size=None,
    segment_length=None,
    memory_length=None,
    overwrite=False,
    verbose=False,
    tokenizer=None,
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
        batch_size: int >= 1, or `None` (default) for any number of
            streams per call.
        segment_length: int >= 1, or `None` for any length. Tokens per
            call.
        memory_length: int >= 1, or `None` for the model's memory length.
            Memory slots carried between calls (may differ from the memory
            the model was trained with).
        overwrite: bool. Replace an existing export at `path`.
        verbose: bool. Print the signatures that were written.
        tokenizer: optional tokenizer whose vocabulary goes to
            `assets/vocabulary.json` (default: the tokenizer of
            `lm.preprocessor`, if any; see `serving_assets`).

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
    >>> path == export_saved_model(lm, path, segment_length=4)
    True
    """
    batch_size, segment_length, memory_length = check_exported_lm(
        lm, batch_size, segment_length, memory_length
    )
    path = check_destination(path, overwrite)
    if keras.config.backend() != "tensorflow":
        with tempfile.TemporaryDirectory(prefix="keras_txl_export_") as tmp:
            lm.save(os.path.join(tmp, run_folder.MODEL_FILE))
            export_in_tensorflow_process(
                tmp,
                path,
                batch_size,
                segment_length,
                memory_length,
                overwrite,
                verbose,
            )
        return path
    if tokenizer is None and lm.preprocessor is not None:
        tokenizer = lm.preprocessor.tokenizer
    archive, signatures = _make_archive(
        lm, batch_size, segment_length, memory_length
    )
    _write_archive(archive, path, verbose, signatures, tokenizer)
    return path


def export_main(
    model_dir,
    out_dir,
    batch_size=None,
    segment_length=None,
    memory_length=None,
    overwrite=False,
    verbose=False,
    any_segment_length=False,
    format="saved_model",
    quantize=None,
    check=True,
):
    """Exports the model saved in `model_dir`, a keras-hub preset (or the
    `model.keras` of older runs) (the CLI's `keras-txl export MODEL_DIR
    OUT_DIR [--batch-size B] [--segment-length T | --any-segment-length]
    [--memory-length M] [--format {saved_model,litert,onnx}] [--quantize
    int8] [--overwrite]`).

    The model may have been trained and saved on any backend; it is loaded
    with `safe_mode=True`. Under a backend other than TensorFlow the export
    runs in a child process with `KERAS_BACKEND=tensorflow`.

    Args:
        model_dir: directory of a keras-hub preset of a
            `TransformerXLCausalLM` (the `--output` folder of a `keras-txl
            train` run, or of `keras-txl convert`), or that holds
            `model.keras`.
        out_dir: directory of the SavedModel (see `export_saved_model`),
            of `model.tflite` (`format="litert"`, see `export_litert`)
            or of `model.onnx` (`format="onnx"`, see `export_onnx`).
        batch_size: int or `None` (default): any number of streams (one
            stream for `format="litert"`, whose shapes are static).
        segment_length: int or `None`: the run's segment length (from its
            `train_config.json`), any length if there is no run config.
        memory_length: int or `None`: the run's evaluation memory length
            (its training memory length if that is 0), else the model's.
        overwrite, verbose: see `export_saved_model`.
        any_segment_length: bool. Accept any segment length (e.g. a
            prompt, then steps of one token) instead of the run's. Not
            with `format="litert"`.
        format: `"saved_model"` (default), `"litert"` or `"onnx"`.
        quantize: `None` or `"int8"`: the weights of a LiteRT export
            (see `export_litert`).
        check: bool. Check an ONNX export with ONNX Runtime (see
            `export_onnx`; the LiteRT export always checks itself).

    Returns:
        `out_dir`, as a string.
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(
            f"`format` must be one of {EXPORT_FORMATS}. Received: "
            f"format={format!r}"
        )
    litert = format == "litert"
    if quantize is not None and not litert:
        raise ValueError(
            "`quantize` applies to a LiteRT export only: pass "
            f'`format="litert"` (`--format litert`). Received: '
            f"quantize={quantize!r}, format={format!r}"
        )
    if litert and any_segment_length:
        raise ValueError(
            "LiteRT's builtin ops run static shapes: a LiteRT export takes "
            "one segment length (`--segment-length T`, 1 for "
            "token-by-token generation), not `--any-segment-length`."
        )
    if litert and batch_size is None:
        batch_size = 1
    if format == "onnx":
        # Said here, before a TensorFlow child process is started for it.
        from keras_txl.export.onnx import require_converter

        require_converter()
    run = run_folder.read_run_config(model_dir)
    if segment_length is None and not any_segment_length:
        segment_length = run.get("segment_length")
    if any_segment_length:
        segment_length = None
    if memory_length is None:
        memory_length = run.get("eval_memory_length") or run.get(
            "memory_length"
        )
    batch_size, segment_length, _ = check_export_args(
        batch_size, segment_length, memory_length or 1
    )
    if not run_folder.has_model(model_dir):
        raise FileNotFoundError(
            f"No model in {os.fspath(model_dir)!r}: neither a keras-hub "
            f"preset ({run_folder.TASK_FILE}, from "
            "`lm.save_to_preset(model_dir)`, `keras-txl train` or "
            f"`keras-txl convert`) nor {run_folder.MODEL_FILE}."
        )
    backbone_file = os.path.join(os.fspath(model_dir), run_folder.BACKBONE_FILE)
    if run_folder.is_preset(model_dir) and not os.path.isfile(backbone_file):
        # Said here, before a TensorFlow child process is started for it.
        raise FileNotFoundError(
            f"The keras-hub preset in {os.fspath(model_dir)!r} has no "
            "config.json (the backbone's config): copy the whole folder "
            "that `keras-txl train` or `keras-txl convert` wrote."
        )
    out_dir = check_destination(out_dir, overwrite)
    if keras.config.backend() != "tensorflow":
        export_in_tensorflow_process(
            model_dir,
            out_dir,
            batch_size,
            segment_length,
            memory_length,
            overwrite,
            verbose,
            format,
            quantize,
            check,
        )
        return out_dir
    tokenizer = None
    if run_folder.is_preset(model_dir):
        lm = TransformerXLCausalLM.from_preset(
            os.fspath(model_dir), preprocessor=None
        )
        tokenizer = _preset_tokenizer(model_dir)
    else:
        model_path = os.path.join(os.fspath(model_dir), run_folder.MODEL_FILE)
        lm = keras.saving.load_model(model_path, safe_mode=True)
    if memory_length is None:
        memory_length = lm.carried_memory_length
    if litert:
        # Imported here: `litert.py` builds on this module.
        from keras_txl.export.litert import export_litert

        export_litert(
            lm,
            out_dir,
            batch_size,
            segment_length,
            memory_length,
            quantize=quantize,
            overwrite=overwrite,
            verbose=verbose,
        )
        return out_dir
    if format == "onnx":
        # Imported here: `onnx.py` builds on this module.
        from keras_txl.export.onnx import export_onnx

        export_onnx(
            lm,
            out_dir,
            batch_size,
            segment_length,
            memory_length,
            overwrite=overwrite,
            verbose=verbose,
            check=check,
        )
        return out_dir
    return export_saved_model(
        lm,
        out_dir,
        batch_size,
        segment_length,
        memory_length,
        overwrite=overwrite,
        verbose=verbose,
        tokenizer=tokenizer,
    )


def _preset_tokenizer(model_dir):
    """The tokenizer of the preset `model_dir`, or `None` (a converted
    checkpoint without one, or a word tokenizer whose optional package
    is not installed: the export then has no `vocabulary.json`)."""
    from keras_txl.models import TransformerXLCausalLMPreprocessor
    from keras_txl.utils.missing_extra_error import MissingExtraError

    path = os.path.join(os.fspath(model_dir), run_folder.TOKENIZER_FILE)
    if not os.path.isfile(path):
        return None
    try:
        preprocessor = TransformerXLCausalLMPreprocessor.from_preset(
            os.fspath(model_dir)
        )
    except MissingExtraError:
        return None
    return preprocessor.tokenizer


# The program of the child process that exports under TensorFlow: the
# arguments of `export_main` as JSON; a bad input comes back as one line,
# `_CHILD_ERROR` then the message.
_CHILD_ERROR = "keras_txl export error: "
_CHILD_PROGRAM = f"""
import json, sys
from keras_txl.export.saved_model import export_main
try:
    export_main(**json.loads(sys.argv[1]))
except (ValueError, OSError) as error:
    print({_CHILD_ERROR!r} + " ".join(str(error).split()), file=sys.stderr)
    sys.exit(1)
"""


def export_in_tensorflow_process(
    model_dir,
    out_dir,
    batch_size,
    segment_length,
    memory_length,
    overwrite,
    verbose,
    format="saved_model",
    quantize=None,
    check=True,
):
    """Runs `export_main` in a child process with
    `KERAS_BACKEND=tensorflow`; what it prints (the signatures with
    `verbose`, a LiteRT or ONNX export's check line) is printed here."""
    package_root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    )
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, env.get("PYTHONPATH")) if p
    )
    arguments = dict(
        model_dir=os.fspath(model_dir),
        out_dir=os.fspath(out_dir),
        batch_size=batch_size,
        segment_length=segment_length,
        memory_length=memory_length,
        overwrite=overwrite,
        verbose=verbose,
        any_segment_length=segment_length is None,
        format=format,
        quantize=quantize,
        check=check,
    )
    command = [sys.executable, "-c", _CHILD_PROGRAM, json.dumps(arguments)]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.stdout:
        print(result.stdout, end="")
    if result.returncode != 0:
        # The child's own one-line error (a file it could not read, a bad
        # argument) is this call's error too.
        lines = result.stderr.strip().splitlines()
        if lines and lines[-1].startswith(_CHILD_ERROR):
            raise ValueError(lines[-1][len(_CHILD_ERROR) :])
        raise RuntimeError(
            "The export under KERAS_BACKEND=tensorflow failed (arguments: "
            f"{arguments}). Its last output:\n{result.stderr[-3000:]}"
        )


def _make_archive(lm, batch_size, segment_length, memory_length):
    import tensorflow as tf

    spec = lm.backbone.memory_spec
    # Every tensor of the memory (the compressed memory too, for a
    # compressive backbone), in the order of `spec.keys`.
    memory_signature = spec.signature(batch_size, memory_length)
    shapes = {key: shape for key, shape, _ in memory_signature}
    limits = {
        "valid_length": memory_length,
        "compressed_valid_length": spec.compressed_memory_length,
    }
    token_shape = (batch_size, segment_length)

    def run(token_ids, memory):
        # The signature's shapes are not enforced when it is called:
        # `ensure_shape` fails with the input's name and both shapes.
        token_ids = tf.ensure_shape(token_ids, token_shape)
        memory = {
            key: tf.ensure_shape(value, shapes[key])
            for key, value in memory.items()
        }
        rows = tf.shape(token_ids)[0]
        checks = [
            tf.debugging.assert_equal(
                tf.shape(value)[0],
                rows,
                message=f"{key} must have as many rows as token_ids",
            )
            for key, value in memory.items()
        ]
        for key, limit in limits.items():
            if key not in memory:
                continue
            name = key.replace("valid_length", "memory_length")
            checks += [
                tf.debugging.assert_non_negative(
                    memory[key], message=f"{key} must be >= 0"
                ),
                tf.debugging.assert_less_equal(
                    memory[key],
                    tf.constant(limit, tf.int32),
                    message=f"{key} must be <= {name}={limit}",
                ),
            ]
        with tf.control_dependencies(checks):
            memory = {key: tf.identity(value) for key, value in memory.items()}
        outputs = lm({"token_ids": token_ids, **memory}, training=False)
        result = {"logits": outputs["logits"]}  # (batch, T, vocab), float32
        for key in spec.keys:
            # Static memory shapes in the signature, as at the input.
            result[key] = tf.ensure_shape(outputs[key], shapes[key])
        return result

    if spec.compressive:

        def serve(
            token_ids,
            memory,
            valid_length,
            compressed_memory,
            compressed_valid_length,
        ):
            return run(
                token_ids,
                {
                    "memory": memory,
                    "valid_length": valid_length,
                    "compressed_memory": compressed_memory,
                    "compressed_valid_length": compressed_valid_length,
                },
            )

    else:

        def serve(token_ids, memory, valid_length):
            return run(
                token_ids, {"memory": memory, "valid_length": valid_length}
            )

    def zeros(rows):
        return spec.zeros(rows, memory_length)

    if not lm.memory_state.has_state:
        # Keras traces the model's own default signature while writing the
        # archive; its carried-memory path needs a batch size. The exported
        # signatures above do not read this state.
        lm.build_memory(batch_size or 1)
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
    if batch_size is None:
        archive.add_endpoint(
            INITIAL_MEMORY_SIGNATURE,
            zeros,
            input_signature=[tf.TensorSpec((), tf.int32, name="batch_size")],
        )
    else:
        archive.add_endpoint(
            INITIAL_MEMORY_SIGNATURE,
            lambda: zeros(batch_size),
            input_signature=[],
        )
    signatures = signatures_asset(
        memory_signature,
        token_shape,
        lm.backbone.vocabulary_size,
        SERVING_SIGNATURE,
        INITIAL_MEMORY_SIGNATURE,
    )
    return archive, signatures


def _write_archive(archive, path, verbose, signatures, tokenizer):
    """Writes the archive and its `assets/` (`serving_assets`) beside
    `path`, then puts it in place whole (`AtomicFolder`): a failed export
    leaves `path`, and a previous export there, as they were, and no
    folder it had to create. With `verbose`, Keras's description of the
    signatures names `path`, not the folder written beside it."""
    said = io.StringIO()
    with AtomicFolder(path) as folder:
        beside = folder.path
        with contextlib.redirect_stdout(said):
            archive.write_out(beside, verbose=verbose)
        write_serving_assets(beside, signatures, tokenizer)
    if verbose:
        print(said.getvalue().replace(beside, path), end="")
