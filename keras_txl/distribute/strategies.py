"""Choosing devices and a strategy: what `keras-txl train --strategy NAME
--num-devices N` calls.

Two calls, in this order:

1. `configure_devices(name, num_devices)` FIRST THING in the process,
   before any model, tensor or op: device counts are fixed once the engine
   starts (TensorFlow's logical devices, JAX's host platform device count
   and `jax.distributed.initialize`).
2. `make_strategy(name, num_devices)`: the `ReplicaStrategy` to build,
   compile and fit the model in.
"""

import os

import keras

from keras_txl.distribute.replica_strategy import ReplicaStrategy
from keras_txl.utils import processes
from keras_txl.utils.validation import check_optional_positive_int

# Strategy name -> the backend it runs on (None: any).
STRATEGY_BACKENDS = {
    "none": None,
    "mirrored": "tensorflow",
    "multiworker": "tensorflow",
    "tpu": "tensorflow",
    "jax-data-parallel": "jax",
}
STRATEGY_NAMES = tuple(STRATEGY_BACKENDS)

# Environment variables that say that this process is one of several (JAX,
# several hosts): those of `keras.distribution.initialize()`, and ours for
# hosts that find each other alone (TPU pod slices).
_MULTI_HOST_ENV = (
    "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "KERAS_TXL_MULTI_HOST",
)


def check_strategy_name(name):
    """Checks that `name` is a strategy of this backend and returns it.

    Raises a `ValueError` naming the strategies that this backend runs when
    `name` is unknown or belongs to another backend (e.g. `"mirrored"`
    under JAX).
    """
    backend = keras.backend.backend()
    here = [n for n, b in STRATEGY_BACKENDS.items() if b in (None, backend)]
    if name not in STRATEGY_BACKENDS:
        raise ValueError(
            f"`strategy` must be one of {list(STRATEGY_NAMES)}. Received: "
            f"strategy={name!r}. With KERAS_BACKEND={backend} use one of "
            f"{here}."
        )
    wanted = STRATEGY_BACKENDS[name]
    if wanted not in (None, backend):
        raise ValueError(
            f"Strategy {name!r} runs on the {wanted} backend, but this "
            f"process runs KERAS_BACKEND={backend}. Set "
            f"KERAS_BACKEND={wanted} before Python starts, or use one of "
            f"{here}."
        )
    return name


def configure_devices(strategy, num_devices=None, multi_host=None):
    """Makes `num_devices` devices visible to the engine. Call it first.

    On a host with no accelerator, `num_devices=N` splits the CPU into `N`
    logical devices (TensorFlow: `tf.config.set_logical_device_configuration`;
    JAX: the `jax_num_cpu_devices` option, the same as
    `XLA_FLAGS=--xla_force_host_platform_device_count=N`), so that the
    multi-device code paths run on a laptop. With GPUs or TPUs nothing is
    split: `num_devices` only checks that there are enough (the strategy
    takes the first `N`).

    Both engines fix their devices when they start, so this must run
    before any tensor, model or op exists in the process.

    Args:
        strategy: str, one of `STRATEGY_NAMES`.
        num_devices: int or `None` (every device of the host).
        multi_host: bool or `None`. JAX only: call
            `keras.distribution.initialize()` (i.e.
            `jax.distributed.initialize`) to join the other processes.
            `None` does so when `KERAS_DISTRIBUTION_JOB_ADDRESSES`,
            `KERAS_DISTRIBUTION_NUM_PROCESSES` or `KERAS_TXL_MULTI_HOST`
            is set. On a TPU pod slice pass `True` (or set
            `KERAS_TXL_MULTI_HOST=1`): JAX finds the other hosts itself.

    Returns:
        The number of devices the strategy will use on this host (`None`
        for `"tpu"`, whose cores are known only once connected).
    """
    name = check_strategy_name(strategy)
    num_devices = check_optional_positive_int("num_devices", num_devices)
    backend = keras.backend.backend()
    if name == "none":
        if num_devices not in (None, 1):
            raise ValueError(
                f"Strategy 'none' trains on one device. Received: "
                f"num_devices={num_devices}. Use a multi-device strategy "
                f"({[n for n in STRATEGY_NAMES if n != 'none']}) or "
                "num_devices=1."
            )
        return 1
    if backend == "jax":
        return _configure_jax(num_devices, multi_host)
    return _configure_tensorflow(name, num_devices)


def _configure_jax(num_devices, multi_host):
    import jax

    if multi_host is None:
        multi_host = any(os.environ.get(key) for key in _MULTI_HOST_ENV)
    seeded = True
    if multi_host and not jax.distributed.is_initialized():
        seeded = _initialize_processes()
    available = _jax_devices(num_devices)
    if not seeded:
        _agree_on_a_seed()
    return available


def _jax_devices(num_devices):
    import jax

    if num_devices is None:
        return len(jax.local_devices())
    try:
        # Only the host (CPU) platform reads it; GPUs and TPUs keep theirs.
        jax.config.update("jax_num_cpu_devices", num_devices)
    except RuntimeError:
        pass  # JAX already started: check what it has below.
    available = len(jax.local_devices())
    if available < num_devices:
        raise RuntimeError(
            f"num_devices={num_devices}, but JAX sees {available} "
            "device(s): it started before `configure_devices` ran. Call "
            "`keras_txl.distribute.configure_devices` before any JAX "
            "computation, or start Python with XLA_FLAGS="
            f"--xla_force_host_platform_device_count={num_devices}."
        )
    return num_devices


def _initialize_processes():
    """`keras.distribution.initialize()` (`jax.distributed.initialize`
    from the `KERAS_DISTRIBUTION_*` variables, or found alone on a TPU pod
    slice), with `KERAS_TXL_PEER_TIMEOUT=SECONDS` passed to JAX as
    `heartbeat_timeout_seconds`: how long the processes wait for a lost
    one before they stop with an error (JAX's default: 100 s).

    Returns whether the processes share a random seed already (Keras's
    `initialize` agrees on one; `jax.distributed.initialize` does not:
    then `_agree_on_a_seed` must run, once the devices are set)."""
    timeout = os.environ.get("KERAS_TXL_PEER_TIMEOUT")
    if not timeout:
        keras.distribution.initialize()
        return True
    if not timeout.isdigit() or int(timeout) < 1:
        raise ValueError(
            "KERAS_TXL_PEER_TIMEOUT must be a whole number of seconds >= 1. "
            f"Received: {timeout!r}. Unset it for JAX's default (100 s)."
        )
    import jax

    addresses = os.environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES")
    count = os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES")
    index = os.environ.get("KERAS_DISTRIBUTION_PROCESS_ID")
    jax.distributed.initialize(
        # Keras's reading: the first of the addresses coordinates.
        coordinator_address=addresses.split(",")[0] if addresses else None,
        num_processes=int(count) if count else None,
        process_id=int(index) if index else None,
        heartbeat_timeout_seconds=int(timeout),
    )
    return False


def _agree_on_a_seed():
    """Sets one random seed on every process, the sum of a seed drawn by
    each, as `keras.distribution.initialize()` does: Keras draws a
    variable's initial value on each process, and JAX refuses to place a
    value that differs between them (as a model that is loaded, and not
    seeded, would draw it). A seed set later (`keras-txl train --seed`)
    replaces it."""
    import secrets

    import numpy as np

    drawn = np.array([secrets.randbits(32)], "uint32")
    seeds = processes.gather_arrays(drawn).astype("uint64")  # (processes,)
    keras.utils.set_random_seed(int(seeds.sum() % 2**32))


def _configure_tensorflow(name, num_devices):
    import tensorflow as tf

    if name == "tpu":
        return num_devices  # checked against the cores once connected
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        if num_devices is not None and len(gpus) < num_devices:
            raise ValueError(
                f"num_devices={num_devices}, but this host has "
                f"{len(gpus)} GPU(s)."
            )
        return num_devices or len(gpus)
    if name == "multiworker":
        if num_devices not in (None, 1):
            raise ValueError(
                "MultiWorkerMirroredStrategy runs one replica per CPU "
                f"worker (it takes no logical CPU devices). Received: "
                f"num_devices={num_devices}. Start one worker per device "
                "(TF_CONFIG), or use strategy 'mirrored' on one host."
            )
        return 1
    if num_devices is None or num_devices == 1:
        return len(tf.config.list_logical_devices("CPU"))
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices
        )
    except RuntimeError:
        pass  # TensorFlow already started: check what it has below.
    available = len(tf.config.list_logical_devices("CPU"))
    if available < num_devices:
        raise RuntimeError(
            f"num_devices={num_devices}, but TensorFlow sees {available} "
            "CPU device(s): it started before `configure_devices` ran. "
            "Call `keras_txl.distribute.configure_devices` before any "
            "TensorFlow op."
        )
    return num_devices


def make_strategy(name, num_devices=None, tpu=None):
    """The `ReplicaStrategy` for a strategy name.

    - `"none"` (any backend): one replica.
    - `"mirrored"` (TensorFlow): the first `num_devices` GPUs, else as many
      logical CPU devices.
    - `"multiworker"` (TensorFlow): every worker of `TF_CONFIG`, times its
      GPUs (or one CPU).
    - `"tpu"` (TensorFlow): every core of the TPU (`TPUClusterResolver`).
    - `"jax-data-parallel"` (JAX): the first `num_devices` devices of
      every host.

    Calls `configure_devices(name, num_devices)` (a no-op if it already
    ran): on a CPU host, call `configure_devices` yourself at the start of
    the process if anything may start the engine before this.

    Args:
        name: str, one of `STRATEGY_NAMES`.
        num_devices: int or `None` (all devices). Devices per host.
        tpu: str or `None`, for `"tpu"`: `"local"` on a TPU VM (the TPU
            attached to this host), a TPU name or `grpc://` address for a
            TPU reached over the network; `None` lets
            `TPUClusterResolver` find it (`$TPU_NAME`, Cloud metadata).

    Returns:
        A `ReplicaStrategy`.

    Example:

    >>> strategy = make_strategy("none")
    >>> with strategy.scope():
    ...     pass  # build, compile and fit here
    >>> strategy.name, strategy.num_replicas
    ('none', 1)
    """
    count = configure_devices(name, num_devices)
    backend = keras.backend.backend()
    if name == "none":
        if backend == "tensorflow":
            import tensorflow as tf

            return ReplicaStrategy(name, tf.distribute.get_strategy(), 1)
        return ReplicaStrategy(name, None, 1)
    if backend == "jax":
        return _jax_data_parallel(count)
    return _tensorflow_strategy(name, count, tpu)


def _jax_data_parallel(count):
    import jax

    if jax.process_count() > 1:
        # Every device of every host; `count` devices per host.
        per_host = {}
        for device in jax.devices():
            per_host.setdefault(device.process_index, []).append(device)
        devices = [d for host in per_host.values() for d in host[:count]]
    else:
        devices = jax.devices()[:count]
    names = [f"{d.platform}:{d.id}" for d in devices]
    distribution = keras.distribution.DataParallel(devices=names)
    return ReplicaStrategy("jax-data-parallel", distribution, len(devices))


def _tensorflow_strategy(name, count, tpu):
    import tensorflow as tf

    if name == "mirrored":
        kind = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
        devices = [d.name for d in tf.config.list_logical_devices(kind)]
        strategy = tf.distribute.MirroredStrategy(devices[:count])
    elif name == "multiworker":
        # Reads TF_CONFIG; without it, a single worker on this host.
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        _reduce_leaf_by_leaf(strategy)
        processes.use_tensorflow_workers(strategy)
    else:
        strategy = _tpu_strategy(tpu)
        cores = strategy.num_replicas_in_sync
        if count is not None and count != cores:
            raise ValueError(
                f"num_devices={count}, but the TPU has {cores} cores; "
                "TPUStrategy uses them all. Pass num_devices=None."
            )
    return ReplicaStrategy(name, strategy, strategy.num_replicas_in_sync)


def _reduce_leaf_by_leaf(strategy):
    """Lets Keras 3's `fit` run under `MultiWorkerMirroredStrategy` with
    several workers.

    Keras's TensorFlow trainer calls `strategy.reduce` on the whole
    `(inputs, targets)` batch (to build the model) and with `axis=0` on
    the scalar logs of each step; with several workers this strategy takes
    neither (a nest, an axis a scalar lacks) and `fit` fails before the
    first step (keras-team/keras#20585). Reducing leaf by leaf, scalars
    without an axis, gives what Keras means: the mean over replicas.
    """
    import tensorflow as tf

    reduce = strategy.reduce

    def reduce_leaves(reduce_op, value, axis=None):
        def one(leaf):
            local = strategy.experimental_local_results(leaf)[0]
            rank = len(getattr(local, "shape", ()))
            try:
                return reduce(reduce_op, leaf, axis=axis if rank else None)
            except ValueError:
                # Not a per-replica value (e.g. a metric result read from
                # a variable in the cross-replica context): already global.
                return leaf

        return tf.nest.map_structure(one, value)

    strategy.reduce = reduce_leaves


def _tpu_strategy(tpu):
    import tensorflow as tf

    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
        raise RuntimeError(
            "Strategy 'tpu' found no TPU "
            f"(TPUClusterResolver(tpu={tpu!r})): {error}. On a TPU VM run "
            "on the VM itself (tpu=None or 'local'); elsewhere pass the "
            "TPU's name (`tpu=` or $TPU_NAME)."
        ) from error
    return tf.distribute.TPUStrategy(resolver)
