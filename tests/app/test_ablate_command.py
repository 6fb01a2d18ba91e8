import json

import pytest

from keras_txl_cli.ablate_command import ablate_main
from keras_txl_cli.recl_command import recl_main
from tests.test_case import DATA


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
            "--size",
            "micro",
            "--num-seeds",
            "1",
            "--eval-tokens",
            "64",
            "--eval-batch-size",
            "2",
            "--variants",
            "recurrence_relative",
            "--memory-sweep",
            "1",
            "--recl-contexts",
            "4",
            "--no-cost",
            "--metrics-json",
            str(metrics),
            "--save-models",
            str(tmp_path / "models"),
        ]
    )
    assert status == 0
    results = json.loads(metrics.read_text())
    bpc = results["valid_bpc"]["recurrence_relative"]
    assert list(results["valid_bpc"]) == ["recurrence_relative"]
    assert 0 < bpc < 10
    # The sweep reuses the run of the same configuration (M = T).
    sweep = results["memory_sweep"]
    assert sweep["memory_lengths"] == [4]
    assert sweep["valid_bpc"]["4"] == bpc
    assert results["recl"]["by_ratio"]["0.1"] == {"recurrence_relative": [4]}
    table = (tmp_path / "out" / "ablation.md").read_text()
    assert f"| recurrence_relative | yes | relative (ours) | {bpc:.4f}" in table
    assert table in capsys.readouterr().out
    for name in ("training", "memory_sweep", "context"):
        assert (tmp_path / "out" / f"ablation_{name}.png").stat().st_size
    # The saved models feed `keras-txl recl`.
    models = sorted((tmp_path / "models" / "seed_0").glob("*.keras"))
    assert [m.stem for m in models] == ["recurrence_relative"]
    recl_json = tmp_path / "recl.json"
    status = recl_main(
        [str(models[0])]
        + ["--corpus", str(corpus), "--segment-length", "4"]
        + ["--contexts", "2,4", "--batch-size", "2", "--eval-tokens", "64"]
        + ["--metrics-json", str(recl_json)]
    )
    assert status == 0
    recl = json.loads(recl_json.read_text())["recl"]
    assert set(recl["0.1"]) == {"recurrence_relative"}
    assert recl["0.1"]["recurrence_relative"] in (2, 4)
