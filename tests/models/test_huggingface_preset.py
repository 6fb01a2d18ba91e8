"""`TransformerXLCausalLM.from_preset` of the HuggingFace fixture folder:
the real converter and tokenizer, and `generate` on strings."""

import os

from keras_txl.models import TransformerXLCausalLM
from keras_txl.models import TransformerXLTokenizer

HF_FOLDER = os.path.join(
    os.path.dirname(__file__), "..", "fixtures", "hf_transfo_xl"
)


def test_generate_on_strings_from_the_huggingface_fixture(tmp_path):
    lm = TransformerXLCausalLM.from_preset(HF_FOLDER)
    assert lm.backbone.vocabulary_size == 1203
    assert isinstance(lm.preprocessor.tokenizer, TransformerXLTokenizer)
    lm.compile(sampler="greedy")
    text = lm.generate("I tell you, friends", max_length=12)
    assert isinstance(text, str) and text.startswith("I tell you")
    lm.save_to_preset(str(tmp_path))
    loaded = TransformerXLCausalLM.from_preset(str(tmp_path))
    loaded.compile(sampler="greedy")
    assert loaded.generate("I tell you, friends", max_length=12) == text
