"""Reads a `.safetensors` file into numpy arrays, without the `safetensors`
package.

The format (https://github.com/huggingface/safetensors): 8 bytes, the
little-endian length `n` of a JSON header; the header, `n` bytes, mapping
each tensor name to its `dtype`, `shape` and `data_offsets` (begin, end)
in the byte buffer that follows, plus an optional `__metadata__` entry;
then the buffer, little-endian, row-major. Nothing in it is executed.
"""

import json
import struct

import numpy as np

_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}


def read_safetensors(path):
    """The tensors of a safetensors file.

    Args:
        path: path of the `.safetensors` file.

    Returns:
        A dict of name to numpy array (bfloat16 tensors as float32).

    Raises:
        ValueError: if the file is not a well-formed safetensors file or
            holds a dtype this reader does not know.

    Example:

    >>> import json, struct, tempfile, numpy as np
    >>> header = json.dumps(
    ...     {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    ... ).encode()
    >>> path = tempfile.mktemp(suffix=".safetensors")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(struct.pack("<Q", len(header)) + header)
    ...     _ = f.write(np.array([1, 2], "<f4").tobytes())
    >>> read_safetensors(path)["w"].tolist()
    [1.0, 2.0]
    """
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path} is not a safetensors file: too short.")
    (length,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8 : 8 + length])
    except ValueError as error:
        raise ValueError(
            f"{path} is not a safetensors file: its header is not JSON "
            f"({error})."
        ) from None
    buffer = memoryview(data)[8 + length :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = entry["dtype"], tuple(entry["shape"])
        begin, end = entry["data_offsets"]
        if not 0 <= begin <= end <= len(buffer):
            raise ValueError(
                f"{path}: tensor '{name}' lies outside the file (bytes "
                f"{begin}..{end} of {len(buffer)})."
            )
        raw = buffer[begin:end]
        if dtype == "BF16":
            bits = np.frombuffer(raw, "<u2").astype("<u4") << 16
            array = bits.view("<f4")
        elif dtype in _DTYPES:
            array = np.frombuffer(raw, _DTYPES[dtype])
        else:
            raise ValueError(
                f"{path}: tensor '{name}' has dtype {dtype}, which this "
                f"reader does not know (known: BF16, {', '.join(_DTYPES)})."
            )
        if array.size != int(np.prod(shape)):
            raise ValueError(
                f"{path}: tensor '{name}' of shape {shape} has "
                f"{array.size} values."
            )
        tensors[name] = array.reshape(shape).copy()
    return tensors
