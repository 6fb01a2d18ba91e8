"""One preset table: a name is one model size for `keras-txl train`,
`keras-txl ablate` and the benchmarks."""

import argparse

from benchmarks import common
from keras_txl.app.ablation_cli import add_ablate_parser
from keras_txl.app.cli import make_parser
from keras_txl.app.presets import ARCHITECTURES
from keras_txl.app.presets import PRESETS
from keras_txl.app.presets import architecture

SIZE_KEYS = ("num_layers", "num_heads", "hidden_dim", "head_dim")


def _size_action(parser):
    (size,) = [a for a in parser._actions if "--size" in a.option_strings]
    # The old spelling: the same choices and destination, not in --help.
    (old,) = [a for a in parser._actions if "--preset" in a.option_strings]
    assert old.dest == size.dest == "size"
    assert old.choices == size.choices
    assert old.help == argparse.SUPPRESS
    return size


def test_every_preset_name_means_one_model_size():
    for name, preset in PRESETS.items():
        assert preset["model"] == ARCHITECTURES[name], name
    for name, preset in common.PRESETS.items():
        sizes = {key: preset[key] for key in ARCHITECTURES[name]}
        assert sizes == ARCHITECTURES[name], name
    assert architecture("small") == ARCHITECTURES["small"]
    assert architecture("small") is not ARCHITECTURES["small"]


def test_train_and_ablate_take_the_tables_names_and_list_their_sizes():
    train = make_parser()._subparsers._group_actions[0].choices["train"]
    action = _size_action(train)
    assert set(action.choices) == set(PRESETS) <= set(ARCHITECTURES)
    assert "tiny: 2 layers x 128 wide" in action.help
    subparsers = argparse.ArgumentParser().add_subparsers()
    add_ablate_parser(subparsers)
    action = _size_action(subparsers.choices["ablate"])
    assert tuple(action.choices) == tuple(ARCHITECTURES)
    assert "micro: 1 layer x 16 wide" in action.help
