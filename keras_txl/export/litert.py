"""LiteRT (TensorFlow Lite) export of a `TransformerXLCausalLM`.

`export_litert(lm, path, ...)` writes `path/model.tflite`: the
`serving_default` signature of the SavedModel export (see
`keras_txl.export.saved_model`), converted with
`tf.lite.TFLiteConverter.from_saved_model` to builtin LiteRT ops only (no
TensorFlow "select" ops: the file runs on the LiteRT runtime alone, on a
phone as in `ai-edge-litert`'s Python interpreter).

Signature `serving_default(token_ids, memory, valid_length)` -> `{"logits",
"memory", "valid_length"}`, as the SavedModel's: int32 `token_ids`
`(batch_size, segment_length)`, the memory `(batch_size, num_layers,
memory_length, hidden_dim)` and int32 `valid_length` `(batch_size,)` in,
float32 `logits` `(batch_size, segment_length, vocabulary_size)` and the
memory and `valid_length` for the next call out (with a compressive
backbone, `compressed_memory` and `compressed_valid_length` too). The
caller threads the memory from one call to the next; an empty memory is
all zeros with `valid_length` 0 (there is no `initial_memory` signature).

LiteRT's builtin ops need static shapes: the batch size (1 unless told)
and the segment length are fixed at export (`segment_length=1` for
token-by-token generation). LiteRT drops the SavedModel's run-time checks:
a `valid_length` outside `[0, memory_length]` is the caller's error and is
not reported.

`quantize="int8"`: dynamic-range quantization (LiteRT's
`Optimize.DEFAULT` without a representative dataset): the weights of the
dense layers and the embedding are stored as int8 and dequantized (or
used by int8 kernels) at run time; the activations and the memory stay
float32. About a quarter of the float file's size; the change in
validation NLL is measured in docs/pretrained.md.

After the conversion `export_litert` checks the file with `ai-edge-litert`'s
interpreter: three segments with the memory carried, against the Keras
model (`lm.call_with_memory`); a float32 export whose logits differ by
more than 1e-4 fails. Without `ai-edge-litert` (`pip install
'keras-txl[litert]'`) the check is skipped with one line that says so.

The conversion runs TensorFlow (imported here only, when called); the
SavedModel it converts is written by `export_saved_model`, in a TensorFlow
child process under another backend.
"""

import contextlib
import os
import sys
import tempfile

import keras
import numpy as np

from keras_txl.export.export_arguments import check_destination
from keras_txl.export.export_arguments import check_exported_lm
from keras_txl.export.saved_model import SERVING_SIGNATURE
from keras_txl.export.saved_model import export_saved_model
from keras_txl.utils.atomic_folder import AtomicFolder
from keras_txl.utils.validation import check_bool

LITERT_FILE = "model.tflite"
QUANTIZE_CHOICES = ("int8",)
# A float32 export's logits against the Keras model's (measured: 1e-6).
CHECK_TOLERANCE = 1e-4
CHECK_SEGMENTS = 3
MISSING_LITERT = (
    "LiteRT check skipped: ai-edge-litert is not installed "
    "(pip install 'keras-txl[litert]')."
)


def export_litert(
    lm,
    path,
    batch_size=1,
    segment_length=None,
    memory_length=None,
    quantize=None,
    overwrite=False,
    verbose=False,
    check=True,
):
    """Exports `lm` as a LiteRT flatbuffer, `path/model.tflite`, with an
    explicit memory.

    See the module documentation for the signature.

    Args:
        lm: a `TransformerXLCausalLM`.
        path: str or path-like. The directory to write `model.tflite`
            into. Must not exist, or be an empty directory, unless
            `overwrite=True`.
        batch_size: int >= 1. Streams per call (static: default 1).
        segment_length: int >= 1. Tokens per call (static; 1 for
            token-by-token generation). Required.
        memory_length: int >= 1, or `None` for the model's memory length.
        quantize: `None` (float32 weights) or `"int8"` (dynamic-range
            quantization of the weights).
        overwrite: bool. Replace an existing export at `path`.
        verbose: bool. Print the size and signature of the file written.
        check: bool. Check the file with `ai-edge-litert`'s interpreter
            against `lm` before it is put in place (see the module
            documentation); skipped, with one line, without
            `ai-edge-litert`.

    Returns:
        The path of `model.tflite`, as a string.

    Example:

    >>> import tempfile, os
    >>> from keras_txl.models import TransformerXLBackbone
    >>> from keras_txl.models import TransformerXLCausalLM
    >>> backbone = TransformerXLBackbone(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
    ...     head_dim=8, intermediate_dim=32, memory_length=8,
    ... )
    >>> lm = TransformerXLCausalLM(backbone)
    >>> out = os.path.join(tempfile.mkdtemp(), "txl_litert")
    >>> path = export_litert(lm, out, segment_length=4, check=False)
    >>> os.path.basename(path)
    'model.tflite'
    """
    batch_size, segment_length, memory_length = check_exported_lm(
        lm, batch_size, segment_length, memory_length
    )
    if batch_size is None or segment_length is None:
        raise ValueError(
            "LiteRT's builtin ops run static shapes: pass an int "
            "`batch_size` and `segment_length` (`--batch-size`, "
            "`--segment-length`; a segment length of 1 for token-by-token "
            f"generation). Received: batch_size={batch_size}, "
            f"segment_length={segment_length}"
        )
    if quantize not in (None, *QUANTIZE_CHOICES):
        raise ValueError(
            "`quantize` must be None (float32 weights) or one of "
            f"{QUANTIZE_CHOICES}. Received: quantize={quantize!r}"
        )
    check_bool("check", check)
    path = check_destination(path, overwrite)
    with tempfile.TemporaryDirectory(prefix="keras_txl_litert_") as tmp:
        saved_model = os.path.join(tmp, "saved_model")
        export_saved_model(
            lm, saved_model, batch_size, segment_length, memory_length
        )
        flatbuffer = convert_saved_model(saved_model, quantize)
    if check:
        check_litert(lm, flatbuffer, strict=quantize is None)
    with AtomicFolder(path) as folder:
        with open(os.path.join(folder.path, LITERT_FILE), "wb") as file:
            file.write(flatbuffer)
    if verbose:
        print(
            f"wrote {os.path.join(path, LITERT_FILE)}: "
            f"{len(flatbuffer) / 1e6:.2f} MB, {quantize or 'float32'} "
            f"weights, {SERVING_SIGNATURE}(token_ids ({batch_size}, "
            f"{segment_length}) int32, memory, valid_length)"
        )
    return os.path.join(path, LITERT_FILE)


def convert_saved_model(saved_model, quantize=None):
    """The LiteRT flatbuffer (bytes) of the `serving_default` signature of
    the SavedModel at `saved_model`, builtin ops only."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(
        os.fspath(saved_model), signature_keys=[SERVING_SIGNATURE]
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantize == "int8":
        # No representative dataset: dynamic-range quantization.
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def litert_interpreter(model):
    """An `ai_edge_litert` interpreter of `model` (a path or the
    flatbuffer's bytes), its tensors allocated, or `None` without
    `ai-edge-litert`.

    The runtime writes "INFO: Created TensorFlow Lite XNNPACK delegate for
    CPU." straight to file descriptor 2 when it allocates the tensors
    (its default delegate), whatever `TF_CPP_MIN_LOG_LEVEL` says, and has
    no option to silence it: descriptor 2 goes to `/dev/null` for those
    two calls only (their errors are Python exceptions, which still
    show)."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        return None
    with _native_stderr_hidden():
        if isinstance(model, bytes):
            interpreter = Interpreter(model_content=model)
        else:
            interpreter = Interpreter(model_path=os.fspath(model))
        interpreter.allocate_tensors()
    return interpreter


@contextlib.contextmanager
def _native_stderr_hidden():
    """File descriptor 2 to `/dev/null` while the block runs."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, AttributeError, ValueError):
        yield  # no descriptor 2 to hide
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def check_litert(lm, model, num_segments=CHECK_SEGMENTS, strict=True, seed=0):
    """Runs `num_segments` segments of random tokens through the LiteRT
    `model` (a path or bytes), the memory carried, and through `lm`.

    Prints one line: the largest logit difference, or (without
    `ai-edge-litert`) that the check was skipped.

    Args:
        lm: the `TransformerXLCausalLM` that was exported.
        model: path of a `.tflite` file, or its bytes.
        num_segments: int. Calls, the memory carried from each to the next.
        strict: bool. Fail when the difference is over 1e-4 (a float32
            export); an int8 export is reported only.
        seed: int. Of the random tokens.

    Returns:
        The largest absolute difference of the logits, or `None` when the
        check was skipped.
    """
    interpreter = litert_interpreter(model)
    if interpreter is None:
        print(MISSING_LITERT)
        return None
    serve = interpreter.get_signature_runner(SERVING_SIGNATURE)
    inputs = serve.get_input_details()
    batch_size, segment_length = inputs["token_ids"]["shape"]
    memory_length = int(inputs["memory"]["shape"][2])
    state = {
        key: np.zeros(detail["shape"], detail["dtype"])
        for key, detail in inputs.items()
        if key != "token_ids"
    }
    memory = lm.backbone.initial_memory(int(batch_size), memory_length)
    rng = np.random.RandomState(seed)
    vocabulary_size = lm.backbone.vocabulary_size
    difference = 0.0
    for _ in range(num_segments):
        tokens = rng.randint(0, vocabulary_size, (batch_size, segment_length))
        tokens = tokens.astype("int32")  # (batch, T)
        outputs = serve(token_ids=tokens, **state)
        logits = outputs.pop("logits")  # (batch, T, vocab)
        state = outputs
        expected, memory = lm.call_with_memory(tokens, memory)
        expected = keras.ops.convert_to_numpy(expected)
        difference = max(difference, float(np.max(np.abs(logits - expected))))
    print(
        f"LiteRT check: {num_segments} segments of {segment_length} "
        "tokens, the memory carried: largest logit difference "
        f"{difference:.1e} against the Keras model"
    )
    if strict and not difference <= CHECK_TOLERANCE:
        raise ValueError(
            "The LiteRT export's logits differ from the Keras model's by "
            f"{difference:.2e} (over {CHECK_TOLERANCE:g}) over "
            f"{num_segments} segments. Nothing was written. Report it, "
            "with the model's config."
        )
    return difference
