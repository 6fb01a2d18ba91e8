import runpy
from pathlib import Path

import numpy as np
import pytest

from tests.test_case import to_numpy

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_model.py"


@pytest.mark.torch_ok
def test_readme_example_composes_the_layers_in_a_user_model():
    module = runpy.run_path(str(EXAMPLE))
    model, state = module["main"]()
    # Four segments of 8 tokens into a memory of 16 slots: full.
    np.testing.assert_array_equal(to_numpy(state["valid_length"]), [16, 16])
    assert tuple(state["memory"].shape) == (2, 16, 32)
