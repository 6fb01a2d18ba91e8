"""`keras-txl train`: a training run, from its corpus to its saved
preset, checkpoints, metrics and sample (the other subcommands are the
other `keras_txl_cli.*_command` modules; the names of a run's files are
`keras_txl.utils.run_folder`'s).

Each function takes plain arguments, prints its progress through `log`
and returns its results as a dict, so that the command line
(`keras_txl_cli.cli`) only parses options and reports errors.
"""

import atexit
import contextlib
import dataclasses
import math
import os
import shutil
import signal
import tempfile
import threading
import time

import keras

from keras_txl.distribute import device_budget
from keras_txl.models import MemoryReset
from keras_txl.training.evaluation import evaluate_bpc
from keras_txl.training.nan_guard import NanGuard
from keras_txl.training.nan_guard import TrainingDiverged
from keras_txl.training.periodic_validation import PeriodicValidation
from keras_txl.training.schedules import transformer_xl_optimizer
from keras_txl.training.step_csv_logger import StepCSVLogger
from keras_txl.training.step_history import StepHistory
from keras_txl.training.stop_on_signal import StopOnSignal
from keras_txl.training.stop_on_signal import TrainingInterrupted
from keras_txl.training.training_checkpoint import TrainingCheckpoint
from keras_txl.utils import processes
from keras_txl.utils import run_folder
from keras_txl.utils.atomic_folder import AtomicFolder
from keras_txl.utils.missing_extra_error import MissingExtraError
from keras_txl_cli import artifacts
from keras_txl_cli.choices import ConfigError
from keras_txl_cli.console import printable
from keras_txl_cli.plots import plot_bpc_vs_memory
from keras_txl_cli.plots import plot_training_curve
from keras_txl_cli.sampling import generate_text
from keras_txl_cli.sampling import make_sampler
from keras_txl_cli.sizes import TRAIN_SIZES
from keras_txl_cli.sizes import build_language_model
from keras_txl_cli.strategy_flags import make_command_strategy
from keras_txl_cli.text_segments import eval_batch_size
from keras_txl_cli.text_segments import ordered_segments
from keras_txl_cli.text_segments import token_unit
from keras_txl_cli.train_config import TrainConfig

PROMPT_TOKENS = 40  # validation tokens that prompt the sample
SAMPLE_MARK = "[continued:]"  # where the sample's prompt ends


def load_corpus(config, tokenizer=None, log=print):
    """`CorpusIds(tokenizer, train, valid, test)` of the run's corpus:
    files are tokenized once into the token cache and memory-mapped."""
    from keras_txl import data

    corpus = data.load_corpus(
        config.dataset, config.corpus, valid_fraction=config.valid_fraction
    )
    if tokenizer is None:
        tokenizer = data.make_tokenizer(config.tokenizer, corpus)
    return data.corpus_ids(tokenizer, corpus, log=log)


def _corpus_name(config):
    if config.corpus is not None:
        return os.path.basename(os.fspath(config.corpus))
    return f"{config.dataset} corpus"


def eval_memory_lengths(config):
    """The memory lengths of the bpc-against-memory table, sorted: those of
    `--validation-memory-lengths`, else `0, T/4, T, 2T, 4T` and the
    training memory length; with 0 and the evaluation memory length
    always (the bits per character without and with memory)."""
    lengths = config.validation_memory_lengths
    if lengths is None:
        t = config.segment_length
        lengths = [0, t // 4, t, 2 * t, 4 * t, config.memory_length]
    return sorted({0, config.eval_memory_length, *lengths})


def _prepare_output(config):
    """The `AtomicFolder` a run writes: `--output` itself when resumed,
    else a temporary folder beside it that the first checkpoint puts in
    place (`--overwrite`: the old run stays whole until then).

    Of a run on several processes (JAX), only the primary one writes
    `--output` (the checkpoint's shards aside: every process writes its
    own, `TrainingCheckpoint`): the others check it alike, and write their
    run folder (steps, config) into a temporary folder, removed when the
    process exits."""
    _check_output(config)
    if not processes.is_primary():
        scratch = tempfile.mkdtemp(prefix="keras-txl-process-")
        atexit.register(shutil.rmtree, scratch, True)
        return AtomicFolder(os.path.join(scratch, "run"))
    if config.resume:
        return AtomicFolder(config.output, in_place=True)
    return AtomicFolder(config.output)


def _check_output(config):
    """Raises `ConfigError` when `--output` cannot take this run."""
    output = config.output
    if os.path.exists(output) and not os.path.isdir(output):
        raise ConfigError(f"--output '{output}' is a file, not a folder.")
    checkpoint = os.path.join(output, run_folder.CHECKPOINT_DIR)
    if config.resume:
        if not os.path.isdir(checkpoint):
            raise ConfigError(
                f"Nothing to resume in '{output}': it holds no checkpoint. "
                "Start the run without --resume."
            )
        return
    if os.path.isdir(output):
        has_model = run_folder.has_model(output)
        if (has_model or os.path.exists(checkpoint)) and not config.overwrite:
            raise ConfigError(
                f"'{output}' already holds a model. Pass --resume to "
                "continue its run, --overwrite to replace it, or another "
                "--output."
            )
        foreign = sorted(
            name
            for name in os.listdir(output)
            if name not in run_folder.RUN_ENTRIES
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


def make_run_strategy(config):
    """The devices and the `ReplicaStrategy` of a run, or `None` for
    strategy `"none"` (one device: no strategy scope).

    Calls `keras_txl.distribute.configure_devices` first, so it must run
    before any operation of the engine in the process (device counts are
    fixed when the engine starts), then `make_strategy`; raises a
    `ValueError` if the global batch does not split between the replicas.
    """
    strategy = make_command_strategy(
        config.strategy, config.num_devices, config.tpu
    )
    if strategy is not None:
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
        rows of `--validate-every`), `folder` (the run's
        `AtomicFolder`, in place) and `strategy` (the run's
        `ReplicaStrategy`, `None` for strategy `"none"`).

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
    from keras_txl.data.token_cache import token_cache_writes

    # The token cache's new entries are kept with the first checkpoint.
    pending = token_cache_writes(log=log)
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
                os.path.join(config.output, run_folder.CHECKPOINT_DIR),
                config.batch_size,
                strategy,
            )
        start_step, losses = state["step"], state["train_loss"]
        log(f"Resuming at step {start_step} of {config.steps}.")
    # Written once the checkpoint (when resuming) has loaded.
    artifacts.write_json(folder.join(run_folder.CONFIG_FILE), run_config)
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
        checkpoint.directory = folder.join(run_folder.CHECKPOINT_DIR)

    checkpoint = TrainingCheckpoint(
        folder.join(run_folder.CHECKPOINT_DIR),
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
        "strategy": strategy,
    }


def _resolve_run(config):
    """`(config, strategy, folder)` of a new or resumed run: a resumed run
    takes its saved configuration, merged with the flags that may change
    (`TrainConfig.merged_for_resume`); `folder` is the `AtomicFolder` it
    writes (`_prepare_output`)."""
    config.check_run_flags()
    if config.resume:
        _check_output(config)
        saved = TrainingCheckpoint.read_state(
            os.path.join(config.output, run_folder.CHECKPOINT_DIR)
        )
        config = config.merged_for_resume(saved["config"]).resolved()
        strategy = make_run_strategy(config)
        # (After the strategy: it says which process writes.)
        folder = _prepare_output(config)
    else:
        config = config.resolved()
        strategy = make_run_strategy(config)
        folder = _prepare_output(config)
    return config, strategy, folder


@dataclasses.dataclass
class _RunData:
    """The corpus of a run and its ordered segments."""

    corpus: object  # what `keras_txl.data.corpus_ids` returns
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
        from keras_txl.data.segments import num_batches

        batch, length = config.batch_size, config.segment_length
        loading = time.perf_counter()
        corpus = load_corpus(
            config,
            artifacts.load_tokenizer(config.output) if config.resume else None,
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
            train=ordered_segments(
                corpus.train, batch, length, vocabulary_size, "training"
            ),
            valid=ordered_segments(
                valid_ids, valid_batch, length, vocabulary_size, "validation"
            ),
            steps_per_pass=num_batches(len(corpus.train), batch, length),
        )
        log(
            f"Corpus: {len(corpus.train):,} training and "
            f"{len(corpus.valid):,} validation tokens ({config.tokenizer}, "
            f"vocabulary {vocabulary_size}; ready in "
            f"{time.perf_counter() - loading:.1f} s); "
            f"{run_data.steps_per_pass} steps per pass."
        )
        return run_data


def _metrics(tokenizer):
    """The model's default metrics (`"auto"`), but a word model's bits are
    per word: `fit` logs `bits_per_word`, not `bits_per_character`."""
    if tokenizer != "word":
        return "auto"
    import keras_hub

    from keras_txl.metrics import BatchCrossEntropy
    from keras_txl.metrics import BitsPerCharacter

    return [
        BitsPerCharacter(name="bits_per_word"),
        keras_hub.metrics.Perplexity(from_logits=True),
        BatchCrossEntropy(),
    ]


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
            weighted_metrics=_metrics(config.tokenizer),
        )
        if strategy is not None:
            strategy.build_memory(lm, batch)
    replicas = 1 if strategy is None else strategy.num_replicas
    budget = device_budget(
        lm.backbone.get_config(),
        batch,
        config.segment_length,
        replicas=replicas,
        dtype=config.dtype_policy,
        parameter_count=lm.count_params(),
    )
    log(
        f"Device bytes per replica: {budget['total'] / 2**20:,.1f} MiB "
        f"estimated (keras_txl.distribute.device_budget), "
        f"{budget['per_replica_batch']} "
        f"of {batch} streams on each of {replicas} replica(s), strategy "
        f"'{config.strategy}'."
    )
    run_config = dict(
        config.to_dict(),
        vocabulary_size=vocabulary_size,
        model=TRAIN_SIZES[config.size]["model"],
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
            folder.join(run_folder.STEPS_CSV),
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
    if config.tensorboard and processes.is_primary():
        # (The chief's only, as TensorFlow's `should_save_summary`.)
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
        config: a `TrainConfig` (fields left at `None` take the
            training defaults of its model size, `TRAIN_SIZES`). With
            `resume=True`, the configuration saved in `config.output` is
            used and options given here must match it.
        callbacks: extra Keras callbacks for `fit`.
        log: function that prints a line.

    Returns:
        The metrics dict (also written to `OUTPUT/metrics.json` and to
        `config.metrics_json`); only `steps` and `train_loss` when a
        callback stopped the run early.
    """
    started = time.perf_counter()
    resume = (
        "Start every process again with `keras-txl train --output "
        f"{config.output} --resume`: the run continues from its last "
        "checkpoint."
    )
    with processes.peer_errors(resume):
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
    # Bars at verbosity 1 only: at 2 (one line per epoch, a log file)
    # each pass is the line below.
    verbose = 1 if config.verbose == 1 else 0
    lengths = eval_memory_lengths(config)
    strategy = _validation_strategy(run["strategy"], valid_data, config, log)
    for number, memory_length in enumerate(lengths, 1):
        if verbose:
            log(f"  [{number}/{len(lengths)}] memory {memory_length}:")
        row = evaluate_bpc(
            lm, valid_data, memory_length, verbose=verbose, strategy=strategy
        )
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
        f"Validation bits per {token_unit(tokenizer)} with memory "
        f"({config.eval_memory_length}): "
        f"{with_memory['bits_per_character']:.4f}; without memory: "
        f"{without_memory['bits_per_character']:.4f}"
    )

    artifacts.save_model(lm, output, tokenizer, sequence_length=length)
    try:
        plot_training_curve(
            history.losses,
            os.path.join(output, run_folder.CURVE_PNG),
            title=f"{config.size} model, {_corpus_name(config)}",
        )
        plot_bpc_vs_memory(
            table,
            os.path.join(output, run_folder.MEMORY_PNG),
            length,
            config.memory_length,
        )
    except MissingExtraError as error:
        log(f"No {run_folder.CURVE_PNG} or {run_folder.MEMORY_PNG}: {error}")
    prompt, continuation = _sample(lm, tokenizer, corpus, config)
    sample = None if prompt is None else prompt + continuation
    if sample is not None:
        log(
            f"Sample (the first {PROMPT_TOKENS} validation tokens, then "
            f"{SAMPLE_MARK} and the model's {config.sample_tokens}):\n"
            f"{printable(prompt)}{SAMPLE_MARK}{printable(continuation)}"
        )
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
        "sample": sample,
        "config": run_config,
    }
    # (Of several processes, the primary one writes --metrics-json.)
    metrics_json = config.metrics_json if processes.is_primary() else None
    artifacts.write_metrics(metrics, output, metrics_json)
    log(
        f"Saved the model and its tokenizer as a keras-hub preset in "
        f"{config.output} (TransformerXLCausalLM.from_preset("
        f"'{config.output}'))."
    )
    return metrics


def _validation_strategy(strategy, valid_data, config, log):
    """The strategy the validation runs in: the run's, whose replicas
    share the validation streams as they share the training ones (the
    result is that of one device), or `None` (one device, outside the
    strategy) when they cannot share them.

    The validation reads `eval_batch_size` streams: the training batch,
    a multiple of the replicas, unless the validation text is shorter
    than 4 segments per stream; then fewer, which the replicas may not
    divide. Those few streams are read on one device rather than
    changed, so that a run validates the same streams on any number of
    devices."""
    from keras_txl.distribute.replica_strategy import static_batch_size

    if strategy is None:
        return None
    streams = static_batch_size(valid_data)
    if streams % strategy.num_replicas == 0:
        return strategy
    tokens = 4 * config.batch_size * config.segment_length + 1
    log(
        f"Validation on one device: its {streams} stream(s) do not split "
        f"over the {strategy.num_replicas} replicas (a validation text of "
        f"{tokens:,} tokens or more gives {config.batch_size} streams)."
    )
    return None


def _sample(lm, tokenizer, corpus, config):
    """The text after training: `(prompt, continuation)`, the first
    validation tokens and the `config.sample_tokens` tokens that continue
    them (`(None, None)` for 0 tokens)."""
    from keras_txl.data.tokenization import decode
    from keras_txl.data.tokenization import encode

    if not config.sample_tokens:
        return None, None
    prompt_ids = (
        corpus.valid[:PROMPT_TOKENS]
        if len(corpus.valid)
        else (corpus.train[:PROMPT_TOKENS])
    )
    prompt = decode(tokenizer, prompt_ids)
    sample = generate_text(
        lm,
        tokenizer,
        prompt,
        max_length=len(encode(tokenizer, prompt)) + config.sample_tokens,
        sampler=make_sampler("top_k", seed=config.seed),
        memory_length=config.eval_memory_length or None,
    )
    return prompt, sample


__all__ = [
    "TrainConfig",
    "fit_language_model",
    "train",
]
