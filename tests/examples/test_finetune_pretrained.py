import h5py
import pytest

from tests.examples.run_example import numbers
from tests.examples.run_example import run_example


# The example runs on any backend; its subprocess costs 20-45 CPU-seconds,
# so CI runs it under TensorFlow only (the library paths it calls are
# tested on every backend elsewhere).
@pytest.mark.one_backend
def test_finetune_pretrained_loads_the_checkpoint_and_trains_lora(tmp_path):
    lora = tmp_path / "smoke.lora.h5"
    output = run_example("finetune_pretrained.py", "--smoke", "--output", lora)
    # The HuggingFace fixture loaded: 2 layers, its 1,203 words.
    assert "2 layers x 32, vocabulary 1,203, memory 16" in output
    # A log-probability for each of the sentence's 9 words after the first.
    assert len(numbers(r"^ +\S+ +(-[\d.]+)$", output)) == 9
    # LoRA left only a small part of the model trainable.
    (share,) = numbers(r"parameters \(([\d.]+)%\)", output)
    assert 0 < share < 15
    before, after = numbers(r"held-out perplexity +([\d.]+)", output)
    assert 0 < after < before
    with h5py.File(lora) as saved:
        assert "lora" in saved
