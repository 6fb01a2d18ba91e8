import json
import os
import subprocess
import sys

import numpy as np
import pytest
from txl_export_testing import keras_segment_loop
from txl_export_testing import segments
from txl_export_testing import tiny_lm

from keras_txl.export import export_litert
from keras_txl.export.litert import MISSING_LITERT
from keras_txl.export.litert import check_litert
from keras_txl.export.saved_model import export_main
from keras_txl_cli import cli


def _litert_segment_loop(path, token_segments):
    """Logits `(num_segments, batch, T, vocab)`, valid lengths and the final
    memory of the `.tflite` file at `path`, run by ai-edge-litert's
    interpreter with the memory carried from call to call."""
    from ai_edge_litert.interpreter import Interpreter

    serve = Interpreter(model_path=str(path)).get_signature_runner(
        "serving_default"
    )
    inputs = serve.get_input_details()
    assert sorted(inputs) == ["memory", "token_ids", "valid_length"]
    outputs = ["logits", "memory", "valid_length"]
    assert sorted(serve.get_output_details()) == outputs
    state = {
        key: np.zeros(inputs[key]["shape"], inputs[key]["dtype"])
        for key in ("memory", "valid_length")
    }
    logits, valid_lengths = [], []
    for segment in token_segments:
        outputs = serve(token_ids=segment, **state)
        logits.append(outputs.pop("logits"))
        valid_lengths.append(outputs["valid_length"])
        state = outputs
    return inputs, np.stack(logits), np.stack(valid_lengths), state["memory"]


def _export_command(*args):
    """`python -m keras_txl export ...` in a fresh process, as a user runs
    it: `(exit status, stdout, stderr)`."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, "-m", "keras_txl_cli", "export", *map(str, args)]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr


def test_export_command_litert_streams_as_the_keras_model(tmp_path, capsys):
    lm = tiny_lm()
    run = tmp_path / "run"
    run.mkdir()
    lm.save(str(run / "model.keras"))
    config = {"segment_length": 3, "memory_length": 4, "eval_memory_length": 5}
    (run / "train_config.json").write_text(json.dumps(config))
    out = tmp_path / "litert"
    status, stdout, stderr = _export_command(run, out, "--format", "litert")
    assert status == 0, stderr[-3000:]
    # The export checked itself with the interpreter, and said so.
    assert "LiteRT check: 3 segments of 3 tokens" in stdout
    assert sorted(p.name for p in out.iterdir()) == ["model.tflite"]

    # The run's lengths, one stream: 3 segments of 3 into a memory of 5
    # (it fills, then slides).
    token_segments = segments(1, 3, num_segments=3)
    inputs, logits, valid_lengths, memory = _litert_segment_loop(
        out / "model.tflite", token_segments
    )
    assert inputs["token_ids"]["shape"].tolist() == [1, 3]
    assert inputs["token_ids"]["dtype"] == np.int32
    assert inputs["memory"]["shape"].tolist() == [1, 2, 5, 16]
    assert inputs["valid_length"]["dtype"] == np.int32
    expected, expected_lengths, expected_memory = keras_segment_loop(
        lm, token_segments, 5
    )
    np.testing.assert_allclose(logits, expected, atol=1e-4)
    np.testing.assert_array_equal(valid_lengths, expected_lengths)
    np.testing.assert_array_equal(valid_lengths[:, 0], [3, 5, 5])
    np.testing.assert_allclose(memory, expected_memory, atol=1e-4)

    # The check fails on a model that is not the one exported.
    other = tiny_lm(seed=7)
    with pytest.raises(ValueError, match="differ from the Keras model"):
        check_litert(other, str(out / "model.tflite"))
    # Not over an export without --overwrite (in this process: cheaper).
    assert cli.main(["export", str(run), str(out), "--format", "litert"]) == 1
    assert "--overwrite" in capsys.readouterr().err


def test_int8_export_is_smaller_and_close(tmp_path, capsys):
    # The bound is what int8 costs a model that does not amplify small
    # errors: each int8 weight or activation is off by at most half of
    # 1/127 of its channel's (or tensor's) largest value, a few tenths of
    # a percent, in each of the layers' quantized products (measured:
    # 0.8-0.9% of the largest logit, seeds 0-2). The weight spread of the
    # other export tests (0.3) amplifies them: that model alone, in
    # Keras, with its weights rounded to int8, moves its logits by 4-8%,
    # and its int8 file by 10-27%; at 0.1 the rounding moves them by
    # 0.6-0.7%, its weights' own error, while removing any one attention
    # or feed-forward sublayer still moves them by 16-30%.
    lm = tiny_lm(hidden_dim=32, vocabulary_size=200, initializer_range=0.1)
    float_path = export_litert(
        lm, tmp_path / "float", batch_size=2, segment_length=4, check=False
    )
    int8_path = export_litert(
        lm,
        tmp_path / "int8",
        batch_size=2,
        segment_length=4,
        quantize="int8",
    )
    # The int8 check reports its difference and does not fail on it.
    assert "LiteRT check" in capsys.readouterr().out
    float_size = (tmp_path / "float" / "model.tflite").stat().st_size
    int8_size = (tmp_path / "int8" / "model.tflite").stat().st_size
    # The tiny model's small tensors (under 1,024 weights) stay float32.
    assert int8_size < 0.7 * float_size, (int8_size, float_size)
    token_segments = segments(2, 4, num_segments=3)
    _, float_logits, _, _ = _litert_segment_loop(float_path, token_segments)
    _, int8_logits, _, _ = _litert_segment_loop(int8_path, token_segments)
    difference = np.max(np.abs(int8_logits - float_logits))
    assert 0 < difference < 0.05 * np.max(np.abs(float_logits)), difference


def test_litert_check_degrades_without_ai_edge_litert(monkeypatch, capsys):
    # `import ai_edge_litert.interpreter` fails, as without the package.
    for name in ("ai_edge_litert", "ai_edge_litert.interpreter"):
        monkeypatch.setitem(sys.modules, name, None)
    assert check_litert(tiny_lm(), b"not read") is None
    assert capsys.readouterr().out.strip() == MISSING_LITERT
    assert "pip install 'keras-txl[litert]'" in MISSING_LITERT


def test_litert_export_rejects_what_it_cannot_run(tmp_path):
    lm = tiny_lm()
    path = tmp_path / "out"
    with pytest.raises(ValueError, match="static shapes.*segment_length=None"):
        export_litert(lm, path)
    with pytest.raises(ValueError, match="quantize='int4'"):
        export_litert(lm, path, segment_length=4, quantize="int4")
    with pytest.raises(ValueError, match="--any-segment-length"):
        export_main(tmp_path, path, format="litert", any_segment_length=True)
    with pytest.raises(ValueError, match="--format litert"):
        export_main(tmp_path, path, quantize="int8")
    with pytest.raises(ValueError, match="format='tflite'"):
        export_main(tmp_path, path, format="tflite")
    assert not path.exists()
