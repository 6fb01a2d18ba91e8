"""Long runs stay flat: evaluation over many consecutive segments.

Evaluates a tiny Transformer-XL with its carried memory over `--segments`
consecutive segments of one ordered dataset (`model.evaluate`, one call)
and measures, per block of `--block` segments, the process CPU time and
wall time per segment, plus the resident memory and the live Python
objects after the first block (warm-up: compilation) and at the end.

The ratio of the last block's time per segment to the middle block's is
the flatness: 1.0 means no slowdown (the first blocks still warm up);
the memory is FIFO, so nothing should grow with the number of segments.
CPU time is the estimate least disturbed by other jobs on the machine.

Prints one JSON object.

Usage:
    KERAS_BACKEND=jax python benchmarks/long_run.py [--segments 2000]
"""

import argparse
import gc
import json
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_txl import data  # noqa: E402
from keras_txl.models import TransformerXLBackbone  # noqa: E402
from keras_txl.models import TransformerXLCausalLM  # noqa: E402


def resident_mib():
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class Blocks(keras.callbacks.Callback):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.marks = []  # (segments done, cpu, wall)
        self.samples = {}

    def on_test_begin(self, logs=None):
        self.marks.append((0, time.process_time(), time.perf_counter()))

    def on_test_batch_end(self, batch, logs=None):
        done = batch + 1
        if done % self.block == 0:
            self.marks.append((done, time.process_time(), time.perf_counter()))
            if done == self.block or done == self.params["steps"]:
                gc.collect()
                self.samples[done] = (resident_mib(), len(gc.get_objects()))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", type=int, default=2000)
    parser.add_argument("--block", type=int, default=200)
    parser.add_argument("--sequence-length", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=2)
    args = parser.parse_args()

    calls = []
    original = TransformerXLCausalLM.call

    def counted(self, *a, **k):
        calls.append(1)
        return original(self, *a, **k)

    TransformerXLCausalLM.call = counted
    keras.utils.set_random_seed(0)
    lm = TransformerXLCausalLM(
        TransformerXLBackbone(
            vocabulary_size=20,
            num_layers=2,
            num_heads=2,
            hidden_dim=8,
            head_dim=4,
            intermediate_dim=16,
            memory_length=4,
        )
    )
    length = args.batch_size * (args.segments * args.sequence_length + 1)
    ids = np.random.default_rng(0).integers(0, 20, length)
    dataset = data.segment_dataset(
        ids, args.batch_size, args.sequence_length, vocabulary_size=20
    )
    blocks = Blocks(args.block)
    lm.evaluate(dataset, callbacks=[blocks], verbose=0)

    per_segment = []
    for (n0, c0, w0), (n1, c1, w1) in zip(blocks.marks, blocks.marks[1:]):
        per_segment.append(
            {
                "segments": [n0, n1],
                "cpu_ms": round(1e3 * (c1 - c0) / (n1 - n0), 3),
                "wall_ms": round(1e3 * (w1 - w0) / (n1 - n0), 3),
            }
        )
    middle, last = per_segment[len(per_segment) // 2], per_segment[-1]
    (rss0, objects0) = blocks.samples[args.block]
    (rss1, objects1) = blocks.samples[args.segments]
    print(
        json.dumps(
            {
                "backend": keras.config.backend(),
                "segments": args.segments,
                "traces_of_call": len(calls),
                "per_segment": per_segment,
                "cpu_ratio_last_to_middle_block": round(
                    last["cpu_ms"] / middle["cpu_ms"], 3
                ),
                "wall_ratio_last_to_middle_block": round(
                    last["wall_ms"] / middle["wall_ms"], 3
                ),
                "rss_mib_after_first_block": round(rss0, 1),
                "rss_mib_at_end": round(rss1, 1),
                "python_objects_after_first_block": objects0,
                "python_objects_at_end": objects1,
                "memory_shape": list(lm.memory_state.memory.shape),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
