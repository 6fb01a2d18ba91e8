"""`markdown_report` and `picture_series`: the tables and the lines of
the pictures of a `run_ablation` result."""

import numpy as np

from keras_txl.ablation.report import markdown_report
from keras_txl.ablation.report import picture_series


def _run(bpc):
    return dict(
        train_seconds=3.0,
        valid_bpc=bpc,
        valid_bpc_long=bpc - 0.1,
        train_loss_last=np.log(2.0),
        train_loss_last_std=0.0,
        nonfinite_steps=0,
        seconds_per_step=None,
        loss_curve=[0.9, 0.8, 0.7, 0.6],
    )


def _results():
    return {
        "config": dict(
            size="micro",
            segment_length=4,
            memory_length=4,
            long_memory_length=8,
            steps=2,
            batch_size=2,
            segments_per_step=2,
            tokens_per_step=16,
            seeds=[0, 1],
            backend="jax",
            eval_tokens=64,
            eval_batch_size=2,
        ),
        "valid_bpc": {"recurrence_relative": 2.5},
        "training": {
            "recurrence_relative": [_run(2.5), _run(2.7)],
            "memory_0": [_run(3.0)],
            "memory_4": [_run(2.5), _run(2.7)],
        },
        "memory_sweep": {
            "memory_lengths": [0, 4],
            "long_memory_length": 8,
            "valid_bpc": {"0": 3.0, "4": 2.6},
            "valid_bpc_long": {"0": 2.9, "4": 2.5},
        },
        "recl": {
            "group": ["recurrence_relative"],
            "contexts": [2, 4],
            "by_ratio": {"0.1": {"recurrence_relative": [4, 2]}},
            "bpc_by_context": [{"recurrence_relative": {"2": 3.0, "4": 2.5}}],
        },
        "cost": {
            "stop_gradient": dict(
                seconds_per_step=0.5,
                tokens_per_step=1000,
                segments_per_step=2,
                xla_temp_bytes=None,
            )
        },
    }


def test_the_tables_show_every_seed_the_sweep_recl_and_the_cost():
    table = markdown_report(_results())
    assert "Size `micro`, T = 4, M = 4, 2 steps of 2 x 2 segments" in table
    assert (
        "| recurrence_relative | yes | relative (ours) "
        "| 2.6000 (2.5000, 2.7000) | 2.5000 (2.4000, 2.6000) | 3 | best |"
    ) in table
    # Training loss ln 2 nats: 1 bit per character.
    assert "| recurrence_relative | 1.0000 | 0.0000 | 0 | - |" in table
    assert "| 0 (0 T) | 3.0000 | 2.9000 |" in table
    assert "| recurrence_relative | 4, 2 |" in table
    assert "| stop_gradient | 2 | 1000 | 0.5000 | 500.00 | - |" in table
    assert table.endswith("\n")


def test_a_result_without_recl_or_cost_has_no_such_table():
    results = _results()
    results["recl"]["by_ratio"] = {}
    results["cost"] = {}
    table = markdown_report(results)
    assert "RECL" not in table and "Cost of a training step" not in table


def test_picture_series_are_in_bits_per_character():
    pictures = picture_series(_results())
    assert list(pictures) == [
        "ablation_training.png",
        "ablation_memory_sweep.png",
        "ablation_context.png",
    ]
    x, y = pictures["ablation_training.png"]["recurrence_relative"]
    np.testing.assert_allclose(y, np.array([0.9, 0.8, 0.7, 0.6]) / np.log(2))
    assert list(x) == [1, 2, 3, 4]
    sweep = pictures["ablation_memory_sweep.png"]
    assert sweep["evaluated with M"] == ([0, 4], [3.0, 2.6])
    assert sweep["evaluated with M = 8"] == ([0, 4], [2.9, 2.5])
    context = pictures["ablation_context.png"]["recurrence_relative"]
    assert context == ([2, 4], [3.0, 2.5])
