"""Loads a `.keras` file under this process's backend and saves it again.

Usage: KERAS_BACKEND=... python keras_round_trip_child.py IN.keras
SEGMENTS.npz OUT.npz RESAVED.keras

Writes to `OUT.npz` the logits of `call_with_memory` threaded over the
segments (memory of 6) and every weight, in
`lm.weights` order; saves the loaded model,
as this backend writes it, to `RESAVED.keras`.
"""

import sys


def main(model_path, segments_path, outputs_path, resaved_path):
    import keras
    import numpy as np

    import keras_txl  # noqa: F401  (registers the serializable classes)

    lm = keras.saving.load_model(model_path, safe_mode=True)
    segments = np.load(segments_path)["segments"]
    memory = lm.backbone.initial_memory(segments.shape[1], 6)
    logits = []
    for segment in segments:
        segment_logits, memory = lm.call_with_memory(segment, memory)
        logits.append(keras.ops.convert_to_numpy(segment_logits))
    weights = {
        f"weight_{i}": keras.ops.convert_to_numpy(w)
        for i, w in enumerate(lm.weights)
    }
    np.savez(
        outputs_path,
        logits=np.stack(logits),
        backend=keras.config.backend(),
        **weights,
    )
    lm.save(resaved_path)


if __name__ == "__main__":
    main(*sys.argv[1:5])
