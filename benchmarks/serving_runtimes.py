"""The three serving files side by side, in one run: SavedModel
(TensorFlow), LiteRT (float32) and ONNX Runtime (CPU). For each model size
(`tiny`, `reference`: keras_txl_cli.sizes, a byte vocabulary, random
weights: the time does not depend on their values), batch 1, the
memory carried from call to call: the file's size, the median ms per
segment of `--segment-length` tokens and per generated token (a file of
one token per call), each after a first call that is not counted, and the
ratios to the SavedModel's of the same run.

    KERAS_BACKEND=tensorflow python benchmarks/serving_runtimes.py \\
        [--sizes tiny reference] [--segment-length 64] [--memory-length 128]

Prints one JSON line per size and runtime on stdout (the exports' own
lines go to stderr), as every benchmark (`run_all` reads them). Needs the
`litert` and `onnx` extras. Each runtime runs with its default threads.
"""

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

RUNTIMES = ("saved_model", "litert", "onnx")


def _median_ms(call, token_segments, state):
    """Median ms of `call(tokens, state) -> state` over the segments
    after the first, the state threaded."""
    times = []
    for tokens in token_segments:
        started = time.perf_counter()
        state = call(tokens, state)
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times[1:])


def _runner(runtime, lm, folder, segment_length, memory_length):
    """`(call, size in MB)`: `call(tokens (1, T), state) -> next state`
    (a dict of the memory's arrays) served by `runtime` from a file of
    `segment_length` tokens per call, batch 1."""
    import numpy as np

    if runtime == "saved_model":
        import tensorflow as tf

        from keras_txl.export import export_saved_model

        export_saved_model(lm, folder, 1, segment_length, memory_length)
        serve = tf.saved_model.load(str(folder)).signatures["serving_default"]

        def call(tokens, state):
            outputs = serve(token_ids=tokens, **state)
            np.asarray(outputs["logits"])  # the logits reach the host
            return {key: outputs[key] for key in state}

    elif runtime == "litert":
        from keras_txl.export import export_litert
        from keras_txl.export.litert import litert_interpreter

        path = export_litert(
            lm, folder, 1, segment_length, memory_length, check=False
        )
        serve = litert_interpreter(path).get_signature_runner()

        def call(tokens, state):
            outputs = serve(token_ids=tokens, **state)
            return {key: outputs[key] for key in state}

    else:
        from keras_txl.export.onnx import OUTPUT_PREFIX
        from keras_txl.export.onnx import export_onnx
        from keras_txl.export.onnx import onnx_session

        path = export_onnx(
            lm, folder, 1, segment_length, memory_length, check=False
        )
        session = onnx_session(path)

        def call(tokens, state):
            keys = list(state)
            names = ["logits", *(OUTPUT_PREFIX + key for key in keys)]
            _, *memory = session.run(names, {"token_ids": tokens, **state})
            return dict(zip(keys, memory))

    files = [p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()]
    return call, sum(files) / 1e6


def measure(size, segment_length, memory_length, num_segments, num_tokens):
    """`{runtime: {size_mb, ms_per_segment, ms_per_token, ratios}}` of
    the model size `size`."""
    import keras
    import numpy as np

    from keras_txl.models import TransformerXLBackbone
    from keras_txl.models import TransformerXLCausalLM
    from keras_txl_cli.sizes import SIZES

    keras.utils.set_random_seed(0)
    backbone = TransformerXLBackbone(
        vocabulary_size=256, memory_length=memory_length, **SIZES[size]
    )
    lm = TransformerXLCausalLM(backbone)
    rng = np.random.RandomState(0)
    # A kernel of its own for every layer: the initializers, drawn after
    # `set_random_seed`, give each layer the same values, which the LiteRT
    # and ONNX files store once (a trained model's layers differ).
    for weight in lm.weights:
        if len(weight.shape) >= 2:
            weight.assign(rng.normal(0, 0.02, weight.shape))
    segments = rng.randint(0, 256, (num_segments, 1, segment_length))
    tokens = rng.randint(0, 256, (num_tokens, 1, 1))
    empty = {
        key: keras.ops.convert_to_numpy(value)
        for key, value in lm.backbone.initial_memory(1, memory_length).items()
    }
    tmp = Path(tempfile.mkdtemp(prefix="keras_txl_serving_bench_"))
    results = {}
    for runtime in RUNTIMES:
        call, size_mb = _runner(
            runtime, lm, tmp / f"{runtime}_T", segment_length, memory_length
        )
        ms = _median_ms(call, segments.astype("int32"), empty)
        step, _ = _runner(runtime, lm, tmp / f"{runtime}_1", 1, memory_length)
        per_token = _median_ms(step, tokens.astype("int32"), empty)
        results[runtime] = dict(
            size_mb=round(size_mb, 3),
            ms_per_segment=round(ms, 3),
            ms_per_token=round(per_token, 3),
        )
    base = results["saved_model"]
    for runtime in RUNTIMES:
        entry = results[runtime]
        entry["segment_ratio"] = round(
            entry["ms_per_segment"] / base["ms_per_segment"], 3
        )
        entry["token_ratio"] = round(
            entry["ms_per_token"] / base["ms_per_token"], 3
        )
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "reference"])
    parser.add_argument("--segment-length", type=int, default=64)
    parser.add_argument("--memory-length", type=int, default=128)
    parser.add_argument("--segments", type=int, default=21)
    parser.add_argument("--tokens", type=int, default=41)
    args = parser.parse_args(argv)

    settings = {
        "benchmark": "serving_runtimes",
        "batch_size": 1,
        "segment_length": args.segment_length,
        "memory_length": args.memory_length,
        "segments_timed": args.segments - 1,
        "tokens_timed": args.tokens - 1,
    }
    results = {}
    with contextlib.redirect_stdout(sys.stderr):  # stdout: the JSON only
        for size in args.sizes:
            results[size] = measure(
                size,
                args.segment_length,
                args.memory_length,
                args.segments,
                args.tokens,
            )
        about = {**common.backend_versions(), **common.machine_info()}
    for size, runtimes in results.items():
        for runtime, numbers in runtimes.items():
            common.emit(
                dict(settings, size=size, runtime=runtime, **numbers, **about)
            )
    return results


if __name__ == "__main__":
    main()
