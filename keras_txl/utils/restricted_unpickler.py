"""Reading data out of a pickle without running the code it names.

HuggingFace's Transformer-XL tokenizer saved its vocabulary as a pickle of
the whole tokenizer object (`vocab.pkl`), and `pickle.load` of such a file
runs whatever the file asks for: a `__reduce__` can call `os.system`. This
module reads it with `pickle.Unpickler`'s opcode machine, but every class
or function the file names is replaced by an inert placeholder
(`OpaqueObject`), except a short list of plain containers and scalars
(`dict`, `list`, `tuple`, `set`, `frozenset`, `str`, `bytes`, `int`,
`float`, `bool`, `complex` and `collections.OrderedDict`, read as a
`dict`). Calling a placeholder builds another placeholder and nothing
else; its state, items and attributes are dropped. No module is imported,
no attribute is looked up by a name from the file, no function of the file
runs. What comes back is made of plain Python values and placeholders.
"""

import io
import pickle

# (module, name) -> what the file may build with it: plain containers and
# scalars, whose constructors run no code of the file.
_PLAIN = {
    ("builtins", "dict"): dict,
    ("builtins", "list"): list,
    ("builtins", "tuple"): tuple,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "str"): str,
    ("builtins", "bytes"): bytes,
    ("builtins", "bytearray"): bytearray,
    ("builtins", "int"): int,
    ("builtins", "float"): float,
    ("builtins", "bool"): bool,
    ("builtins", "complex"): complex,
    ("__builtin__", "dict"): dict,
    ("__builtin__", "list"): list,
    ("__builtin__", "set"): set,
    ("__builtin__", "frozenset"): frozenset,
    ("collections", "OrderedDict"): dict,
}


class OpaqueObject:
    """Stands for an object of a class or function a pickle names: keeps
    the name (`qualified_name`), accepts and drops everything the
    unpickler hands it (arguments, state, items)."""

    __slots__ = ()
    qualified_name = "?"

    def __new__(cls, *args, **kwargs):
        return super().__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __repr__(self):
        return f"<opaque {self.qualified_name}>"

    # The calls `pickle.Unpickler` makes on the objects it builds.
    def __setstate__(self, state):
        pass

    def __setitem__(self, key, value):
        pass

    def append(self, value):
        pass

    def extend(self, values):
        pass

    def add(self, value):
        pass


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file):
        super().__init__(file)
        self._opaque = {}

    def find_class(self, module, name):
        plain = _PLAIN.get((module, name))
        if plain is not None:
            return plain
        # A fresh subclass per name: REDUCE calls it, NEWOBJ calls its
        # `__new__`; both make an inert object that only knows the name.
        key = f"{module}.{name}"
        if key not in self._opaque:
            self._opaque[key] = type(
                "Opaque",
                (OpaqueObject,),
                {"__slots__": (), "qualified_name": key},
            )
        return self._opaque[key]

    def persistent_load(self, pid):
        return OpaqueObject()


def restricted_loads(data):
    """Reads a pickle's data without running the code it names.

    Args:
        data: bytes of a pickle (any protocol).

    Returns:
        The object, built from plain containers, scalars and
        `OpaqueObject`s.

    Raises:
        ValueError: the data is not a pickle the opcode machine can read.

    Example:

    >>> import pickle, collections
    >>> restricted_loads(pickle.dumps({"a": [1, "b"]}))
    {'a': [1, 'b']}
    >>> restricted_loads(pickle.dumps(collections.Counter("ab")))
    <opaque collections.Counter>
    """
    try:
        return _RestrictedUnpickler(io.BytesIO(data)).load()
    except Exception as error:  # any malformed file: one clear error
        raise ValueError(
            f"Could not read the pickle data ({type(error).__name__}: "
            f"{error}). It is read without running code, so only plain "
            "containers and strings come out of it."
        ) from error


__all__ = ["OpaqueObject", "restricted_loads"]
