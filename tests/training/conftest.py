import keras
import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """torch's default intra-op threads spin against the other pytest
    worker on a 2-core machine (measured: 1 s a step instead of 0.07 s);
    one thread per worker is what `pytest -n 2` wants."""
    if keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(1)
