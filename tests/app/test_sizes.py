"""One table of sizes: a name is one model size for `keras-txl train`,
`keras-txl ablate` and the benchmarks; "preset" is a keras-hub preset
only, so no command takes `--preset` for a size."""

import argparse
import os
import re

from benchmarks import common
from keras_txl_cli.ablate_command import DEFAULTS as ABLATE_DEFAULTS
from keras_txl_cli.ablate_command import add_parser as add_ablate_parser
from keras_txl_cli.cli import make_parser
from keras_txl_cli.sizes import SIZES
from keras_txl_cli.sizes import TRAIN_SIZES
from keras_txl_cli.sizes import size_arguments

README = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "README.md"
)
# README's column of each dimension.
COLUMNS = dict(
    num_layers="layers",
    num_heads="heads",
    hidden_dim="hidden",
    head_dim="head",
    intermediate_dim="inner",
)


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


def _readme_size_table():
    """`{name: cells}` of README.md's size table, by its header cell."""
    with open(README, encoding="utf-8") as file:
        lines = file.read().splitlines()
    start = lines.index(
        "| size | layers | heads | hidden | head | inner "
        "| `keras-txl train --size` | `keras-txl ablate --size` "
        "| benchmarks' `--size` |"
    )
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = re.match(r"`(\w+)`", cells[0]).group(1)
        rows[name] = dict(zip(header, cells))
    return rows


def _takes(action, default):
    """README's cell for each size: whether a `--size` takes it."""
    return {
        name: "default"
        if name == default
        else ("yes" if name in action.choices else "no")
        for name in SIZES
    }


def test_readme_size_table_says_which_command_takes_which_size():
    rows = _readme_size_table()
    assert list(rows) == list(SIZES)
    for name, row in rows.items():
        dimensions = {key: int(row[column]) for key, column in COLUMNS.items()}
        assert dimensions == SIZES[name], name
    train = _size_action(
        make_parser()._subparsers._group_actions[0].choices["train"]
    )
    subparsers = argparse.ArgumentParser().add_subparsers()
    add_ablate_parser(subparsers)
    ablate = _size_action(subparsers.choices["ablate"])
    benchmark = _size_action(common.add_common_args(argparse.ArgumentParser()))
    for column, action, default in (
        ("`keras-txl train --size`", train, train.default),
        ("`keras-txl ablate --size`", ablate, ABLATE_DEFAULTS["size"]),
        ("benchmarks' `--size`", benchmark, benchmark.default),
    ):
        cells = {name: row[column] for name, row in rows.items()}
        assert cells == _takes(action, default), column
