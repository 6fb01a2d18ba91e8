"""Prints how far keras-txl's converted models are from the reference
outputs in tests/fixtures/ (the authors' TensorFlow code, HuggingFace's
TransfoXL), on the current Keras backend. Numbers quoted in
docs/pretrained.md come from this script:

    KERAS_BACKEND=jax python tools/check_converters.py
"""

import json
import pathlib
import sys

import keras
import numpy as np
from keras import ops

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from keras_txl.convert import from_huggingface  # noqa: E402
from keras_txl.convert import from_official_tensorflow  # noqa: E402
from keras_txl.training.evaluation import evaluate_segments  # noqa: E402
from keras_txl.training.evaluation import evaluation_model  # noqa: E402

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def _tensorflow(name):
    folder = FIXTURES / "tf_official" / name
    reference = np.load(folder / "reference.npz")
    T = json.loads((folder / "config.json").read_text())["tgt_len"]
    lm = from_official_tensorflow(folder)
    tokens = reference["tokens"]
    memory = lm.backbone.initial_memory(tokens.shape[0], start="zeros")
    nll_error = memory_error = 0.0
    for s in range(reference["nll"].shape[0]):
        logits, memory = lm.call_with_memory(
            tokens[:, s * T : (s + 1) * T], memory
        )
        log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))
        targets = tokens[:, s * T + 1 : (s + 1) * T + 1, None]
        nll = -np.take_along_axis(log_probs, targets, -1)[..., 0]
        nll_error = max(nll_error, np.abs(nll - reference["nll"][s]).max())
        got = ops.convert_to_numpy(memory["memory"])
        memory_error = max(
            memory_error, np.abs(got - reference["memory"][s]).max()
        )
    result = evaluate_segments(
        lm, tokens.reshape(-1), tokens.shape[0], T, start="zeros"
    )
    empty = _empty_error(lm, tokens, T, reference)
    print(
        f"tf_official/{name}: max |nll - theirs| {nll_error:.1e}, max "
        f"|memory - theirs| {memory_error:.1e} over "
        f"{reference['nll'].shape[0]} segments; mean loss "
        f"{result['loss']:.6f} (theirs {reference['nll'].mean():.6f}); "
        f"from an empty memory instead: {empty:.2f}"
    )
    mask = _variant_error(lm, tokens, T, reference, same_length=True)
    print(f"  with the PyTorch same_length mask instead: {mask:.2f}")
    if lm.adaptive_softmax is not None:
        order = _variant_error(lm, tokens, T, reference, order="pytorch")
        print(f"  with the PyTorch cluster order instead: {order:.2f}")


def _variant_error(lm, tokens, T, reference, same_length=None, order=None):
    """Largest NLL difference of segment 0 with one option changed."""
    variant = evaluation_model(lm, same_length=same_length)
    if order is not None:
        config = {**lm.get_config(), "cluster_order": order}
        variant = type(lm).from_config(config)
        variant.build()
        for target, source in zip(variant.weights, lm.weights):
            target.assign(ops.convert_to_numpy(source))
    memory = variant.backbone.initial_memory(tokens.shape[0], start="zeros")
    logits, _ = variant.call_with_memory(tokens[:, :T], memory)
    log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))
    nll = -np.take_along_axis(log_probs, tokens[:, 1 : T + 1, None], -1)[..., 0]
    return np.abs(nll - reference["nll"][0]).max()


def _empty_error(lm, tokens, T, reference):
    logits, _ = lm.call_with_memory(tokens[:, :T])
    log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))
    nll = -np.take_along_axis(log_probs, tokens[:, 1 : T + 1, None], -1)[..., 0]
    return np.abs(nll - reference["nll"][0]).max()


def _huggingface():
    folder = FIXTURES / "hf_transfo_xl"
    reference = np.load(folder / "reference.npz")
    lm = from_huggingface(folder)
    ids = reference["token_ids"]
    memory = lm.backbone.initial_memory(ids.shape[0], start="zeros")
    error = 0.0
    for s in range(reference["logp"].shape[0]):
        log_probs, memory = lm.call_with_memory(
            ids[:, 12 * s : 12 * (s + 1)], memory
        )
        got = ops.convert_to_numpy(log_probs)
        error = max(error, np.abs(got - reference["logp"][s]).max())
    print(
        f"hf_transfo_xl: max |log p - HuggingFace's| {error:.1e} over "
        f"{reference['logp'].shape[0]} segments"
    )


if __name__ == "__main__":
    print(f"backend {keras.backend.backend()}")
    _tensorflow("tf_char")
    _tensorflow("tf_word")
    _huggingface()
