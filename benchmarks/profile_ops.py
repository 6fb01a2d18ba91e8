"""Where a training step's time goes: the backend profiler, summed by op.

Runs a few `model.fit` steps of the chosen preset under the backend's own
profiler and sums the op (TensorFlow), fused kernel (JAX, mapped back to
the Keras op that produced it through the compiled HLO) or aten op (torch)
durations, by op type and by model component (attention, feed-forward,
norms, dropout, optimizer), forward and backward apart. Prints one JSON
line; `--top` rows of each table also go to stderr as text.

Durations are summed over the runtime's threads, so they add up to more
than the wall time when ops overlap; read them as shares.

    KERAS_BACKEND=tensorflow PYTHONPATH=. python -m benchmarks.profile_ops \
        --dtype mixed_bfloat16
"""

import argparse
import collections
import glob
import os
import re
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_WORKDIR = tempfile.mkdtemp(prefix="txl_profile_")
if os.environ.get("KERAS_BACKEND") == "jax":
    # The compiled HLO names each fused kernel; the dump maps the names back
    # to Keras ops. Must be set before JAX starts.
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + f" --xla_dump_to={_WORKDIR}/hlo --xla_dump_hlo_as_text"
    )

import keras  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.train_eval import build_model  # noqa: E402
from benchmarks.train_eval import parse_jit  # noqa: E402

COMPONENTS = (
    "attention_norm",
    "feedforward_norm",
    "attention",
    "intermediate",
    "dropout",
    "output",
    "memory",
    "embedding",
    "adam",
    "loss",
    "crossentropy",
)


def component_of(name):
    lowered = name.lower()
    for component in COMPONENTS:
        if component in lowered:
            return "loss" if component == "crossentropy" else component
    return "other"


def _read_xspace(logdir):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    path = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    space = xplane_pb2.XSpace()
    with open(path[0], "rb") as f:
        space.ParseFromString(f.read())
    return space


def tensorflow_events(logdir):
    """(op type, node name, milliseconds) of every TF op executed."""
    for plane in _read_xspace(logdir).planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name or name.startswith("ExecutorState"):
                    continue
                node, op_type = name.rsplit(":", 1)
                if op_type.endswith("PartitionedCall"):
                    continue
                yield op_type, node, event.duration_ps / 1e9


def jax_events(logdir, hlo_dir):
    """(HLO op, Keras op name, milliseconds) of every XLA kernel run."""
    texts = sorted(
        glob.glob(os.path.join(hlo_dir, "*train_step*after_optimizations.txt")),
        key=os.path.getsize,
    )
    op_names = {}
    if texts:
        with open(texts[-1]) as f:
            hlo = f.read()
        pattern = r"^\s*(?:ROOT )?%?([\w.\-]+) = [^\n]*?op_name=\"([^\"]*)\""
        for match in re.finditer(pattern, hlo, re.M):
            op_names[match.group(1)] = match.group(2)
    for plane in _read_xspace(logdir).planes:
        for line in plane.lines:
            if "XLA" not in line.name:
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name.startswith("ThunkExecutor") or "Await" in name:
                    continue
                kind = re.sub(r"[.\d]+$", "", name)
                yield kind, op_names.get(name, kind), event.duration_ps / 1e9


def profile(lm, dataset, steps):
    backend = keras.backend.backend()
    logdir = os.path.join(_WORKDIR, "trace")
    if backend == "tensorflow":
        import tensorflow as tf

        tf.profiler.experimental.start(logdir)
        lm.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0)
        tf.profiler.experimental.stop()
        events = list(tensorflow_events(logdir))
    elif backend == "jax":
        import jax

        jax.profiler.start_trace(logdir)
        lm.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0)
        jax.profiler.stop_trace()
        events = list(jax_events(logdir, os.path.join(_WORKDIR, "hlo")))
    else:
        import torch

        with torch.profiler.profile() as prof:
            lm.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0)
        events = [
            (row.key, row.key, row.self_cpu_time_total / 1e3)
            for row in prof.key_averages()
        ]
    return events


def summarize(events, steps):
    by_type = collections.Counter()
    by_component = collections.Counter()
    for op_type, name, ms in events:
        backward = any(
            mark in name for mark in ("gradient", "transpose(jvp", "backward")
        )
        direction = "backward" if backward else "forward"
        by_type[f"{op_type} ({direction})"] += ms / steps
        by_component[f"{component_of(name)} ({direction})"] += ms / steps
    total = sum(by_type.values())
    return total, by_type, by_component


def main(argv=None):
    parser = common.add_common_args(
        argparse.ArgumentParser(description=__doc__)
    )
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--jit", default="auto")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    preset = common.PRESETS[args.preset]
    batch, length = preset["batch_size"], preset["segment_length"]
    x, y = common.ordered_segments(common.byte_corpus(), batch, length)
    dataset = common.to_dataset(x, y, repeat=2)
    lm = build_model(preset, args.dtype, args.dropout, parse_jit(args.jit), 1)
    lm.fit(dataset, epochs=1, steps_per_epoch=2, verbose=0)  # compile
    events = profile(lm, dataset, args.steps)
    total, by_type, by_component = summarize(events, args.steps)

    def table(counter):
        return [
            {"name": name, "ms_per_step": ms, "share": ms / total}
            for name, ms in counter.most_common(args.top)
        ]

    result = {
        "benchmark": "profile_ops",
        "preset": args.preset,
        "dtype": args.dtype,
        "op_ms_per_step": total,
        "by_op": table(by_type),
        "by_component": table(by_component),
        **common.backend_versions(),
        **common.machine_info(),
    }
    common.emit(result)
    for title in ("by_component", "by_op"):
        common.log(f"-- {title}")
        for row in result[title]:
            common.log(
                f"{row['ms_per_step']:9.1f} ms {100 * row['share']:5.1f}%  "
                f"{row['name']}"
            )
    shutil.rmtree(_WORKDIR, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
