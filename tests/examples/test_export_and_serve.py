import pytest

from tests.examples.run_example import numbers
from tests.examples.run_example import run_example


# The export and the serving run TensorFlow whatever KERAS_BACKEND says:
# CI runs this under TensorFlow only.
@pytest.mark.one_backend
def test_export_and_serve_streams_without_keras_as_keras_does(tmp_path):
    output = run_example(
        "export_and_serve.py",
        "--smoke",
        "--output",
        tmp_path / "saved_model" / "1",
        backend="tensorflow",
    )
    assert (tmp_path / "saved_model" / "1" / "saved_model.pb").is_file()
    # The child served every segment with the memory full by the end and
    # never imported Keras (it asserts so itself, and says it).
    assert "valid memory slots at the end: 32;" in output
    assert "keras, keras_hub and keras_txl never imported" in output
    # The SavedModel's stream equals the Keras model's.
    (difference,) = numbers(
        r"call_with_memory: largest log-probability difference ([\d.e+-]+)",
        output,
    )
    assert difference < 1e-5
    # Streaming generation over model.tflite, then over model.onnx (one
    # token per call): Keras, fed the same tokens, picks the same 16 (the
    # example asserts it, and that both runtimes stream the same tokens).
    assert "litert check: 3 segments of 1 tokens" in output.lower()
    assert (
        "ONNX Runtime check: 3 segments of 1 tokens at batch sizes 1, 3"
        in output
    )
    assert output.count("picks the same token 16/16 times") == 2
    per_token = numbers(r"([\d.]+) ms per generated token", output)
    assert len(per_token) == 2 and min(per_token) > 0, per_token
    differences = numbers(
        r"16/16 times; largest log-probability difference ([\d.e+-]+)",
        output,
    )
    assert len(differences) == 2 and max(differences) < 1e-4, differences
    assert "onnx:    " in output
