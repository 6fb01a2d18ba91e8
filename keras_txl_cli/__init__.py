"""The `keras-txl` command, a package apart from the library: it imports
`keras_txl`, never the reverse.

`main` is the console script. One module per subcommand
(`*_command.py`) adds its parser and runs it; `cli.py` gathers them,
checks the arguments before Keras is imported (so that a mistake comes
back at once) and prints errors in one line. Beside them, what commands
share: `train_config.py`, `artifacts.py` (run files, metrics),
`text_segments.py`, `sampling.py`, `plots.py`, `dynamic_report.py`,
`console.py` (what the command prints) and `sizes.py` (the one table of
model sizes).
"""


def main(argv=None):
    """The `keras-txl` command: returns its exit status.

    Hides the native libraries' start-up lines
    (`console.quiet_native_logs`, unless `--verbose`), then runs
    `cli.main`, which checks `argv` (default: the command line) before it
    imports Keras.
    """
    from keras_txl_cli import cli
    from keras_txl_cli import console

    console.quiet_native_logs(argv)
    return cli.main(argv)
