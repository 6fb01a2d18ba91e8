"""`python -m keras_txl`: the `keras-txl` command."""

import sys

from keras_txl.app.cli import main

sys.exit(main())
