import os

import keras
import numpy as np
import pytest
from txl_export_testing import REPO_ROOT
from txl_export_testing import keras_segment_loop
from txl_export_testing import run_python
from txl_export_testing import segments
from txl_export_testing import tiny_lm

CHILD_SCRIPT = os.path.join(
    REPO_ROOT, "tests", "export", "keras_round_trip_child.py"
)
BACKENDS = ("jax", "tensorflow", "torch")


def weights_of(lm):
    return [keras.ops.convert_to_numpy(w) for w in lm.weights]


@pytest.mark.slow
def test_keras_file_round_trips_through_the_other_backends(tmp_path):
    """Saved here, loaded (safe mode) on each other backend with the same
    weights and logits; saved there, loaded back here, the same again."""
    here = keras.config.backend()
    lm = tiny_lm(seed=5, same_length=True, tie_weights=False)
    lm.save(str(tmp_path / f"{here}.keras"))
    token_segments = segments(batch_size=2, segment_length=3, num_segments=3)
    np.savez(tmp_path / "segments.npz", segments=token_segments)
    logits, _, _ = keras_segment_loop(lm, token_segments, memory_length=6)
    weights = weights_of(lm)

    for there in [b for b in BACKENDS if b != here]:
        resaved = tmp_path / f"{here}_then_{there}.keras"
        outputs = tmp_path / f"{there}.npz"
        run_python(
            [
                CHILD_SCRIPT,
                str(tmp_path / f"{here}.keras"),
                str(tmp_path / "segments.npz"),
                str(outputs),
                str(resaved),
            ],
            backend=there,
        )
        loaded_there = np.load(outputs)
        assert str(loaded_there["backend"]) == there
        for i, weight in enumerate(weights):
            np.testing.assert_array_equal(loaded_there[f"weight_{i}"], weight)
        np.testing.assert_allclose(loaded_there["logits"], logits, atol=1e-5)

        back_here = keras.saving.load_model(str(resaved), safe_mode=True)
        for loaded, weight in zip(weights_of(back_here), weights):
            np.testing.assert_array_equal(loaded, weight)
        back_logits, _, _ = keras_segment_loop(
            back_here, token_segments, memory_length=6
        )
        np.testing.assert_allclose(back_logits, logits, atol=1e-5)
