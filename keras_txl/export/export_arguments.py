"""What every exporter of `keras_txl.export` checks the same way, before
anything is written: the model it was given, the shapes it will serve
and the destination (`export_saved_model`, `export_litert`,
`export_onnx`; `export_main`, the command's, checks the shapes and the
destination of a run folder)."""

import os

from keras_txl.models.transformer_xl_causal_lm import TransformerXLCausalLM
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int
from keras_txl.utils.validation import check_positive_int


def check_exported_lm(lm, batch_size, segment_length, memory_length):
    """The export's `(batch_size, segment_length, memory_length)` for
    `lm`, checked: `lm` must be a `TransformerXLCausalLM` (the backbone
    alone has no output layer to serve), and `memory_length=None` is the
    memory it carries (`lm.carried_memory_length`)."""
    if not isinstance(lm, TransformerXLCausalLM):
        raise ValueError(
            "`lm` must be a `keras_txl.models.TransformerXLCausalLM`. "
            f"Received: lm={type(lm).__name__}. A backbone has no output "
            "layer to serve: export `TransformerXLCausalLM(backbone)`."
        )
    if memory_length is None:
        memory_length = lm.carried_memory_length
    return check_export_args(batch_size, segment_length, memory_length)


def check_export_args(batch_size, segment_length, memory_length):
    """The export's `(batch_size, segment_length, memory_length)`,
    checked: `None` batch size or segment length serves any."""
    batch_size = check_optional_positive_int("batch_size", batch_size)
    segment_length = check_optional_positive_int(
        "segment_length", segment_length
    )
    # The memory is what the signature threads: at least one slot.
    memory_length = check_positive_int("memory_length", memory_length)
    return batch_size, segment_length, memory_length


def check_destination(path, overwrite):
    """Refuses to write over `path` unless it is empty or `overwrite`.
    Returns `path` as a string."""
    path = os.fspath(path)
    check_bool("overwrite", overwrite)
    exists = os.path.exists(path)
    empty_dir = exists and os.path.isdir(path) and not os.listdir(path)
    if exists and not empty_dir and not overwrite:
        raise FileExistsError(
            f"The export destination {path!r} already exists. Pass "
            "`overwrite=True` (`--overwrite` on the command line) to "
            "replace it, or choose another path (e.g. a new version "
            "directory `.../2`)."
        )
    return path
