"""One table of sizes: a name is one model size for `keras-txl train`,
`keras-txl ablate` and the benchmarks; "preset" is a keras-hub preset
only, so no command takes `--preset` for a size."""

import argparse

from benchmarks import common
from keras_txl_cli.ablate_command import add_parser as add_ablate_parser
from keras_txl_cli.cli import make_parser
from keras_txl_cli.sizes import SIZES
from keras_txl_cli.sizes import TRAIN_SIZES
from keras_txl_cli.sizes import size_arguments


def _size_action(parser):
    (size,) = [a for a in parser._actions if "--size" in a.option_strings]
    assert size.dest == "size"
    assert not [a for a in parser._actions if "--preset" in a.option_strings]
    return size


def test_every_size_name_means_one_model_size():
    for name, size in TRAIN_SIZES.items():
        assert size["model"] == SIZES[name], name
    for name, size in common.BENCHMARK_SIZES.items():
        arguments = {key: size[key] for key in SIZES[name]}
        assert arguments == SIZES[name], name
    assert size_arguments("small") == SIZES["small"]
    assert size_arguments("small") is not SIZES["small"]


def test_train_and_ablate_take_the_tables_names_and_list_their_sizes():
    train = make_parser()._subparsers._group_actions[0].choices["train"]
    action = _size_action(train)
    assert set(action.choices) == set(TRAIN_SIZES) <= set(SIZES)
    assert "tiny: 2 layers x 128 wide" in action.help
    subparsers = argparse.ArgumentParser().add_subparsers()
    add_ablate_parser(subparsers)
    action = _size_action(subparsers.choices["ablate"])
    assert tuple(action.choices) == tuple(SIZES)
    assert "micro: 1 layer x 16 wide" in action.help
