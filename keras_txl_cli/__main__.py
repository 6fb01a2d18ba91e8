"""`python -m keras_txl_cli`: the `keras-txl` command."""

import sys

from keras_txl_cli import main

sys.exit(main())
