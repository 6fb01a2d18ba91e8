"""Saved models are safe to load: JSON, text and HDF5, nothing pickled.

Pickled tokenizers (which run code when loaded) are why HuggingFace's
TransfoXL port was deprecated. A `.keras` archive here holds JSON
(config, metadata, vocabularies), text vocabularies and an HDF5 file of
numeric arrays, and loads with `safe_mode=True`.
"""

import io
import json
import os
import pickle
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import h5py
import keras
import keras_hub
import numpy as np
import pytest

from keras_txl import data
from keras_txl_cli import artifacts
from tests.test_case import to_numpy
from tests.tiny_models import random_ids
from tests.tiny_models import tiny_lm

REPOSITORY = Path(__file__).resolve().parents[2]
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# Every pickle of protocol 2 to 5 starts with the PROTO opcode and its
# version; protocols 0 and 1 are not valid JSON, text or HDF5 either.
PICKLE_HEADERS = tuple(bytes([0x80, protocol]) for protocol in range(2, 6))
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib", ".dill", ".npy", ".npz")


def unsafe_entries(path):
    """Entries of a `.keras` archive that are not plain data."""
    found = []
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            content = archive.read(name)
            if name.endswith(PICKLE_SUFFIXES) or content.startswith(
                PICKLE_HEADERS
            ):
                found.append(f"{name}: pickle")
            elif name.endswith(".json"):
                json.loads(content)
                if b'"__lambda__"' in content:  # Keras's serialized code
                    found.append(f"{name}: serialized code")
            elif name.endswith(".txt"):
                content.decode("utf-8")
            elif name.endswith(".h5"):
                assert content.startswith(HDF5_SIGNATURE)
                found += [f"{name}/{key}" for key in _non_numeric(content)]
            else:
                found.append(f"{name}: unknown kind of file")
    return found


def _non_numeric(content):
    """Datasets of an HDF5 file that are not arrays of numbers."""
    found = []
    with h5py.File(io.BytesIO(content), "r") as file:
        file.visititems(
            lambda key, item: (
                found.append(key)
                if isinstance(item, h5py.Dataset)
                and item.dtype.kind not in "fiub"
                else None
            )
        )
    return found


def _lm(kind):
    text = "the cat sat on the mat\nthe dog sat"
    tokenizer = data.make_tokenizer(kind, text)
    preprocessor = keras_hub.models.CausalLMPreprocessor(
        tokenizer=tokenizer,
        sequence_length=4,
        add_start_token=False,
        add_end_token=False,
    )
    return tiny_lm(
        seed=None,
        tie_weights=kind == "char",
        preprocessor=preprocessor,
        vocabulary_size=tokenizer.vocabulary_size(),
    )


@pytest.mark.torch_ok
@pytest.mark.parametrize("kind", ["char", "word"])
def test_saved_archive_holds_no_pickle_and_loads_in_safe_mode(tmp_path, kind):
    lm = _lm(kind)
    tokens = random_ids((2, 3), high=lm.backbone.vocabulary_size)
    expected, _ = lm.call_with_memory(tokens)
    lm(tokens)  # a carried memory exists: it must not be saved
    path = tmp_path / "lm.keras"
    lm.save(path)

    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    assert any(name.startswith("assets/") for name in names), names
    assert unsafe_entries(path) == []

    loaded = keras.saving.load_model(path, safe_mode=True)
    got, _ = loaded.call_with_memory(tokens)
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), atol=1e-6)
    assert (
        loaded.preprocessor.tokenizer.get_vocabulary()
        == lm.preprocessor.tokenizer.get_vocabulary()
    )
    assert not loaded.memory_state.has_state


def test_the_scan_finds_pickles_and_code(tmp_path):
    # The check above could not fail if the scan saw nothing.
    path = tmp_path / "bad.keras"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            "config.json", json.dumps({"class_name": "__lambda__"})
        )
        archive.writestr("assets/vocabulary.json", pickle.dumps(["a"]))
        archive.writestr("assets/tokenizer.pkl", b"")
    assert unsafe_entries(path) == [
        "config.json: serialized code",
        "assets/vocabulary.json: pickle",
        "assets/tokenizer.pkl: pickle",
    ]


SAVE_FOREVER = """
import sys

import numpy as np

from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from keras_txl_cli import artifacts
from keras_txl_cli import artifacts
from tests.tiny_models import BACKBONE_KWARGS

lm = TransformerXLCausalLM(TransformerXLBackbone(**BACKBONE_KWARGS))
lm(np.zeros((2, 3), "int32"))
np.savez(sys.argv[2], *lm.backbone.get_weights())  # what every save holds
artifacts.save_model(lm, sys.argv[1])
print("saved", flush=True)
while True:
    artifacts.save_model(lm, sys.argv[1])
"""


@pytest.mark.slow
def test_killing_a_save_mid_write_leaves_the_previous_model(tmp_path):
    # `keras-txl train` saves through `artifacts.save_model`: a preset in
    # a temporary folder, then renames. Kill a process while it writes it.
    saved = str(tmp_path / "weights.npz")
    child = subprocess.Popen(
        [sys.executable, "-c", SAVE_FOREVER, str(tmp_path / "model"), saved],
        stdout=subprocess.PIPE,
        cwd=REPOSITORY,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
    )
    try:
        assert child.stdout.readline().strip() == b"saved"
        deadline = time.monotonic() + 120
        while not _temporaries(tmp_path / "model"):  # the next save has begun
            assert time.monotonic() < deadline, "no second save started"
        child.kill()
    finally:
        child.kill()
        child.wait()
    assert _temporaries(tmp_path / "model"), "the kill missed the write"
    loaded = artifacts.load_model(tmp_path / "model")  # the previous one
    with np.load(saved) as expected:  # whole: every weight, as saved
        weights = [expected[f"arr_{i}"] for i in range(len(expected.files))]
    assert len(loaded.backbone.get_weights()) == len(weights)
    for got, want in zip(loaded.backbone.get_weights(), weights):
        np.testing.assert_array_equal(got, want)
    logits, _ = loaded.call_with_memory(random_ids((2, 3)))
    assert np.all(np.isfinite(to_numpy(logits)))


def _temporaries(folder):
    return [name for name in os.listdir(folder) if ".tmp" in name]
