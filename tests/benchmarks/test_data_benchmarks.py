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


class _Counted:
    """Iterates over `dataset`, counting the batches taken."""

    def __init__(self, dataset):
        self.dataset, self.batches = dataset, 0

    def __iter__(self):
        for batch in self.dataset:
            self.batches += 1
            yield batch


def test_input_benchmark_reads_every_batch():
    import numpy as np

    from keras_txl.data import segment_dataset

    dataset = segment_dataset(np.arange(1000) % 7, 4, 8, vocabulary_size=7)
    # 4 streams of 250 tokens: 31 segments of 8 (+ 1 target) each.
    assert len(list(dataset)) == 31
    counted = _Counted(dataset)
    assert input_pipeline._read_all(counted) > 0
    assert counted.batches == 31
