"""The arithmetic behind the benchmark tables: FLOP counts, data layout,
the cost-law fit, the goals table and the document update. Nothing here is
timed."""

import os

import numpy as np
import pytest

from benchmarks import common
from benchmarks import run_all
from benchmarks import throughput
from benchmarks.long_context import fit_law


def test_reference_flops_per_token_by_hand():
    d, nd, f, t, k, layers, vocab, batch = 256, 256, 1024, 128, 256, 4, 256, 16
    per_layer = (
        2 * d * nd  # query projection
        + 4 * d * nd * k / t  # key and value of T + M rows, per query
        + 2 * d * nd * k / (t * batch)  # position projection, once a batch
        + 6 * nd * k  # q.k, q.r, p.v over K keys
        + 2 * nd * d  # output projection
        + 4 * d * f  # feed-forward
    )
    expected = layers * per_layer + 2 * d * vocab
    size = common.BENCHMARK_SIZES["reference"]
    assert common.forward_flops_per_token(**size) == pytest.approx(expected)
    assert common.training_flops_per_token(**size) == pytest.approx(
        3 * expected
    )


def test_attention_flops_grow_with_memory_length():
    size = dict(common.BENCHMARK_SIZES["reference"])
    short = common.forward_flops_per_token(**size)
    size["memory_length"] += 128
    longer = common.forward_flops_per_token(**size)
    # 128 more keys: K/V projections of 128 more rows per 128 queries, the
    # position projection of 128 more rows, and 3 products over them.
    per_layer = 4 * 256 * 256 + 2 * 256 * 256 / 16 + 6 * 256 * 128
    assert longer - short == pytest.approx(4 * per_layer)


def test_segment_arrays_continue_each_stream():
    tokens = np.arange(1000)
    x, y = common.segment_arrays(tokens, batch_size=3, segment_length=7)
    assert x.shape[1:] == (3, 7) and x.shape == y.shape
    np.testing.assert_array_equal(y[:, :, :-1], x[:, :, 1:])
    # Row b of batch i + 1 starts where row b of batch i ended.
    np.testing.assert_array_equal(x[1:, :, 0], x[:-1, :, -1] + 1)
    np.testing.assert_array_equal(y[:, :, -1], x[:, :, -1] + 1)


def test_cost_law_fit_recovers_its_coefficients():
    rows = [
        {"segment_length": t, "memory_length": m}
        for t, m in [(128, 0), (128, 512), (64, 128), (256, 128), (32, 2048)]
    ]
    for row in rows:
        t, m = row["segment_length"], row["memory_length"]
        row["cpu_seconds"] = 3e-5 * t + 2e-9 * t * (t + m)
    a, b, r2 = fit_law(rows)
    assert a == pytest.approx(3e-5) and b == pytest.approx(2e-9)
    assert r2 == pytest.approx(1.0)


def _train_row(phase, dtype, tokens, cpu_tokens, mfu=None, dropout=0.1):
    return {
        "benchmark": "train_eval",
        "backend": "tensorflow",
        "size": "reference",
        "dtype": dtype,
        "phase": phase,
        "jit_compile": "auto",
        "resolved_jit_compile": False,
        "steps_per_execution": 1,
        "dropout": dropout,
        "tokens_per_s": tokens,
        "tokens_per_cpu_s_x_cores": cpu_tokens,
        "mfu": mfu,
        "mfu_cpu": mfu,
        "median_execution_ms": 1.0,
        "max_execution_ms": 2.0,
        "peak_rss_mib": 1.0,
        "loadavg_1min": 1.0,
    }


def _peer(peer, phase, tokens, cpu_tokens):
    return {
        "benchmark": "peer",
        "peer": peer,
        "phase": phase,
        "tokens_per_s": tokens,
        "tokens_per_cpu_s_x_cores": cpu_tokens,
        "torch": "2.13.0",
    }


def _generation(backend, tokens, cpu_tokens):
    return {
        "benchmark": "generation_length",
        "backend": backend,
        "rows": [
            {
                "new_tokens": 256,
                "ms_per_token": 1.0,
                "tokens_per_s": tokens,
                "tokens_per_cpu_s_x_cores": cpu_tokens,
                "cost_ratio_to_first": 1.0,
            }
        ],
    }


def _paper_eval(implementation, backend, mode, tokens, cpu_tokens):
    return {
        "benchmark": "paper_eval",
        "implementation": implementation,
        "backend": backend,
        "mode": mode,
        "tokens_per_s": tokens,
        "tokens_per_cpu_s_x_cores": cpu_tokens,
    }


def section(spec, results):
    """A section of the document, as `run_all.render` writes it."""
    return run_all.section(spec, results)


def test_goals_table_says_which_goal_is_met():
    results = [
        _train_row("train", "float32", 4000.0, 4500.0, mfu=0.65),
        _train_row("train", "mixed_bfloat16", 5000.0, 7000.0),
        # Faster without dropout, but the peer trains with 0.1: not a goal.
        _train_row("train", "mixed_bfloat16", 9000.0, 9000.0, dropout=0.0),
        _train_row("eval", "mixed_bfloat16", 15000.0, 20000.0),
        _generation("jax", 900.0, 1000.0),
        _peer("authors_pytorch", "train", 2000.0, 2000.0),
        _peer("authors_pytorch", "eval", 7000.0, 7000.0),
        _peer("huggingface_transfo_xl", "generate", 250.0, 400.0),
        _paper_eval("keras_txl", "tensorflow", "kv_reuse", 300.0, 600.0),
        _paper_eval("keras_txl", "jax", "plain", 200.0, 500.0),
        _paper_eval("authors", "torch", "authors_eval", 100.0, 100.0),
    ]
    lines = section(run_all.SECTIONS[0], results).splitlines()
    fp32, bf16, jax_train, evaluation, paper, jax_gen, tf_gen = lines[2:9]
    assert "3.00x / 6.00x" in paper and "yes / yes" in paper
    assert "tensorflow kv_reuse" in paper
    assert "yes / yes" in fp32
    assert "2.50x / 3.50x" in bf16 and "no / yes" in bf16
    assert "not run" in jax_train  # no JAX training row
    assert "2.14x / 2.86x" in evaluation and "no / no" in evaluation
    assert "3.60x / 2.50x" in jax_gen and "yes / no" in jax_gen
    assert "not run" in tf_gen
    peers = section(run_all.SECTIONS[2], results)
    assert "| train | 2,000 | 2,000 |" in peers


def test_goals_without_peers_say_not_measured():
    results = [
        _train_row("train", "mixed_bfloat16", 5000.0, 7000.0),
        _generation("tensorflow", 900.0, 1000.0),
    ]
    table = section(run_all.SECTIONS[0], results)
    bf16 = [line for line in table.splitlines() if "bf16" in line][0]
    assert "5,000 / 7,000 | not measured |" in bf16
    generate = [line for line in table.splitlines() if "tensorflow" in line]
    assert "not measured" in generate[0]
    assert "not measured" in section(run_all.SECTIONS[2], results)
    # No constant stands in for a peer.
    assert not hasattr(run_all, "GOAL_BF16_TRAIN")


def test_peers_run_with_their_own_python():
    jobs = run_all.suite(
        True,
        ["jax"],
        peer_python="/peers/bin/python",
        authors_code="/peers/transformer-xl",
    )
    peers = [j for j in jobs if j["module"] == "peers"]
    assert peers and peers[0]["python"] == "/peers/bin/python"
    assert "/peers/transformer-xl" in peers[0]["args"]
    assert not [
        j for j in run_all.suite(True, ["jax"]) if j["module"] == "peers"
    ]


def test_document_keeps_text_outside_the_markers(tmp_path):
    path = tmp_path / "benchmarks.md"
    path.write_text(
        f"# Title\n\nhand-written\n\n{run_all.BEGIN}\nold\n{run_all.END}\n"
        "after\n"
    )
    run_all.write_doc(str(path), f"{run_all.BEGIN}\nnew\n{run_all.END}")
    text = path.read_text()
    assert "hand-written" in text and "after" in text
    assert "new" in text and "old" not in text


@pytest.mark.backend_dependent
@pytest.mark.torch_ok
def test_matmul_throughput_is_positive():
    result = throughput.matmul_throughput("float32", (32, 16, 8), seconds=0.05)
    assert result["gflops_per_s"] > 0
    assert result["gflops_per_cpu_s_x_cores"] > 0


def test_with_keras_dropout_turns_every_packed_dropout_back():
    import keras

    from benchmarks.ab import with_keras_dropout
    from keras_txl.layers.packed_dropout import PackedDropout
    from tests.tiny_models import tiny_lm

    lm = tiny_lm(dropout=0.1, num_layers=2, build=True)

    def dropouts(kind):
        return [
            layer
            for layer in lm._flatten_layers(include_self=False)
            if type(layer) is kind
        ]

    # Per block: attention probabilities, attention output, feed-forward
    # inner and output; and the backbone's embedding, position, output.
    assert len(dropouts(PackedDropout)) == 2 * 4 + 3
    assert with_keras_dropout(lm) == 2 * 4 + 3
    assert not dropouts(PackedDropout)
    assert len(dropouts(keras.layers.Dropout)) == 2 * 4 + 3


def test_generation_profile_counts_each_loop_body():
    from benchmarks.generation import loop_bodies

    hlo = """HloModule m

%body.1 (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]) parameter(0)
  %a = f32[4]{0} fusion(%x), kind=kLoop, calls=%f
  %b = f32[4]{0} fusion(%a), kind=kLoop, calls=%g
  %c = f32[4]{0} dot(%a, %b), lhs_contracting_dims={0}
  ROOT %t = (s32[], f32[4]) tuple(%i, %c)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %w = (s32[], f32[4]) while(%init), condition=%cond.1, body=%body.1
}
"""
    ((name, opcodes),) = loop_bodies(hlo)
    assert name == "body.1"
    assert opcodes == {"parameter": 1, "fusion": 2, "dot": 1, "tuple": 1}


def test_limits_table_shows_both_profiles():
    profile = {
        "benchmark": "generation_profile",
        "backend": "tensorflow",
        "loop_ms_per_token_cpu": 3.05,
        "loop_ms_per_token_wall": 2.74,
        "module_dots": 140,
        "module_instructions": 4413,
        "while_bodies": [{"instructions": 190}, {"instructions": 254}],
        "load": 1.2,
    }
    dropout = {
        "benchmark": "packed_dropout",
        "variant": "packed",
        "cpu_ms_per_step": 1612.7,
        "tokens_per_cpu_s_x_cores": 2540.0,
        "cpu_time_vs_keras_dropout": 0.9123,
    }
    table = section(run_all.SECTIONS[1], [profile, dropout])
    assert "| tensorflow | 3.05 | 2.74 | 140 | 4413 | 190, 254 | 1.2 |" in table
    assert "| packed | 1613 | 2,540 | 0.91 |" in table
    assert section(run_all.SECTIONS[1], []) == "(not run)"


def test_run_all_runs_every_benchmark_script_or_says_why_not():
    everything = dict(variants=True, peer_python="p", authors_code="a")
    backends = ["tensorflow", "jax", "torch"]
    jobs = run_all.suite(False, backends, **everything)
    jobs += run_all.suite(True, backends, **everything)
    scripts = {
        name[: -len(".py")]
        for name in os.listdir(os.path.join(run_all.ROOT, "benchmarks"))
        if name.endswith(".py")
    }
    helpers = {"__init__", "common", "goals", "run_all"}
    not_run = scripts - helpers - {j["module"] for j in jobs}
    assert not_run == set(run_all.RUN_ALONE)


def test_run_all_measures_pieces_and_serving_files_quick_or_not():
    for quick in (False, True):
        jobs = run_all.suite(quick, ["tensorflow", "jax", "torch"])
        pieces = [j for j in jobs if j["module"] == "streaming_pieces"]
        serving = [j for j in jobs if j["module"] == "serving_runtimes"]
        # Where a new length compiles again; torch compiles nothing.
        assert [j["backend"] for j in pieces] == ["tensorflow", "jax"]
        assert [j["backend"] for j in serving] == ["tensorflow"]
        assert all(("--pieces" in j["args"]) == quick for j in pieces)
        assert ("--sizes" in serving[0]["args"]) == quick
    # ... and the document has a table of each.
    titles = {spec["title"].split(" (")[0]: spec for spec in run_all.SECTIONS}
    piece = dict(benchmark="streaming_pieces", backend="jax", call="score")
    piece.update(pad_to_bucket=True, pieces=30, ratio=1.234)
    piece.update(one_length_s=0.5, random_lengths_s=0.6, loadavg_1min=2.0)
    table = section(titles["Pieces of any length: bucketed and not"], [piece])
    assert "| jax | score | True | 30 | 0.50 | 0.60 | 1.2x | 2.0 |" in table
    files = dict(benchmark="serving_runtimes", size="tiny", runtime="onnx")
    files.update(size_mb=2.1, ms_per_segment=41.2, ms_per_token=1.05)
    files.update(segment_ratio=7.7, token_ratio=0.04, loadavg_1min=20.0)
    serving = titles["SavedModel, LiteRT and ONNX Runtime, batch 1"]
    table = section(serving, [files])
    row = "| tiny | onnx | 2.10 | 41.2 | 1.05 | 7.70x | 0.04x | 20.0 |"
    assert row in table
