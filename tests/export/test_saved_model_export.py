import os

import numpy as np
import pytest
from txl_export_testing import REPO_ROOT
from txl_export_testing import keras_segment_loop
from txl_export_testing import run_python
from txl_export_testing import segments
from txl_export_testing import tiny_lm

from keras_txl.export import export_saved_model
from keras_txl.export.saved_model import export_main
from keras_txl.models import CompressiveTransformerXLBackbone

SERVER_SCRIPT = os.path.join(
    REPO_ROOT, "tests", "export", "serve_without_keras.py"
)


def _serve(tmp_path, path, token_segments):
    """Runs the export at `path` in a process without Keras."""
    rows = token_segments.shape[1]
    inputs = tmp_path / f"inputs_{rows}.npz"
    outputs = tmp_path / f"outputs_{rows}.npz"
    np.savez(inputs, segments=token_segments)
    run_python([SERVER_SCRIPT, str(path), str(inputs), str(outputs)])
    return np.load(outputs)


@pytest.mark.slow
def test_one_export_serves_any_batch_size_without_keras(tmp_path):
    lm = tiny_lm()
    segment_length, memory_length = 4, 6
    path = tmp_path / "txl" / "1"
    path.mkdir(parents=True)
    (path / "old_export.txt").write_text("an older export")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_saved_model(
            lm, path, None, segment_length, memory_length=memory_length
        )
    export_saved_model(
        lm, path, None, segment_length, memory_length, overwrite=True
    )
    assert not (path / "old_export.txt").exists()
    assert (path / "saved_model.pb").is_file()

    # The same export, batches of 1 and 3 streams (TF Serving batches
    # requests of any size); 4 segments of 4 tokens: the memory of 6
    # fills, then slides.
    for batch_size in (1, 3):
        token_segments = segments(batch_size, segment_length, num_segments=4)
        served = _serve(tmp_path, path, token_segments)
        assert served["loaded_blocked_modules"].tolist() == []
        assert served["signatures"].tolist() == [
            "initial_memory",
            "serving_default",
        ]
        np.testing.assert_array_equal(
            served["initial_memory"],
            np.zeros((batch_size, 2, memory_length, 16)),
        )
        np.testing.assert_array_equal(
            served["initial_valid_length"], [0] * batch_size
        )
        logits, valid_lengths, final_memory = keras_segment_loop(
            lm, token_segments, memory_length
        )
        assert served["logits"].shape == (4, batch_size, segment_length, 37)
        np.testing.assert_allclose(served["logits"], logits, atol=1e-4)
        np.testing.assert_array_equal(served["valid_length"], valid_lengths)
        np.testing.assert_array_equal(valid_lengths[:, 0], [4, 6, 6, 6])
        np.testing.assert_allclose(
            served["final_memory"], final_memory, atol=1e-4
        )
        # Calls that do not fit the export fail with names and shapes.
        shape_error = str(served["wrong_shape_error"])
        assert "token_ids" in shape_error, shape_error
        assert f"[{batch_size},5]" in shape_error, shape_error
        assert "[?,4]" in shape_error, shape_error
        valid_error = str(served["wrong_valid_length_error"])
        assert "valid_length must be <= memory_length=6" in valid_error


def test_signatures_have_dynamic_batch_and_static_memory(tmp_path):
    import tensorflow as tf

    lm = tiny_lm()
    path = tmp_path / "out"
    export_saved_model(lm, path, segment_length=4, memory_length=6)
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    inputs = serve.structured_input_signature[1]
    assert inputs["token_ids"].shape.as_list() == [None, 4]
    assert inputs["memory"].shape.as_list() == [None, 2, 6, 16]
    assert inputs["valid_length"].shape.as_list() == [None]
    outputs = serve.structured_outputs
    assert outputs["memory"].shape.as_list() == [None, 2, 6, 16]
    assert outputs["logits"].shape.as_list() == [None, 4, 37]


def test_compressive_export_threads_the_compressed_memory(tmp_path):
    import tensorflow as tf

    lm = tiny_lm(
        backbone_class=CompressiveTransformerXLBackbone,
        compressed_memory_length=2,
        compression_rate=2,
    )
    path = tmp_path / "out"
    export_saved_model(lm, path, segment_length=4, memory_length=4)
    loaded = tf.saved_model.load(str(path))
    serve = loaded.signatures["serving_default"]
    inputs = serve.structured_input_signature[1]
    assert inputs["compressed_memory"].shape.as_list() == [None, 2, 2, 16]
    state = loaded.signatures["initial_memory"](batch_size=tf.constant(2))
    assert sorted(state) == sorted(lm.backbone.memory_spec.keys)
    memory = lm.backbone.initial_memory(2, 4)
    # 3 segments of 4 into a memory of 4: the last one compresses.
    for segment in segments(2, 4, num_segments=3):
        state = serve(token_ids=tf.constant(segment), **state)
        logits = state.pop("logits")
        expected, memory = lm.call_with_memory(segment, memory)
        np.testing.assert_allclose(
            logits.numpy(), np.asarray(expected), atol=1e-4
        )
    np.testing.assert_array_equal(state["compressed_valid_length"], [2, 2])
    np.testing.assert_allclose(
        state["compressed_memory"].numpy(),
        np.asarray(memory["compressed_memory"]),
        atol=1e-5,
    )


def test_export_command_takes_lengths_from_the_run(tmp_path):
    import json

    import tensorflow as tf

    from keras_txl_cli import cli

    lm = tiny_lm()
    run = tmp_path / "run"
    run.mkdir()
    lm.save(str(run / "model.keras"))
    config = {"segment_length": 3, "memory_length": 4, "eval_memory_length": 7}
    (run / "train_config.json").write_text(json.dumps(config))
    out = tmp_path / "serving" / "1"
    assert cli.main(["export", str(run), str(out)]) == 0
    serve = tf.saved_model.load(str(out)).signatures["serving_default"]
    inputs = serve.structured_input_signature[1]
    assert inputs["token_ids"].shape.as_list() == [None, 3]
    assert inputs["memory"].shape.as_list() == [None, 2, 7, 16]


@pytest.mark.slow
def test_export_main_from_model_dir_accepts_any_segment_length(tmp_path):
    import tensorflow as tf

    lm = tiny_lm(seed=3, pre_norm=True)
    model_dir = tmp_path / "run"
    model_dir.mkdir()
    lm.save(str(model_dir / "model.keras"))
    out_dir = tmp_path / "serving" / "1"
    assert export_main(
        model_dir,
        out_dir,
        batch_size=1,
        segment_length=None,
        memory_length=5,
    ) == str(out_dir)

    loaded = tf.saved_model.load(str(out_dir))
    serve = loaded.signatures["serving_default"]
    state = loaded.signatures["initial_memory"]()
    tokens = segments(batch_size=1, segment_length=7, num_segments=1)[0]
    # A prompt of 4 tokens, then steps of one token, as a server would.
    memory = lm.backbone.initial_memory(1, 5)
    for start, stop in [(0, 4), (4, 5), (5, 6), (6, 7)]:
        segment = tokens[:, start:stop]
        state = serve(
            token_ids=tf.constant(segment),
            memory=state["memory"],
            valid_length=state["valid_length"],
        )
        logits, memory = lm.call_with_memory(segment, memory)
        np.testing.assert_allclose(
            state["logits"].numpy(), np.asarray(logits), atol=1e-4
        )
    np.testing.assert_array_equal(state["valid_length"].numpy(), [5])


def test_export_rejects_bad_arguments(tmp_path):
    lm = tiny_lm()
    path = tmp_path / "out"
    with pytest.raises(ValueError, match="memory_length=0"):
        export_saved_model(lm, path, 2, 4, memory_length=0)
    with pytest.raises(ValueError, match="batch_size=0"):
        export_saved_model(lm, path, 0, 4, memory_length=4)
    with pytest.raises(ValueError, match="segment_length=-1"):
        export_saved_model(lm, path, 2, -1, memory_length=4)
    with pytest.raises(ValueError, match="TransformerXLCausalLM"):
        export_saved_model(lm.backbone, path, 2, 4, memory_length=4)
    with pytest.raises(FileNotFoundError, match="model.keras"):
        export_main(tmp_path, path, 2, 4, memory_length=4)
    assert not path.exists()


def test_tied_relative_biases_export_serves_the_keras_outputs(tmp_path):
    import tensorflow as tf

    lm = tiny_lm(tie_relative_biases=True)
    # The one pair (layer 0's) away from its initial values: an export
    # that gave the other layers their own copies would serve otherwise.
    attention = lm.backbone.transformer_layers[0].attention
    rng = np.random.RandomState(2)
    for bias in (attention.content_bias, attention.position_bias):
        bias.assign(rng.normal(0, 0.5, tuple(bias.shape)).astype("float32"))
    token_segments = segments(num_segments=3)
    logits, _, final_memory = keras_segment_loop(lm, token_segments, 6)
    path = tmp_path / "tied"
    export_saved_model(lm, path, segment_length=4, memory_length=6)
    loaded = tf.saved_model.load(str(path))
    serve = loaded.signatures["serving_default"]
    state = loaded.signatures["initial_memory"](batch_size=tf.constant(2))
    served = []
    for segment in token_segments:
        state = serve(token_ids=tf.constant(segment), **state)
        served.append(state.pop("logits").numpy())
    np.testing.assert_allclose(np.stack(served), logits, atol=1e-4)
    np.testing.assert_allclose(state["memory"].numpy(), final_memory, atol=1e-4)
