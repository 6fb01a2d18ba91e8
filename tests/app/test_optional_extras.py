"""Each optional feature without its package: one line that names the
extra to install, never a traceback (matplotlib: `plot`, TensorBoard:
`tensorboard`, pyarrow: `wikitext`, sacremoses: `pretrained`,
tensorflow-text: `tensorflow`). `sys.modules[name] = None` makes
`import name` raise ImportError, as on a machine without the package.

The whole path of a user without matplotlib (a wheel installed with only
the `jax` extra) runs in CI: `.ci/wheel_check`."""

import doctest
import json
import sys

import pytest

from keras_txl.utils import missing_extra_error
from keras_txl.utils.missing_extra_error import MissingExtraError
from keras_txl.utils.missing_extra_error import import_extra
from keras_txl_cli.cli import main

TEXT = (
    "The quick brown fox jumps over the lazy dog. "
    "Pack my box with five dozen liquor jugs. "
) * 4
# A short run of the main job: every step of it, in seconds.
SHORT_RUN = [
    "--size",
    "tiny",
    "--steps",
    "2",
    "--segment-length",
    "8",
    "--batch-size",
    "2",
    "--memory-length",
    "8",
    "--eval-memory-length",
    "8",
    "--sample-tokens",
    "0",
    "--seed",
    "0",
]


def _block(monkeypatch, *names):
    """`import name` of each of `names` raises ImportError."""
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def _one_line(text, extra):
    """The one line of `text` that names `pip install 'keras-txl[extra]'`;
    fails on a traceback or on a second such line."""
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if f"[{extra}]" in line]
    assert len(lines) == 1, text
    assert f"pip install 'keras-txl[{extra}]'" in lines[0], lines
    return lines[0]


def test_the_error_names_the_module_and_the_extra():
    error = MissingExtraError("pyarrow", "wikitext", "Reading Parquet")
    assert str(error) == (
        "Reading Parquet needs pyarrow: pip install 'keras-txl[wikitext]'."
    )
    assert (error.module, error.extra, error.name) == (
        "pyarrow",
        "wikitext",
        "pyarrow",
    )
    assert isinstance(error, ImportError)  # `except ImportError` sees it
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for test in finder.find(missing_extra_error):
        runner.run(test)
    assert runner.summarize(verbose=False) == (0, 4), "doctest failed"


def test_import_extra_names_the_top_package_of_a_missing_module(
    monkeypatch,
):
    _block(monkeypatch, "pyarrow", "pyarrow.parquet")
    with pytest.raises(MissingExtraError) as info:
        import_extra("pyarrow.parquet", "wikitext", "Reading Parquet")
    assert info.value.module == "pyarrow"
    assert isinstance(info.value.__cause__, ImportError)


def test_train_without_matplotlib_saves_the_run_and_says_so(
    tmp_path, monkeypatch, capsys
):
    _block(monkeypatch, "matplotlib", "matplotlib.pyplot")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    output = tmp_path / "run"
    argv = ["train", "--corpus", str(corpus), "--output", str(output)]
    status = main(argv + SHORT_RUN)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    line = _one_line(captured.out + captured.err, "plot")
    assert "training_curve.png" in line and "matplotlib" in line, line
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["steps"] == 2
    assert (output / "task.json").is_file()  # the preset is saved
    assert not list(output.glob("*.png"))


def test_tensorboard_without_tensorboard_is_one_line(
    tmp_path, monkeypatch, capsys
):
    _block(monkeypatch, "tensorboard")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    output = tmp_path / "run"
    argv = ["train", "--corpus", str(corpus), "--output", str(output)]
    argv += ["--tensorboard", str(tmp_path / "tb")]
    status = main(argv + SHORT_RUN)
    captured = capsys.readouterr()
    assert status == 1
    assert captured.err.startswith("keras-txl train: error: --tensorboard")
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    _one_line(captured.err, "tensorboard")
    assert not (tmp_path / "tb").exists() and not output.exists()


def test_wikitext_parquet_without_pyarrow_is_one_line(
    tmp_path, monkeypatch, capsys
):
    _block(monkeypatch, "pyarrow", "pyarrow.parquet")
    folder = tmp_path / "wikitext-103-v1"
    folder.mkdir()
    for split in ("train", "validation", "test"):
        (folder / f"{split}-00000-of-00001.parquet").write_bytes(b"PAR1")
    argv = ["train", "--dataset", "wikitext103", "--corpus", str(folder)]
    status = main(argv + ["--output", str(tmp_path / "run")] + SHORT_RUN)
    captured = capsys.readouterr()
    assert status == 1
    assert captured.err.startswith("keras-txl train: error: Reading"), (
        captured.err
    )
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    _one_line(captured.err, "wikitext")


def test_word_tokenizer_without_sacremoses_names_the_extra(monkeypatch):
    from keras_txl.models import TransformerXLTokenizer

    tokenizer = TransformerXLTokenizer(["<eos>", "<unk>", "the", "cat"])
    _block(monkeypatch, "sacremoses")
    with pytest.raises(MissingExtraError) as info:
        tokenizer.tokenize("the cat")
    _one_line(str(info.value), "pretrained")
    assert "TransformerXLTokenizer" in str(info.value)


def test_text_pipeline_without_tensorflow_text_names_the_extra(monkeypatch):
    from keras_txl.data import text_pipeline

    _block(monkeypatch, "tensorflow_text")
    with pytest.raises(MissingExtraError) as info:
        text_pipeline._tensorflow_text()
    _one_line(str(info.value), "tensorflow")
