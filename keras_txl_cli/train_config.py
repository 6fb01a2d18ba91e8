import dataclasses
import math
import os

from keras_txl_cli.choices import CORPORA
from keras_txl_cli.choices import TOKENIZERS
from keras_txl_cli.choices import ConfigError
from keras_txl_cli.sizes import TRAIN_SIZES
from keras_txl_cli.strategy_flags import check_tpu_flag

# The corpora of `keras_txl.data.load_corpus` (copied in `choices`, which
# Keras does not load: `tests/app/test_cli.py` pins the copy).
DATASETS = tuple(CORPORA)
# The tokenizer each corpus is modeled with in the paper (enwik8: bytes,
# text8: characters, WikiText-103: words); characters otherwise.
DEFAULT_TOKENIZER = {**CORPORA, "file": "char"}
# Fields a resumed run may change: where and how it reports.
RUN_FIELDS = (
    "output",
    "resume",
    "overwrite",
    "metrics_json",
    "verbose",
    "valid_tokens",  # how much is evaluated, not what is trained
    "validation_memory_lengths",
    "sample_tokens",
    "tpu",  # where the run is, not what it is: may change on resume
    "tensorboard",
)
# Fields of how a run executes, recorded with the run (config.json,
# metrics.json) but free to change on resume: they change neither the
# model nor the data.
EXECUTION_FIELDS = ("jit_compile", "steps_per_execution", "validate_every")
# Where a run's global batch is computed: a resumed run may move to
# another strategy or number of devices (the same global batch, the same
# streams: each row's memory goes to the replica that holds it now); the
# saved value when not given.
PLACEMENT_FIELDS = ("strategy", "num_devices")


@dataclasses.dataclass
class TrainConfig:
    """Everything a `keras-txl train` run depends on.

    Fields left at `None` take the defaults of the model size (see
    `keras_txl_cli.sizes.TRAIN_SIZES`) in `resolved()`.

    Fields:
        dataset: a name of `keras_txl.data.corpora.CORPORA`: `"builtin"` (the
            default corpus), `"enwik8"`, `"text8"`, `"wikitext103"` or
            `"one_billion_word"`.
        corpus: path of a text file (with `dataset="builtin"` it replaces
            the built-in text), or the local copy of a benchmark.
        tokenizer: `"byte"`, `"char"` or `"word"`; `None` picks the one
            of the paper for the dataset, characters otherwise.
        size: the model size and its training defaults, `"tiny"`,
            `"reference"` or `"base"` (`keras_txl_cli.sizes.TRAIN_SIZES`).
        steps, segment_length, memory_length, eval_memory_length,
            batch_size, dropout, learning_rate, warmup_steps: see the
            `keras-txl train` options.
        steps_per_epoch: training steps between checkpoints (a Keras
            epoch); a resumed run continues from the last one.
        valid_fraction: share of a text file (or the built-in text) held
            out for validation, from its end.
        valid_tokens: validation tokens evaluated after training (the
            first ones of the split); 0: the whole split.
        validation_memory_lengths: list of ints >= 0, or `None`: the
            memory lengths of the validation after training (its table in
            `metrics.json` and `bpc_vs_memory.png`), one pass over the
            validation tokens each; 0 and `eval_memory_length` are always
            among them (the bits per character without and with memory).
            `None`: `0, T/4, T, 2T, 4T` (T the segment length) and
            `memory_length` (`keras_txl_cli.train_run.eval_memory_lengths`).
        sample_tokens: tokens of the sample generated and printed after
            training (a compiled generation: seconds on a CPU); 0: none.
        seed: int. Seed of the initialization and of dropout.
        output: folder of the model, tokenizer, checkpoint and pictures.
        resume, overwrite: what to do when `output` holds a run.
        metrics_json: optional path of the metrics file.
        verbose: Keras verbosity of `fit` (1: progress bars, of the
            validation passes too; 2: one line per epoch; 0: none).
        strategy: a strategy name of `keras_txl.distribute.make_strategy`:
            how `fit` spreads the batch over devices (`"none"`: one
            device).
        num_devices: int >= 1 or `None` (every device of the host):
            devices per host of the strategy.
        tpu: str or `None`, for strategy `"tpu"` only: `"local"` on a TPU
            VM, or a TPU's name or `grpc://` address (`None`: found by
            `TPUClusterResolver` from `$TPU_NAME` or the Cloud metadata).
        dtype_policy: name of a Keras dtype policy for the model
            (`"float32"`, `"mixed_bfloat16"`, `"mixed_float16"`, ...);
            `None`: `"float32"`. Part of the run: a resumed run keeps it.
        jit_compile: `"auto"`, `True` or `False`: `jit_compile` of
            `Model.compile` (XLA on TensorFlow, `torch.compile` on torch;
            JAX always compiles).
        steps_per_execution: int >= 1. Training steps per compiled call
            (`Model.compile`); `steps`, `steps_per_epoch` and
            `validate_every` must be multiples of it.
        validate_every: int >= 1 or `None`: validation bits per character
            every this many steps during training (with the training
            memory length), logged and written to the step log.
        tensorboard: folder of TensorBoard logs, or `None` (no logs).
    """

    dataset: str = "builtin"
    corpus: str = None
    tokenizer: str = None
    size: str = "tiny"
    steps: int = None
    segment_length: int = None
    memory_length: int = None
    eval_memory_length: int = None
    batch_size: int = None
    dropout: float = None
    learning_rate: float = None
    warmup_steps: int = None
    steps_per_epoch: int = 100
    valid_fraction: float = 0.1
    valid_tokens: int = 200_000
    validation_memory_lengths: list = None
    sample_tokens: int = 200
    seed: int = 0
    output: str = os.path.join("runs", "keras-txl")
    resume: bool = False
    overwrite: bool = False
    metrics_json: str = None
    verbose: int = 1
    strategy: str = "none"
    num_devices: int = None
    tpu: str = None
    dtype_policy: str = None
    jit_compile: object = "auto"
    steps_per_execution: int = 1
    validate_every: int = None
    tensorboard: str = None

    def resolved(self, check_libraries=True):
        """A copy with the size's defaults filled in, checked.

        `check_libraries=False` leaves out the checks that import Keras
        (`check_libraries()`), so that the command line's mistakes are
        found before the import (`keras-txl` does, then checks again).
        """
        if self.size not in TRAIN_SIZES:
            raise ConfigError(
                f"--size must be one of {', '.join(TRAIN_SIZES)}. Received: "
                f"{self.size!r}"
            )
        if self.dataset not in DATASETS:
            raise ConfigError(
                f"--dataset must be one of {', '.join(DATASETS)}. "
                f"Received: {self.dataset!r}"
            )
        values = dataclasses.asdict(self)
        warmup_given = values["warmup_steps"] is not None
        for name, default in TRAIN_SIZES[self.size]["train"].items():
            if values[name] is None:
                values[name] = default
        if not warmup_given and isinstance(values["steps"], int):
            # The size's warmup, at most a tenth of a shorter run.
            values["warmup_steps"] = min(
                values["warmup_steps"], values["steps"] // 10
            )
        if values["dtype_policy"] is None:
            values["dtype_policy"] = "float32"
        if values["tokenizer"] is None:
            kind = self.dataset
            if kind == "builtin" and self.corpus is not None:
                kind = "file"
            values["tokenizer"] = DEFAULT_TOKENIZER[kind]
        config = TrainConfig(**values)
        if check_libraries:
            config.check()
        else:
            config.check_flags()
        return config

    def check_without_keras(self):
        """Raises `ConfigError` for what the command line can get wrong
        that is found before Keras is imported. A resumed run only checks
        `check_run_flags()`: its other flags are checked merged with the
        saved run's."""
        if self.resume:
            self.check_run_flags()
        else:
            self.resolved(check_libraries=False)

    def check(self):
        """Raises `ConfigError` naming the first bad option."""
        self.check_flags()
        self.check_libraries()

    def check_flags(self):
        """Raises `ConfigError` naming the first bad option, for what
        can be checked without Keras: every value and their relations."""
        for name in ("steps", "segment_length", "batch_size"):
            _check_int(name, getattr(self, name), lowest=1)
        _check_int("steps_per_epoch", self.steps_per_epoch, lowest=1)
        for name in ("memory_length", "eval_memory_length", "warmup_steps"):
            _check_int(name, getattr(self, name), lowest=0)
        _check_int("seed", self.seed, lowest=0)
        _check_int("valid_tokens", self.valid_tokens, lowest=0)
        _check_int("sample_tokens", self.sample_tokens, lowest=0)
        lengths = self.validation_memory_lengths
        if lengths is not None:
            if not isinstance(lengths, (list, tuple)) or not lengths:
                raise ConfigError(
                    "--validation-memory-lengths must be a list of integers "
                    f">= 0 (e.g. 0,16). Received: {lengths!r}"
                )
            for length in lengths:
                _check_int("validation_memory_lengths", length, lowest=0)
        if self.warmup_steps >= self.steps:
            raise ConfigError(
                f"--warmup-steps ({self.warmup_steps}) must be below --steps "
                f"({self.steps})."
            )
        if not (
            isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0
        ):
            raise ConfigError(
                f"--dropout must be a number in [0, 1). Received: "
                f"{self.dropout!r}"
            )
        if not (
            isinstance(self.learning_rate, (int, float))
            and math.isfinite(self.learning_rate)
            and self.learning_rate > 0
        ):
            raise ConfigError(
                f"--learning-rate must be a number > 0. Received: "
                f"{self.learning_rate!r}"
            )
        if not 0.0 < self.valid_fraction < 1.0:
            raise ConfigError(
                f"--valid-fraction must be in (0, 1). Received: "
                f"{self.valid_fraction!r}"
            )
        if self.tokenizer not in TOKENIZERS:
            raise ConfigError(
                f"--tokenizer must be one of {', '.join(TOKENIZERS)}. "
                f"Received: {self.tokenizer!r}"
            )
        if self.num_devices is not None:
            _check_int("num_devices", self.num_devices, lowest=1)
        check_tpu_flag(self.strategy, self.tpu)
        self.check_run_flags()
        self.check_execution()

    def check_libraries(self):
        """Raises `ConfigError` for a strategy unknown or not of this
        backend, or a dtype policy Keras does not know (imports Keras)."""
        import keras

        from keras_txl.distribute.strategies import check_strategy_name

        try:
            check_strategy_name(self.strategy)
        except ValueError as error:
            raise ConfigError(f"--strategy: {error}") from None
        try:
            keras.dtype_policies.get(self.dtype_policy)
        except (ValueError, TypeError):
            raise ConfigError(
                "--dtype-policy must name a Keras dtype policy, e.g. "
                "float32, mixed_bfloat16 or mixed_float16. Received: "
                f"{self.dtype_policy!r}"
            ) from None

    def check_execution(self):
        """Raises `ConfigError` for a bad `jit_compile`,
        `steps_per_execution` or `validate_every`."""
        jit = self.jit_compile
        if not (jit == "auto" or isinstance(jit, bool)):
            raise ConfigError(
                "--jit-compile must be auto, true or false. Received: "
                f"{self.jit_compile!r}"
            )
        if self.tensorboard is not None:
            import importlib.util

            missing = [
                name
                for name in ("tensorflow", "tensorboard")
                if importlib.util.find_spec(name) is None
            ]
            if missing:
                raise ConfigError(
                    f"--tensorboard needs {' and '.join(missing)}: pip "
                    "install 'keras-txl[tensorboard]'."
                )
        spe = self.steps_per_execution
        _check_int("steps_per_execution", spe, lowest=1)
        if self.validate_every is not None:
            _check_int("validate_every", self.validate_every, lowest=1)
            if self.strategy != "none":
                raise ConfigError(
                    "--validate-every runs on one device; it is not "
                    f"supported with --strategy {self.strategy}. Drop it: "
                    "the run validates at the end."
                )
        for name in ("steps", "steps_per_epoch", "validate_every"):
            value = getattr(self, name)
            if value is not None and value % spe:
                option = "--" + name.replace("_", "-")
                raise ConfigError(
                    f"{option} ({value}) must be a multiple of "
                    f"--steps-per-execution ({spe}): Keras runs whole "
                    "executions of that many steps."
                )

    def check_run_flags(self):
        """Raises `ConfigError` if `resume` and `overwrite` are both set."""
        if self.resume and self.overwrite:
            raise ConfigError(
                "--resume and --overwrite exclude each other: resume the "
                "run in --output, or replace it."
            )

    def to_dict(self):
        """The fields that define the run (not where it reports)."""
        values = dataclasses.asdict(self)
        return {k: v for k, v in values.items() if k not in RUN_FIELDS}

    def merged_for_resume(self, saved):
        """This configuration's run fields on the `saved` run's fields.

        Raises `ConfigError` if an option given now (not `None`, not its
        default) differs from the saved run.
        """
        defaults = TrainConfig()
        fields = {f.name for f in dataclasses.fields(TrainConfig)}
        if "preset" in saved and "size" not in saved:
            # Runs saved before `--preset` became `--size`.
            saved = dict(saved, size=saved["preset"])
        values = {k: v for k, v in saved.items() if k in fields}
        for name, value in self.to_dict().items():
            if name in EXECUTION_FIELDS + PLACEMENT_FIELDS:
                continue  # Taken from this configuration below.
            given = value is not None and value != getattr(defaults, name)
            if given and value != saved.get(name):
                option = "--" + name.replace("_", "-")
                raise ConfigError(
                    f"{option} {value} differs from the run being resumed "
                    f"({saved.get(name)}): omit it, or start a new run "
                    f"with --overwrite."
                )
        for name in RUN_FIELDS + EXECUTION_FIELDS:
            values[name] = getattr(self, name)
        for name in PLACEMENT_FIELDS:
            value = getattr(self, name)
            if value is not None and value != getattr(defaults, name):
                values[name] = value
        return TrainConfig(**values)


def _check_int(name, value, lowest):
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        option = "--" + name.replace("_", "-")
        raise ConfigError(
            f"{option} must be an integer >= {lowest}. Received: {value!r}"
        )
