"""The one table of model sizes: a name is one model size everywhere.

`SIZES` names every model size of the project; `keras-txl train --size`,
`keras-txl ablate --size` and the benchmarks' `--size` all take these
names, so `small` is the same 2-layer, 64-wide model for each of them.
`TRAIN_SIZES` adds the training defaults of the sizes that `keras-txl
train` offers. To add a size, add a line here. ("Preset" means a keras-hub
preset only: a saved model folder, `from_preset`.)
"""


def _size(layers, heads, hidden, head, inner):
    return dict(
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        head_dim=head,
        intermediate_dim=inner,
    )


# Backbone sizes (layers, heads, hidden, head, inner). "reference" is the
# configuration of the speed goals in docs/benchmarks.md; "base" the base
# enwik8 model of the paper (Dai et al., 2019, and the authors'
# `run_enwik8_base.sh`).
SIZES = {
    "micro": _size(1, 2, 16, 8, 32),  # tests: seconds
    "small": _size(2, 4, 64, 16, 256),  # the ablation table
    "tiny": _size(2, 4, 128, 32, 512),  # `keras-txl train`
    "reference": _size(4, 8, 256, 32, 1024),
    "medium": _size(6, 8, 256, 32, 1024),
    "base": _size(12, 8, 512, 64, 2048),
}


def describe(name):
    """A one-line description of model size `name`."""
    size = SIZES[name]
    layers = size["num_layers"]
    return (
        f"{layers} layer{'s' if layers > 1 else ''} x {size['hidden_dim']} "
        f"wide, {size['num_heads']} heads"
    )


def size_arguments(name):
    """The backbone arguments of model size `name` (a new dict).

    Raises:
        ValueError: if `name` is not in `SIZES`.
    """
    if name not in SIZES:
        raise ValueError(
            f"`size` must be one of {list(SIZES)}. Received: size={name!r}"
        )
    return dict(SIZES[name])


def _train_size(size, length, batch, steps, lr, warmup, drop):
    return {
        "model": dict(SIZES[size]),
        "train": dict(
            segment_length=length,
            memory_length=length,
            eval_memory_length=2 * length,
            batch_size=batch,
            steps=steps,
            learning_rate=lr,
            warmup_steps=warmup,
            dropout=drop,
        ),
    }


# `model`: the backbone; `train`: defaults of the `TrainConfig` fields left
# at `None` (memory as long as the segments in training, twice as long in
# the "with memory" validation). "base" trains as the authors' enwik8 base
# model: segments and memory of 512, batch 22, Adam 2.5e-4 with cosine
# decay over 400k steps, dropout 0.1.
TRAIN_SIZES = {
    # size, T, batch, steps, lr, warmup, dropout
    "tiny": _train_size("tiny", 64, 16, 2000, 2e-3, 200, 0.0),
    "reference": _train_size("reference", 128, 16, 2000, 1e-3, 200, 0.1),
    "base": _train_size("base", 512, 22, 400_000, 2.5e-4, 0, 0.1),
}


def build_language_model(config, vocabulary_size):
    """A `TransformerXLCausalLM` of `config.size`.

    Args:
        config: a resolved `TrainConfig`.
        vocabulary_size: int. Size of the tokenizer's vocabulary.

    Returns:
        An uncompiled `TransformerXLCausalLM` with tied output weights.
    """
    # Here, not at the top: the parser of `keras-txl` reads `SIZES` before
    # Keras is imported.
    from keras_txl.models import TransformerXLBackbone
    from keras_txl.models import TransformerXLCausalLM

    backbone = TransformerXLBackbone(
        vocabulary_size=vocabulary_size,
        memory_length=config.memory_length,
        dropout=config.dropout,
        dtype=config.dtype_policy,
        **TRAIN_SIZES[config.size]["model"],
    )
    return TransformerXLCausalLM(backbone)
