"""LiteRT export against the SavedModel in the same run: size, ms per
segment and per generated token (median call after the first), NLL;
float32 and int8 (dynamic-range) files, batch 1, the memory carried.

    KERAS_BACKEND=tensorflow python benchmarks/litert.py --preset RUN_DIR
"""

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _stream(call, ids, segment_length, state):
    """NLL (nats per token) and median ms of `call(tokens, state)`."""
    import numpy as np

    nll, times = [], []
    for k in range((len(ids) - 1) // segment_length):
        start, stop = k * segment_length, (k + 1) * segment_length
        started = time.perf_counter()
        logits, state = call(ids[None, start:stop], state)  # (1, T, V)
        times.append(time.perf_counter() - started)
        logits = logits[0].astype("float64")
        logits -= logits.max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        targets = ids[start + 1 : stop + 1]
        nll.extend(-log_probs[np.arange(len(targets)), targets])
    return float(np.mean(nll)), 1000 * statistics.median(times[1:])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--text", default="data/tinyshakespeare.txt")
    parser.add_argument("--segment-length", type=int, default=64)
    parser.add_argument("--memory-length", type=int, default=128)
    parser.add_argument("--num-chars", type=int, default=4096)
    args = parser.parse_args(argv)

    import numpy as np
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from keras_txl.export import export_litert
    from keras_txl.export import export_saved_model
    from keras_txl.models import TransformerXLCausalLM

    lm = TransformerXLCausalLM.from_preset(args.preset)
    with open(args.text, encoding="utf-8") as file:
        text = file.read()[-args.num_chars :]  # held out by the run
    ids = np.asarray(lm.preprocessor.tokenizer(text), "int32")  # (chars,)
    T, M = args.segment_length, args.memory_length
    tmp = Path(tempfile.mkdtemp(prefix="keras_txl_litert_bench_"))
    empty = tf.nest.map_structure(np.asarray, lm.backbone.initial_memory(1, M))

    def runner(kind, length):
        out = tmp / f"{kind}{length}"
        if kind == "saved_model":
            path = export_saved_model(lm, out, 1, length, M)
            serve = tf.saved_model.load(path).signatures["serving_default"]
        else:
            quantize = None if kind == "float32" else kind
            path = export_litert(lm, out, 1, length, M, quantize)
            serve = Interpreter(model_path=path).get_signature_runner()

        def call(tokens, state):
            out = dict(serve(token_ids=tokens, **state))
            return np.asarray(out.pop("logits")), out

        files = [p.stat().st_size for p in out.rglob("*") if p.is_file()]
        return call, sum(files) / 1e6

    results = {"segment_length": T, "memory_length": M, "tokens": len(ids)}
    with contextlib.redirect_stdout(sys.stderr):  # stdout: the JSON only
        for kind in ("saved_model", "float32", "int8"):
            call, size_mb = runner(kind, T)
            nll, ms = _stream(call, ids, T, empty)
            step = runner(kind, 1)[0]  # generation: a token per call
            _, t_ms = _stream(step, ids[: 2 * M + 1], 1, empty)
            base = results.get("saved_model", {})
            results[kind] = dict(size_mb=size_mb, nll=nll, ms_per_segment=ms)
            results[kind]["ms_per_token"] = t_ms
            results[kind]["segment_ratio"] = ms / base.get("ms_per_segment", ms)
            results[kind]["token_ratio"] = t_ms / base.get("ms_per_token", t_ms)
    nll = {k: results[k]["nll"] for k in ("saved_model", "float32", "int8")}
    results["int8_nll_change"] = nll["int8"] - nll["float32"]
    results["litert_float32_nll_change"] = nll["float32"] - nll["saved_model"]
    print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
