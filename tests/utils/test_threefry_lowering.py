import jax
import keras
import numpy as np
from jax.extend.random import threefry2x32_p

from keras_txl.utils.threefry_lowering import threefry_2x32
from tests.tiny_models import tiny_backbone

# Known answers of Threefry-2x32 with 20 rounds (Random123's kat_vectors:
# key, counter, output).
KNOWN_ANSWERS = (
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF,) * 2, (0xFFFFFFFF,) * 2, (0x1CB996FC, 0xBB002BE7)),
    (
        (0x13198A2E, 0x03707344),
        (0x243F6A88, 0x85A308D3),
        (0xC4923A9C, 0x483DF7A0),
    ),
)


def numpy_threefry(key, counters):
    """`threefry_2x32` in NumPy, one counter pair at a time."""
    u = np.uint32
    with np.errstate(over="ignore"):
        return np.array(
            [
                threefry_2x32(u(key[0]), u(key[1]), u(c1), u(c2), np)
                for c1, c2 in counters
            ]
        )


def test_rounds_give_the_specification_known_answers():
    for key, counter, expected in KNOWN_ANSWERS:
        got = numpy_threefry(key, [counter])[0]
        assert [int(v) for v in got] == list(expected), (key, counter)


def test_a_jax_backbone_makes_threefry_compile_without_a_loop():
    # Building a backbone on JAX registers the unrolled CPU lowering; on
    # another backend JAX keeps its own (a loop of five iterations).
    tiny_backbone()
    on_jax = keras.backend.backend() == "jax"
    key = np.array([0x13198A2E, 0x03707344], "uint32")
    counters = np.arange(22, dtype="uint32").reshape(2, 11)

    def draw(key, counters):
        return threefry2x32_p.bind(key[0], key[1], counters[0], counters[1])

    compiled = jax.jit(draw).lower(key, counters).compile()
    assert ("while" in compiled.as_text()) != on_jax
    # The same bits either way, those of the specification.
    got = np.stack([np.asarray(x) for x in compiled(key, counters)], -1)
    np.testing.assert_array_equal(got, numpy_threefry(key, counters.T))
