"""The learning-rate schedule and optimizer of the paper."""

import keras

from keras_txl.utils.validation import check_positive_int


def _check_positive_float(name, value):
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not value > 0
    ):
        raise ValueError(
            f"`{name}` must be a number > 0. Received: {name}={value!r}"
        )
    return float(value)


def warmup_cosine_schedule(
    learning_rate, total_steps, warmup_steps=0, min_learning_rate_ratio=0.0
):
    """Linear warmup from 0, then cosine decay: the schedule of the paper.

    Step `s < warmup_steps` gets `learning_rate * s / warmup_steps`; the
    following steps decay along a half cosine from `learning_rate` to
    `learning_rate * min_learning_rate_ratio` at `total_steps`, and stay
    there. This is the authors' TensorFlow schedule (`train_gpu.py`), and
    exactly `keras.optimizers.schedules.CosineDecay` with
    `initial_learning_rate=0`, `warmup_target=learning_rate` and
    `decay_steps=total_steps - warmup_steps`, which this function returns
    (a serializable `LearningRateSchedule`).

    Args:
        learning_rate: float > 0. Peak learning rate (the paper: 2.5e-4 on
            enwik8 for the base model).
        total_steps: int > `warmup_steps`. Number of training steps.
        warmup_steps: int >= 0. Length of the linear warmup.
        min_learning_rate_ratio: float in [0, 1]. Final learning rate as a
            fraction of `learning_rate` (the authors' `eta_min / lr`).

    Returns:
        A `keras.optimizers.schedules.CosineDecay`.

    Example:

    >>> schedule = warmup_cosine_schedule(1e-3, total_steps=100,
    ...                                   warmup_steps=10)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 55, 100)]
    [0.0, 0.0005, 0.001, 0.0005, 0.0]
    """
    learning_rate = _check_positive_float("learning_rate", learning_rate)
    total_steps = check_positive_int("total_steps", total_steps)
    warmup_steps = check_positive_int(
        "warmup_steps", warmup_steps, allow_zero=True
    )
    if warmup_steps >= total_steps:
        raise ValueError(
            "`warmup_steps` must be below `total_steps`. Received: "
            f"warmup_steps={warmup_steps}, total_steps={total_steps}"
        )
    if isinstance(min_learning_rate_ratio, bool) or not (
        isinstance(min_learning_rate_ratio, (int, float))
        and 0.0 <= min_learning_rate_ratio <= 1.0
    ):
        raise ValueError(
            "`min_learning_rate_ratio` must be a number in [0, 1]. "
            f"Received: min_learning_rate_ratio={min_learning_rate_ratio!r}"
        )
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0 if warmup_steps else learning_rate,
        decay_steps=total_steps - warmup_steps,
        alpha=float(min_learning_rate_ratio),
        warmup_target=learning_rate if warmup_steps else None,
        warmup_steps=warmup_steps,
    )


def transformer_xl_optimizer(
    learning_rate=2.5e-4,
    total_steps=None,
    warmup_steps=0,
    min_learning_rate_ratio=0.0,
    clip_norm=0.25,
):
    """Adam with the paper's schedule and gradient clipping.

    The authors clip the global norm of all the gradients together
    (`torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)`), which in
    Keras is `global_clipnorm`, not `clipnorm` (which clips each gradient
    by its own norm).

    Args:
        learning_rate: float > 0. Peak learning rate.
        total_steps: int or `None`. With an int, the learning rate follows
            `warmup_cosine_schedule`; `None` keeps it constant.
        warmup_steps: int >= 0. Linear warmup steps (needs `total_steps`).
        min_learning_rate_ratio: float. See `warmup_cosine_schedule`.
        clip_norm: float > 0 or `None`. Global gradient-norm clip.

    Returns:
        A `keras.optimizers.Adam`.

    Example:

    >>> optimizer = transformer_xl_optimizer(1e-3, total_steps=1000,
    ...                                      warmup_steps=100)
    >>> optimizer.global_clipnorm
    0.25
    """
    if total_steps is None:
        if warmup_steps:
            raise ValueError(
                "`warmup_steps` needs `total_steps` (the schedule's length). "
                f"Received: warmup_steps={warmup_steps!r}, total_steps=None"
            )
        schedule = _check_positive_float("learning_rate", learning_rate)
    else:
        schedule = warmup_cosine_schedule(
            learning_rate, total_steps, warmup_steps, min_learning_rate_ratio
        )
    if clip_norm is not None:
        clip_norm = _check_positive_float("clip_norm", clip_norm)
    return keras.optimizers.Adam(
        learning_rate=schedule, global_clipnorm=clip_norm
    )
