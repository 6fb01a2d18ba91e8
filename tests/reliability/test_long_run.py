"""Long runs stay flat: the memory is FIFO and nothing accumulates.

Evaluation over 2,000 consecutive segments with the carried memory,
checked on deterministic signs instead of wall time: the step is traced
once, the memory keeps its shape and stays finite, and neither Python
objects nor the process's resident memory grow after a warm-up.
"""

import functools
import gc
import os

import keras
import numpy as np
import pytest

from keras_txl import data
from keras_txl.models import TransformerXLCausalLM
from tests.test_case import to_numpy
from tests.tiny_models import BACKBONE_KWARGS
from tests.tiny_models import VOCABULARY_SIZE
from tests.tiny_models import random_ids
from tests.tiny_models import tiny_lm

SEGMENTS = 2_000
WARM_UP = 200
SEQUENCE_LENGTH = 4
BATCH_SIZE = 2


def resident_bytes():
    """Resident set size of this process (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Probe(keras.callbacks.Callback):
    """Resident memory and live Python objects after chosen batches."""

    def __init__(self, batches):
        super().__init__()
        self.batches = set(batches)
        self.samples = {}

    def on_test_batch_end(self, batch, logs=None):
        if batch in self.batches:
            gc.collect()
            self.samples[batch] = (resident_bytes(), len(gc.get_objects()))


@pytest.mark.slow
def test_evaluation_over_2000_segments_stays_flat(monkeypatch):
    calls = []
    original = TransformerXLCausalLM.call

    @functools.wraps(original)
    def counted(self, *args, **kwargs):
        calls.append(1)  # once per trace, or per step when run eagerly
        return original(self, *args, **kwargs)

    monkeypatch.setattr(TransformerXLCausalLM, "call", counted)
    lm = tiny_lm()
    ids = random_ids((BATCH_SIZE * (SEGMENTS * SEQUENCE_LENGTH + 1),))
    dataset = data.segment_dataset(
        ids, BATCH_SIZE, SEQUENCE_LENGTH, vocabulary_size=VOCABULARY_SIZE
    )
    assert int(dataset.cardinality()) == SEGMENTS
    probe = Probe([WARM_UP - 1, SEGMENTS - 1])

    loss = lm.evaluate(dataset, callbacks=[probe], verbose=0, return_dict=True)[
        "loss"
    ]

    assert np.isfinite(loss)
    assert sorted(probe.samples) == [WARM_UP - 1, SEGMENTS - 1]
    (rss_before, objects_before) = probe.samples[WARM_UP - 1]
    (rss_after, objects_after) = probe.samples[SEGMENTS - 1]
    if keras.config.backend() != "torch":  # torch runs eagerly
        assert len(calls) <= 3, f"{len(calls)} traces: it recompiled"
    # 1,800 more segments: no per-segment growth (a leak of one small
    # tensor or dict per segment would already exceed these).
    assert objects_after - objects_before < 300, (
        objects_before,
        objects_after,
    )
    assert rss_after - rss_before < 32 * 2**20, (rss_before, rss_after)
    memory = lm.memory_state.read(BATCH_SIZE)
    shape = (
        BATCH_SIZE,
        BACKBONE_KWARGS["num_layers"],
        BACKBONE_KWARGS["memory_length"],
        BACKBONE_KWARGS["hidden_dim"],
    )
    assert tuple(memory["memory"].shape) == shape
    assert np.all(np.isfinite(to_numpy(memory["memory"])))
    np.testing.assert_array_equal(
        to_numpy(memory["valid_length"]), BACKBONE_KWARGS["memory_length"]
    )
