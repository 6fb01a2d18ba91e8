"""Export a SavedModel with an explicit memory and serve it with TensorFlow.

What this shows, top to bottom:

1. `keras_txl.export.export_saved_model`: a TensorFlow SavedModel whose
   `serving_default` signature takes `token_ids (batch, T)`, `memory
   (batch, num_layers, M, hidden)` and `valid_length (batch,)`, and
   returns the `logits` and the memory for the next call; an
   `initial_memory(batch_size)` signature returns an empty memory. The
   server, not the model, keeps the memory: one model serves any number
   of streams.
2. Serving in **plain TensorFlow**: a child process, started from this
   file, that blocks `keras`, `keras_hub` and `keras_txl` before importing
   TensorFlow (TensorFlow imports Keras when it is installed) and checks
   at the end that none of them was loaded. It streams a long text
   segment by segment, carrying the memory from each call to the next,
   and scores it.
3. The same text through the Keras model (`lm.call_with_memory`, segment
   by segment): the two must agree.
4. On-device streaming generation with **LiteRT**: `export_litert` writes
   a `model.tflite` of one token per call (`segment_length=1`), and a
   loop over `ai-edge-litert`'s interpreter feeds a prompt and then
   generates greedily, one token per call, the memory carried (the
   `litert` extra). Keras, fed the same tokens, picks the same ones.
5. The same streaming generation with **ONNX Runtime**: `lm.export(path,
   format="onnx", segment_length=1)` writes a `model.onnx` whose outputs
   `next_memory` and `next_valid_length` are the next call's `memory` and
   `valid_length` (the `onnx` extra); Keras picks the same tokens again.

Run it:

    python examples/train_char_lm.py        # trains runs/char_lm_preset
    python examples/export_and_serve.py     # exports and serves it
    python examples/export_and_serve.py --preset MY_PRESET --text FILE
    python examples/export_and_serve.py --smoke   # an untrained tiny model

Defaults: the preset of `train_char_lm.py`, exported with segments of 64
and a memory of 128 (the export may use another memory length than the
training), serving the last 4,096 characters of tinyshakespeare (held out
from the training) as one stream. The export itself always runs
TensorFlow; under another Keras backend `export_saved_model` does it in a
TensorFlow child process.

The output of a full run on a 2-core CPU (2026-12-01): docs/examples.md.
"""

import argparse
import importlib.abc
import importlib.machinery
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BLOCKED = ("keras", "keras_hub", "keras_txl", "tf_keras")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="runs/char_lm_preset")
    parser.add_argument(
        "--text", default=str(REPO / "data" / "tinyshakespeare.txt")
    )
    parser.add_argument("--output", default="runs/char_lm_saved_model/1")
    parser.add_argument("--segment-length", type=int, default=64)  # T
    parser.add_argument("--memory-length", type=int, default=128)  # M
    parser.add_argument("--num-chars", type=int, default=4096)
    parser.add_argument("--generate", type=int, default=64)  # new tokens
    parser.add_argument("--smoke", action="store_true")
    # The serving child process: --serve EXPORT_DIR IDS.npz RESULT.npz
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.segment_length, args.memory_length, args.num_chars = 16, 32, 256
        args.generate = 16
    return args


# ---------------------------------------------------------------------------
# 1. Export (Keras and keras_txl).
# ---------------------------------------------------------------------------


def load_or_build_model(args):
    """The preset of `train_char_lm.py`, or (--smoke) an untrained tiny
    model with a character tokenizer."""
    import keras

    from keras_txl.models import CharacterTokenizer
    from keras_txl.models import TransformerXLBackbone
    from keras_txl.models import TransformerXLCausalLM
    from keras_txl.models import TransformerXLCausalLMPreprocessor

    if not args.smoke:
        if not os.path.isdir(args.preset):
            sys.exit(
                f"No preset at {args.preset!r}: run `python examples/"
                "train_char_lm.py` first, or pass --preset (or --smoke)."
            )
        return TransformerXLCausalLM.from_preset(args.preset)
    keras.utils.set_random_seed(0)
    text = Path(args.text).read_text(encoding="utf-8")
    tokenizer = CharacterTokenizer(sorted(set(text)))
    backbone = TransformerXLBackbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        head_dim=16,
        intermediate_dim=64,
        memory_length=16,
        initializer_range=0.3,  # untrained, but far from uniform
    )
    preprocessor = TransformerXLCausalLMPreprocessor(tokenizer)
    return TransformerXLCausalLM(backbone, preprocessor=preprocessor)


def export(args):
    """Exports the model; returns it and the ids of the text to serve."""
    import numpy as np

    from keras_txl.export import export_saved_model

    lm = load_or_build_model(args)
    text = Path(args.text).read_text(encoding="utf-8")[-args.num_chars :]
    ids = np.asarray(lm.preprocessor.tokenizer(text), "int32")  # (chars,)
    started = time.time()
    export_saved_model(
        lm,
        args.output,
        batch_size=None,  # any number of streams per call
        segment_length=args.segment_length,  # T of every call
        memory_length=args.memory_length,  # M carried between calls
        overwrite=True,
    )
    print(
        f"exported to {args.output} in {time.time() - started:.0f} s "
        f"(segments of {args.segment_length}, memory "
        f"{args.memory_length}, {lm.backbone.num_layers} layers x "
        f"{lm.backbone.hidden_dim})"
    )
    return lm, ids


# ---------------------------------------------------------------------------
# 2. Serving: TensorFlow only (runs in a child process).
# ---------------------------------------------------------------------------


class BlockKeras(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An import hook under which `import keras` (and keras_hub,
    keras_txl, tf_keras) fails, so TensorFlow runs without them. It finds
    the blocked names (TensorFlow probes for Keras with `find_spec` and
    must get no file to read) and fails to load them."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        raise ImportError(f"{spec.name} is blocked in the serving process")

    def exec_module(self, module):
        raise ImportError(f"{module.__name__} is blocked")


def serve(export_dir, ids_path, result_path):
    """Streams the ids through the SavedModel, one segment per call."""
    sys.meta_path.insert(0, BlockKeras())
    import numpy as np
    import tensorflow as tf

    ids = np.load(ids_path)["ids"]  # (chars,)
    loaded = tf.saved_model.load(export_dir)
    step = loaded.signatures["serving_default"]
    segment_length = step.structured_input_signature[1]["token_ids"].shape[1]
    print(f"serving: signatures {sorted(loaded.signatures)}")
    for name, spec in sorted(step.structured_input_signature[1].items()):
        print(f"  input {name}: {spec.dtype.name} {spec.shape}")

    # One stream (batch 1). A server keeps one memory per stream and may
    # stack the streams it serves together into one batch.
    state = loaded.signatures["initial_memory"](batch_size=tf.constant(1))
    log_probs, started = [], time.time()
    num_calls = (len(ids) - 1) // segment_length
    for k in range(num_calls):
        if k == 1:  # the first call also loads the graph: time the rest
            started = time.time()
        segment = ids[k * segment_length : (k + 1) * segment_length]
        outputs = step(
            token_ids=tf.constant(segment[None], tf.int32),  # (1, T)
            memory=state["memory"],  # (1, layers, M, hidden)
            valid_length=state["valid_length"],  # (1,)
        )
        state = {
            "memory": outputs["memory"],
            "valid_length": outputs["valid_length"],
        }
        log_probs.append(tf.nn.log_softmax(outputs["logits"][0]).numpy())
    milliseconds = 1000 * (time.time() - started) / max(num_calls - 1, 1)
    log_probs = np.concatenate(log_probs)  # (num_calls * T, vocab)
    targets = ids[1 : len(log_probs) + 1]
    nll = -log_probs[np.arange(len(targets)), targets]  # (tokens,)
    loaded_keras = sorted(
        name for name in sys.modules if name.split(".")[0] in BLOCKED
    )
    assert not loaded_keras, f"the serving process loaded {loaded_keras}"
    print(
        f"serving: {num_calls} calls, {milliseconds:.1f} ms "
        f"per segment, {np.mean(nll) / np.log(2):.4f} bits per character, "
        f"valid memory slots at the end: {int(state['valid_length'][0])}; "
        "keras, keras_hub and keras_txl never imported"
    )
    np.savez(result_path, log_probs=log_probs)


# ---------------------------------------------------------------------------
# 3. The same stream through the Keras model.
# ---------------------------------------------------------------------------


def keras_log_probs(lm, ids, segment_length, memory_length):
    """Log-probabilities `(calls * T, vocab)` of `call_with_memory`."""
    import keras
    import numpy as np

    memory = lm.backbone.initial_memory(1, memory_length=memory_length)
    log_probs = []
    for k in range((len(ids) - 1) // segment_length):
        segment = ids[None, k * segment_length : (k + 1) * segment_length]
        logits, memory = lm.call_with_memory(segment, memory)  # (1, T, V)
        log_probs.append(keras.ops.log_softmax(logits[0]))
    return np.concatenate([keras.ops.convert_to_numpy(x) for x in log_probs])


# ---------------------------------------------------------------------------
# 4. Streaming generation over a LiteRT file (ai-edge-litert).
# ---------------------------------------------------------------------------


def generate_litert(lm, args, prompt):
    """Greedy generation of `args.generate` tokens after `prompt` (ids)
    from a `model.tflite` of one token per call; returns all the ids and
    the log-probabilities of every call `(calls, vocab)`."""
    import numpy as np

    from keras_txl.export import export_litert
    from keras_txl.export.litert import litert_interpreter

    path = export_litert(
        lm,
        os.path.join(os.path.dirname(args.output), "litert"),
        batch_size=1,
        segment_length=1,  # one token per call: generation
        memory_length=args.memory_length,
        overwrite=True,
    )
    # The runtime's own "INFO: Created ... XNNPACK delegate" line hidden.
    interpreter = litert_interpreter(path)
    if interpreter is None:
        raise ImportError("Part 4 needs pip install 'keras-txl[litert]'.")
    step = interpreter.get_signature_runner()
    details = step.get_input_details()
    state = {  # the empty memory: no valid slot yet
        name: np.zeros(details[name]["shape"], details[name]["dtype"])
        for name in ("memory", "valid_length")
    }

    # The runtime's signature runner: inputs and outputs by name.
    def run_step(token, state):
        outputs = step(token_ids=token, **state)
        next_state = {key: outputs[key] for key in ("memory", "valid_length")}
        return outputs["logits"], next_state

    return greedy_stream(lm, "litert", path, run_step, state, prompt, args)


def greedy_stream(lm, runtime, path, run_step, state, prompt, args):
    """Feeds `prompt` (ids) one token per call, then generates
    `args.generate` tokens greedily, one per call, `state` (the memory)
    carried: `run_step(token (1, 1) int32, state) -> (logits (1, 1,
    vocab), next state)`. Prints the file's size (`path`), the time per
    generated token and the text; returns all the ids and the
    log-probabilities of every call `(calls, vocab)`."""
    import keras
    import numpy as np

    num_tokens = args.generate
    tokens, log_probs, started = list(prompt), [], None
    for k in range(len(prompt) + num_tokens - 1):
        if k == len(prompt):
            started = time.time()  # time the generated tokens only
        token = np.asarray([[tokens[k]]], "int32")  # (1, 1)
        logits, state = run_step(token, state)
        log_probs.append(keras.ops.log_softmax(logits[0, -1]))
        if k >= len(prompt) - 1:  # past the prompt: pick the next token
            tokens.append(int(np.argmax(logits[0, -1])))
    milliseconds = 1000 * (time.time() - started) / max(num_tokens - 1, 1)
    text = lm.preprocessor.tokenizer.detokenize(tokens[len(prompt) :])
    print(
        f"{runtime + ':':8} {os.path.getsize(path) / 1e6:.2f} MB, "
        f"{milliseconds:.2f} ms per generated token; {num_tokens} "
        f"greedy tokens: {str(text)!r}"
    )
    log_probs = np.stack([keras.ops.convert_to_numpy(x) for x in log_probs])
    return np.asarray(tokens, "int32"), log_probs


# ---------------------------------------------------------------------------
# 5. Streaming generation over an ONNX file (onnxruntime).
# ---------------------------------------------------------------------------


def generate_onnx(lm, args, prompt):
    """Greedy generation of `args.generate` tokens after `prompt` (ids)
    through ONNX Runtime, from a `model.onnx` of one token per call;
    returns all the ids and the log-probabilities of every call `(calls,
    vocab)`."""
    import numpy as np

    from keras_txl.export.onnx import onnx_session

    path = lm.export(
        os.path.join(os.path.dirname(args.output), "onnx"),
        format="onnx",
        segment_length=1,  # one token per call: generation
        memory_length=args.memory_length,
        overwrite=True,
    )
    session = onnx_session(path)  # CPUExecutionProvider
    if session is None:
        raise ImportError("Part 5 needs pip install 'keras-txl[onnx]'.")
    memory = session.get_inputs()[1]  # ("batch", layers, M, hidden)
    state = {  # one stream's empty memory: no valid slot yet
        "memory": np.zeros((1, *memory.shape[1:]), "float32"),
        "valid_length": np.zeros((1,), "int32"),
    }

    # The outputs `next_memory`, `next_valid_length` are the next call's
    # `memory`, `valid_length` (an ONNX graph names each value once).
    def run_step(token, state):
        logits, memory, valid_length = session.run(
            ["logits", "next_memory", "next_valid_length"],
            {"token_ids": token, **state},
        )
        return logits, {"memory": memory, "valid_length": valid_length}

    return greedy_stream(lm, "onnx", path, run_step, state, prompt, args)


def check_against_keras(lm, args, prompt, tokens, served):
    """Keras, fed the same tokens one by one with the same memory, gives
    the same log-probabilities and picks the same token at every step."""
    import numpy as np

    expected = keras_log_probs(lm, tokens, 1, args.memory_length)
    picked = np.argmax(expected[len(prompt) - 1 :], axis=-1)  # (generate,)
    matches = int(np.sum(picked == tokens[len(prompt) :]))
    difference = float(np.max(np.abs(served - expected)))
    print(
        f"keras:   picks the same token {matches}/{args.generate} times; "
        f"largest log-probability difference {difference:.1e}"
    )
    assert matches == args.generate, (picked, tokens[len(prompt) :])
    assert difference < 1e-4, difference


def main(argv=None):
    args = parse_args(argv)
    if args.serve:
        serve(*args.serve)
        return None
    import numpy as np

    lm, ids = export(args)
    with tempfile.TemporaryDirectory() as tmp:
        ids_path = os.path.join(tmp, "ids.npz")
        result_path = os.path.join(tmp, "result.npz")
        np.savez(ids_path, ids=ids)
        # A fresh Python process that runs `serve` above.
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--serve",
                args.output,
                ids_path,
                result_path,
            ],
            check=True,
        )
        served = np.load(result_path)["log_probs"]
    expected = keras_log_probs(lm, ids, args.segment_length, args.memory_length)
    difference = float(np.max(np.abs(served - expected)))
    print(
        f"keras:   the same {len(expected)} characters with "
        f"lm.call_with_memory: largest log-probability difference "
        f"{difference:.1e}"
    )
    assert difference < 1e-4, difference

    prompt = ids[: args.segment_length]
    litert_tokens, served = generate_litert(lm, args, prompt)
    check_against_keras(lm, args, prompt, litert_tokens, served)
    onnx_tokens, served = generate_onnx(lm, args, prompt)
    check_against_keras(lm, args, prompt, onnx_tokens, served)
    # Both runtimes streamed the same text.
    assert np.array_equal(onnx_tokens, litert_tokens)
    return difference


if __name__ == "__main__":
    main()
