"""`keras-txl export --format onnx` and `export_onnx`: model.onnx served
by ONNX Runtime equals the Keras model, segment after segment with the
memory carried, at any batch size.

The conversion always runs TensorFlow (a child process under JAX or
PyTorch, as the SavedModel's). The command's test is `one_backend` (its
folder's rule: CI runs it under TensorFlow). `lm.export(format="onnx")`
checks the file against the model on the caller's backend: its test is
`backend_dependent`, so that CI runs it under JAX too, through the
TensorFlow child process (PyTorch takes the same path as JAX)."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from txl_export_testing import keras_segment_loop
from txl_export_testing import segments
from txl_export_testing import tiny_lm

from keras_txl.export.onnx import MISSING_ONNXRUNTIME
from keras_txl.export.onnx import check_onnx
from keras_txl.export.onnx import export_onnx
from keras_txl.export.saved_model import export_main
from keras_txl.utils.missing_extra_error import MissingExtraError
from keras_txl_cli import cli
from tests.tiny_models import COMPRESSIVE_LM
from tests.tiny_models import tiny_lm as shared_tiny_lm


def _onnx_segment_loop(path, token_segments):
    """Logits `(num_segments, batch, T, vocab)`, valid lengths and the final
    memory of the ONNX file at `path`, run by ONNX Runtime with the memory
    carried from call to call."""
    import onnxruntime

    session = onnxruntime.InferenceSession(
        str(path), providers=["CPUExecutionProvider"]
    )
    inputs = {x.name: x for x in session.get_inputs()}
    assert list(inputs) == ["token_ids", "memory", "valid_length"]
    outputs = ["logits", "next_memory", "next_valid_length"]
    assert sorted(x.name for x in session.get_outputs()) == outputs
    batch_size = token_segments.shape[1]
    memory_shape = [batch_size, *inputs["memory"].shape[1:]]
    state = {
        "memory": np.zeros(memory_shape, "float32"),
        "valid_length": np.zeros((batch_size,), "int32"),
    }
    logits, valid_lengths = [], []
    for segment in token_segments:
        segment_logits, memory, valid_length = session.run(
            outputs, {"token_ids": segment, **state}
        )
        logits.append(segment_logits)
        valid_lengths.append(valid_length)
        state = {"memory": memory, "valid_length": valid_length}
    return inputs, np.stack(logits), np.stack(valid_lengths), state["memory"]


def _with_changed_output(model, name, change):
    """`model` whose output `name` is multiplied by `change` (a float)
    or has `change` (an int) added."""
    from onnx import helper
    from onnx import numpy_helper

    graph = model.graph
    for node in graph.node:
        node.output[:] = [
            name + "_unchanged" if out == name else out for out in node.output
        ]
    dtype = "float32" if isinstance(change, float) else "int32"
    graph.initializer.append(
        numpy_helper.from_array(np.asarray(change, dtype), name + "_change")
    )
    op = "Mul" if isinstance(change, float) else "Add"
    graph.node.append(
        helper.make_node(
            op, [name + "_unchanged", name + "_change"], [name], name=op
        )
    )
    return model


def _export_command(*args, backend):
    """`python -m keras_txl_cli export ...` in a fresh process under
    `backend`, as a user runs it: `(exit status, stdout, stderr)`."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND=backend)
    command = [sys.executable, "-m", "keras_txl_cli", "export", *map(str, args)]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr


def test_export_command_onnx_streams_as_the_keras_model(tmp_path, capsys):
    lm = tiny_lm()
    run = tmp_path / "run"
    run.mkdir()
    lm.save(str(run / "model.keras"))
    config = {"segment_length": 3, "memory_length": 4, "eval_memory_length": 5}
    (run / "train_config.json").write_text(json.dumps(config))
    out = tmp_path / "onnx"
    status, stdout, stderr = _export_command(
        run, out, "--format", "onnx", backend="tensorflow"
    )
    assert status == 0, stderr[-3000:]
    # The export checked itself with ONNX Runtime, and said so; then the
    # command named what it wrote.
    assert (
        "ONNX Runtime check: 3 segments of 3 tokens at batch sizes 1, 3"
        in stdout
    ), stdout
    path = out / "model.onnx"
    assert (
        f"Exported an ONNX file to {path}: inputs token_ids int32 (batch, "
        "3), memory float32 (batch, 2, 5, 16), valid_length int32 (batch) "
        "-> outputs logits float32 (batch, 3, 37)"
    ) in stdout, stdout
    assert sorted(p.name for p in out.iterdir()) == ["model.onnx"]

    # The run's lengths: 3 segments of 3 into a memory of 5 (it fills,
    # then slides), one stream and three from the same file.
    for batch_size in (1, 3):
        token_segments = segments(batch_size, 3, num_segments=3)
        inputs, logits, valid_lengths, memory = _onnx_segment_loop(
            path, token_segments
        )
        assert inputs["token_ids"].shape == ["batch", 3]
        assert inputs["token_ids"].type == "tensor(int32)"
        assert inputs["memory"].shape == ["batch", 2, 5, 16]
        assert inputs["valid_length"].type == "tensor(int32)"
        expected, expected_lengths, expected_memory = keras_segment_loop(
            lm, token_segments, 5
        )
        np.testing.assert_allclose(logits, expected, atol=1e-4)
        np.testing.assert_array_equal(valid_lengths, expected_lengths)
        np.testing.assert_array_equal(valid_lengths[:, 0], [3, 5, 5])
        np.testing.assert_allclose(memory, expected_memory, atol=1e-4)

    # The check fails on a model that is not the one exported.
    other = tiny_lm(seed=7)
    with pytest.raises(ValueError, match="differs from the Keras model"):
        check_onnx(other, str(path))
    # Not over an export without --overwrite (in this process: cheaper).
    assert cli.main(["export", str(run), str(out), "--format", "onnx"]) == 1
    assert "--overwrite" in capsys.readouterr().err


# `lm.export` converts under TensorFlow (a child process under JAX) and
# checks the file against `lm` on the backend that runs the test.
@pytest.mark.backend_dependent
def test_compressive_onnx_export_threads_both_memories(tmp_path, capsys):
    import onnx
    import onnxruntime
    from onnx import numpy_helper

    lm = shared_tiny_lm(**COMPRESSIVE_LM)
    # Segments of 2 into M=4: the third evicts into the compressed memory.
    path = lm.export(str(tmp_path / "onnx"), format="onnx", segment_length=2)
    said = capsys.readouterr().out
    assert "ONNX Runtime check: 3 segments of 2 tokens at batch sizes 1, 3" in (
        said
    )
    session = onnxruntime.InferenceSession(
        path, providers=["CPUExecutionProvider"]
    )
    keys = ["memory", "valid_length"]
    keys += ["compressed_memory", "compressed_valid_length"]
    assert [x.name for x in session.get_inputs()] == ["token_ids", *keys]
    assert sorted(x.name for x in session.get_outputs()) == sorted(
        ["logits", *("next_" + key for key in keys)]
    )
    compressed = session.get_inputs()[3]
    assert compressed.shape == ["batch", 2, 3, 8]  # Mc=3, width 8

    # The check reads the file: one whose largest weight (the embedding)
    # was scaled by 1.01 after the export fails it.
    model = onnx.load(path)
    weight = max(model.graph.initializer, key=lambda w: np.prod(w.dims))
    weight.CopyFrom(
        numpy_helper.from_array(
            numpy_helper.to_array(weight) * np.float32(1.01), weight.name
        )
    )
    with pytest.raises(ValueError, match=r"logits by .* memory by "):
        check_onnx(lm, model.SerializeToString())
    # One segment, whose logits do not read the (empty) memory: a file
    # whose memory out is off by 1% fails on the memory alone, one whose
    # valid length out is off by one on the valid length alone.
    for name, change in (("next_memory", 1.01), ("next_valid_length", 1)):
        changed = _with_changed_output(onnx.load(path), name, change)
        with pytest.raises(ValueError) as error:
            check_onnx(lm, changed.SerializeToString(), num_segments=1)
        logits = float(re.search(r"logits by (\S+),", str(error.value))[1])
        assert logits <= 1e-4, str(error.value)
        assert ("valid lengths different" in str(error.value)) == (
            name == "next_valid_length"
        ), str(error.value)


def test_onnx_export_names_the_extra_when_it_is_missing(
    monkeypatch, tmp_path, capsys
):
    # `import onnxruntime` fails, as without the package: the check is
    # skipped with one line.
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert check_onnx(tiny_lm(), b"not read") is None
    assert capsys.readouterr().out.strip() == MISSING_ONNXRUNTIME
    assert "pip install 'keras-txl[onnx]'" in MISSING_ONNXRUNTIME
    # Without tf2onnx the export itself cannot run: one line, from the
    # function and from the command, before any TensorFlow process.
    monkeypatch.setitem(sys.modules, "tf2onnx", None)
    expected = "ONNX export needs tf2onnx: pip install 'keras-txl[onnx]'."
    with pytest.raises(MissingExtraError) as error:
        export_onnx(tiny_lm(), tmp_path / "out", segment_length=2)
    assert str(error.value) == expected
    with pytest.raises(MissingExtraError, match="keras-txl\\[onnx\\]"):
        export_main(tmp_path, tmp_path / "out", format="onnx")
    tiny_lm().save(str(tmp_path / "model.keras"))
    out = str(tmp_path / "out")
    assert cli.main(["export", str(tmp_path), out, "--format", "onnx"]) == 1
    assert capsys.readouterr().err.strip().endswith(expected)
    assert not (tmp_path / "out").exists()


def test_onnx_export_refuses_a_model_that_is_not_float32(tmp_path):
    lm = shared_tiny_lm(dtype="mixed_bfloat16")
    with pytest.raises(ValueError, match="needs a float32 model.*bfloat16"):
        export_onnx(lm, tmp_path / "out", segment_length=2)
    assert not (tmp_path / "out").exists()
