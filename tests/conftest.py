import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The token cache of the tests (and of the commands they run) is theirs,
# not the user's ~/.keras/keras_txl_cache.
os.environ["KERAS_TXL_CACHE"] = tempfile.mkdtemp(prefix="keras_txl_cache_")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _clean_keras_state():
    """Each test starts from float32 and fresh layer names."""
    keras.config.set_dtype_policy("float32")
    keras.utils.clear_session()
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """torch's default intra-op threads spin against the other pytest
    worker on a 2-core machine (measured: 1 s a step instead of 0.07 s);
    one thread per worker is what `pytest -n 2` wants."""
    if keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(1)
