"""Model sizes of the ablation runs (`run_ablation(preset=...)`).

Sizes for a CPU: `"tiny"` for tests (seconds), `"small"` for the ablation
table (minutes on 2 cores), `"base"` for a machine with an accelerator.
Only the architecture lives here; memory length, position encoding and
stop-gradient are what the ablation varies.
"""

PRESETS = {
    "tiny": dict(
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        head_dim=8,
        intermediate_dim=32,
    ),
    "small": dict(
        num_layers=2,
        num_heads=4,
        hidden_dim=64,
        head_dim=16,
        intermediate_dim=256,
    ),
    "base": dict(
        num_layers=6,
        num_heads=8,
        hidden_dim=256,
        head_dim=32,
        intermediate_dim=1024,
    ),
}


def get_preset(name):
    """The backbone arguments of preset `name` (a new dict)."""
    if name not in PRESETS:
        raise ValueError(
            f"`preset` must be one of {sorted(PRESETS)}. Received: "
            f"preset={name!r}"
        )
    return dict(PRESETS[name])
