"""The `keras-txl` command, apart from the library: argument parsing, the
runs it orchestrates (train, evaluate, generate, ablate), their
configuration, artifacts and plots, and the one table of model sizes."""
