import json

import keras
import pytest

from keras_txl.ablation import measure_step_cost
from keras_txl.ablation.cli import ablate_main
from keras_txl.ablation.cli import recl_main
from tests.test_case import DATA

TINY = dict(
    vocabulary_size=20,
    num_layers=1,
    num_heads=2,
    hidden_dim=8,
    head_dim=4,
    intermediate_dim=16,
    memory_length=4,
)


@pytest.mark.slow
def test_ablate_writes_the_table_pictures_and_metrics(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text((DATA / "tinyshakespeare.txt").read_text()[:6000])
    metrics = tmp_path / "out" / "metrics.json"
    metrics.parent.mkdir()
    status = ablate_main(
        [
            "--corpus",
            str(corpus),
            "--steps",
            "2",
            "--segment-length",
            "4",
            "--batch-size",
            "2",
            "--preset",
            "tiny",
            "--num-seeds",
            "1",
            "--eval-tokens",
            "64",
            "--eval-batch-size",
            "2",
            "--variants",
            "recurrence_relative,no_recurrence",
            "--memory-sweep",
            "0,1",
            "--recl-contexts",
            "2,4",
            "--no-cost",
            "--metrics-json",
            str(metrics),
            "--save-models",
            str(tmp_path / "models"),
        ]
    )
    assert status == 0
    results = json.loads(metrics.read_text())
    assert set(results["valid_bpc"]) == {"recurrence_relative", "no_recurrence"}
    assert all(0 < v < 10 for v in results["valid_bpc"].values())
    # The sweep reuses the runs of the same configuration (M = 0 and T).
    sweep = results["memory_sweep"]
    assert sweep["memory_lengths"] == [0, 4]
    assert sweep["valid_bpc"]["0"] == results["valid_bpc"]["no_recurrence"]
    assert set(results["recl"]["by_ratio"]) == {"0.1", "0.5", "1.0"}
    assert set(results["recl"]["by_ratio"]["0.1"]) == set(results["valid_bpc"])
    table = (tmp_path / "out" / "ablation.md").read_text()
    assert "| no_recurrence | no | relative (ours)" in table
    assert table in capsys.readouterr().out
    for name in ("training", "memory_sweep", "context"):
        assert (tmp_path / "out" / f"ablation_{name}.png").stat().st_size
    # The saved models feed `keras-txl recl`.
    models = sorted((tmp_path / "models" / "seed_0").glob("*.keras"))
    assert [m.stem for m in models] == ["no_recurrence", "recurrence_relative"]
    recl_json = tmp_path / "recl.json"
    status = recl_main(
        [str(m) for m in models]
        + ["--corpus", str(corpus), "--segment-length", "4"]
        + ["--contexts", "2,4", "--batch-size", "2", "--eval-tokens", "64"]
        + ["--metrics-json", str(recl_json)]
    )
    assert status == 0
    recl = json.loads(recl_json.read_text())["recl"]
    assert set(recl["0.1"]) == {m.stem for m in models}
    assert all(v in (2, 4) for v in recl["0.1"].values())


def test_step_cost_is_measured():
    cost = measure_step_cost(TINY, 2, 4, 2, steps=2, isolate=False)
    assert cost["seconds_per_step"] > 0
    assert cost["tokens_per_step"] == 16
    if keras.config.backend() == "jax":
        assert cost["xla_temp_bytes"] > 0
