"""`run_ablation`: the ablations of Dai et al. (2019, Table 6 and section
4.3) at small scale, every variant trained with the same budget and seed:
the variants, the seeds, the memory sweep, RECL and the cost of a step
(`keras-txl ablate` parses its options, prints and writes the results).
"""

import dataclasses
import os
import time

import keras
import numpy as np

from keras_txl import data
from keras_txl.ablation.ablation_transformer_xl_backbone import (
    AblationTransformerXLBackbone,
)
from keras_txl.ablation.cost import measure_step_cost
from keras_txl.ablation.recl import compare_contexts
from keras_txl.ablation.recl import default_contexts
from keras_txl.ablation.unrolled_segments_lm import UnrolledSegmentsLM
from keras_txl.data.segments import num_batches
from keras_txl.metrics.batch_cross_entropy import BatchCrossEntropy
from keras_txl.models import MemoryReset
from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM
from keras_txl.training.evaluation import evaluate_bpc
from keras_txl.training.schedules import transformer_xl_optimizer
from keras_txl.training.step_history import StepHistory
from keras_txl.utils.validation import check_positive_int

# The variants of the table, in its order.
VARIANTS = (
    "recurrence_relative",
    "no_recurrence",
    "recurrence_absolute",
    "recurrence_learned_relative",
    "no_stop_gradient",
)
# Memory lengths of the sweep, in multiples of the segment length T.
MEMORY_SWEEP = (0.0, 0.25, 1.0, 2.0, 5.0)
# The group whose RECL is compared (as the paper's second group).
RECL_GROUP = (
    "recurrence_relative",
    "recurrence_learned_relative",
    "recurrence_absolute",
    "no_recurrence",
)


def variant_config(name, memory_length, segment_length):
    """Backbone arguments that make variant `name` (besides the model size).

    Args:
        name: one of `VARIANTS`, or `"memory_M"` (relative encoding,
            memory length `M`: the memory sweep).
        memory_length: int. `M` of the recurrent variants.
        segment_length: int. `T`.

    Returns:
        dict of `AblationTransformerXLBackbone` arguments.
    """
    if name.startswith("memory_"):
        return {"memory_length": int(name[len("memory_") :])}
    if name == "recurrence_relative":
        return {"memory_length": memory_length}
    if name == "no_recurrence":
        return {"memory_length": 0}
    if name == "recurrence_absolute":
        return {"memory_length": memory_length, "position_encoding": "absolute"}
    if name == "recurrence_learned_relative":
        # One embedding per distance seen in training; longer ones clip.
        return {
            "memory_length": memory_length,
            "position_encoding": "learned_relative",
            "max_relative_distance": memory_length + segment_length - 1,
        }
    if name == "no_stop_gradient":
        return {"memory_length": memory_length, "stop_memory_gradient": False}
    raise ValueError(
        f"Unknown variant {name!r}. Known: {VARIANTS} and 'memory_M'."
    )


def _train(
    backbone_config,
    train_ids,
    steps,
    batch_size,
    segment_length,
    segments_per_step,
    learning_rate,
    warmup_steps,
    seed,
):
    """Trains one variant; returns `(lm, training record)`."""
    keras.utils.clear_session()
    keras.utils.set_random_seed(seed)
    lm = TransformerXLCausalLM(AblationTransformerXLBackbone(**backbone_config))
    model = UnrolledSegmentsLM(lm, segment_length=segment_length)
    model.compile(
        optimizer=transformer_xl_optimizer(
            learning_rate, total_steps=steps, warmup_steps=warmup_steps
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[BatchCrossEntropy()],
    )
    length = segments_per_step * segment_length
    dataset = data.segment_dataset(train_ids, batch_size, length)
    batches = num_batches(len(train_ids), batch_size, length)
    history = StepHistory(batch_size * length, total_steps=steps)
    start = time.perf_counter()
    model.fit(
        dataset.repeat(),
        epochs=1,
        steps_per_epoch=steps,
        # The memory starts empty where the text starts over.
        callbacks=[MemoryReset(reset_every=batches), history],
        shuffle=False,
        verbose=0,
    )
    seconds = time.perf_counter() - start
    losses = np.asarray(history.losses)
    tail = losses[-max(1, steps // 10) :]
    speed = history.tokens_per_second  # Compilation left out.
    record = {
        "train_seconds": seconds,
        "seconds_per_step": speed and history.tokens_per_step / speed,
        "train_loss_last": float(np.mean(tail)),
        "train_loss_last_std": float(np.std(tail)),
        "nonfinite_steps": int(np.sum(~np.isfinite(losses))),
        "passes_over_data": steps / batches,
        "loss_curve": [float(x) for x in losses],
    }
    return lm, record


def _evaluate(lm, ids, batch_size, segment_length, memory_length):
    dataset = data.segment_dataset(ids, batch_size, segment_length)
    return evaluate_bpc(lm, dataset, memory_length)["bits_per_character"]


def _mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def run_ablation(
    corpus,
    steps,
    segment_length,
    batch_size,
    architecture,
    size=None,
    seed=0,
    num_seeds=1,
    memory_length=None,
    segments_per_step=2,
    learning_rate=5e-3,
    warmup_steps=None,
    memory_sweep=MEMORY_SWEEP,
    long_memory_length=None,
    eval_batch_size=4,
    eval_tokens=16384,
    recl_ratios=(0.1, 0.5, 1.0),
    recl_contexts=None,
    measure_cost=True,
    variants=VARIANTS,
    save_dir=None,
    log=print,
):
    """Trains the ablation variants of Transformer-XL with the same budget
    and seed, evaluates them and returns every number.

    The variants (`VARIANTS`), all with the `architecture`, trained
    for `steps` batches of `batch_size` rows of `segments_per_step`
    segments of `segment_length` tokens (`UnrolledSegmentsLM`), memory
    `memory_length` (default `T`):

    - `recurrence_relative`: the paper's model;
    - `no_recurrence`: memory 0 (a vanilla Transformer with relative
      positions, trained on segments of `T`);
    - `recurrence_absolute`: absolute sinusoidal positions of the segment
      added to the embeddings, no relative terms;
    - `recurrence_learned_relative`: Shaw et al. (2018) learned relative
      positions clipped at `M + T - 1`;
    - `no_stop_gradient`: the paper's model with gradients flowing through
      the memory across the `segments_per_step` segments of a batch.

    Then a memory sweep: the paper's model trained with `M` in
    `memory_sweep * T`, each evaluated with its own `M` and with
    `long_memory_length` (default `2 * max(memory_sweep) * T`); every
    variant is also evaluated with `long_memory_length` (extrapolation).
    RECL (Dai et al., appendix C) compares the group `RECL_GROUP` at
    context lengths `recl_contexts` (default `T/2, T, ..., 3T`).

    The corpus is tokenized by characters (vocabulary of the whole text);
    evaluation reads the first
    `eval_tokens` of the validation part as `eval_batch_size` streams of
    segments of `T`.

    Args:
        corpus: the `keras_txl.data.load_corpus` corpus (the ablation
            command's: the built-in text or a file, split 90/5/5).
        steps: int. Training steps of every model.
        segment_length: int. `T`.
        batch_size: int. Rows (streams) per training batch.
        architecture: dict of backbone arguments of the model size
            (`num_layers`, `num_heads`, `hidden_dim`, `head_dim`,
            `intermediate_dim`, ...; the command takes them from the size
            table, `keras_txl_cli/sizes.py`).
        size: optional name of the size, recorded in `"config"`.
        seed: int. Seed of the first run; run `s` uses `seed + s`.
        num_seeds: int. Runs of everything, each with its own seed.
        memory_length: int or None. `M` of the recurrent variants; None:
            `T`.
        segments_per_step: int. `k`, segments per row and batch.
        learning_rate: float. Peak learning rate (Adam, linear warmup,
            cosine decay, gradient norm clipped at 0.25).
        warmup_steps: int or None (10% of `steps`).
        memory_sweep: memory lengths of the sweep in multiples of `T`.
        long_memory_length: int or None. The longer evaluation memory.
        eval_batch_size: int. Evaluation streams.
        eval_tokens: int. Validation tokens evaluated (at most).
        recl_ratios: the `r` of RECL.
        recl_contexts: context lengths of RECL, or None.
        measure_cost: bool. Measure time and peak RSS of a training
            step with and without stop-gradient (in fresh processes).
        variants: the variants to train (a subset of `VARIANTS`).
        save_dir: str or None. Save every trained model as
            `save_dir/seed_S/NAME.keras` (for `keras-txl recl`).
        log: callable taking a line of progress, or None.

    Returns:
        A dict: `"valid_bpc"` (variant: mean over seeds), `"valid_bpc_long"`
        (each variant evaluated with `long_memory_length`),
        `"valid_bpc_per_seed"`, `"memory_sweep"`, `"recl"`, `"training"`
        (per variant and seed: time, losses), `"cost"` and `"config"`
        (`keras_txl.ablation.report.markdown_report` makes its tables).

    Example:

    >>> from keras_txl import data
    >>> corpus = data.load_corpus("builtin", None, 0.05, 0.05)
    >>> results = run_ablation(
    ...     corpus, steps=2, segment_length=4, batch_size=2, eval_tokens=64,
    ...     architecture=dict(num_layers=1, num_heads=2, hidden_dim=8,
    ...                       head_dim=4, intermediate_dim=16),
    ...     variants=("recurrence_relative",), memory_sweep=(1.0,),
    ...     recl_contexts=[4], eval_batch_size=2, measure_cost=False,
    ...     log=None)
    >>> list(results["valid_bpc"]), results["memory_sweep"]["memory_lengths"]
    (['recurrence_relative'], [4])
    """
    log = log or (lambda line: None)
    plan = _Plan.check(
        steps=steps,
        segment_length=segment_length,
        batch_size=batch_size,
        architecture=architecture,
        size=size,
        seed=seed,
        num_seeds=num_seeds,
        memory_length=memory_length,
        segments_per_step=segments_per_step,
        learning_rate=learning_rate,
        warmup_steps=warmup_steps,
        memory_sweep=memory_sweep,
        long_memory_length=long_memory_length,
        eval_batch_size=eval_batch_size,
        recl_ratios=recl_ratios,
        recl_contexts=recl_contexts,
        variants=variants,
    )
    corpus = _Corpus.read(corpus, eval_tokens)
    training, recl = {}, {}
    for run_seed in plan.seeds:
        models = _train_variants(
            plan, corpus, run_seed, training, save_dir, log
        )
        _add_recl(plan, corpus, models, run_seed, recl, log)
    cost = _step_costs(plan, corpus, log) if measure_cost else {}
    return _results(plan, corpus, training, recl, cost)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """The checked settings of an ablation run (see `run_ablation`)."""

    steps: int
    T: int
    batch_size: int
    size: str
    architecture: dict
    seeds: tuple
    M: int
    segments_per_step: int
    learning_rate: float
    warmup_steps: int
    sweep: list
    long_memory_length: int
    eval_batch_size: int
    recl_ratios: tuple
    recl_contexts: list
    variants: tuple

    @classmethod
    def check(
        cls,
        steps,
        segment_length,
        batch_size,
        architecture,
        size,
        seed,
        num_seeds,
        memory_length,
        segments_per_step,
        learning_rate,
        warmup_steps,
        memory_sweep,
        long_memory_length,
        eval_batch_size,
        recl_ratios,
        recl_contexts,
        variants,
    ):
        steps = check_positive_int("steps", steps)
        T = check_positive_int("segment_length", segment_length)
        num_seeds = check_positive_int("num_seeds", num_seeds)
        segments_per_step = check_positive_int(
            "segments_per_step", segments_per_step
        )
        M = check_positive_int(
            "memory_length", T if memory_length is None else memory_length
        )
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown:
            raise ValueError(
                f"Unknown variants {unknown}. Choose among {VARIANTS}."
            )
        if "no_stop_gradient" in variants and segments_per_step < 2:
            raise ValueError(
                "`no_stop_gradient` needs `segments_per_step >= 2`: the "
                "gradient crosses the memory only between segments of one "
                f"batch. Received: segments_per_step={segments_per_step}"
            )
        sweep = sorted({int(round(f * T)) for f in memory_sweep})
        if recl_contexts is None:
            recl_contexts = default_contexts(T)
        return cls(
            steps=steps,
            T=T,
            batch_size=check_positive_int("batch_size", batch_size),
            size=size,
            architecture=dict(architecture),
            seeds=tuple(seed + s for s in range(num_seeds)),
            M=M,
            segments_per_step=segments_per_step,
            learning_rate=learning_rate,
            warmup_steps=(
                max(1, steps // 10) if warmup_steps is None else warmup_steps
            ),
            sweep=sweep,
            long_memory_length=(
                2 * max(sweep + [M])
                if long_memory_length is None
                else long_memory_length
            ),
            eval_batch_size=eval_batch_size,
            recl_ratios=tuple(recl_ratios or ()),
            recl_contexts=sorted(int(c) for c in recl_contexts),
            variants=tuple(variants),
        )


def validation_characters(corpus, eval_tokens):
    """`(ids, vocabulary_size)`: the first `eval_tokens` characters of the
    validation part of `corpus`, tokenized by characters over the whole
    corpus as `run_ablation` tokenizes it (what `keras-txl recl` scores
    the saved models of `keras-txl ablate --save-models` on).

    Args:
        corpus: a `keras_txl.data.load_corpus` corpus.
        eval_tokens: int. Characters kept (at most).

    Returns:
        `(ids, vocabulary_size)`: 1-D int array and int.

    Example:

    >>> from keras_txl import data
    >>> corpus = data.load_corpus("builtin", None, 0.05, 0.05)
    >>> ids, size = validation_characters(corpus, 64)
    >>> len(ids), size > 50
    (64, True)
    """
    tokenizer = data.make_tokenizer("char", corpus)
    ids = data.corpus_ids(tokenizer, corpus.valid)[:eval_tokens]
    return ids, int(tokenizer.vocabulary_size())


@dataclasses.dataclass(frozen=True)
class _Corpus:
    """The character-level splits of the corpus: 90% train, the first
    `eval_tokens` of the 5% validation."""

    train_ids: np.ndarray
    valid_ids: np.ndarray
    vocabulary_size: int

    @classmethod
    def read(cls, corpus, eval_tokens):
        tokenizer = data.make_tokenizer("char", corpus)
        ids = data.corpus_ids(tokenizer, corpus)
        return cls(
            train_ids=ids.train,
            valid_ids=ids.valid[:eval_tokens],
            vocabulary_size=int(tokenizer.vocabulary_size()),
        )

    def backbone_config(self, plan, **options):
        """The size's backbone for this vocabulary, with `options`."""
        return dict(
            plan.architecture, vocabulary_size=self.vocabulary_size, **options
        )


def _train_and_evaluate(plan, corpus, name, run_seed, save_dir, log):
    """Trains variant `name`, saves it if asked and evaluates it with its
    own memory and the long one; returns `(lm, record)`."""
    config = corpus.backbone_config(
        plan, **variant_config(name, plan.M, plan.T)
    )
    log(f"[seed {run_seed}] training {name} ({config})")
    lm, record = _train(
        config,
        corpus.train_ids,
        plan.steps,
        plan.batch_size,
        plan.T,
        plan.segments_per_step,
        plan.learning_rate,
        plan.warmup_steps,
        run_seed,
    )
    if save_dir is not None:
        folder = os.path.join(save_dir, f"seed_{run_seed}")
        os.makedirs(folder, exist_ok=True)
        lm.save(os.path.join(folder, f"{name}.keras"))
    own = config["memory_length"]
    valid = (corpus.valid_ids, plan.eval_batch_size, plan.T)
    record["memory_length"] = own
    record["valid_bpc"] = _evaluate(lm, *valid, own)
    record["valid_bpc_long"] = _evaluate(lm, *valid, plan.long_memory_length)
    log(
        f"[seed {run_seed}] {name}: valid bpc {record['valid_bpc']:.4f} "
        f"(M={own}), {record['valid_bpc_long']:.4f} "
        f"(M={plan.long_memory_length}), {record['train_seconds']:.0f} s"
    )
    return lm, record


def _train_variants(plan, corpus, run_seed, training, save_dir, log):
    """Trains the variants and the memory sweep of one seed, appending
    their records to `training`; returns the variants' models."""
    models = {}
    for name in plan.variants:
        lm, record = _train_and_evaluate(
            plan, corpus, name, run_seed, save_dir, log
        )
        models[name] = lm
        training.setdefault(name, []).append(record)
    # The sweep reuses the runs with the same configuration.
    same = {0: "no_recurrence", plan.M: "recurrence_relative"}
    for memory in plan.sweep:
        key = f"memory_{memory}"
        if same.get(memory) in models:
            training.setdefault(key, []).append(training[same[memory]][-1])
            continue
        _, record = _train_and_evaluate(
            plan, corpus, key, run_seed, save_dir, log
        )
        training.setdefault(key, []).append(record)
    return models


def _add_recl(plan, corpus, models, run_seed, recl, log):
    """RECL of the group `RECL_GROUP` among `models`, added to `recl`."""
    group = [name for name in RECL_GROUP if name in models]
    if not group or not plan.recl_ratios:
        return
    log(f"[seed {run_seed}] RECL of {group} at {plan.recl_contexts}")
    found = compare_contexts(
        {name: models[name] for name in group},
        corpus.valid_ids,
        plan.T,
        contexts=plan.recl_contexts,
        ratios=plan.recl_ratios,
        batch_size=plan.eval_batch_size,
    )
    for ratio, by_name in found["recl"].items():
        for name, value in by_name.items():
            recl.setdefault(ratio, {}).setdefault(name, []).append(value)
    recl.setdefault("bpc_by_context", []).append(found["bpc_by_context"])


def _step_costs(plan, corpus, log):
    """Time and peak resident bytes (RSS) of a training step with and without
    stop-gradient. The paper's training holds one segment in the graph;
    without stop-gradient the graph must hold all k segments the gradient
    crosses. The middle row has k segments under stop-gradient: the same
    tokens as the last, the gradient cut between segments."""
    cost = {}
    k = plan.segments_per_step
    for name, stop, segments in (
        ("stop_gradient_1_segment", True, 1),
        ("stop_gradient", True, k),
        ("no_stop_gradient", False, k),
    ):
        config = corpus.backbone_config(
            plan, memory_length=plan.M, stop_memory_gradient=stop
        )
        log(f"measuring the cost of a training step: {name}")
        cost[name] = measure_step_cost(
            config, plan.batch_size, plan.T, segments, seed=plan.seeds[0]
        )
    return cost


def _results(plan, corpus, training, recl, cost):
    """The dict `run_ablation` returns."""

    def summary(key, field):
        return _mean([r[field] for r in training.get(key, [])])

    variants, sweep = plan.variants, plan.sweep
    return {
        "valid_bpc": {name: summary(name, "valid_bpc") for name in variants},
        "valid_bpc_long": {
            name: summary(name, "valid_bpc_long") for name in variants
        },
        "valid_bpc_per_seed": {
            name: [r["valid_bpc"] for r in training[name]] for name in variants
        },
        "memory_sweep": {
            "memory_lengths": sweep,
            "long_memory_length": plan.long_memory_length,
            "valid_bpc": {
                str(m): summary(f"memory_{m}", "valid_bpc") for m in sweep
            },
            "valid_bpc_long": {
                str(m): summary(f"memory_{m}", "valid_bpc_long") for m in sweep
            },
            "valid_bpc_per_seed": {
                str(m): [r["valid_bpc"] for r in training[f"memory_{m}"]]
                for m in sweep
            },
        },
        "recl": {
            "contexts": plan.recl_contexts,
            "group": [n for n in RECL_GROUP if n in variants],
            "by_ratio": {
                ratio: by_name
                for ratio, by_name in recl.items()
                if ratio != "bpc_by_context"
            },
            "bpc_by_context": recl.get("bpc_by_context", []),
        },
        "training": training,
        "cost": cost,
        "config": {
            "steps": plan.steps,
            "segment_length": plan.T,
            "batch_size": plan.batch_size,
            "size": plan.size,
            "architecture": plan.architecture,
            "vocabulary_size": corpus.vocabulary_size,
            "seeds": list(plan.seeds),
            "memory_length": plan.M,
            "segments_per_step": plan.segments_per_step,
            "tokens_per_step": plan.batch_size
            * plan.segments_per_step
            * plan.T,
            "learning_rate": plan.learning_rate,
            "warmup_steps": plan.warmup_steps,
            "long_memory_length": plan.long_memory_length,
            "eval_batch_size": plan.eval_batch_size,
            "eval_tokens": int(len(corpus.valid_ids)),
            "train_tokens": int(len(corpus.train_ids)),
            "backend": keras.config.backend(),
        },
    }
