"""Export of Transformer-XL language models for serving.

`export_saved_model(lm, path, batch_size, segment_length, memory_length)`
writes a TensorFlow SavedModel whose signatures take and return the memory
explicitly (`lm.export(path)` calls it).
`export_litert(lm, path, batch_size, segment_length, memory_length,
quantize)` writes `path/model.tflite`, the same serving signature for the
LiteRT runtime (float32 or int8 weights). `lm.export(path,
format="onnx")` (`export_onnx`) writes
`path/model.onnx` for ONNX Runtime, checked by ONNX Runtime against the
model. A SavedModel describes itself in its `assets/`: `vocabulary.json`
(the tokenizer's) and `signatures.json`, documented in
`keras_txl.export.serving_assets`.
"""

from keras_txl.export.litert import export_litert
from keras_txl.export.onnx import export_onnx
from keras_txl.export.saved_model import export_saved_model

__all__ = [
    "export_litert",
    "export_onnx",
    "export_saved_model",
]
