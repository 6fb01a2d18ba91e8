import json
import os
import subprocess
import sys

import pytest

from benchmarks import common
from benchmarks import throughput as gpu_pass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def test_quick_pass_writes_the_json_and_table(tmp_path):
    out, table = tmp_path / "pass.json", tmp_path / "pass.md"
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.throughput", "gpu", "--quick"]
        + ["--backends", "tensorflow", "--json", str(out)]
        + ["--markdown", str(table)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    saved = json.loads(out.read_text())
    rows = saved["results"]
    assert {(r["dtype"], r["phase"]) for r in rows} == {
        (dtype, phase)
        for dtype in ("float32", "mixed_bfloat16")
        for phase in ("train", "eval")
    }
    micro = common.BENCHMARK_SIZES["micro"]
    device = gpu_pass.gpu_name()  # None on a machine without a GPU
    for r in rows:
        assert r["backend"] == "tensorflow" and r["tokens_per_s"] > 0
        expected = (
            common.training_flops_per_token(**micro)
            if r["phase"] == "train"
            else common.forward_flops_per_token(**micro)
        )
        assert r["flops_per_token"] == expected
        # On a CPU machine there is no device and no peak; on a GPU the pass
        # names the GPU nvidia-smi reports and divides by its table peak.
        peak = gpu_pass.peak_tflops(device, r["dtype"])
        assert r["device"] == device and r["peak_tflops"] == peak
        if peak is None:
            assert r["mfu"] is None
        else:
            assert r["mfu"] == pytest.approx(r["tflops_per_s"] / peak)
    assert saved["device"] == device
    assert [n["tf32_tokens_per_s"] for n in saved["nvidia_a100_base"]] == [
        41527,
        34244,
    ]
    text = table.read_text()
    assert "41,527 / 34,244" in text and "59,961 / 36,455" in text


def test_peaks_by_device_name_and_mfu():
    assert gpu_pass.peak_tflops("NVIDIA H200", "mixed_bfloat16") == 989.4
    assert gpu_pass.peak_tflops("NVIDIA H100 PCIe", "float32") == 378.0
    assert gpu_pass.peak_tflops("NVIDIA H100 80GB HBM3", "float32") == 494.7
    assert gpu_pass.peak_tflops("NVIDIA A100-SXM4-80GB", "bfloat16") == 312
    assert gpu_pass.peak_tflops("Tesla T4", "float32") is None
    rows = gpu_pass.add_mfu(
        [{"dtype": "mixed_bfloat16", "tflops_per_s": 156.0}], "A100"
    )
    assert rows[0]["mfu"] == 0.5 and rows[0]["peak_kind"] == "bf16"


def test_refuses_to_run_without_a_gpu(monkeypatch):
    monkeypatch.setattr(gpu_pass, "gpu_name", lambda: None)
    with pytest.raises(SystemExit, match="no NVIDIA GPU found"):
        gpu_pass.main(["gpu", "--backends", "tensorflow"])
