"""`keras-txl evaluate`: bits per character of a saved model on a whole
text. Its flags import nothing heavy; `evaluate` loads Keras.

    keras-txl evaluate DIR [--corpus FILE] [--memory-length M]
        [--segment-length T --clamp-length C --same-length tensorflow
         --memory-start zeros]     # the paper's protocol
    keras-txl evaluate DIR --dataset enwik8 [--corpus LOCAL_COPY] [--split test]
    keras-txl evaluate DIR --streams 4 --strategy mirrored --num-devices 2
    keras-txl evaluate DIR --strategy multiworker   # on every TF_CONFIG worker
"""

import contextlib
import os

from keras_txl_cli.choices import DATASETS
from keras_txl_cli.choices import ConfigError
from keras_txl_cli.choices import integer
from keras_txl_cli.console import progress_flag
from keras_txl_cli.console import progress_verbosity
from keras_txl_cli.strategy_flags import add_strategy_arguments


def add_parser(subparsers):
    """Adds `evaluate` to `subparsers` (the `keras-txl` subcommands)."""
    parser = subparsers.add_parser(
        "evaluate",
        help="bits per character of a saved model on a text",
        description="Scores a text with a saved run. With the run folder "
        "alone: the run's own corpus (its test part when it has one, else "
        "its validation text) with the run's tokenizer, segment length, "
        "batch size and evaluation memory.",
    )
    parser.add_argument("model_dir", metavar="MODEL_DIR")
    parser.add_argument(
        "--corpus",
        help="text file (all of it), or with --dataset the local copy of "
        "the benchmark",
    )
    parser.add_argument(
        "--dataset",
        choices=DATASETS,
        help="score a split of this corpus (builtin: the --corpus file "
        "split as in training) instead of a whole file",
    )
    parser.add_argument(
        "--split",
        choices=("valid", "test"),
        help="split of --dataset or of the run's corpus (default: test "
        "when there is one, else valid)",
    )
    parser.add_argument(
        "--memory-length",
        type=integer(0),
        help="default: the run's evaluation memory length",
    )
    parser.add_argument("--segment-length", type=integer(1))
    parser.add_argument(
        "--streams",
        "--batch-size",
        dest="batch_size",
        type=integer(1),
        help="parallel streams the text is cut into (default: 1 for "
        "--corpus FILE, read once with its memory; else the run's batch "
        "size). Each stream starts without memory: faster, a higher loss",
    )
    parser.add_argument("--metrics-json", metavar="FILE")
    parser.add_argument(
        "--token-losses",
        metavar="FILE",
        help="write the loss (nats) of every token: .npy, else one a line",
    )
    # The paper's protocol (docs/pretrained.md): any of these scores the
    # text with an explicit memory, as the authors' evaluation does.
    parser.add_argument(
        "--clamp-length",
        type=integer(-1),
        help="clamp relative distances (the authors' clamp_len; -1: none)",
    )
    parser.add_argument(
        "--same-length",
        choices=("off", "pytorch", "tensorflow"),
        help="every query sees as many keys (the authors' same_length, "
        "with the mask of their PyTorch or TensorFlow code)",
    )
    parser.add_argument(
        "--memory-start",
        choices=("empty", "zeros"),
        help="zeros: the memory starts as mem_len zero vectors that are "
        "attended to (the authors' TensorFlow code, HuggingFace)",
    )
    dynamic = parser.add_argument_group(
        "dynamic evaluation (Krause et al., 2019)",
        "a gradient step on each segment once it is scored; prints static "
        "and dynamic results side by side (one stream unless --batch-size)",
    )
    dynamic.add_argument(
        "--dynamic",
        choices=("sgd", "rms"),
        help="sgd: plain steps; rms: steps scaled by the gradients' RMS "
        "(from the run's training text), decaying to the saved weights",
    )
    dynamic.add_argument(
        "--dynamic-learning-rate",
        type=float,
        help="default: 0.03 (sgd), 0.0001 (rms)",
    )
    dynamic.add_argument("--dynamic-decay", type=float, default=0.0)
    dynamic.add_argument(
        "--dynamic-segments-per-update", type=integer(1), default=1
    )
    add_strategy_arguments(
        parser, "how the streams (a multiple of the replicas) are spread"
    )
    parser.add_argument(
        "--progress",
        **progress_flag(
            "bar: a progress bar when the run's own corpus is scored; "
            "lines: one line per tenth of the text or per pass"
        ),
    )
    parser.set_defaults(run=run)


def run(args):
    """Runs `keras-txl evaluate` (Keras is imported by now)."""
    evaluate(
        args.model_dir,
        args.corpus,
        memory_length=args.memory_length,
        segment_length=args.segment_length,
        batch_size=args.batch_size,
        metrics_json=args.metrics_json,
        clamp_length=args.clamp_length,
        same_length={"off": False, None: None}.get(
            args.same_length, args.same_length
        ),
        memory_start=args.memory_start,
        dataset=args.dataset,
        split=args.split,
        dynamic=None
        if args.dynamic is None
        else dict(
            method=args.dynamic,
            learning_rate=args.dynamic_learning_rate,
            decay=args.dynamic_decay,
            segments_per_update=args.dynamic_segments_per_update,
        ),
        token_losses=args.token_losses,
        verbose=progress_verbosity(args.progress),
        strategy=args.strategy,
        num_devices=args.num_devices,
        tpu=args.tpu,
    )
    return 0


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
    strategy="none",
    num_devices=None,
    tpu=None,
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
        verbose: Keras verbosity of the evaluation: 1 a progress bar, 2
            plain lines (one per tenth of a text file), 0 the results
            only.
        log: function that prints a line.
        clamp_length, same_length, memory_start: the paper's evaluation
            protocol. If any is set, the text is scored by
            `keras_txl.training.evaluation.evaluate_segments` (explicit
            memory from `memory_start`, `"empty"` by default; `None` keeps
            the model's `clamp_length` / `same_length`).
        dynamic: optional dict of `keras_txl_cli.dynamic_report.
            evaluate_dynamic` arguments (`method`, `learning_rate`,
            `decay`, `segments_per_update`): static and dynamic
            evaluation side by side (one stream unless `batch_size`);
            returns their `{"text", "static", "dynamic"}`.
        token_losses: optional path of a file for the loss (nats) of every
            token scored: `.npy` (float32 `(streams, n - 1)`), else one
            number a line, stream after stream.
        strategy, num_devices, tpu: the devices, as `keras-txl train`'s
            (`keras_txl_cli.strategy_flags`): the replicas of a strategy
            share the streams, each carrying the memory of its own, with
            the result of one device (`evaluate_bpc(strategy=)`,
            `score(strategy=)`). The streams must be a multiple of the
            replicas; not with `dynamic`. Set up first: call `evaluate`
            before any other work of the engine in the process. On
            several processes (JAX's `KERAS_DISTRIBUTION_*`, TensorFlow's
            `TF_CONFIG`, as `keras-txl train`) every process runs the
            same command and gets the whole result; the primary one
            writes `metrics_json` and `token_losses`.

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
    from keras_txl.training.evaluation import evaluate_bpc
    from keras_txl.training.evaluation import evaluate_segments
    from keras_txl.utils import processes
    from keras_txl.utils import run_folder
    from keras_txl_cli import artifacts
    from keras_txl_cli.strategy_flags import make_command_strategy
    from keras_txl_cli.text_segments import eval_batch_size
    from keras_txl_cli.text_segments import ordered_segments
    from keras_txl_cli.text_segments import token_unit

    replicas = make_command_strategy(strategy, num_devices, tpu)
    if replicas is not None and dynamic is not None:
        raise ConfigError(
            "--dynamic updates the weights after each segment on one "
            f"device, not in a strategy. Drop --strategy {strategy}."
        )
    with contextlib.nullcontext() if replicas is None else replicas.scope():
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
        _warn_unknown(tokenizer, corpus)
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
        from keras_txl_cli.dynamic_report import evaluate_dynamic

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
    if replicas is not None:
        # Fewer streams than asked: each holds 4 segments at least.
        fewer = not document and rows < (batch_size or rows + 1)
        _check_streams(rows, replicas, f" ({len(ids):,} tokens)" * fewer)
        log(
            f"{rows // replicas.num_replicas} stream(s) on each of "
            f"{replicas.num_replicas} replicas, strategy {strategy!r}."
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
            log=log if verbose else None,
            return_token_losses=token_losses is not None,
            strategy=replicas,
        )
        if token_losses is not None:
            losses = result.pop("token_losses")
            if processes.is_primary():
                _write_token_losses(token_losses, losses)
                log(f"Wrote the loss of every token to {token_losses}")
    else:
        dataset_ = ordered_segments(
            ids, rows, length, int(tokenizer.vocabulary_size()), "evaluation"
        )
        result = evaluate_bpc(
            lm, dataset_, memory_length, verbose=verbose, strategy=replicas
        )
    result.setdefault("tokens", int(len(ids)))
    result["text"] = name
    log(
        f"{name}: {result['bits_per_character']:.4f} bits per "
        f"{token_unit(tokenizer)}, "
        f"perplexity {result['perplexity']:.3f} (memory {memory_length}, "
        f"segments of {length}, {len(ids):,} tokens)"
    )
    # (Of several processes, each holding every result, the primary one
    # writes the files.)
    metrics_json = metrics_json if processes.is_primary() else None
    artifacts.write_metrics(result, None, metrics_json)
    return result


def _check_streams(rows, strategy, short=""):
    """Raises `ConfigError` unless the replicas share the streams;
    `short`: the text's length in words when it gave fewer streams than
    asked."""
    replicas = strategy.num_replicas
    if not rows % replicas:
        return
    fix = (
        f"Use --streams {strategy.nearest_multiples(rows)} (each stream "
        "starts without memory)"
    )
    if short:
        fix = (
            "It is too short for more (a stream holds 4 segments or "
            "more): score a longer text"
        )
    raise ConfigError(
        f"--strategy {strategy.name} gives each of its {replicas} "
        f"replicas the same number of streams, and the text{short} is "
        f"cut into {rows}. {fix}, or drop --strategy to read it on one "
        "device."
    )


def _warn_unknown(tokenizer, path):
    """One line on stderr, as `generate` prints for a prompt, naming the
    characters (or words) of the text file `path` that the run's
    vocabulary lacks. The file is read a million characters at a time
    (lines whole, so that no word is cut)."""
    import sys

    from keras_txl_cli.sampling import unknown_in_prompt
    from keras_txl_cli.sampling import unknown_notice

    found, oov_token = {}, None
    with open(path, encoding="utf-8", errors="replace") as file:
        while True:
            chunk = file.read(2**20)
            chunk += file.readline()
            if not chunk:
                break
            unknown, oov_token = unknown_in_prompt(tokenizer, chunk)
            found.update(dict.fromkeys(unknown))
    if found and oov_token is not None:  # else tokenizing names them
        unknown = list(found)
        if hasattr(tokenizer, "unknown_characters"):
            unknown = sorted(unknown)  # in code point order, as generate
        line = unknown_notice(
            "evaluate", f"'{os.fspath(path)}'", tokenizer, unknown, oov_token
        )
        print(line, file=sys.stderr)


def _write_token_losses(path, losses):
    """Per-token losses `(streams, n)` to `.npy`, or one a line."""
    import numpy as np

    path = os.fspath(path)
    if path.endswith(".npy"):
        np.save(path, losses.astype("float32"))
    else:
        np.savetxt(path, losses.reshape(-1), fmt="%.6f")
