import numpy as np

from benchmarks import paper_eval
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM


def test_kv_reuse_scores_what_the_graph_scores():
    """The benchmark's two keras-txl paths give the same losses segment
    after segment, at the paper's flags (same_length, a clamp) with a
    memory that drops its oldest rows, and the memory matters."""
    backbone = TransformerXLBackbone(
        vocabulary_size=50,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        head_dim=8,
        intermediate_dim=32,
        memory_length=12,
        clamp_length=7,
        same_length=True,
        initializer_range=0.5,
    )
    lm = TransformerXLCausalLM(backbone)
    lm.build()
    steps = paper_eval.step_functions(lm, 5, 12)
    plain = paper_eval.initial_state(lm, "plain", 3, 12)
    cached = paper_eval.initial_state(lm, "kv_reuse", 3, 12)
    tokens = np.random.default_rng(0).integers(0, 50, (4, 3, 6))
    tokens = tokens.astype("int32")
    for segment in tokens:
        expected, plain = steps["plain"](segment[:, :-1], segment[:, 1:], plain)
        got, cached = steps["kv_reuse"](segment[:, :-1], segment[:, 1:], cached)
        np.testing.assert_allclose(float(got), float(expected), rtol=1e-5)
    other = paper_eval.initial_state(lm, "plain", 3, 12, seed=5)
    moved, _ = steps["plain"](tokens[0, :, :-1], tokens[0, :, 1:], other)
    first, _ = steps["plain"](
        tokens[0, :, :-1],
        tokens[0, :, 1:],
        paper_eval.initial_state(lm, "plain", 3, 12),
    )
    assert abs(float(moved) - float(first)) > 1e-3


def test_summary_ratios():
    def row(backend, mode, tokens, cpu, rss, implementation="keras_txl"):
        return {
            "benchmark": "paper_eval",
            "implementation": implementation,
            "backend": backend,
            "mode": mode,
            "tokens_per_s": tokens,
            "tokens_per_cpu_s_x_cores": cpu,
            "peak_rss_delta_mib": rss,
        }

    out = paper_eval.summary(
        [
            row("jax", "plain", 200.0, 400.0, 300.0),
            row("jax", "kv_reuse", 300.0, 500.0, 450.0),
            {"benchmark": "paper_eval", "error": "failed"},
            row("torch", "authors_eval", 100.0, 100.0, 150.0, "authors"),
        ]
    )
    plain, reuse = out["rows"]
    assert plain["x_authors_wall"] == 2.0 and plain["x_authors_cpu"] == 4.0
    assert plain["rss_over_authors"] == 2.0
    assert "kv_reuse_over_plain_wall" not in plain
    assert reuse["kv_reuse_over_plain_wall"] == 1.5
    assert reuse["kv_reuse_over_plain_cpu"] == 1.25
    assert out["authors_tokens_per_s"] == 100.0
    alone = paper_eval.summary([row("jax", "plain", 1.0, 1.0, 1.0)])
    assert alone["authors"].startswith("not measured")
    assert "x_authors_wall" not in alone["rows"][0]
