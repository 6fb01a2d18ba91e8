"""JAX's threefry random bits, compiled for a CPU without a loop.

JAX's default generator, Threefry-2x32 (Salmon et al., 2011, "Parallel
random numbers: as easy as 1, 2, 3"), is computed in XLA ops. On a CPU,
JAX lowers its 20 rounds as a loop of 5 iterations (a `while` in the
compiled HLO) to keep compile times short; on other platforms it unrolls
them. On XLA:CPU the loop costs the arrays of the generator's state a
round trip through memory per iteration, and keeps XLA from fusing the
rounds into one vectorized kernel: 2.1 M uniforms took 6.6x the CPU time
of the unrolled form, and the dropout of a training step draws 6.8 M
(docs/benchmarks.md, "Round three").

`unroll_threefry_on_cpu` registers the unrolled rounds as the CPU
lowering of JAX's `threefry2x32` primitive, through JAX's public
extension points (`jax.extend.random.threefry2x32_p`,
`jax.interpreters.mlir.register_lowering`). The function is the same
hash: every random number is bit for bit what JAX's own lowering gives
(checked against the specification's known answers and a NumPy
definition in tests/utils/test_threefry_lowering.py), so seeds, random
streams, fixtures and resumed runs are unchanged; only the compiled code
differs. It applies to every program JAX lowers afterwards in the
process.
"""

import numpy as np

# Rotation constants of Threefry-2x32 (Salmon et al., 2011, table 4),
# used four rounds at a time, alternating.
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# The key schedule's parity constant (Threefish's C240 for 32-bit words).
KEY_PARITY = 0x1BD11BDA


def threefry_2x32(key1, key2, count1, count2, xp):
    """The 20 rounds of Threefry-2x32 on uint32 arrays, written with the
    array module `xp` (`numpy` or `jax.numpy`); returns the two output
    words. The arguments broadcast against each other."""

    def rotate_left(value, bits):
        return (value << xp.uint32(bits)) | (value >> xp.uint32(32 - bits))

    keys = (key1, key2, key1 ^ key2 ^ xp.uint32(KEY_PARITY))
    x1, x2 = count1 + keys[0], count2 + keys[1]
    for block in range(5):
        for bits in ROTATIONS[block % 2]:
            x1 = x1 + x2
            x2 = rotate_left(x2, bits) ^ x1
        # Key injection after every four rounds.
        x1 = x1 + keys[(block + 1) % 3]
        x2 = x2 + keys[(block + 2) % 3] + xp.uint32(block + 1)
    return x1, x2


def unroll_threefry_on_cpu():
    """Makes JAX compile `threefry2x32` for the CPU as unrolled rounds:
    the same bits, without a loop, in every program lowered afterwards
    (a program already compiled keeps its code). Calling it again
    registers the same rule again. Needs JAX (call it on the JAX backend
    only)."""
    import jax.numpy as jnp
    from jax.extend.random import threefry2x32_p
    from jax.interpreters import mlir

    def rounds(key1, key2, count1, count2):
        with np.errstate(over="ignore"):
            return threefry_2x32(key1, key2, count1, count2, jnp)

    mlir.register_lowering(
        threefry2x32_p,
        mlir.lower_fun(rounds, multiple_results=True),
        platform="cpu",
    )
