from benchmarks import data_memory
from benchmarks import input_pipeline


def test_fit_line_and_generated_text(tmp_path):
    slope, intercept = data_memory.fit_line([(0, 1.0), (2, 5.0), (4, 9.0)])
    assert (slope, intercept) == (2.0, 1.0)
    path = tmp_path / "text.txt"
    written = data_memory.make_text(path, 50_000)
    text = path.read_text(encoding="utf-8")
    assert written == len(text.encode("utf-8")) >= 50_000
    assert text.endswith("\n") and len(set(text.split())) > 1000


def test_input_benchmark_reads_every_batch():
    import numpy as np

    from keras_txl.data import segment_dataset

    dataset = segment_dataset(np.arange(1000) % 7, 4, 8, vocabulary_size=7)
    assert input_pipeline._read_all(dataset) > 0
