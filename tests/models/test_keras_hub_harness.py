"""The backbones (plain, compressive, ablation), the LM and the text
classifier under keras-hub's own test harness
(`keras_hub.src.tests.test_case.TestCase`): serialization, eager and
compiled calls, variable lengths, quantization policies, `.keras` saving,
and the task tests (predict and fit on strings through the
preprocessor)."""

import keras
import numpy as np
import pytest
from keras_hub.src.tests import test_case as keras_hub_test_case

from keras_txl.ablation import AblationTransformerXLBackbone
from keras_txl.models import CompressiveTransformerXLBackbone
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from keras_txl.models import TransformerXLCausalLMPreprocessor
from keras_txl.models import TransformerXLTextClassifier
from keras_txl.models import TransformerXLTokenizer
from keras_txl.models.transformer_xl_text_classifier_preprocessor import (
    TransformerXLTextClassifierPreprocessor,
)
from tests.tiny_models import backbone_config

_BACKBONE = backbone_config(vocabulary_size=12, memory_length=3)


def _inputs(batch=2, length=5, memory_length=3):
    rng = np.random.default_rng(0)
    return {
        "token_ids": rng.integers(0, 12, (batch, length)).astype("int32"),
        "memory": rng.normal(size=(batch, 2, memory_length, 8)).astype(
            "float32"
        ),
        "valid_length": np.full((batch,), memory_length, "int32"),
    }


def _shorter_segments(data, lengths=(1, 2, 4)):
    """`data` with segments of `lengths` tokens. keras-hub slices axis 1
    of every input, which is the layer axis of the memory: only the
    segment length varies here."""
    return [
        dict(data, token_ids=data["token_ids"][:, :length])
        for length in lengths
    ]


# The task tests' dataset batches all 4 examples at once, as `predict`
# and `fit` do the arrays (their default batch of 32): the harness's runs
# on arrays and on datasets then share one compiled step each (batches of
# 2, the harness's default, compile or trace a step of a second shape).
_TASK_BATCH = 4


class TaskUnderTest(TransformerXLCausalLM):
    """`run_task_test` reads `_inputs_struct`, which only functional
    models have; the LM is subclassed, and these are the inputs its
    preprocessor gives it.

    Not registered globally: keras-hub's `CausalLM.from_preset` picks the
    task class among the registered subclasses in set order, so a global
    registration made other tests load presets as this class now and then.
    """

    @property
    def _inputs_struct(self):
        return {"token_ids": None, "padding_mask": None}


class ClassifierUnderTest(TransformerXLTextClassifier):
    """The classifier with the `_inputs_struct` of its preprocessor's
    output (see `TaskUnderTest`); not registered globally either."""

    @property
    def _inputs_struct(self):
        return {"token_ids": None, "padding_mask": None}


class KerasHubHarnessTest(keras_hub_test_case.TestCase):
    # `tf.test.TestCase.test_session` is a deprecated helper, not a test:
    # pytest would collect it and report it skipped.
    test_session = None

    @pytest.mark.slow
    def test_backbone(self):
        data = _inputs()
        self.run_backbone_test(
            cls=TransformerXLBackbone,
            init_kwargs=dict(_BACKBONE),
            input_data=data,
            expected_output_shape={
                "sequence_output": (2, 5, 8),
                "memory": (2, 2, 3, 8),
                "valid_length": (2,),
            },
            variable_length_data=_shorter_segments(data),
        )

    @pytest.mark.slow
    @pytest.mark.one_backend  # see test_ablation_backbone
    def test_compressive_backbone(self):
        """`run_backbone_test`'s serialization and eager checks, and the
        saving test. Not its `predict`, which concatenates each batch's
        scalar reconstruction loss (JAX refuses), nor its mixed precision
        check, which refuses that float32 loss (float32 by design, see
        `CompressiveMemory`; test_memory_dtype.py checks this backbone's
        memory under each policy), nor quantization, which is the plain
        backbone's attention (tested above and in test_quantization.py)
        and took most of this test's time."""
        # Segments of a multiple of the compression rate.
        data = dict(
            _inputs(length=4),
            compressed_memory=np.zeros((2, 2, 2, 8), "float32"),
            compressed_valid_length=np.zeros((2,), "int32"),
        )
        init_kwargs = dict(
            _BACKBONE, compressed_memory_length=2, compression_rate=2
        )
        backbone = CompressiveTransformerXLBackbone(**init_kwargs)
        self.run_serialization_test(backbone)
        output = backbone(data)
        shapes = {key: tuple(value.shape) for key, value in output.items()}
        assert shapes == {
            "sequence_output": (2, 4, 8),
            "memory": (2, 2, 3, 8),
            "valid_length": (2,),
            "compressed_memory": (2, 2, 2, 8),
            "compressed_valid_length": (2,),
            "reconstruction_loss": (),
        }
        backbone(dict(data, token_ids=data["token_ids"][:, :2]))
        self.run_model_saving_test(
            cls=CompressiveTransformerXLBackbone,
            init_kwargs=init_kwargs,
            input_data=data,
        )

    # The harness's checks of the two variant backbones (serialization,
    # saving, shapes) run under TensorFlow only (`one_backend`): on JAX they
    # cost a minute or more of compiles in CI, and each backbone's numbers
    # on every backend are its own test files' (the plain backbone's
    # harness test, above, runs on every backend).
    @pytest.mark.slow
    @pytest.mark.one_backend
    def test_ablation_backbone(self):
        data = _inputs()
        self.run_backbone_test(
            cls=AblationTransformerXLBackbone,
            init_kwargs=dict(
                _BACKBONE,
                position_encoding="learned_relative",
                max_relative_distance=4,
                stop_memory_gradient=False,
            ),
            input_data=data,
            expected_output_shape={
                "sequence_output": (2, 5, 8),
                "memory": (2, 2, 3, 8),
                "valid_length": (2,),
            },
            variable_length_data=_shorter_segments(data),
        )

    @pytest.mark.slow
    def test_backbone_saving(self):
        self.run_model_saving_test(
            cls=TransformerXLBackbone,
            init_kwargs=dict(_BACKBONE),
            input_data=_inputs(),
        )

    @pytest.mark.slow
    def test_causal_lm_saving(self):
        keras.utils.set_random_seed(0)
        self.run_model_saving_test(
            cls=TransformerXLCausalLM,
            init_kwargs={"backbone": TransformerXLBackbone(**_BACKBONE)},
            input_data=_inputs(),
        )

    @pytest.mark.slow
    def test_causal_lm_task(self):
        tokenizer = TransformerXLTokenizer(
            ["<eos>", "<unk>", "a", "b", "c", "d", "e", "f", "g", "h"]
        )
        preprocessor = TransformerXLCausalLMPreprocessor(
            tokenizer, sequence_length=6
        )
        backbone = TransformerXLBackbone(**dict(_BACKBONE, vocabulary_size=10))
        with keras.saving.custom_object_scope({"TaskUnderTest": TaskUnderTest}):
            self.run_task_test(
                cls=TaskUnderTest,
                init_kwargs={
                    "backbone": backbone,
                    "preprocessor": preprocessor,
                },
                train_data=(["a b c", "d e f g", "h a", "b b b b b b b"],),
                expected_output_shape=(4, 6, 10),
                batch_size=_TASK_BATCH,
            )
        registered = keras.saving.get_custom_objects().values()
        assert TaskUnderTest not in registered

    @pytest.mark.slow
    @pytest.mark.one_backend
    def test_text_classifier_task(self):
        """keras-hub's task test of the classifier: serialization, the
        preprocessor's structure, predict and fit on strings, on a
        dataset and with split preprocessing, and `compile=False`.

        Under TensorFlow only (`one_backend`, as the variant backbones
        above), documents of one segment: these are the paths data takes
        through keras-hub's task, not numbers (the classifier's own tests
        read documents of several segments, `fit` and `predict` compiled,
        on every backend). The first `fit`'s trace dominates: 80 s with
        two segments, 27 s with one (TensorFlow, on a loaded machine)."""
        tokenizer = TransformerXLTokenizer(
            ["<eos>", "<unk>", "a", "b", "c", "d", "e", "f", "g", "h"]
        )
        preprocessor = TransformerXLTextClassifierPreprocessor(
            tokenizer, sequence_length=4
        )
        backbone = TransformerXLBackbone(**dict(_BACKBONE, vocabulary_size=10))
        custom = {"ClassifierUnderTest": ClassifierUnderTest}
        with keras.saving.custom_object_scope(custom):
            self.run_task_test(
                cls=ClassifierUnderTest,
                init_kwargs={
                    "backbone": backbone,
                    "num_classes": 3,
                    "preprocessor": preprocessor,
                    "segment_length": 4,
                },
                train_data=(
                    ["a b c", "d e f g", "h a", "b b b b b b b b b"],
                    np.array([0, 2, 1, 2]),
                ),
                expected_output_shape=(4, 3),
                batch_size=_TASK_BATCH,
            )
        registered = keras.saving.get_custom_objects().values()
        assert ClassifierUnderTest not in registered
