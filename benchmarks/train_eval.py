"""Training and evaluation throughput through the public Keras path.

`model.fit` / `model.evaluate` on an ordered tf.data dataset of
`(inputs, targets)` with a fixed batch, the language model carrying its
memory from batch to batch. Prints one JSON line per measurement:
tokens/s, model FLOP/s (analytic count, see `common.py`), peak RSS.

Run one backend per process:

    KERAS_BACKEND=tensorflow PYTHONPATH=. python -m benchmarks.train_eval \
        --preset reference --dtype mixed_bfloat16
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks import roofline  # noqa: E402


class StepClock(keras.callbacks.Callback):
    """Wall time at the end of every (train or test) batch.

    Reading the loss forces the step to finish (JAX dispatches
    asynchronously), so the clock sees completed work.
    """

    def __init__(self):
        super().__init__()
        self.times = []
        self.cpu = []
        self.steps = []

    def _record(self, batch, logs):
        if logs and "loss" in logs:
            float(logs["loss"])
        self.times.append(time.perf_counter())
        t = os.times()
        self.cpu.append(t.user + t.system)
        self.steps.append(batch)

    def on_train_batch_end(self, batch, logs=None):
        self._record(batch, logs)

    def on_test_batch_end(self, batch, logs=None):
        self._record(batch, logs)

    def step_stats(self, warmup):
        """Median and largest wall time of one execution after warmup, ms:
        a recompilation between segments would show as a large maximum."""
        times = [
            t1 - t0
            for (s, t0), t1 in zip(zip(self.steps, self.times), self.times[1:])
            if s + 1 >= warmup
        ]
        times.sort()
        return 1000 * times[len(times) // 2], 1000 * times[-1]

    def rates(self, warmup):
        """(steps per wall second, steps per process-CPU second) after the
        first `warmup` steps (compilation). The second is what the steps
        cost in CPU time, less sensitive to other processes on the
        machine."""
        rows = [
            (s, t, c)
            for s, t, c in zip(self.steps, self.times, self.cpu)
            if s + 1 > warmup
        ]
        if len(rows) < 2:
            raise ValueError(
                f"Too few timed steps ({len(rows)}) after warmup={warmup}: "
                "raise --steps."
            )
        (s0, t0, c0), (s1, t1, c1) = rows[0], rows[-1]
        return (s1 - s0) / (t1 - t0), (s1 - s0) / max(c1 - c0, 1e-9)


def build_model(preset, dtype, dropout, jit_compile, steps_per_execution):
    from keras_txl.models import TransformerXLCausalLM

    backbone = common.make_backbone(preset, dtype, dropout)
    lm = TransformerXLCausalLM(backbone)
    lm.compile(
        optimizer=keras.optimizers.Adam(2.5e-4, clipnorm=0.25),
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )
    return lm


def parse_jit(value):
    return {"auto": "auto", "true": True, "false": False}[value.lower()]


def main(argv=None):
    parser = common.add_common_args(
        argparse.ArgumentParser(description=__doc__)
    )
    parser.add_argument("--jit", default="auto", help="auto | true | false")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--eval-steps", type=int, default=20)
    parser.add_argument("--steps-per-execution", type=int, default=1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument(
        "--mode", default="both", choices=["train", "eval", "both"]
    )
    parser.add_argument(
        "--roofline-seconds",
        type=float,
        default=1.0,
        help="time spent measuring matmul throughput in this process for "
        "the model FLOP utilisation (0: skip)",
    )
    args = parser.parse_args(argv)
    preset = dict(common.PRESETS[args.preset])
    batch, length = preset["batch_size"], preset["segment_length"]
    jit = parse_jit(args.jit)
    rss_start = common.current_rss_mib()

    spe = args.steps_per_execution
    warmup = max(args.warmup, 2 * spe)
    train_steps = warmup + args.steps
    eval_steps = warmup + args.eval_steps
    train_steps += -train_steps % spe
    eval_steps += -eval_steps % spe
    tokens = common.byte_corpus()
    x, y = common.ordered_segments(tokens, batch, length)
    need = max(train_steps, eval_steps)
    repeat = -(-need // len(x))
    dataset = common.to_dataset(x, y, repeat=repeat)

    matmul_dtype = "float32" if args.dtype == "float32" else "bfloat16"
    peak = None
    if args.roofline_seconds > 0:
        peak = roofline.peak(matmul_dtype, args.roofline_seconds)
        peak.pop("per_shape")
    lm = build_model(preset, args.dtype, args.dropout, jit, spe)
    result_base = {
        "benchmark": "train_eval",
        "preset": args.preset,
        "dtype": args.dtype,
        "jit_compile": args.jit,
        "steps_per_execution": spe,
        "dropout": args.dropout,
        "tokens_per_step": batch * length,
        **common.backend_versions(),
        **common.machine_info(),
    }

    cores = os.cpu_count() or 1

    def measure(phase, run, steps, flops_per_token):
        clock = StepClock()
        start = time.perf_counter()
        run(clock)
        total = time.perf_counter() - start
        steps_s, steps_cpu_s = clock.rates(warmup)
        tokens_s = steps_s * batch * length
        tokens_cpu_s = steps_cpu_s * batch * length * cores
        median_ms, max_ms = clock.step_stats(warmup)
        utilisation = {}
        if peak is not None:
            utilisation = {
                "matmul_dtype": matmul_dtype,
                "matmul_gflops_per_s": peak["gflops_per_s"],
                "matmul_gflops_per_cpu_s_x_cores": peak[
                    "gflops_per_cpu_s_x_cores"
                ],
                # Model FLOP utilisation: achieved model FLOP/s over the
                # matmul throughput measured in this process, in wall time
                # and in CPU time (the latter holds when other processes
                # share the cores).
                "mfu": tokens_s * flops_per_token / 1e9 / peak["gflops_per_s"],
                "mfu_cpu": tokens_cpu_s
                * flops_per_token
                / 1e9
                / peak["gflops_per_cpu_s_x_cores"],
            }
        common.emit(
            {
                **utilisation,
                **result_base,
                "phase": phase,
                "resolved_jit_compile": bool(lm.jit_compile),
                "timed_steps": steps - warmup,
                "tokens_per_s": tokens_s,
                # What the steps would reach with all cores to themselves:
                # tokens per CPU-second of this process x cores.
                "tokens_per_cpu_s_x_cores": tokens_cpu_s,
                "cpu_share": steps_s / steps_cpu_s / cores,
                "step_ms": 1000.0 / steps_s,
                "median_execution_ms": median_ms,
                "max_execution_ms": max_ms,
                "flops_per_token": flops_per_token,
                "gflops_per_s": tokens_s * flops_per_token / 1e9,
                "first_steps_s": clock.times[0] - start,
                "wall_s": total,
                "peak_rss_mib": common.peak_rss_mib(),
                "rss_start_mib": rss_start,
            }
        )

    if args.mode in ("train", "both"):
        measure(
            "train",
            lambda clock: lm.fit(
                dataset,
                epochs=1,
                steps_per_epoch=train_steps,
                callbacks=[clock],
                verbose=0,
            ),
            train_steps,
            common.training_flops_per_token(**preset),
        )
    if args.mode in ("eval", "both"):
        lm.reset_memory()
        measure(
            "eval",
            lambda clock: lm.evaluate(
                dataset, steps=eval_steps, callbacks=[clock], verbose=0
            ),
            eval_steps,
            common.forward_flops_per_token(**preset),
        )


if __name__ == "__main__":
    main()
