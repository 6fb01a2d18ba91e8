"""`run_ablation`: the variants, the checks of its settings, and a tiny
study whose records and sweep fit together."""

import pytest

from keras_txl import data
from keras_txl.ablation import run_ablation
from keras_txl.ablation.study import VARIANTS
from keras_txl.ablation.study import validation_characters
from keras_txl.ablation.study import variant_config
from keras_txl.data.text_source import Corpus

ARCHITECTURE = dict(
    num_layers=1, num_heads=2, hidden_dim=8, head_dim=4, intermediate_dim=16
)
TEXT = "the quick brown fox jumps over the lazy dog. " * 40


def _corpus():
    return Corpus(train=TEXT, valid=TEXT[:400], test="")


def test_each_variant_takes_one_mechanism_away():
    assert variant_config("recurrence_relative", 8, 4) == {"memory_length": 8}
    assert variant_config("no_recurrence", 8, 4) == {"memory_length": 0}
    assert variant_config("memory_12", 8, 4) == {"memory_length": 12}
    assert variant_config("recurrence_absolute", 8, 4)["position_encoding"] == (
        "absolute"
    )
    learned = variant_config("recurrence_learned_relative", 8, 4)
    assert learned["max_relative_distance"] == 8 + 4 - 1
    assert variant_config("no_stop_gradient", 8, 4) == {
        "memory_length": 8,
        "stop_memory_gradient": False,
    }
    with pytest.raises(ValueError, match="Unknown variant 'x'"):
        variant_config("x", 8, 4)


def test_bad_settings_are_refused_before_any_training():
    common = dict(steps=1, segment_length=4, batch_size=2)
    with pytest.raises(ValueError, match="Unknown variants"):
        run_ablation(
            _corpus(), architecture=ARCHITECTURE, variants=["x"], **common
        )
    with pytest.raises(ValueError, match="segments_per_step >= 2"):
        run_ablation(
            _corpus(),
            architecture=ARCHITECTURE,
            variants=VARIANTS,
            segments_per_step=1,
            **common,
        )


def test_a_tiny_study_records_every_run_and_reuses_the_sweep():
    lines = []
    results = run_ablation(
        _corpus(),
        steps=2,
        segment_length=4,
        batch_size=2,
        architecture=ARCHITECTURE,
        size="tiny-test",
        variants=("recurrence_relative", "no_recurrence"),
        memory_sweep=(0.0, 1.0, 2.0),
        recl_contexts=[2, 4],
        eval_tokens=128,
        eval_batch_size=2,
        measure_cost=False,
        log=lines.append,
    )
    config = results["config"]
    assert config["size"] == "tiny-test"
    assert config["architecture"] == ARCHITECTURE
    assert config["eval_tokens"] == 128
    assert config["long_memory_length"] == 16  # 2 * the longest sweep M
    sweep = results["memory_sweep"]
    assert sweep["memory_lengths"] == [0, 4, 8]
    # M = 0 and M = T are the runs of no_recurrence and the paper's model.
    assert sweep["valid_bpc"]["0"] == results["valid_bpc"]["no_recurrence"]
    assert (
        sweep["valid_bpc"]["4"] == results["valid_bpc"]["recurrence_relative"]
    )
    assert 0 < sweep["valid_bpc"]["8"] < 10
    assert results["recl"]["group"] == ["recurrence_relative", "no_recurrence"]
    by_ratio = results["recl"]["by_ratio"]
    assert list(by_ratio) == ["0.1", "0.5", "1.0"]
    assert set(by_ratio["0.1"]) == {"recurrence_relative", "no_recurrence"}
    assert results["cost"] == {}
    # Two variants and the one new sweep run trained, then RECL.
    assert sum("training" in line for line in lines) == 3
    assert any("RECL" in line for line in lines)


def test_validation_characters_are_the_studys_tokens():
    corpus = _corpus()
    ids, vocabulary = validation_characters(corpus, 100)
    tokenizer = data.make_tokenizer("char", corpus)
    assert vocabulary == int(tokenizer.vocabulary_size())
    assert list(ids) == list(data.corpus_ids(tokenizer, corpus.valid)[:100])
