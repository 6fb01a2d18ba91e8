"""Training over several devices and hosts, each replica carrying the
memory of its own streams of text.

The process starts with `configure_devices(name, num_devices)` (before any
op: device counts are fixed when the engine starts), then
`strategy = make_strategy(name, num_devices)`, and builds, compiles and
fits the model in `strategy.scope()`, with `strategy.build_memory(model,
global_batch_size)` and `strategy.distribute_dataset(dataset)`. See
`docs/distributed.md`.
"""

from keras_txl.distribute.device_budget import device_budget
from keras_txl.distribute.replica_strategy import ReplicaStrategy
from keras_txl.distribute.strategies import configure_devices
from keras_txl.distribute.strategies import make_strategy

__all__ = [
    "ReplicaStrategy",
    "configure_devices",
    "device_budget",
    "make_strategy",
]
