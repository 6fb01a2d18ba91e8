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
    (difference,) = numbers(r"log-probability difference ([\d.e+-]+)", output)
    assert difference < 1e-5
