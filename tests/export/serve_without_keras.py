"""Runs an exported SavedModel in a process that cannot import Keras.

Usage: python serve_without_keras.py EXPORT_DIR INPUTS.npz OUTPUTS.npz

`INPUTS.npz` holds `segments`, int32 `(num_segments, batch, T)`. The script
threads the memory through the `serving_default` signature segment after
segment, starting from `initial_memory` (given the batch size when the
export takes any), and writes the logits, the memory
and valid lengths after each segment, plus the error messages of two bad
calls, to `OUTPUTS.npz`. `keras`, `keras_hub`, `keras_txl` and `tf_keras`
are blocked before TensorFlow is imported (TensorFlow imports Keras when it
can); `loaded_blocked_modules` lists any of them that got loaded anyway.
"""

import importlib.abc
import importlib.machinery
import sys

BLOCKED = ("keras", "keras_hub", "keras_txl", "tf_keras")


class _BlockedLoader(importlib.abc.Loader):
    def create_module(self, spec):
        raise ImportError(f"{spec.name} is blocked in this process")

    def exec_module(self, module):
        raise ImportError(f"{module.__name__} is blocked in this process")


class _BlockKeras(importlib.abc.MetaPathFinder):
    """Finds the blocked packages (so TensorFlow's `find_spec` probes get
    no file to read) and fails to load them."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            return importlib.machinery.ModuleSpec(name, _BlockedLoader())
        return None


def main(export_dir, inputs_path, outputs_path):
    sys.meta_path.insert(0, _BlockKeras())
    import numpy as np
    import tensorflow as tf

    segments = np.load(inputs_path)["segments"]
    loaded = tf.saved_model.load(export_dir)
    serve = loaded.signatures["serving_default"]
    initial_memory = loaded.signatures["initial_memory"]
    if initial_memory.structured_input_signature[1]:  # any batch size
        rows = tf.constant(segments.shape[1], tf.int32)
        state = initial_memory(batch_size=rows)
    else:  # a batch size fixed at export
        state = initial_memory()
    results = {
        "initial_memory": state["memory"].numpy(),
        "initial_valid_length": state["valid_length"].numpy(),
    }
    logits, valid_lengths = [], []
    for segment in segments:
        outputs = serve(
            token_ids=tf.constant(segment, tf.int32),
            memory=state["memory"],
            valid_length=state["valid_length"],
        )
        state = {"memory": outputs["memory"]}
        state["valid_length"] = outputs["valid_length"]
        logits.append(outputs["logits"].numpy())
        valid_lengths.append(outputs["valid_length"].numpy())
    results["logits"] = np.stack(logits)
    results["valid_length"] = np.stack(valid_lengths)
    results["final_memory"] = state["memory"].numpy()

    def error_of(**inputs):
        try:
            serve(**inputs)
        except Exception as error:  # the message is what the test checks
            return f"{type(error).__name__}: {error}"
        return "no error"

    too_long = np.zeros(segments.shape[1:2] + (segments.shape[2] + 1,))
    results["wrong_shape_error"] = error_of(
        token_ids=tf.constant(too_long, tf.int32),
        memory=state["memory"],
        valid_length=state["valid_length"],
    )
    results["wrong_valid_length_error"] = error_of(
        token_ids=tf.constant(segments[0], tf.int32),
        memory=state["memory"],
        valid_length=state["valid_length"] + 1000,
    )
    results["loaded_blocked_modules"] = np.array(
        sorted(
            name
            for name, module in sys.modules.items()
            if name.split(".")[0] in BLOCKED and module is not None
        ),
        dtype=str,
    )
    results["signatures"] = np.array(sorted(loaded.signatures), dtype=str)
    np.savez(outputs_path, **results)


if __name__ == "__main__":
    main(*sys.argv[1:4])
