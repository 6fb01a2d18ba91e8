import numpy as np
import pytest

from keras_txl.data import corpus_ids
from keras_txl.data import load_corpus
from keras_txl.data import make_tokenizer
from keras_txl.data import one_billion_word_dataset
from keras_txl.data import segment_dataset
from keras_txl.data.one_billion_word import ARCHIVE_FOLDER
from keras_txl.data.one_billion_word import HELDOUT_FILE
from keras_txl.data.one_billion_word import HELDOUT_FOLDER
from keras_txl.data.one_billion_word import TRAIN_FOLDER
from keras_txl.data.one_billion_word import _shuffled_sentences
from keras_txl.data.text_source import CorpusError
from keras_txl.data.tokenization import encode

WORDS = [f"w{i}" for i in range(40)]


def _sentences(rng, count):
    return [
        " ".join(rng.choice(WORDS, rng.integers(2, 9))) for _ in range(count)
    ]


@pytest.fixture
def fake_layout(tmp_path):
    """The official layout with 3 training shards of 60 sentences."""
    rng = np.random.default_rng(0)
    root = tmp_path / ARCHIVE_FOLDER
    (root / TRAIN_FOLDER).mkdir(parents=True)
    (root / HELDOUT_FOLDER).mkdir()
    shards = {}
    for number in (1, 2, 3):
        lines = _sentences(rng, 60)
        name = f"news.en-{number:05d}-of-00100"
        (root / TRAIN_FOLDER / name).write_text("\n".join(lines) + "\n")
        shards[name] = lines
    heldout = _sentences(rng, 30)
    (root / HELDOUT_FOLDER / HELDOUT_FILE).write_text("\n".join(heldout) + "\n")
    return tmp_path, shards, heldout


def _load(path):
    return load_corpus("one_billion_word", path)


def test_files_and_tokenizers(fake_layout, tmp_path):
    path, shards, _ = fake_layout
    files = _load(path)
    assert _load(path / ARCHIVE_FOLDER) == files
    assert [s.path.rsplit("/", 1)[1] for s in files.train] == list(shards)
    assert files.valid == files.test and files.valid.path.endswith(HELDOUT_FILE)
    assert files.word_list is None
    with open(files.valid.path, "a") as file:
        file.write("heldout_only w1\n")
    counted = make_tokenizer("word", files, token_cache_dir=tmp_path)
    vocabulary = counted.get_vocabulary()
    assert vocabulary[:2] == ["<unk>", "<eos>"]
    assert set(vocabulary[2:]) <= set(WORDS)
    # Counted over the training shards alone, as the authors do: a word
    # of the held-out shard only is not in it.
    assert "heldout_only" not in vocabulary
    # The benchmark's vocabulary file: first column, its own specials out.
    (path / "1b_word_vocab.txt").write_text(
        "<S> 9\n</S> 9\n<UNK> 9\nw3 5\nw1 4\n"
    )
    files = _load(path)
    tokenizer = make_tokenizer("word", files)
    assert tokenizer.get_vocabulary() == ["<unk>", "<eos>", "w3", "w1"]
    assert encode(tokenizer, "w1 w2 w3\n").tolist() == [3, 0, 2, 1]
    capped = make_tokenizer("word", files, vocabulary_size=3)
    assert capped.get_vocabulary() == ["<unk>", "<eos>", "w3"]
    with pytest.raises(CorpusError, match="One Billion Word layout"):
        _load(tmp_path / "nowhere")


def test_shuffled_sentences_keeps_sentences_whole():
    ids = np.array([5, 6, 1, 7, 1, 8, 9, 9, 1, 4, 1])
    out = _shuffled_sentences(ids, 1, np.random.default_rng(3))
    pieces = sorted(
        tuple(p) for p in np.split(out, np.flatnonzero(out == 1) + 1) if len(p)
    )
    assert pieces == sorted([(5, 6, 1), (7, 1), (8, 9, 9, 1), (4, 1)])


def test_dataset_reads_shuffled_whole_sentences(fake_layout, tmp_path):
    path, shards, _ = fake_layout
    files = _load(path)
    tokenizer = make_tokenizer("word", files, token_cache_dir=tmp_path)
    eos = tokenizer.token_to_id("<eos>")
    known = {
        tuple(encode(tokenizer, line + "\n"))
        for lines in shards.values()
        for line in lines
    }
    dataset = one_billion_word_dataset(
        files, tokenizer, 2, 8, seed=0, token_cache_dir=tmp_path
    )
    first = [(a.numpy(), b.numpy()) for a, b in dataset]
    second = [(a.numpy(), b.numpy()) for a, b in dataset]  # next pass
    again = [
        (a.numpy(), b.numpy())
        for a, b in one_billion_word_dataset(
            files, tokenizer, 2, 8, seed=0, token_cache_dir=tmp_path
        )
    ]
    assert len(first) > 10 and first[0][0].shape == (2, 8)
    assert all((x[0] == y[0]).all() for x, y in zip(first, again))
    assert not all((x[0] == y[0]).all() for x, y in zip(first, second))
    for inputs, targets in first:
        np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])
    # Row 0 reads whole sentences of the shards, one after the other
    # (a shard's last, cut sentence joins the next shard's first one).
    row = np.concatenate([inputs[0] for inputs, _ in first])
    sentences = np.split(row, np.flatnonzero(row == eos) + 1)[:-1]
    assert len(sentences) > 10
    unknown = [s for s in sentences if tuple(s) not in known]
    assert len(unknown) <= len(files.train) - 1


def test_trains_through_the_adaptive_softmax(fake_layout, tmp_path):
    import keras

    from tests.tiny_models import tiny_lm

    path, _, heldout = fake_layout
    files = _load(path)
    tokenizer = make_tokenizer("word", files, token_cache_dir=tmp_path)
    size = int(tokenizer.vocabulary_size())
    lm = tiny_lm(
        seed=None,
        vocabulary_size=size,
        num_layers=1,
        hidden_dim=16,
        memory_length=8,
        cutoffs=[10, 25],
        div_val=2,
    )
    lm.compile(optimizer=keras.optimizers.Adam(3e-2))
    train = one_billion_word_dataset(
        files, tokenizer, 2, 8, seed=0, token_cache_dir=tmp_path
    )
    valid = corpus_ids(tokenizer, files.valid, tmp_path)
    assert len(valid) == sum(len(line.split()) + 1 for line in heldout)
    # The evaluation copy shares the weights: the same copy scores the
    # heldout text before and after training (compiled once).
    evaluator = lm.with_memory_length(16)
    heldout_segments = segment_dataset(valid, 2, 8, vocabulary_size=size)

    def heldout_loss():
        logs = evaluator.evaluate(heldout_segments, verbose=0, return_dict=True)
        return logs["loss"]

    untrained = heldout_loss()
    softmax = lm.adaptive_softmax.trainable_variables
    before = [np.array(v) for v in softmax]
    history = lm.fit(train.take(3), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][-1])
    # Three steps lower the heldout loss (measured: by 0.13 to 0.17 from
    # about 4.23, over initial weights drawn at random, on JAX).
    assert heldout_loss() < untrained - 0.05
    # Every cluster of the softmax (head and both tails) was trained.
    assert len(softmax) >= 3
    for variable, value in zip(softmax, before):
        assert not np.allclose(np.array(variable), value), variable.path


def test_read_as_every_corpus_is(fake_layout, tmp_path):
    """`keras-txl train --dataset one_billion_word`: the shards one after
    the other, in the benchmark's order, as one training text."""
    path, shards, heldout = fake_layout
    corpus = _load(path)
    tokenizer = make_tokenizer("word", corpus, token_cache_dir=tmp_path)
    ids = corpus_ids(tokenizer, corpus, tmp_path)
    text = "".join("\n".join(lines) + "\n" for lines in shards.values())
    np.testing.assert_array_equal(ids.train, encode(tokenizer, text))
    expected = encode(tokenizer, "\n".join(heldout) + "\n")
    np.testing.assert_array_equal(ids.valid, expected)
    np.testing.assert_array_equal(ids.test, expected)
