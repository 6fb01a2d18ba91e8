"""The checks every exporter shares (`keras_txl/export/export_arguments.py`):
each refuses a model it cannot serve with the same message, before it
writes anything."""

import pytest

from keras_txl.export import export_litert
from keras_txl.export import export_onnx
from keras_txl.export import export_saved_model
from tests.tiny_models import tiny_backbone

NOT_A_TASK = (
    "`lm` must be a `keras_txl.models.TransformerXLCausalLM`. Received: "
    "lm=TransformerXLBackbone. A backbone has no output layer to serve: "
    "export `TransformerXLCausalLM(backbone)`."
)


@pytest.fixture(scope="module")
def backbone():
    return tiny_backbone()


@pytest.mark.parametrize(
    "export", [export_saved_model, export_litert, export_onnx]
)
def test_every_exporter_refuses_a_backbone_alone(tmp_path, backbone, export):
    out = tmp_path / "out"
    with pytest.raises(ValueError) as error:
        export(backbone, out, batch_size=1, segment_length=4)
    assert str(error.value) == NOT_A_TASK
    assert not out.exists()
