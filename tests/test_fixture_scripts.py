"""The scripts in tools/fixtures/ describe the files in tests/fixtures/:
the configurations they make are the stored ones, array for array in
shape. (Running the scripts needs the peers' code and environment, which
CI does not have; tools/fixtures/README.md has the commands and
tests/fixtures/README.md the results of the last check.)"""

import json
import sys

import numpy as np
import pytest

from tests.test_case import FIXTURES
from tests.test_case import REPO

sys.path.insert(0, str(REPO / "tools" / "fixtures"))

import make_huggingface  # noqa: E402
import make_official_pytorch  # noqa: E402
import make_official_tensorflow  # noqa: E402


@pytest.mark.parametrize("name", sorted(make_official_pytorch.CONFIGS))
def test_pytorch_script_makes_the_stored_configuration(name):
    spec = make_official_pytorch.CONFIGS[name]
    stored = np.load(FIXTURES / f"official_{name}.npz")
    assert json.dumps(spec["config"]) == str(stored["config"])
    T = spec["config"]["tgt_len"]
    assert stored["tokens"].shape == (spec["batch"], spec["segments"] * T + 1)
    segments = [k for k in stored.files if k.startswith("nll_s")]
    assert len(segments) == spec["segments"]


@pytest.mark.parametrize("name", sorted(make_official_tensorflow.CONFIGS))
def test_tensorflow_script_makes_the_stored_configuration(name):
    spec = make_official_tensorflow.CONFIGS[name]
    folder = FIXTURES / "tf_official" / name
    text = (folder / "config.json").read_text()
    assert json.dumps(spec["config"], indent=1) == text
    stored = np.load(folder / "reference.npz")
    c = spec["config"]
    S, B, T = spec["segments"], spec["batch"], c["tgt_len"]
    assert stored["tokens"].shape == (B, S * T + 1)
    assert stored["nll"].shape == (S, B, T)
    assert stored["memory"].shape == (
        S,
        B,
        c["n_layer"],
        c["mem_len"],
        c["d_model"],
    )


def test_huggingface_script_makes_the_stored_configuration():
    config = dict(make_huggingface.CONFIG)
    folder = FIXTURES / "hf_transfo_xl"
    stored = json.loads((folder / "config.json").read_text())
    assert config.pop("proj_share_all_but_first")  # tie_projs [F, T, ...]
    assert stored["tie_projs"] == [False] + [True] * len(config["cutoffs"])
    for key, value in config.items():
        assert stored[key] == value, key
    reference = np.load(folder / "reference.npz")
    S, L = make_huggingface.SEGMENTS, make_huggingface.SEGMENT_LENGTH
    assert int(reference["segment_length"]) == L
    assert reference["token_ids"].shape == (2, S * L)
    assert reference["logp"].shape == (S, 2, L, config["vocab_size"])


def test_huggingface_vocabulary_is_the_corpus_words():
    # vocab.pkl read by its data only: no object it names is built.
    stored = make_huggingface.stored_symbols(FIXTURES / "hf_transfo_xl")
    assert make_huggingface.corpus_words() == stored
    assert len(stored) + 1 == make_huggingface.CONFIG["vocab_size"]
