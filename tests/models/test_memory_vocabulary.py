"""The memory vocabulary (docs/design.md, "Memory vocabulary"): every old
name still works and gives what the new name gives, and the design notes
name only files that exist."""

import re
import warnings

import numpy as np
import pytest

import keras_txl.models
import keras_txl.training
from keras_txl.models import MemoryState
from keras_txl.models import TransformerXLBackbone
from keras_txl.models.transformer_xl_backbone import RENAMED_HOOKS
from keras_txl.utils.validation import renamed_argument
from tests.test_case import REPO
from tests.test_case import to_numpy

# Names route to the same code on every backend: CI runs these under
# TensorFlow only (a backbone's eager call takes ~18 s on JAX, ~1 s on
# TensorFlow, on this 2-core machine).
pytestmark = pytest.mark.one_backend


def test_memory_reset_is_public_from_training_and_importable_from_models():
    from keras_txl.models import MemoryReset as old
    from keras_txl.training import MemoryReset as new

    assert old is new
    assert "MemoryReset" in keras_txl.training.__all__
    assert "MemoryReset" not in keras_txl.models.__all__


def test_call_with_key_value_cache_takes_the_old_keyword_cache():
    backbone = TransformerXLBackbone(
        vocabulary_size=7,
        num_layers=1,
        num_heads=1,
        hidden_dim=4,
        head_dim=4,
        intermediate_dim=4,
        memory_length=2,
    )
    token_ids = np.array([[1, 2, 3]], "int32")
    key_value_cache = backbone.key_value_cache(backbone.initial_memory(1))
    new, new_cache = backbone.call_with_key_value_cache(
        token_ids, key_value_cache=key_value_cache
    )
    with pytest.warns(DeprecationWarning, match="`key_value_cache=`"):
        old, old_cache = backbone.call_with_key_value_cache(
            token_ids, cache=key_value_cache
        )
    np.testing.assert_array_equal(to_numpy(old), to_numpy(new))
    np.testing.assert_array_equal(
        to_numpy(old_cache["key_values"][0]),
        to_numpy(new_cache["key_values"][0]),
    )
    with pytest.raises(TypeError, match="Received both"):
        backbone.call_with_key_value_cache(
            token_ids, key_value_cache, cache=key_value_cache
        )


def test_renamed_argument_refuses_unknown_and_missing_keywords():
    with pytest.raises(TypeError, match=r"\['chache'\]"):
        renamed_argument("key_value_cache", None, "cache", {"chache": 1})
    with pytest.raises(TypeError, match="Missing argument `key_value_cache`"):
        renamed_argument("key_value_cache", None, "cache", {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed_argument("key_value_cache", 3, "cache", {}) == 3


@pytest.mark.parametrize("old, new", sorted(RENAMED_HOOKS.items()))
def test_a_subclass_overriding_an_old_hook_name_overrides_the_new(old, new):
    def hook(self, *args):
        return "overridden"

    with pytest.warns(DeprecationWarning, match=f"renamed `{new}`"):
        subclass = type("OldVariant", (TransformerXLBackbone,), {old: hook})
    assert getattr(subclass, new) is hook
    # The base class keeps its own hook, and new names warn nothing.
    assert getattr(TransformerXLBackbone, new) is not hook
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        type("NewVariant", (TransformerXLBackbone,), {new: hook})


def test_design_notes_name_only_files_that_exist():
    text = (REPO / "docs" / "design.md").read_text()
    paths = set(re.findall(r"keras_txl/[\w/]+\.py", text))
    # Names relative to `keras_txl/` in the one-file table and picture.
    paths |= {
        f"keras_txl/{name}"
        for name in re.findall(
            r"(?<![\w/])((?:models|layers|utils|convert|app|data|export"
            r"|training|distribute|ablation|metrics)/[\w/]+\.py)",
            text,
        )
    }
    missing = sorted(p for p in paths if not (REPO / p).is_file())
    assert len(paths) > 20
    assert not missing, f"docs/design.md names missing files: {missing}"


def test_memory_state_write_names_the_keys_a_memory_dict_needs():
    state = MemoryState(num_layers=1, memory_length=2, hidden_dim=3)
    state.build(batch_size=1)
    with pytest.raises(KeyError, match=r"\['memory', 'valid_length'\]"):
        state.write({"memory": np.zeros((1, 1, 2, 3), "float32")})
