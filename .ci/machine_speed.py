"""How fast this machine is right now, in one line, for `.ci/run`'s log.

    python3 .ci/machine_speed.py

Nearly the same code's CI took 24.6 minutes one night and 34.2 the
next day on the "same" 2-core VM (CONTRIBUTING.md's table): the machine,
not the code, moved. The tests start over a hundred fresh processes
(each loads TensorFlow or JAX and Keras, about 7 CPU seconds), so how
fast new memory comes is worth recording: that day the VM filled a new
1 GiB numpy array at 0.37 GB/s and the same array again at 11 GB/s.
This prints the rates of new and touched memory and a pure-Python loop,
so that a row of CONTRIBUTING's table says which machine it was
measured on (`.ci/timings.py` reads the line). A record, not yet a
predictor: the 34.2-minute run started at 2.02 / 8.7 GB/s. Standard
library only: it runs before anything is installed.
"""

import ctypes
import platform
import time

SIZE = 256 * 2**20  # bytes zeroed per measurement
LOOP = 5_000_000  # iterations of the Python loop


def cpu_model():
    """The CPU's model name, family and model (Linux), or the platform's
    processor: "Intel(R) Xeon(R) Processor (family 6 model 167)"."""
    fields = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if "model name" not in fields:
        return platform.processor() or "unknown CPU"
    return (
        f"{fields['model name']} (family {fields.get('cpu family', '?')} "
        f"model {fields.get('model', '?')})"
    )


def fill_rates():
    """GB/s of zeroing `SIZE` bytes of new memory (pages this process has
    never touched: `bytearray` allocates and zeroes them), then the best
    of zeroing the same bytes again 3 times."""
    start = time.perf_counter()
    buffer = bytearray(SIZE)
    new = SIZE / (time.perf_counter() - start) / 1e9
    address = ctypes.addressof((ctypes.c_char * SIZE).from_buffer(buffer))
    touched = 0.0
    for _ in range(3):
        start = time.perf_counter()
        ctypes.memset(address, 0, SIZE)
        touched = max(touched, SIZE / (time.perf_counter() - start) / 1e9)
    return new, touched


def loop_seconds():
    """Seconds of a fixed pure-Python loop (the interpreter's speed)."""
    start = time.perf_counter()
    total = 0
    for i in range(LOOP):
        total += i
    return time.perf_counter() - start


def measure():
    """`{"cpu", "new_memory", "touched_memory", "python_loop"}`: memory
    rates in GB/s (the best of 3), the loop in seconds (the best of 3)."""
    new, touched = zip(*(fill_rates() for _ in range(3)))
    return {
        "cpu": cpu_model(),
        "new_memory": max(new),
        "touched_memory": max(touched),
        "python_loop": min(loop_seconds() for _ in range(3)),
    }


def line(speed):
    """The line `.ci/run` prints (and `.ci/timings.py` parses)."""
    return (
        f"=== machine: {speed['cpu']}; new memory "
        f"{speed['new_memory']:.2f} GB/s, touched "
        f"{speed['touched_memory']:.1f} GB/s; Python loop "
        f"{speed['python_loop']:.2f} s"
    )


if __name__ == "__main__":
    print(line(measure()))
