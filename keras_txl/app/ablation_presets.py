"""Model sizes of the ablation runs (`run_ablation(preset=...)`).

Sizes for a CPU: `"tiny"` for tests (seconds), `"small"` for the ablation
table (minutes on 2 cores), `"base"` for a machine with an accelerator.
Memory length, position encoding and stop-gradient are what the ablation
varies; the sizes come from `keras_txl.app.presets.ARCHITECTURES`.
"""

from keras_txl.app.presets import ARCHITECTURES

# Names of the ablation command for sizes of the project's one table.
PRESETS = {
    "tiny": ARCHITECTURES["micro"],
    "small": ARCHITECTURES["small"],
    "base": ARCHITECTURES["medium"],
}


def get_preset(name):
    """The backbone arguments of preset `name` (a new dict)."""
    if name not in PRESETS:
        raise ValueError(
            f"`preset` must be one of {sorted(PRESETS)}. Received: "
            f"preset={name!r}"
        )
    return dict(PRESETS[name])
