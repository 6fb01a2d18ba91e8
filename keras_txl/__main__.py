"""`python -m keras_txl`: the `keras-txl` command, kept for those who
typed it before the command became a package of its own. Python runs
`keras_txl/__init__.py` (Keras, TensorFlow or JAX) before this file, so a
mistake takes seconds to come back and the native libraries' start-up
lines show: `keras-txl` or `python -m keras_txl_cli` check the arguments
first. Nothing imports this module; the library never imports the
command."""

import sys

from keras_txl_cli import main

sys.exit(main())
