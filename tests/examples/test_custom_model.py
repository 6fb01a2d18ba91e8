import re

import pytest

from tests.examples.run_example import numbers
from tests.examples.run_example import run_example


@pytest.mark.torch_ok
def test_custom_model_carries_its_memory_explicitly_and_in_variables():
    """Runs on every backend: `fit` on a model whose memory lives in
    variables is what differs between them. About 8 (TensorFlow), 16
    (JAX) and 25 (torch) CPU-seconds."""
    output = run_example("custom_model.py", "--smoke")
    # 1. Four segments of 8 tokens into a memory of 16 slots: full.
    slots = re.findall(r"^segment at +\d+: .* slots (.*)$", output, re.M)
    assert slots == ["[8, 8]", "[16, 16]", "[16, 16]", "[16, 16]"]
    # 2. `fit` carried the memory from batch to batch: the model learned
    # to copy the previous segment (smoke run: 71-87% of the repeated
    # tokens right with its memory, 2.2% without; an untrained model, or
    # one whose valid length stays 0 in `fit`, gets about 2% with it).
    assert "valid memory slots [16, 16, 16, 16, 16, 16, 16, 16]" in output
    with_memory, without = numbers(
        r"^held out, +(?:no )?memory: ([\d.]+)% of repeated tokens", output
    )
    assert with_memory > 40 and without < 10
    # `predict`, its memory read from the variables in a compiled
    # function, gives the logits of `call_with_memory` steps (<= 1e-6).
    (difference,) = numbers(r"largest logit difference ([\d.e+-]+)$", output)
    assert difference < 1e-4
