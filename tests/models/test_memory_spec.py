"""`MemorySpec`, the one description of a memory, and the parts that ask
it: the backbone, the carried state and the training checkpoint."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_txl.models import CompressiveTransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from keras_txl.models.memory_spec import MemorySpec
from keras_txl.training.step_history import StepHistory
from keras_txl.training.training_checkpoint import TrainingCheckpoint
from tests.test_case import to_numpy
from tests.tiny_models import backbone_config
from tests.tiny_models import random_ids
from tests.tiny_models import tiny_backbone

TINY = backbone_config(vocabulary_size=12)


def test_keys_shapes_and_dtypes():
    plain = MemorySpec(num_layers=2, hidden_dim=8, memory_length=4)
    assert plain.keys == ("memory", "valid_length")
    assert plain.shapes(3) == {"memory": (3, 2, 4, 8), "valid_length": (3,)}
    spec = MemorySpec(2, 8, 4, compressed_memory_length=5, dtype="bfloat16")
    assert spec.keys[2:] == ("compressed_memory", "compressed_valid_length")
    zeros = spec.zeros(3, memory_length=6)
    assert {k: tuple(v.shape) for k, v in zeros.items()} == {
        "memory": (3, 2, 6, 8),
        "valid_length": (3,),
        "compressed_memory": (3, 2, 5, 8),
        "compressed_valid_length": (3,),
    }
    dtypes = {k: ops.convert_to_numpy(v).dtype.name for k, v in zeros.items()}
    assert dtypes["valid_length"] == dtypes["compressed_valid_length"]
    assert dtypes["valid_length"] == "int32"
    assert "float" not in dtypes["valid_length"]
    cast = spec.cast({"memory": np.ones((1, 2, 4, 8)), "valid_length": [2.0]})
    assert ops.convert_to_numpy(cast["valid_length"]).dtype.name == "int32"
    assert keras.backend.standardize_dtype(cast["memory"].dtype) == "bfloat16"
    with pytest.raises(ValueError, match="float dtype"):
        MemorySpec(2, 8, 4, dtype="int32")


def test_flatten_unflatten_round_trip_and_old_checkpoints():
    spec = MemorySpec(2, 8, 4, compressed_memory_length=3)
    memory = spec.zeros(2)
    memory["valid_length"] = ops.convert_to_tensor([4, 1], "int32")
    arrays = spec.flatten(memory)
    assert sorted(arrays) == sorted(spec.keys)
    back = spec.unflatten(arrays)
    np.testing.assert_array_equal(back["valid_length"], [4, 1])
    # A checkpoint written before the compressed memory was saved.
    old = spec.unflatten({k: arrays[k] for k in ("memory", "valid_length")})
    assert sorted(old) == ["memory", "valid_length"]
    with pytest.raises(ValueError, match="lacks"):
        spec.unflatten({"memory": arrays["memory"]})


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize(
    "dtype, saved", [("bfloat16", "float32"), ("float64", "float64")]
)
def test_saved_states_lose_no_precision(dtype, saved):
    # bfloat16 states are saved as float32 (exact; numpy has no bfloat16),
    # float64 states as float64, not rounded to float32.
    spec = MemorySpec(2, 8, 4, dtype=dtype)
    value = np.full((1, 2, 4, 8), 1 / 3)
    memory = {"memory": value, "valid_length": np.array([4], "int32")}
    arrays = spec.flatten(spec.cast(memory))
    assert arrays["memory"].dtype.name == saved
    back = spec.unflatten(arrays)
    assert back["memory"].dtype.name == saved
    exact = ops.convert_to_numpy(ops.cast(spec.cast(memory)["memory"], saved))
    np.testing.assert_array_equal(back["memory"], exact)


def test_backbone_state_and_initial_memory_follow_the_spec():
    backbone = CompressiveTransformerXLBackbone(
        **TINY, compressed_memory_length=3
    )
    spec = backbone.memory_spec
    assert spec == MemorySpec(2, 8, 4, 3)
    inputs = {x.name for x in backbone.inputs}
    assert inputs == {"token_ids", *spec.keys}
    lm = TransformerXLCausalLM(backbone)
    lm.build((2, 4))
    assert lm.memory_state.memory_spec == spec
    state = lm.memory_state.read(2)
    assert {k: tuple(v.shape) for k, v in state.items()} == spec.shapes(2)


class BackboneWithMemoryInVariables(keras.Model):
    """A user's model that keeps a backbone's memory dict in
    non-trainable variables and passes their values to
    `call_with_memory`."""

    def __init__(self, backbone, batch_size):
        super().__init__()
        self.backbone = backbone
        zeros = backbone.memory_spec.zeros(batch_size)
        self.state = [
            keras.Variable(value, trainable=False, name=key)
            for key, value in zeros.items()
        ]

    def call(self, token_ids):
        keys = self.backbone.memory_spec.keys
        memory = {key: v.value for key, v in zip(keys, self.state)}
        output, memory = self.backbone.call_with_memory(token_ids, memory)
        for key, variable in zip(keys, self.state):
            variable.assign(memory[key])
        return output


@pytest.mark.torch_ok
def test_a_memory_held_in_variables_is_checked_only_eagerly():
    """`predict` traces the call: the valid length, read from a variable
    (a `tf.Variable` under TensorFlow), is not read there, and two
    segments give the outputs of eager `call_with_memory` steps. Eagerly
    the variable's values are checked."""
    backbone = tiny_backbone(**TINY)
    model = BackboneWithMemoryInVariables(backbone, batch_size=2)
    segments = random_ids((2, 2, 3), high=12)  # two segments of 3
    memory = backbone.initial_memory(2)
    for ids in segments:
        expected, memory = backbone.call_with_memory(ids, memory)
        got = model.predict_on_batch(ids)
        np.testing.assert_allclose(got, to_numpy(expected), atol=1e-6)
    np.testing.assert_array_equal(to_numpy(model.state[1]), [4, 4])
    model.state[1].assign([5, 0])
    with pytest.raises(ValueError, match=r"must lie in .* M=4 .*\[0, 5\]"):
        model(segments[0])


def test_checkpoint_saves_and_restores_the_compressed_memory(tmp_path):
    def make():
        backbone = CompressiveTransformerXLBackbone(
            **TINY, compressed_memory_length=3
        )
        lm = TransformerXLCausalLM(backbone)
        lm.compile()
        return lm

    lm = make()
    lm.build_memory(2)
    rng = np.random.default_rng(0)
    for _ in range(3):  # fills the memory, then the compressed memory
        lm(rng.integers(0, 12, size=(2, 4)).astype("int32"))
    saved = lm.memory_state.memory_spec.flatten(lm.memory_state.read())
    assert saved["compressed_valid_length"].tolist() == [3, 3]
    history = StepHistory(tokens_per_step=8, total_steps=1)
    checkpoint = TrainingCheckpoint(tmp_path / "ckpt", history)
    checkpoint.set_model(lm)
    checkpoint.save()

    other = make()
    TrainingCheckpoint.restore(other, tmp_path / "ckpt", batch_size=2)
    restored = other.memory_state.memory_spec.flatten(other.memory_state.read())
    for key, value in saved.items():
        np.testing.assert_array_equal(restored[key], value, err_msg=key)
