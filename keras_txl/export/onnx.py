"""ONNX export of a `TransformerXLCausalLM`, checked by ONNX Runtime.

`export_onnx(lm, path, ...)` writes `path/model.onnx`: the model with the
memory as an input and an output, as the SavedModel's `serving_default`
(see `keras_txl.export.saved_model`), for ONNX Runtime (servers,
browsers, phones) or any ONNX runtime.

Inputs and outputs (ONNX names):

- in: int32 `token_ids` `(batch, segment_length)`, the `memory`
  `(batch, num_layers, memory_length, hidden_dim)` (float32) and int32
  `valid_length` `(batch,)`: how many memory slots (the last ones) hold
  states; an empty memory is all zeros with `valid_length` 0;
- out: float32 `logits` `(batch, segment_length, vocabulary_size)`,
  `next_memory` and `next_valid_length`, the next call's `memory` and
  `valid_length`.
- With a `CompressiveTransformerXLBackbone`, `compressed_memory`
  `(batch, num_layers, compressed_memory_length, hidden_dim)` and
  `compressed_valid_length` `(batch,)` in, `next_compressed_memory` and
  `next_compressed_valid_length` out, threaded like the memory.

The outputs are named `next_*`, not as the SavedModel's (`memory`,
`valid_length`): an ONNX graph names each value once (static single
assignment), so an output cannot carry the name of an input. The batch
axis is dynamic (`batch` in the file: any number of streams per call)
unless `batch_size` is given; `segment_length` is fixed at export (1 for
token-by-token generation) or, `None`, any length (`segment_length` in
the file). The memory lengths are static. As in LiteRT, the run-time
checks of the SavedModel are not in the file: a `valid_length` outside
`[0, memory_length]` is the caller's error and is not reported.

How: the model's call with an explicit memory is traced by TensorFlow
(a `tf.function`, as Keras's own `Model.export(format="onnx")` does on
TensorFlow) and converted by `tf2onnx.convert.from_function`. Keras's
export is not called as is, for two reasons (docs/serving.md, "ONNX"):
the model's outputs carry its inputs' names (`memory`, `valid_length`),
which tf2onnx cannot convert ("graph input 'memory' not exist"), and
tf2onnx's `from_function` turns every tensor the traced function
captures into a graph input; a functional Keras model captures the
constants computed while it was built (here `sqrt(hidden_dim)`, the
embedding's scale), which then are inputs ONNX Runtime asks for
("Required inputs ... are missing"). This module names the outputs
`next_*` and writes the captured constants into the file as initializers
(their values as traced).

After the conversion `export_onnx` checks the file with ONNX Runtime
(CPU): three segments with the memory carried, at batch sizes 1 and 3
(the batch size given at export, if any), against the Keras model
(`lm.call_with_memory`). Logits and memory that differ by more than 1e-4
fail the export, and nothing is written. Without `onnxruntime` the check
is skipped with one line that says so.

Everything here needs the `onnx` extra (`pip install
'keras-txl[onnx]'`: tf2onnx, onnx, onnxruntime); without tf2onnx or onnx
the export fails with one line that names it. The conversion runs
TensorFlow (imported here only, when called): under another backend the
model is saved to a temporary `.keras` file and converted in a child
process with `KERAS_BACKEND=tensorflow`, as the SavedModel is; the check
then runs in the calling process, against the model on its own backend.
"""

import importlib.util
import os
import tempfile

import keras
import numpy as np

from keras_txl.export.export_arguments import check_destination
from keras_txl.export.export_arguments import check_exported_lm
from keras_txl.export.saved_model import export_in_tensorflow_process
from keras_txl.utils import run_folder
from keras_txl.utils.atomic_folder import AtomicFolder
from keras_txl.utils.missing_extra_error import MissingExtraError
from keras_txl.utils.validation import check_bool

ONNX_FILE = "model.onnx"
# What an output is called: the input it feeds in the next call, `next_`
# before it (an ONNX graph names each value once).
OUTPUT_PREFIX = "next_"
# Logits and memory against the Keras model's (measured: 1e-6).
CHECK_TOLERANCE = 1e-4
CHECK_SEGMENTS = 3
CHECK_BATCH_SIZES = (1, 3)
# The segment length of the check of an export of any segment length.
CHECK_SEGMENT_LENGTH = 4
NEEDED_FOR = "ONNX export"
MISSING_ONNXRUNTIME = (
    "ONNX Runtime check skipped: onnxruntime is not installed "
    "(pip install 'keras-txl[onnx]')."
)


def export_onnx(
    lm,
    path,
    batch_size=None,
    segment_length=None,
    memory_length=None,
    overwrite=False,
    verbose=False,
    check=True,
):
    """Exports `lm` as `path/model.onnx` with an explicit memory.

    See the module documentation for the inputs and outputs. Under a
    backend other than TensorFlow the conversion runs in a child process
    with `KERAS_BACKEND=tensorflow`, and the check here, against `lm` on
    this backend.

    Args:
        lm: a `TransformerXLCausalLM` (float32: the ONNX file computes in
            float32).
        path: str or path-like. The directory to write `model.onnx`
            into. Must not exist, or be an empty directory, unless
            `overwrite=True`.
        batch_size: int >= 1, or `None` (default) for any number of
            streams per call.
        segment_length: int >= 1, or `None` for any length. Tokens per
            call (1 for token-by-token generation).
        memory_length: int >= 1, or `None` for the model's memory length.
        overwrite: bool. Replace an existing export at `path`.
        verbose: bool. Print the size, inputs and outputs of the file.
        check: bool. Check the file with ONNX Runtime against `lm` before
            it is put in place (see the module documentation); skipped,
            with one line, without `onnxruntime`.

    Returns:
        The path of `model.onnx`, as a string.

    Example:

    >>> import tempfile, os
    >>> from keras_txl.models import TransformerXLBackbone
    >>> from keras_txl.models import TransformerXLCausalLM
    >>> backbone = TransformerXLBackbone(
    ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
    ...     head_dim=8, intermediate_dim=32, memory_length=8,
    ... )
    >>> lm = TransformerXLCausalLM(backbone)
    >>> out = os.path.join(tempfile.mkdtemp(), "txl_onnx")
    >>> path = export_onnx(lm, out, segment_length=4, check=False)
    >>> os.path.basename(path)
    'model.onnx'
    """
    batch_size, segment_length, memory_length = check_exported_lm(
        lm, batch_size, segment_length, memory_length
    )
    check_bool("check", check)
    check_float32(lm)
    require_converter()
    path = check_destination(path, overwrite)
    if keras.config.backend() == "tensorflow":
        model = convert(lm, batch_size, segment_length, memory_length)
        serialized = model.SerializeToString()
    else:
        serialized = _convert_in_tensorflow_process(
            lm, batch_size, segment_length, memory_length
        )
    if check:
        # Against `lm` as it runs here, on this backend.
        check_onnx(lm, serialized)
    with AtomicFolder(path) as folder:
        with open(os.path.join(folder.path, ONNX_FILE), "wb") as file:
            file.write(serialized)
    if verbose:
        import onnx

        model = onnx.load_from_string(serialized)
        print(
            f"wrote {os.path.join(path, ONNX_FILE)}: "
            f"{len(serialized) / 1e6:.2f} MB, opset "
            f"{model.opset_import[0].version}; {describe(model)}"
        )
    return os.path.join(path, ONNX_FILE)


def _convert_in_tensorflow_process(
    lm, batch_size, segment_length, memory_length
):
    """The bytes of `lm`'s ONNX file, converted in a child process with
    `KERAS_BACKEND=tensorflow` from `lm` saved to a temporary `.keras`
    file (unchecked there: the caller checks it against `lm`)."""
    with tempfile.TemporaryDirectory(prefix="keras_txl_onnx_") as tmp:
        lm.save(os.path.join(tmp, run_folder.MODEL_FILE))
        converted = os.path.join(tmp, "onnx")
        export_in_tensorflow_process(
            tmp,
            converted,
            batch_size,
            segment_length,
            memory_length,
            overwrite=False,
            verbose=False,
            format="onnx",
            check=False,
        )
        with open(os.path.join(converted, ONNX_FILE), "rb") as file:
            return file.read()


def check_float32(lm):
    """Refuses a model that does not compute in float32 (tf2onnx and the
    check compare float32 graphs)."""
    for layer in (lm, lm.backbone):
        policy = layer.dtype_policy
        if (policy.compute_dtype, policy.variable_dtype) != (
            "float32",
            "float32",
        ):
            break
    else:
        return
    raise ValueError(
        "ONNX export needs a float32 model. Received a model under the "
        f"dtype policy {policy.name!r}: load it with `dtype='float32'` "
        "(e.g. `TransformerXLCausalLM.from_preset(preset, "
        "dtype='float32')`)."
    )


def require_converter():
    """Raises `MissingExtraError` (one line naming the `onnx` extra)
    unless tf2onnx and onnx can be imported; imports neither (tf2onnx
    imports TensorFlow)."""
    for module in ("tf2onnx", "onnx"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a blocked or broken module
            found = False
        if not found:
            raise MissingExtraError(module, "onnx", NEEDED_FOR)


def _input_names(spec):
    """The model's inputs, in order: `token_ids`, then the memory's."""
    return ["token_ids", *spec.keys]


def convert(lm, batch_size, segment_length, memory_length):
    """The `onnx.ModelProto` of `lm` with an explicit memory (see the
    module documentation). Runs under the TensorFlow backend."""
    import tensorflow as tf
    import tf2onnx

    spec = lm.backbone.memory_spec
    memory_signature = spec.signature(batch_size, memory_length)
    input_signature = [
        tf.TensorSpec((batch_size, segment_length), tf.int32, "token_ids"),
        *(
            tf.TensorSpec(shape, dtype, name=key)
            for key, shape, dtype in memory_signature
        ),
    ]

    @tf.function(input_signature=input_signature, autograph=False)
    def serve(token_ids, *memory):
        inputs = dict(zip(spec.keys, memory), token_ids=token_ids)
        outputs = lm(inputs, training=False)
        result = {"logits": outputs["logits"]}  # (batch, T, vocab)
        for key in spec.keys:
            result[OUTPUT_PREFIX + key] = outputs[key]
        return result

    captured = _captured_constants(serve.get_concrete_function())
    model, _ = tf2onnx.convert.from_function(
        serve, input_signature=input_signature
    )
    _fold_captured_inputs(model, captured)
    _name_dynamic_axes(model, segment_length is None)
    expected = _input_names(spec)
    names = [value.name for value in model.graph.input]
    if names != expected:
        raise RuntimeError(
            f"The ONNX file's inputs are {names}, not {expected}: report "
            "it, with the versions of tensorflow and tf2onnx."
        )
    return model


def _captured_constants(concrete_function):
    """`{name in the graph: numpy value}` of the non-resource tensors
    that `concrete_function` captures (the constants Keras computed while
    it built the model); the variables are resources, which tf2onnx
    freezes itself."""
    import tensorflow as tf

    constants = {}
    for outer, inner in zip(
        concrete_function.captured_inputs,
        concrete_function.graph.internal_captures,
    ):
        if outer.dtype != tf.resource:
            constants[inner.name] = np.asarray(outer)
    return constants


def _fold_captured_inputs(model, captured):
    """Turns the graph inputs that tf2onnx made of captured constants
    (`captured`, by name) into initializers of their values. Any other
    graph input beyond the model's is an error."""
    from onnx import numpy_helper

    graph = model.graph
    for value in list(graph.input):
        name = value.name
        known = captured.get(name, captured.get(name + ":0"))
        if known is None:
            continue
        graph.initializer.append(numpy_helper.from_array(known, name))
        graph.input.remove(value)


def _name_dynamic_axes(model, any_segment_length):
    """Names the unknown axes tf2onnx leaves as `unk__N`: `batch` for the
    first axis of every input and output, `segment_length` for the
    second of `token_ids` and `logits` (an export of any length). The
    `logits` have the segment length of `token_ids`, and an output
    `next_KEY` the shape of the input `KEY` (static memory lengths),
    which tf2onnx does not always infer."""
    graph = model.graph
    inputs = {value.name: value for value in graph.input}
    for value in graph.output:
        source = inputs.get(value.name[len(OUTPUT_PREFIX) :])
        if value.name.startswith(OUTPUT_PREFIX) and source is not None:
            shape = value.type.tensor_type.shape
            shape.CopyFrom(source.type.tensor_type.shape)
    (logits,) = [value for value in graph.output if value.name == "logits"]
    logits_dims = logits.type.tensor_type.shape.dim
    logits_dims[1].CopyFrom(inputs["token_ids"].type.tensor_type.shape.dim[1])
    for value in [*graph.input, *graph.output]:
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_param = "batch"
        if (
            any_segment_length
            and value.name in ("token_ids", "logits")
            and not dims[1].HasField("dim_value")
        ):
            dims[1].dim_param = "segment_length"


def describe(model):
    """`"inputs token_ids int32 (batch, 4), ... -> outputs logits ..."`."""
    from onnx import helper

    def spec(value):
        tensor = value.type.tensor_type
        shape = ", ".join(
            d.dim_param or str(d.dim_value) for d in tensor.shape.dim
        )
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
        return f"{value.name} {dtype} ({shape})"

    inputs = ", ".join(spec(value) for value in model.graph.input)
    outputs = ", ".join(spec(value) for value in model.graph.output)
    return f"inputs {inputs} -> outputs {outputs}"


def onnx_session(model):
    """An ONNX Runtime `InferenceSession` of `model` (a path or the
    file's bytes) on the CPU, or `None` without `onnxruntime`."""
    try:
        import onnxruntime
    except ImportError:
        return None
    if not isinstance(model, bytes):
        model = os.fspath(model)
    return onnxruntime.InferenceSession(
        model, providers=["CPUExecutionProvider"]
    )


def session_batch_and_length(session):
    """`(batch_size, segment_length)` of the session's `token_ids`; `None`
    for a dynamic axis."""
    (token_ids,) = [x for x in session.get_inputs() if x.name == "token_ids"]
    return tuple(d if isinstance(d, int) else None for d in token_ids.shape)


def check_onnx(lm, model, num_segments=CHECK_SEGMENTS, seed=0):
    """Runs `num_segments` segments of random tokens through the ONNX
    `model` (a path or bytes) with ONNX Runtime, the memory carried, and
    through `lm`, at batch sizes 1 and 3 (or the file's fixed one).

    Prints one line: the largest differences of the logits and of the
    memory, or (without `onnxruntime`) that the check was skipped.

    Args:
        lm: the `TransformerXLCausalLM` that was exported.
        model: path of a `.onnx` file, or its bytes.
        num_segments: int. Calls, the memory carried from each to the next.
        seed: int. Of the random tokens.

    Returns:
        The largest absolute difference of the logits and memory states
        over all calls, or `None` when the check was skipped.

    Raises:
        ValueError: when a difference is over 1e-4, or a valid length
            differs.
    """
    session = onnx_session(model)
    if session is None:
        print(MISSING_ONNXRUNTIME)
        return None
    fixed_batch, segment_length = session_batch_and_length(session)
    segment_length = segment_length or CHECK_SEGMENT_LENGTH
    batch_sizes = CHECK_BATCH_SIZES if fixed_batch is None else (fixed_batch,)
    memory_input = [x for x in session.get_inputs() if x.name == "memory"]
    memory_length = int(memory_input[0].shape[2])
    spec = lm.backbone.memory_spec
    output_names = ["logits", *(OUTPUT_PREFIX + key for key in spec.keys)]
    rng = np.random.RandomState(seed)
    vocabulary_size = lm.backbone.vocabulary_size
    logits_difference = memory_difference = 0.0
    lengths_equal = True
    for batch_size in batch_sizes:
        memory = lm.backbone.initial_memory(batch_size, memory_length)
        state = {
            key: keras.ops.convert_to_numpy(value)
            for key, value in memory.items()
        }
        for _ in range(num_segments):
            shape = (batch_size, segment_length)
            tokens = rng.randint(0, vocabulary_size, shape).astype("int32")
            outputs = session.run(output_names, {"token_ids": tokens, **state})
            logits, *next_state = outputs  # (batch, T, vocab), memory
            state = dict(zip(spec.keys, next_state))
            expected, memory = lm.call_with_memory(tokens, memory)
            expected = keras.ops.convert_to_numpy(expected)
            logits_difference = max(
                logits_difference, float(np.max(np.abs(logits - expected)))
            )
            for key in spec.keys:
                want = keras.ops.convert_to_numpy(memory[key])
                if "valid_length" in key:
                    lengths_equal &= bool(np.array_equal(state[key], want))
                    continue
                memory_difference = max(
                    memory_difference,
                    float(np.max(np.abs(state[key] - want), initial=0.0)),
                )
    print(
        f"ONNX Runtime check: {num_segments} segments of {segment_length} "
        f"tokens at batch sizes {', '.join(map(str, batch_sizes))}, the "
        "memory carried: largest difference against the Keras model "
        f"{logits_difference:.1e} (logits), {memory_difference:.1e} "
        "(memory)"
    )
    difference = max(logits_difference, memory_difference)
    if not (difference <= CHECK_TOLERANCE and lengths_equal):
        raise ValueError(
            "The ONNX export differs from the Keras model over "
            f"{num_segments} segments: logits by {logits_difference:.2e}, "
            f"memory by {memory_difference:.2e} (allowed: "
            f"{CHECK_TOLERANCE:g}), valid lengths "
            f"{'equal' if lengths_equal else 'different'}. Nothing was "
            "written. Report it, with the model's config and the versions "
            "of tensorflow, tf2onnx and onnxruntime."
        )
    return difference
