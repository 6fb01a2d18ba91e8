"""The runs of the `keras-txl` command: train, evaluate and generate.

Each function takes plain arguments, prints its progress through `log`
and returns its results as a dict, so that the command line
(`keras_txl.app.cli`) only parses options and reports errors.
"""

import contextlib
import dataclasses
import math
import os
import signal
import threading
import time

import keras

from keras_txl.app import artifacts
from keras_txl.app.plots import plot_bpc_vs_memory
from keras_txl.app.plots import plot_training_curve
from keras_txl.app.presets import PRESETS
from keras_txl.app.presets import build_language_model
from keras_txl.app.sampling import generate_text
from keras_txl.app.sampling import make_sampler
from keras_txl.app.sampling import prompt_as_read
from keras_txl.app.train_config import ConfigError
from keras_txl.app.train_config import TrainConfig
from keras_txl.distribute import memory_budget
from keras_txl.models.memory_reset import MemoryReset
from keras_txl.training.evaluation import evaluate_bpc
from keras_txl.training.evaluation import evaluate_segments
from keras_txl.training.nan_guard import NanGuard
from keras_txl.training.periodic_validation import PeriodicValidation
from keras_txl.training.schedules import transformer_xl_optimizer
from keras_txl.training.step_csv_logger import StepCSVLogger
from keras_txl.training.step_history import StepHistory
from keras_txl.training.stop_on_signal import StopOnSignal
from keras_txl.training.training_checkpoint import TrainingCheckpoint
from keras_txl.training.training_diverged import TrainingDiverged
from keras_txl.training.training_interrupted import TrainingInterrupted
from keras_txl.utils.atomic_folder import AtomicFolder

METRICS_FILE = "metrics.json"
STEPS_CSV = "steps.csv"  # one row per training step (or execution)
CURVE_PNG = "training_curve.png"
MEMORY_PNG = "bpc_vs_memory.png"
SAMPLE_TOKENS = 200  # tokens of the sample printed after training
PROMPT_TOKENS = 40  # validation tokens that prompt the sample
# Scored by `keras-txl convert` (WikiText-103's tokenization).
CHECK_SENTENCE = (
    "The tower is 324 metres ( 1,063 ft ) tall , about the same height as "
    "an 81 @-@ storey building , and the tallest structure in Paris ."
)


def load_corpus(config, tokenizer=None, log=print):
    """`CorpusIds(tokenizer, train, valid, test)` of the run's corpus:
    files are tokenized once into the token cache and memory-mapped."""
    from keras_txl import data

    return data.load_corpus_ids(
        config.dataset,
        config.corpus,
        kind=config.tokenizer,
        valid_fraction=config.valid_fraction,
        tokenizer=tokenizer,
        log=log,
    )


def _corpus_name(config):
    if config.corpus is not None:
        return os.path.basename(os.fspath(config.corpus))
    return f"{config.dataset} corpus"


def eval_batch_size(num_tokens, batch_size, segment_length):
    """Streams for evaluation: at most `batch_size`, each of at least four
    segments when the text allows it (so that the memory has context)."""
    return max(1, min(batch_size, (num_tokens - 1) // (4 * segment_length)))


def eval_memory_lengths(config):
    """The memory lengths of the bpc-against-memory table: `0, T/4, T, 2T,
    4T`, the training and the evaluation memory lengths."""
    t = config.segment_length
    lengths = {0, t // 4, t, 2 * t, 4 * t}
    lengths |= {config.memory_length, config.eval_memory_length}
    return sorted(lengths)


def _segments(token_ids, batch_size, segment_length, vocabulary_size, part):
    from keras_txl import data

    try:
        data.segment_info(len(token_ids), batch_size, segment_length)
    except data.CorpusError as error:
        raise data.CorpusError(f"The {part} text is too short. {error}")
    return data.segment_dataset(
        token_ids,
        batch_size,
        segment_length,
        vocabulary_size=vocabulary_size,
    )


# What a run folder may hold: `--overwrite` replaces such a folder whole.
RUN_ENTRIES = frozenset(
    (
        artifacts.CHECKPOINT_DIR,
        artifacts.TOKENIZER_DIR,
        artifacts.ASSETS_DIR,
        artifacts.MODEL_FILE,
        artifacts.CONFIG_FILE,
        METRICS_FILE,
        STEPS_CSV,
        CURVE_PNG,
        MEMORY_PNG,
    )
    + artifacts.PRESET_FILES
)


def _prepare_output(config):
    """The `AtomicFolder` a run writes: `--output` itself when resumed,
    else a temporary folder beside it that the first checkpoint puts in
    place (`--overwrite`: the old run stays whole until then)."""
    output = config.output
    if os.path.exists(output) and not os.path.isdir(output):
        raise ConfigError(f"--output '{output}' is a file, not a folder.")
    checkpoint = os.path.join(output, artifacts.CHECKPOINT_DIR)
    if config.resume:
        if not os.path.isdir(checkpoint):
            raise ConfigError(
                f"Nothing to resume in '{output}': it holds no checkpoint. "
                "Start the run without --resume."
            )
        return AtomicFolder(output, in_place=True)
    if os.path.isdir(output):
        has_model = artifacts.is_preset(output) or os.path.exists(
            os.path.join(output, artifacts.MODEL_FILE)
        )
        if (has_model or os.path.exists(checkpoint)) and not config.overwrite:
            raise ConfigError(
                f"'{output}' already holds a model. Pass --resume to "
                "continue its run, --overwrite to replace it, or another "
                "--output."
            )
        foreign = sorted(
            name
            for name in os.listdir(output)
            if name not in RUN_ENTRIES
            and ".tmp" not in name
            and ".partial" not in name
        )
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if foreign[3:] else "")
            raise ConfigError(
                f"'{output}' holds files that are not a run's ({shown}); a "
                "run replaces its folder whole. Move them, or pick another "
                "--output."
            )
    tensorboard = config.tensorboard and os.path.abspath(config.tensorboard)
    if tensorboard and tensorboard.startswith(
        os.path.join(os.path.abspath(output), "")
    ):
        raise ConfigError(
            f"--tensorboard '{config.tensorboard}' is inside --output "
            f"'{output}', which a new run replaces whole: pick a folder "
            "beside it."
        )
    return AtomicFolder(output)


def make_run_strategy(config):
    """The devices and the `ReplicaStrategy` of a run, or `None` for
    strategy `"none"` (one device: no strategy scope).

    Calls `keras_txl.distribute.configure_devices` first, so it must run
    before any operation of the engine in the process (device counts are
    fixed when the engine starts), then `make_strategy`; raises a
    `ValueError` if the global batch does not split between the replicas.
    """
    from keras_txl import distribute

    distribute.configure_devices(config.strategy, config.num_devices)
    if config.strategy == "none":
        return None
    strategy = distribute.make_strategy(
        config.strategy, config.num_devices, tpu=config.tpu
    )
    strategy.per_replica_batch_size(config.batch_size)
    return strategy


def _scope(strategy):
    # One device (strategy "none"): no scope, as without `keras_txl.distribute`.
    return contextlib.nullcontext() if strategy is None else strategy.scope()


def fit_language_model(config, callbacks=(), log=print):
    """The training half of `train`: data, model, `fit` with checkpoints.

    Args:
        config: a `TrainConfig` (see `train`).
        callbacks: extra Keras callbacks for `fit`.
        log: function that prints a line.

    Returns:
        A dict: `lm`, `tokenizer`, `splits`, `config` (resolved),
        `run_config` (saved with the run), `history` (`StepHistory`),
        `valid_ids`, `valid_data`, `train_ids`, `train_seconds`,
        `finished` (False when a callback stopped `fit` early: the
        checkpoint then holds the step reached), `validation` (the
        rows of `--validate-every`) and `folder` (the run's
        `AtomicFolder`, in place).

    A new run writes into a temporary folder beside `config.output`; its
    first checkpoint puts it in place (with `overwrite`, the old run is
    untouched until then). A run that fails before it leaves the file
    system as it was (`keras_txl.utils.atomic_folder.AtomicFolder`).
    SIGINT and SIGTERM stop `fit` after the current step, whose checkpoint
    is written; `TrainingInterrupted` is then raised.

    Every step is written to `OUTPUT/steps.csv` (`StepCSVLogger`), and to
    TensorBoard logs with `config.tensorboard`.
    """
    config, strategy, folder = _resolve_run(config)
    try:
        return _fit(config, strategy, folder, callbacks, log)
    except BaseException:
        folder.discard()  # nothing of a run without a checkpoint stays
        raise


def _fit(config, strategy, folder, callbacks, log):
    from keras_txl.data.token_cache import PendingWrites

    # The token cache's new entries are kept with the first checkpoint.
    pending = PendingWrites(log=log)
    try:
        with pending.active():
            run_data = _RunData.load(config, folder, log)
        return _fit_loaded(
            config, strategy, folder, run_data, pending, callbacks, log
        )
    finally:
        pending.discard()  # what the first checkpoint did not commit


def _fit_loaded(config, strategy, folder, run_data, pending, callbacks, log):
    lm, run_config = _compiled_model(config, strategy, run_data, log)
    if strategy is not None:
        with _scope(strategy):
            run_data.train = strategy.distribute_dataset(run_data.train)
    start_step, losses = 0, []
    if config.resume:
        with _scope(strategy):
            state = TrainingCheckpoint.restore(
                lm,
                folder.join(artifacts.CHECKPOINT_DIR),
                config.batch_size,
                strategy,
            )
        start_step, losses = state["step"], state["train_loss"]
        log(f"Resuming at step {start_step} of {config.steps}.")
    # Written once the checkpoint (when resuming) has loaded.
    artifacts.write_json(folder.join(artifacts.CONFIG_FILE), run_config)
    history = StepHistory(
        config.batch_size * config.segment_length,
        initial_step=start_step,
        total_steps=config.steps,
        losses=losses,
    )
    logging, validation = _logging_callbacks(
        config, folder, history, run_data.valid, start_step, log
    )
    train_seconds = 0.0
    guard = NanGuard(verbose=False)
    stop = StopOnSignal()

    def put_in_place(checkpoint):
        # The first checkpoint puts a new run's folder in place, and the
        # token cache's entries of its corpus.
        pending.commit()
        folder.commit()
        checkpoint.directory = folder.join(artifacts.CHECKPOINT_DIR)

    checkpoint = TrainingCheckpoint(
        folder.join(artifacts.CHECKPOINT_DIR),
        history,
        run_config,
        strategy,
        on_save=put_in_place,
    )
    if start_step < config.steps:
        per_epoch = min(config.steps_per_epoch, config.steps)
        fit_started = time.perf_counter()
        with _scope(strategy):
            lm.fit(
                run_data.train.repeat().skip(start_step),
                steps_per_epoch=per_epoch,
                epochs=math.ceil(config.steps / per_epoch),
                initial_epoch=start_step // per_epoch,
                verbose=config.verbose,
                shuffle=False,
                callbacks=[
                    MemoryReset(
                        run_data.steps_per_pass, initial_step=start_step
                    ),
                    history,
                    guard,
                    stop,
                    checkpoint,
                    *logging,
                    *callbacks,
                ],
            )
        train_seconds = time.perf_counter() - fit_started
    if guard.step is not None:
        raise _diverged(guard, checkpoint, start_step, config)
    finished = history.step >= config.steps
    where = f"`keras-txl train --output {config.output} --resume`"
    if stop.signal is not None:
        raise TrainingInterrupted(
            f"stopped by {stop.signal_name} after step {history.step} of "
            f"{config.steps}; its checkpoint is saved: {where} continues "
            "the run.",
            signal=stop.signal,
            step=history.step,
        )
    if not finished:
        # A callback stopped the run; its checkpoint is the step reached.
        log(
            f"Stopped at step {history.step} of {config.steps}: continue "
            f"with {where}."
        )
    return {
        "lm": lm,
        "tokenizer": run_data.corpus.tokenizer,
        "corpus": run_data.corpus,
        "config": config,
        "run_config": run_config,
        "history": history,
        "train_ids": run_data.corpus.train,
        "valid_ids": run_data.valid_ids,
        "valid_data": run_data.valid,
        "train_seconds": train_seconds,
        "finished": finished,
        "validation": [] if validation is None else validation.results,
        "folder": folder,
    }


def _resolve_run(config):
    """`(config, strategy, folder)` of a new or resumed run: a resumed run
    takes its saved configuration, merged with the flags that may change
    (`TrainConfig.merged_for_resume`); `folder` is the `AtomicFolder` it
    writes (`_prepare_output`)."""
    config.check_run_flags()
    if config.resume:
        folder = _prepare_output(config)
        saved = TrainingCheckpoint.read_state(
            folder.join(artifacts.CHECKPOINT_DIR)
        )
        config = config.merged_for_resume(saved["config"]).resolved()
        strategy = make_run_strategy(config)
    else:
        config = config.resolved()
        strategy = make_run_strategy(config)
        folder = _prepare_output(config)
    return config, strategy, folder


@dataclasses.dataclass
class _RunData:
    """The corpus of a run and its ordered segments."""

    corpus: object  # `keras_txl.data.CorpusIds`
    valid_ids: object  # at most `config.valid_tokens`
    train: object  # tf.data of (inputs, targets) batches
    valid: object
    steps_per_pass: int

    @property
    def vocabulary_size(self):
        return int(self.corpus.tokenizer.vocabulary_size())

    @classmethod
    def load(cls, config, folder, log):
        """Reads the corpus (the run's saved tokenizer when resuming, else
        a new one, saved in `folder`) and cuts it into ordered segments."""
        from keras_txl import data

        batch, length = config.batch_size, config.segment_length
        loading = time.perf_counter()
        corpus = load_corpus(
            config,
            artifacts.load_tokenizer(folder.path) if config.resume else None,
            log,
        )
        if not config.resume:
            artifacts.save_tokenizer(corpus.tokenizer, folder.path)
        vocabulary_size = int(corpus.tokenizer.vocabulary_size())
        valid_ids = corpus.valid
        if config.valid_tokens and len(valid_ids) > config.valid_tokens:
            valid_ids = valid_ids[: config.valid_tokens]
        valid_batch = eval_batch_size(len(valid_ids), batch, length)
        run_data = cls(
            corpus=corpus,
            valid_ids=valid_ids,
            train=_segments(
                corpus.train, batch, length, vocabulary_size, "training"
            ),
            valid=_segments(
                valid_ids, valid_batch, length, vocabulary_size, "validation"
            ),
            steps_per_pass=data.num_batches(len(corpus.train), batch, length),
        )
        log(
            f"Corpus: {len(corpus.train):,} training and "
            f"{len(corpus.valid):,} validation tokens ({config.tokenizer}, "
            f"vocabulary {vocabulary_size}; ready in "
            f"{time.perf_counter() - loading:.1f} s); "
            f"{run_data.steps_per_pass} steps per pass."
        )
        return run_data


def _compiled_model(config, strategy, run_data, log):
    """The run's language model, compiled (under `strategy`), and the run
    configuration saved beside it (`config.json`)."""
    batch = config.batch_size
    vocabulary_size = run_data.vocabulary_size
    with _scope(strategy):
        keras.utils.set_random_seed(config.seed)
        lm = build_language_model(config, vocabulary_size)
        lm.compile(
            optimizer=transformer_xl_optimizer(
                config.learning_rate,
                total_steps=config.steps,
                warmup_steps=config.warmup_steps,
            ),
            jit_compile=config.jit_compile,
            steps_per_execution=config.steps_per_execution,
        )
        lm.build()  # its weights, for the budget below
        if strategy is not None:
            strategy.build_memory(lm, batch)
    replicas = 1 if strategy is None else strategy.num_replicas
    budget = memory_budget(
        lm,
        batch,
        config.segment_length,
        replicas=replicas,
        dtype=config.dtype_policy,
    )
    log(
        f"Memory per replica: {budget['total'] / 2**20:,.1f} MiB estimated "
        f"(keras_txl.distribute.memory_budget), {budget['per_replica_batch']} "
        f"of {batch} streams on each of {replicas} replica(s), strategy "
        f"'{config.strategy}'."
    )
    run_config = dict(
        config.to_dict(),
        vocabulary_size=vocabulary_size,
        model=PRESETS[config.preset]["model"],
        resolved_jit_compile=bool(lm.jit_compile),
    )
    log(
        f"Precision {config.dtype_policy}, jit_compile {config.jit_compile} "
        f"({'compiled' if lm.jit_compile else 'not compiled'}), "
        f"{config.steps_per_execution} step(s) per execution."
    )
    return lm, run_config


def _logging_callbacks(config, folder, history, valid_data, start, log):
    """`(callbacks, validation)`: the step CSV (a resumed run keeps its
    rows up to `start`, the checkpoint's step), validation every
    `--validate-every` steps (`validation`, else None) and TensorBoard."""
    logging = [
        StepCSVLogger(
            folder.join(STEPS_CSV),
            history,
            append=config.resume,
            from_step=start if config.resume else None,
        )
    ]
    validation = None
    if config.validate_every:
        validation = PeriodicValidation(
            valid_data,
            config.validate_every,
            history,
            memory_length=config.memory_length,
            verbose=1 if config.verbose == 1 else 0,
            log=log,
        )
        logging.insert(0, validation)
    if config.tensorboard:
        logging.append(
            keras.callbacks.TensorBoard(config.tensorboard, update_freq=1)
        )
        log(f"TensorBoard logs: tensorboard --logdir {config.tensorboard}")
    return logging, validation


def _diverged(guard, checkpoint, start_step, config):
    """The `TrainingDiverged` error of a run that `guard` stopped."""
    step = start_step + guard.step
    kept = checkpoint.saved_step
    if kept is None and config.resume:
        kept = start_step
    where = f"--output {config.output}"
    if kept is None:
        # The run's folder is discarded: `--overwrite` only if another run
        # is there.
        again = " --overwrite" if os.path.exists(config.output) else ""
        advice = (
            "no checkpoint was written before it: start again with a lower "
            f"--learning-rate (now {config.learning_rate}) and {where}"
            f"{again}"
        )
    else:
        advice = (
            f"the checkpoint of step {kept} is kept: `keras-txl train "
            f"{where} --resume` continues from it, or start again with a "
            f"lower --learning-rate (now {config.learning_rate}) and "
            "--overwrite"
        )
    return TrainingDiverged(
        f"training diverged: loss {guard.loss} at step {step} of "
        f"{config.steps}; {advice}.",
        step=step,
        checkpoint_step=kept,
    )


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM raises `TrainingInterrupted` (exit status 143) instead of
    ending the process where it stands, so that a run stopped outside
    `fit` (reading its corpus, validating) cleans up as after Ctrl-C;
    inside `fit`, `StopOnSignal` stops it after the current step."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(number, frame):
        raise TrainingInterrupted(
            "stopped by SIGTERM.", signal=number, step=None
        )

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def train(config, callbacks=(), log=print):
    """Trains a model as `keras-txl train` does and saves it.

    Args:
        config: a `TrainConfig` (fields left at `None` take the preset's
            defaults). With `resume=True`, the configuration saved in
            `config.output` is used and options given here must match it.
        callbacks: extra Keras callbacks for `fit`.
        log: function that prints a line.

    Returns:
        The metrics dict (also written to `OUTPUT/metrics.json` and to
        `config.metrics_json`); only `steps` and `train_loss` when a
        callback stopped the run early.
    """
    from keras_txl import data

    started = time.perf_counter()
    run = fit_language_model(config, callbacks, log)
    history = run["history"]
    if not run["finished"]:
        return {"steps": history.step, "train_loss": history.losses}
    lm, tokenizer, corpus = run["lm"], run["tokenizer"], run["corpus"]
    config, run_config = run["config"], run["run_config"]
    valid_ids, valid_data = run["valid_ids"], run["valid_data"]
    output, length = run["folder"].path, config.segment_length

    budget = (
        f"the first {len(valid_ids):,} of {len(corpus.valid):,} tokens "
        "(--valid-tokens 0: all)"
        if len(valid_ids) < len(corpus.valid)
        else f"{len(valid_ids):,} tokens"
    )
    log(f"Validation ({budget}, segments of {length}):")
    table = []
    verbose = min(config.verbose, 1)
    lengths = eval_memory_lengths(config)
    for number, memory_length in enumerate(lengths, 1):
        if verbose:
            log(f"  [{number}/{len(lengths)}] memory {memory_length}:")
        row = evaluate_bpc(lm, valid_data, memory_length, verbose=verbose)
        table.append(row)
        log(
            f"  memory {memory_length:5d}: "
            f"{row['bits_per_character']:.4f} bits per "
            f"{token_unit(tokenizer)}, perplexity {row['perplexity']:.3f}"
        )
    by_length = {row["memory_length"]: row for row in table}
    with_memory = by_length[config.eval_memory_length]
    without_memory = by_length[0]
    log(
        f"Validation bpc with memory ({config.eval_memory_length}): "
        f"{with_memory['bits_per_character']:.4f}; without memory: "
        f"{without_memory['bits_per_character']:.4f}"
    )

    artifacts.save_model(lm, output, tokenizer, sequence_length=length)
    plot_training_curve(
        history.losses,
        os.path.join(output, CURVE_PNG),
        title=f"{config.preset} model, {_corpus_name(config)}",
    )
    plot_bpc_vs_memory(
        table,
        os.path.join(output, MEMORY_PNG),
        length,
        config.memory_length,
    )
    prompt_ids = (
        corpus.valid[:PROMPT_TOKENS]
        if len(corpus.valid)
        else (corpus.train[:PROMPT_TOKENS])
    )
    prompt = data.decode(tokenizer, prompt_ids)
    sample = generate_text(
        lm,
        tokenizer,
        prompt,
        max_length=len(data.encode(tokenizer, prompt)) + SAMPLE_TOKENS,
        sampler=make_sampler("top_k", seed=config.seed),
        memory_length=config.eval_memory_length or None,
    )
    log(f"Sample:\n{prompt}{sample}")
    metrics = {
        "steps": config.steps,
        "train_loss": history.losses,
        "tokens_per_second": history.tokens_per_second,
        "valid_bpc_with_memory": with_memory["bits_per_character"],
        "valid_bpc_without_memory": without_memory["bits_per_character"],
        "valid_perplexity_with_memory": with_memory["perplexity"],
        "valid_perplexity_without_memory": without_memory["perplexity"],
        "eval_memory_length": config.eval_memory_length,
        "bpc_by_memory_length": table,
        "train_tokens": int(len(run["train_ids"])),
        "valid_tokens": int(len(valid_ids)),
        "train_seconds": run["train_seconds"],
        "wall_seconds": time.perf_counter() - started,
        "backend": keras.backend.backend(),
        "dtype_policy": config.dtype_policy,
        "jit_compile": config.jit_compile,
        "resolved_jit_compile": bool(lm.jit_compile),
        "steps_per_execution": config.steps_per_execution,
        "validation_during_training": run["validation"],
        "sample": prompt + sample,
        "config": run_config,
    }
    _write_metrics(metrics, output, config.metrics_json)
    log(
        f"Saved the model and its tokenizer as a keras-hub preset in "
        f"{config.output} (TransformerXLCausalLM.from_preset("
        f"'{config.output}'))."
    )
    return metrics


def _write_metrics(metrics, output, metrics_json):
    if output is not None:
        artifacts.write_json(os.path.join(output, METRICS_FILE), metrics)
    if metrics_json:
        artifacts.write_json(metrics_json, metrics)


def _run_config(model_dir):
    path = os.path.join(os.fspath(model_dir), artifacts.CONFIG_FILE)
    return artifacts.read_json(path) if os.path.exists(path) else {}


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
        dataset: optional `"enwik8"`, `"text8"`, `"wikitext103"` or
            `"builtin"` (with `corpus`: the text file the run held
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

    lm = artifacts.load_model(model_dir)
    tokenizer = artifacts.load_tokenizer(model_dir)
    run_config = _run_config(model_dir)
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
        pending = data.PendingWrites(store=trained_on, log=log)
        try:
            with pending.active():
                splits = data.load_corpus_ids(
                    dataset,
                    corpus,
                    valid_fraction=run_config.get("valid_fraction", 0.1),
                    tokenizer=tokenizer,
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
        source = data.TextSource(os.path.abspath(os.fspath(corpus)))
        with data.PendingWrites(store=False).active():  # a one-off text
            ids = data.cached_token_ids(tokenizer, source, log=log)
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
            log=log,
            **dynamic,
        )
        _write_metrics(result, None, metrics_json)
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
        dataset_ = _segments(
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
    _write_metrics(result, None, metrics_json)
    return result


def token_unit(tokenizer):
    """What one token of `tokenizer` is, for "bits per ...": `"byte"`,
    `"character"`, `"word"` or `"token"`."""
    import keras_hub

    from keras_txl import data
    from keras_txl.models import TransformerXLTokenizer

    tokenizers = keras_hub.tokenizers
    if isinstance(tokenizer, tokenizers.ByteTokenizer):
        return "byte"
    if isinstance(
        tokenizer,
        (data.CharacterTokenizer, tokenizers.UnicodeCodepointTokenizer),
    ):
        return "character"
    if isinstance(
        tokenizer, (tokenizers.WordPieceTokenizer, TransformerXLTokenizer)
    ):
        return "word"
    return "token"


def _write_token_losses(path, losses):
    """Per-token losses `(streams, n)` to `.npy`, or one a line."""
    import numpy as np

    path = os.fspath(path)
    if path.endswith(".npy"):
        np.save(path, losses.astype("float32"))
    else:
        np.savetxt(path, losses.reshape(-1), fmt="%.6f")


def generate(
    model_dir,
    prompt,
    max_length=200,
    sampler="top_k",
    top_k=None,
    top_p=None,
    memory_length=None,
    seed=0,
    log=print,
):
    """Text from a saved model with `TransformerXLCausalLM.generate`:
    prints `prompt` and its continuation.

    Args:
        model_dir: the `--output` folder of a `keras-txl train` run.
        prompt: str of at least one token (of the run's tokenizer).
        max_length: int. Tokens of prompt and continuation together (the
            `max_length` of `keras_hub.models.CausalLM.generate`).
        sampler, top_k, top_p, seed: the keras-hub sampler and its
            parameters (see `keras_txl.app.sampling.make_sampler`).
        memory_length: int >= 1 or `None`: tokens each new token attends
            to; `None` takes the run's `eval_memory_length` (the model's
            memory length if it is 0).
        log: function that prints a line.

    Returns:
        The generated text (without the prompt).
    """
    chosen = make_sampler(sampler, top_k=top_k, top_p=top_p, seed=seed)
    lm = artifacts.load_model(model_dir)
    tokenizer = artifacts.load_tokenizer(model_dir)
    if memory_length is None:
        memory_length = _run_config(model_dir).get("eval_memory_length")
    text = generate_text(
        lm,
        tokenizer,
        prompt,
        max_length,
        sampler=chosen,
        memory_length=memory_length or None,
    )
    log(prompt_as_read(tokenizer, prompt) + text)
    return text


def sentence_log_probabilities(lm, sentence):
    """Log-probability of each token of `sentence` after the ones before
    it (float64 array of length tokens - 1), from an empty memory: with
    `lm.preprocessor`'s tokenizer, or for a model without one the ids
    `0, 1, 2, ...` (modulo the vocabulary)."""
    import numpy as np

    from keras_txl import data

    vocabulary_size = lm.backbone.vocabulary_size
    if lm.preprocessor is not None:
        ids = data.encode(lm.preprocessor.tokenizer, sentence)
    else:
        ids = np.arange(len(sentence.split())) % vocabulary_size
    ids = np.asarray(ids, "int32")[None]  # (1, tokens)
    logits, _ = lm.call_with_memory(ids[:, :-1])
    logits = keras.ops.convert_to_numpy(logits).astype("float64")[0]
    logits = logits - logits.max(-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return log_probs[np.arange(ids.shape[1] - 1), ids[0, 1:]]


def convert(source, out_dir, overwrite=False, log=print):
    """`keras-txl convert`: a checkpoint into a keras-hub preset.

    Args:
        source: what `TransformerXLCausalLM.from_preset` takes: a
            HuggingFace Transformer-XL folder or `hf://` handle, a folder
            of the authors' TensorFlow checkpoint with its `config.json`,
            or a keras-hub preset.
        out_dir: the preset folder to write.
        overwrite: bool. Replace a preset already in `out_dir`.
        log: function that prints a line.

    Returns:
        A dict: `tokens` (scored), `mean_log_probability` (nats per token,
        converted model) and `max_difference` (largest difference of a
        token's log-probability between the converted model and the preset
        loaded back from `out_dir`).
    """
    import numpy as np

    from keras_txl.models import TransformerXLCausalLM

    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConfigError(f"OUT_DIR '{out_dir}' is a file, not a folder.")
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        if not artifacts.is_preset(out_dir):
            raise ConfigError(
                f"'{out_dir}' holds files that are not a keras-hub preset: "
                "pick an empty or new folder."
            )
        if not overwrite:
            raise ConfigError(
                f"'{out_dir}' already holds a preset. Pass --overwrite to "
                "replace it, or another OUT_DIR."
            )
    lm = TransformerXLCausalLM.from_preset(source)
    expected = sentence_log_probabilities(lm, CHECK_SENTENCE)
    # Written beside OUT_DIR, checked, then put in place whole: a failed
    # conversion leaves OUT_DIR (and a preset there) as it was.
    with AtomicFolder(out_dir) as folder:
        artifacts.save_model(lm, folder.path)
        loaded = TransformerXLCausalLM.from_preset(folder.path)
        got = sentence_log_probabilities(loaded, CHECK_SENTENCE)
        _check_converted(got, expected, out_dir)
    difference = float(np.max(np.abs(got - expected)))
    finite = bool(np.all(np.isfinite(expected)))
    result = {
        "tokens": int(expected.size),
        "mean_log_probability": float(np.mean(expected)),
        "max_difference": difference,
    }
    tokenizer = "with its tokenizer" if lm.preprocessor else "no tokenizer"
    log(
        f"Converted {source} to {out_dir} ({tokenizer}). Check: "
        f"{expected.size} tokens of a built-in sentence, mean log-probability "
        f"{result['mean_log_probability']:.4f} nats "
        f"({'finite' if finite else 'NOT FINITE'}), "
        f"max |difference| after reloading the preset {difference:.2e}."
    )
    return result


def _check_converted(got, expected, out_dir):
    import numpy as np

    difference = float(np.max(np.abs(got - expected)))
    if not np.all(np.isfinite(expected)) or difference > 1e-5:
        raise ValueError(
            "The converted model's log-probabilities are not finite or "
            f"change when its preset is loaded back ({difference:.2e}); "
            f"nothing was written to '{out_dir}'."
        )


__all__ = [
    "TrainConfig",
    "convert",
    "evaluate",
    "fit_language_model",
    "generate",
    "train",
]
