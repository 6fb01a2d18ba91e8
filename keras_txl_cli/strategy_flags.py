"""`--strategy`, `--num-devices` and `--tpu`: the devices of `keras-txl
train` and `keras-txl evaluate`. Adding the flags imports nothing heavy;
`make_command_strategy` sets the devices up (the engine's first work)."""

from keras_txl_cli.choices import STRATEGY_NAMES
from keras_txl_cli.choices import ConfigError
from keras_txl_cli.choices import integer


def add_strategy_arguments(parser, spreads):
    """Adds the three flags to `parser`.

    Args:
        parser: an `argparse` parser.
        spreads: what `--strategy` spreads over the devices, in words
            (`"how fit spreads each batch"`).
    """
    parser.add_argument(
        "--strategy",
        choices=STRATEGY_NAMES,
        default="none",
        help=f"{spreads} over devices: mirrored, "
        "multiworker and tpu under KERAS_BACKEND=tensorflow, "
        "jax-data-parallel under jax (default none: one device; see "
        "docs/distributed.md)",
    )
    parser.add_argument(
        "--num-devices",
        type=integer(1),
        metavar="N",
        help="devices per host of --strategy (default: all; on a host "
        "without accelerators the CPU is split into N devices)",
    )
    parser.add_argument(
        "--tpu",
        metavar="NAME",
        help="with --strategy tpu: 'local' on a TPU VM (the TPU attached "
        "to this host), or a TPU's name or grpc:// address (default: "
        "$TPU_NAME or the Cloud metadata, found by TPUClusterResolver)",
    )


def check_tpu_flag(strategy, tpu):
    """Raises `ConfigError` for `--tpu` without `--strategy tpu`."""
    if tpu is not None and strategy != "tpu":
        raise ConfigError(
            f"--tpu names the TPU of --strategy tpu. Received: "
            f"--tpu {tpu} with --strategy {strategy}: drop "
            "--tpu or use --strategy tpu."
        )


def make_command_strategy(strategy, num_devices=None, tpu=None):
    """The `ReplicaStrategy` of the flags, or `None` for `"none"` (one
    device: no strategy scope).

    Calls `keras_txl.distribute.configure_devices` first, so it must run
    before any operation of the engine in the process (device counts are
    fixed when the engine starts), then `make_strategy`. A strategy of
    another backend is a `ConfigError` naming the ones of this backend.
    """
    from keras_txl import distribute
    from keras_txl.distribute.strategies import check_strategy_name

    check_tpu_flag(strategy, tpu)
    try:
        check_strategy_name(strategy)
    except ValueError as error:
        raise ConfigError(f"--strategy: {error}") from None
    distribute.configure_devices(strategy, num_devices)
    if strategy == "none":
        return None
    return distribute.make_strategy(strategy, num_devices, tpu=tpu)
