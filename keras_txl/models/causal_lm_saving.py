"""How a `TransformerXLCausalLM` is saved, loaded and exported (a mixin
of the task, before keras-hub's `CausalLM` in its bases), and the
checks of `from_preset` on a keras-hub preset folder."""

import os

import keras

from keras_txl.models.foreign_checkpoints import foreign_checkpoint_kind
from keras_txl.models.foreign_checkpoints import load_foreign_checkpoint
from keras_txl.models.foreign_checkpoints import saved_mixed_policy
from keras_txl.models.saved_model_exporter import saved_model_exporter
from keras_txl.utils.damaged_file_error import DamagedFileError
from keras_txl.utils.saved_files import PRESET_WEIGHTS_FILES
from keras_txl.utils.saved_files import check_preset_files
from keras_txl.utils.saved_files import check_weights_fit


class CausalLMSaving:
    """The task's build and compile configs, its task weights and its
    SavedModel export."""

    def get_build_config(self):
        # The weights depend on no input shape, and the carried memory is
        # built by the first batch: a loaded model rebuilds without a
        # shape, so that it takes any batch size (also for the models of
        # `with_memory_length`, built by sharing weights).
        return {"input_shape": [None, None]} if self.built else None

    def build_from_config(self, config):
        # The build config records the batch size of the data last seen;
        # a loaded model takes the batch size of the data it gets next.
        shape = (config or {}).get("input_shape")
        if isinstance(shape, (list, tuple)) and len(shape) == 2:
            config = {**config, "input_shape": [None, shape[1]]}
        elif isinstance(shape, dict):
            shape = {key: [None, *value[1:]] for key, value in shape.items()}
            config = {**config, "input_shape": shape}
        super().build_from_config(config)

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved (optimizer, loss,
        metrics), so that `keras.saving.load_model` also restores the
        optimizer's state. Keras skips this for models whose `compile` is
        overridden, as `keras_hub` tasks' is."""
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def load_task_weights(self, filepath):
        """Loads the weights outside the backbone (the output layer),
        building the model first: its output weights are created in
        `build`, which keras-hub's preset loader does not call."""
        if not self.built:
            self.build()
        super().load_task_weights(filepath)

    def export(
        self,
        filepath,
        format="tf_saved_model",
        verbose=None,
        input_signature=None,
        **kwargs,
    ):
        """Keras's `Model.export`, serving the explicit memory: a
        TensorFlow SavedModel whose `serving_default(token_ids, memory,
        valid_length)` returns the logits and the next memory, and
        `initial_memory(batch_size)`; nothing is carried from one call to
        the next. This is `keras_txl.export.export_saved_model` (see it
        for the signatures; it runs from any backend); `kwargs` are its
        `batch_size`, `segment_length`, `memory_length` and `overwrite`.
        Keras's own export would trace the carried memory's path, whose
        serving function keeps a state between calls; other formats and
        an `input_signature` are refused."""
        if format != "tf_saved_model" or input_signature is not None:
            raise ValueError(
                "TransformerXLCausalLM.export writes a SavedModel with the "
                'memory as input and output (format="tf_saved_model", no '
                f"input_signature); received format={format!r}"
                + ("" if input_signature is None else ", an input_signature")
                + ". For another format, export from "
                "`keras_txl.export.export_saved_model`'s SavedModel."
            )
        export_saved_model = saved_model_exporter()
        return export_saved_model(
            self, filepath, verbose=bool(verbose), **kwargs
        )


def load_preset(load_keras_hub_preset, preset, load_weights, **kwargs):
    """`TransformerXLCausalLM.from_preset`'s work: a foreign checkpoint
    through its registered loader, else a keras-hub preset through
    `load_keras_hub_preset` (keras-hub's `from_preset`) under the mixed
    policy it was saved with, its files checked first and its weights
    after, so that a damaged or mismatched file is named."""
    kind = foreign_checkpoint_kind(preset)
    if kind is not None:
        return load_foreign_checkpoint(preset, kind, load_weights, **kwargs)
    folder = None
    if isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset):
        folder = os.fspath(preset)
        # A damaged file is named, not met deep inside the loader.
        check_preset_files(folder)
    if kwargs.get("dtype") is None:
        kwargs["dtype"] = saved_mixed_policy(preset)
    if folder is None or not load_weights:
        return load_keras_hub_preset(
            preset, load_weights=load_weights, **kwargs
        )
    weights = os.path.join(folder, PRESET_WEIGHTS_FILES[0])
    try:
        lm = load_keras_hub_preset(preset, load_weights=True, **kwargs)
    except ValueError as error:
        reason = " ".join(str(error).split())[:160]
        raise DamagedFileError(
            weights,
            "holds the weights of another configuration than the "
            f"model of task.json ({reason}). Put back the weights "
            "saved with it.",
        ) from None
    owner = "the model of task.json"
    check_weights_fit(weights, lm.backbone.weights, owner)
    task = os.path.join(folder, PRESET_WEIGHTS_FILES[1])
    if os.path.exists(task):
        backbone = {id(v) for v in lm.backbone.weights}
        own = [v for v in lm.weights if id(v) not in backbone]
        check_weights_fit(task, own, owner, exact=False)
    return lm
