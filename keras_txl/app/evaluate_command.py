"""`keras-txl evaluate`: bits per character of a saved model on a whole
text."""

import os

from keras_txl.app import artifacts
from keras_txl.app.text_segments import eval_batch_size
from keras_txl.app.text_segments import ordered_segments
from keras_txl.app.text_segments import token_unit
from keras_txl.app.train_config import ConfigError
from keras_txl.training.evaluation import evaluate_bpc
from keras_txl.training.evaluation import evaluate_segments
from keras_txl.utils import run_folder


def evaluate(
    model_dir,
    corpus=None,
    memory_length=None,
    segment_length=None,
    batch_size=None,
    metrics_json=None,
    dataset=None,
    split=None,
    verbose=1,
    log=print,
    clamp_length=None,
    same_length=None,
    memory_start=None,
    dynamic=None,
    token_losses=None,
):
    """Bits per character of a saved model on a whole text, with memory.

    The paper's protocol: the whole split as ordered segments, the memory
    carried from segment to segment (longer than in training by default:
    the run's `eval_memory_length`), with a progress bar. The text is
    tokenized once into the token cache and memory-mapped.

    Args:
        model_dir: the `--output` folder of a `keras-txl train` run (or
            any keras-hub preset of a `TransformerXLCausalLM`).
        corpus: path of the text to score (all of it), or with `dataset`
            the local copy of the benchmark (`None`: downloaded).
        memory_length: evaluation memory; `None`: the run's
            `eval_memory_length`.
        segment_length: `None`: the run's segment length.
        batch_size: number of streams (`--streams`). `None`: one stream
            for a `corpus` file alone (a document read once, left to
            right, as `TransformerXLCausalLM.score` reads it); else the
            run's batch size (fewer streams if the text is short).
        metrics_json: optional path of a JSON file for the results.
        dataset: optional name of `keras_txl.data.corpora.CORPORA` (`"enwik8"`,
            ...; `"builtin"` with `corpus`: the text file the run held
            `valid_fraction` of): score its `split` instead of a file.
        split: `"valid"`, `"test"` or `None` (test when the corpus has
            one, as the benchmarks; else the validation text, e.g. of a
            text file the run held `valid_fraction` of) of `dataset`.
        verbose: Keras verbosity of the evaluation (1: a progress bar).
        log: function that prints a line.
        clamp_length, same_length, memory_start: the paper's evaluation
            protocol. If any is set, the text is scored by
            `keras_txl.training.evaluation.evaluate_segments` (explicit
            memory from `memory_start`, `"empty"` by default; `None` keeps
            the model's `clamp_length` / `same_length`).
        dynamic: optional dict of `keras_txl.app.dynamic_report.
            evaluate_dynamic` arguments (`method`, `learning_rate`,
            `decay`, `segments_per_update`): static and dynamic
            evaluation side by side (one stream unless `batch_size`);
            returns their `{"text", "static", "dynamic"}`.
        token_losses: optional path of a file for the loss (nats) of every
            token scored: `.npy` (float32 `(streams, n - 1)`), else one
            number a line, stream after stream.

    With neither `corpus` nor `dataset`, the run folder alone says what to
    score: the run's own corpus (its `dataset` and `corpus` in
    `config.json`), with the run's tokenizer, segment length, batch size
    and evaluation memory.

    Returns:
        The `evaluate_bpc` (or `evaluate_segments`) dict, with `tokens`
        and `text` (what was scored).
    """
    from keras_txl import data
    from keras_txl.data.token_cache import token_cache_writes

    lm = artifacts.load_model(model_dir)
    tokenizer = artifacts.load_tokenizer(model_dir)
    run_config = run_folder.read_run_config(model_dir)
    if dataset is None and corpus is None:
        # The run folder alone: the corpus the run was trained on.
        dataset = run_config.get("dataset", "builtin")
        corpus = run_config.get("corpus")
    training_ids = None
    if dataset is not None:
        if split not in (None, "valid", "test"):
            raise ConfigError(
                f"--split must be valid or test. Received: {split!r}"
            )
        # The token cache keeps the corpus a run trained on, nothing else.
        trained_on = (dataset, corpus) == (
            run_config.get("dataset", "builtin"),
            run_config.get("corpus"),
        )
        pending = token_cache_writes(store=trained_on, log=log)
        try:
            with pending.active():
                splits = data.corpus_ids(
                    tokenizer,
                    data.load_corpus(
                        dataset,
                        corpus,
                        valid_fraction=run_config.get("valid_fraction", 0.1),
                    ),
                    log=log,
                )
            pending.commit()
        finally:
            pending.discard()
        if split is None:
            split = "test" if len(splits.test) else "valid"
        ids = getattr(splits, split)
        if not len(ids):
            raise ConfigError(
                f"The {dataset} corpus has no {split} part: use --split "
                "valid, or --corpus FILE."
            )
        name = f"{dataset} {split}"
        training_ids = splits.train
    else:
        with token_cache_writes(store=False).active():  # one-off text
            text = data.load_corpus("builtin", corpus, valid_fraction=0.0)
            ids = data.corpus_ids(tokenizer, text.train, log=log)
        name = os.fspath(corpus)
    length = segment_length or run_config.get("segment_length", 64)
    if memory_length is None:
        memory_length = run_config.get(
            "eval_memory_length", lm.backbone.memory_length
        )
    if dynamic is not None:
        from keras_txl.app.dynamic_report import evaluate_dynamic

        result = evaluate_dynamic(
            lm,
            ids,
            name,
            segment_length=length,
            memory_length=memory_length,
            batch_size=batch_size,
            training_ids=training_ids,
            clamp_length=clamp_length,
            same_length=same_length,
            start=memory_start,
            unit=token_unit(tokenizer),
            log=log,
            **dynamic,
        )
        artifacts.write_metrics(result, None, metrics_json)
        return result
    # A text file is one document: read once, with its memory, unless
    # --streams cuts it.
    document = dataset is None
    if document:
        rows = batch_size or 1
    else:
        rows = eval_batch_size(
            len(ids), batch_size or run_config.get("batch_size", 16), length
        )
    log(
        f"Evaluating {name}: {len(ids):,} tokens, {rows} "
        f"stream{'s' if rows > 1 else ''}, segments of {length}, memory "
        f"{memory_length}."
    )
    if rows > 1:
        log(
            f"Each of the {rows} streams starts from an empty memory: "
            f"{rows} cold starts instead of one (a higher loss), for "
            f"{rows} segments per step. --streams 1 reads the text once."
        )
    explicit = (clamp_length, same_length, memory_start, token_losses)
    if document or explicit != (None,) * 4:
        result = evaluate_segments(
            lm,
            ids,
            rows,
            length,
            memory_length,
            clamp_length=clamp_length,
            same_length=same_length,
            start=memory_start or "empty",
            log=log,
            return_token_losses=token_losses is not None,
        )
        if token_losses is not None:
            _write_token_losses(token_losses, result.pop("token_losses"))
            log(f"Wrote the loss of every token to {token_losses}")
    else:
        dataset_ = ordered_segments(
            ids, rows, length, int(tokenizer.vocabulary_size()), "evaluation"
        )
        result = evaluate_bpc(lm, dataset_, memory_length, verbose=verbose)
    result.setdefault("tokens", int(len(ids)))
    result["text"] = name
    log(
        f"{name}: {result['bits_per_character']:.4f} bits per "
        f"{token_unit(tokenizer)}, "
        f"perplexity {result['perplexity']:.3f} (memory {memory_length}, "
        f"segments of {length}, {len(ids):,} tokens)"
    )
    artifacts.write_metrics(result, None, metrics_json)
    return result


def _write_token_losses(path, losses):
    """Per-token losses `(streams, n)` to `.npy`, or one a line."""
    import numpy as np

    path = os.fspath(path)
    if path.endswith(".npy"):
        np.save(path, losses.astype("float32"))
    else:
        np.savetxt(path, losses.reshape(-1), fmt="%.6f")
