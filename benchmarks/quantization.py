"""Quantized against float: bits per character, weight bytes and
evaluation speed of a small trained character model.

Trains the `tiny` preset of `keras-txl train` for `--steps` steps on
data/tinyshakespeare.txt, then scores the same validation text with the
float model and with copies quantized by `lm.quantize(mode)` (int8, int4,
float8), through `evaluate_segments` (explicit memory, the authors'
protocol). Speed is a ratio to the float model measured in the same run,
each model timed on the same segments after one warm-up pass. Prints JSON.

    PYTHONPATH=. KERAS_BACKEND=tensorflow python -m benchmarks.quantization
"""

import argparse
import json
import os
import tempfile
import time

import keras

from keras_txl.app import artifacts
from keras_txl.app.train_command import fit_language_model
from keras_txl.app.train_config import TrainConfig
from keras_txl.training.evaluation import evaluate_segments

MODES = ("int8", "int4", "float8")


def _nbytes(variable):
    return keras.ops.convert_to_numpy(variable.value).nbytes


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--eval-tokens", type=int, default=20000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        corpus = os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            "data",
            "tinyshakespeare.txt",
        )
        config = TrainConfig(
            corpus=corpus,
            size="tiny",
            steps=args.steps,
            verbose=0,
            output=os.path.join(folder, "run"),
        )
        run = fit_language_model(config, log=lambda _: None)
        lm, config = run["lm"], run["config"]
        artifacts.save_model(lm, config.output)
        ids = run["valid_ids"][: args.eval_tokens]
        batch, length = 4, config.segment_length
        memory = config.eval_memory_length or config.memory_length

        def score(model):
            evaluate_segments(model, ids[: 4 * length * batch], batch, length)
            started = time.perf_counter()
            result = evaluate_segments(model, ids, batch, length, memory)
            return result, time.perf_counter() - started

        rows = {}
        base, base_seconds = score(lm)
        rows["float32"] = {
            "bits_per_character": base["bits_per_character"],
            "weight_bytes": _bytes(lm),
            "eval_seconds_ratio": 1.0,
        }
        for mode in MODES:
            model = artifacts.load_model(config.output)
            model.quantize(mode)
            result, seconds = score(model)
            rows[mode] = {
                "bits_per_character": result["bits_per_character"],
                "bpc_change": result["bits_per_character"]
                - base["bits_per_character"],
                "weight_bytes": _bytes(model),
                "eval_seconds_ratio": seconds / base_seconds,
            }
    print(
        json.dumps(
            {
                "backend": keras.backend.backend(),
                "steps": args.steps,
                "eval_tokens": int(len(ids)),
                "segment_length": length,
                "memory_length": memory,
                "float32_eval_seconds": base_seconds,
                "models": rows,
            },
            indent=2,
        )
    )


def _bytes(lm):
    unique = {id(v): v for v in lm.weights if "memory_state" not in v.path}
    return sum(_nbytes(v) for v in unique.values())


if __name__ == "__main__":
    main()
