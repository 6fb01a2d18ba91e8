"""`keras-txl evaluate RUN --dynamic sgd|rms`: static and dynamic
evaluation of one text under one protocol, side by side."""

from keras_txl.training.dynamic_evaluation import dynamic_evaluation

# Chosen on the default run of `keras-txl train` (docs/results.md).
DEFAULT_LEARNING_RATES = {"sgd": 0.03, "rms": 0.0001}
CALIBRATION_SEGMENTS = 100


def evaluate_dynamic(
    lm,
    ids,
    name,
    method,
    segment_length,
    memory_length,
    learning_rate=None,
    decay=0.0,
    segments_per_update=1,
    batch_size=None,
    training_ids=None,
    clamp_length=None,
    same_length=None,
    start=None,
    unit="token",
    log=print,
):
    """Scores `ids` without and with dynamic evaluation, and prints both.

    Both passes read the text the same way (`batch_size` streams, 1 by
    default as in the paper, segments of `segment_length`, the memory
    carried): the static one is `dynamic_evaluation` with no step.
    `"rms"` takes its gradient statistics from the first
    `CALIBRATION_SEGMENTS` segments of `training_ids` (the run's training
    text) when there is one, else from the text scored so far.

    `unit` is what one token is (`"byte"`, `"character"`, `"word"` or
    `"token"`: `keras_txl_cli.text_segments.token_unit`), for the table's
    "bits per ...".

    Returns:
        `{"text", "static", "dynamic"}`, the last two the result dicts of
        `keras_txl.training.dynamic_evaluation`.
    """
    if learning_rate is None:
        learning_rate = DEFAULT_LEARNING_RATES[method]
    rows = batch_size or 1
    protocol = dict(
        segment_length=segment_length,
        batch_size=rows,
        memory_length=memory_length,
        clamp_length=clamp_length,
        same_length=same_length,
        start=start or "empty",
    )
    calibration = None
    if method == "rms" and training_ids is not None and len(training_ids):
        needed = rows * (CALIBRATION_SEGMENTS * segment_length + 1)
        calibration = training_ids[:needed]
    statistics = ""
    if method == "rms":
        source = "the training" if calibration is not None else "this"
        statistics = f", gradient statistics from {source} text"
    log(
        f"Dynamic evaluation of {name} ({method}, learning rate "
        f"{learning_rate:g}, decay {decay:g}, a step every "
        f"{segments_per_update} segment(s){statistics}): {len(ids):,} "
        f"tokens, {rows} stream(s), segments of {segment_length}, memory "
        f"{memory_length}. Static pass first."
    )
    static = dynamic_evaluation(lm, ids, learning_rate=0.0, log=log, **protocol)
    dynamic = dynamic_evaluation(
        lm,
        ids,
        learning_rate=learning_rate,
        method=method,
        decay=decay,
        segments_per_update=segments_per_update,
        calibration_ids=calibration,
        calibration_segments=CALIBRATION_SEGMENTS,
        log=log,
        **protocol,
    )
    log(
        f"{name}, {static['tokens']:,} tokens scored. static: the saved "
        f"weights, no step; dynamic: a {method} step after every "
        f"{segments_per_update} segment(s) scored."
    )
    label = f"bits per {unit}"
    width = max(len(label), len("perplexity")) + 2
    log(f"{'':{width}}{'static':>12}{'dynamic':>12}")
    for key, label in (
        ("bits_per_character", label),
        ("perplexity", "perplexity"),
    ):
        log(f"{label:>{width}}{static[key]:>12.4f}{dynamic[key]:>12.4f}")
    return {"text": name, "static": static, "dynamic": dynamic}
