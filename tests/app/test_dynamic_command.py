"""`keras-txl evaluate RUN --dynamic sgd|rms`, run as a user runs it."""

import json
import os
import subprocess
import sys

from keras_txl.models import Utf8ByteTokenizer
from keras_txl_cli import artifacts
from tests.tiny_models import tiny_lm

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def test_evaluate_dynamic_prints_static_and_dynamic_side_by_side(tmp_path):
    lm = tiny_lm(
        seed=None,
        vocabulary_size=256,
        num_layers=1,
        hidden_dim=16,
        memory_length=8,
    )
    run = str(tmp_path / "run")
    artifacts.save_model(lm, run, Utf8ByteTokenizer())
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Pack my box with five dozen liquor jugs. " * 12)
    metrics = str(tmp_path / "dynamic.json")
    command = [sys.executable, "-m", "keras_txl_cli", "evaluate", run]
    command += ["--corpus", str(corpus), "--segment-length", "16"]
    command += ["--dynamic", "sgd", "--dynamic-learning-rate", "0.5"]
    command += ["--dynamic-segments-per-update", "2"]
    command += ["--metrics-json", metrics]
    result = subprocess.run(
        command,
        env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(metrics) as file:
        scores = json.load(file)
    static, dynamic = scores["static"], scores["dynamic"]
    assert static["learning_rate"] == 0 and dynamic["learning_rate"] == 0.5
    assert dynamic["segments_per_update"] == 2 and dynamic["updates"] > 0
    assert static["tokens"] == dynamic["tokens"] == 12 * 41 - 1
    assert static["batch_size"] == 1  # The paper's one stream.
    # A repeated sentence: the steps learn it.
    assert dynamic["bits_per_character"] < static["bits_per_character"]
    row = next(
        line.split()
        for line in result.stdout.splitlines()
        if line.strip().startswith("bits per byte")  # the unit of the run
    )
    assert float(row[-2]) == round(static["bits_per_character"], 4)
    assert float(row[-1]) == round(dynamic["bits_per_character"], 4)
    # The two passes, named.
    legend = "static: the saved weights, no step; dynamic: a sgd step"
    assert legend + " after every 2 segment(s)" in result.stdout
