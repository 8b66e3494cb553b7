"""kiln.language.random: counter-based random numbers in kernels, as triton.language.random
(Triton 3.6): the same names, signatures and defaults, and the same bits for the same seed and
offsets, so that a kernel ported from Triton (a seeded dropout) draws what Triton drew.

The generator is Philox-4x32 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as
easy as 1, 2, 3", SC'11): a bijection of a 128-bit counter keyed by 64 bits. An element's
counter is (offset low word, offset high word, 0, 0) and its key is the seed's two 32-bit
halves, so each (seed, offset) pair names its own four random words and no state is kept
between calls. Every function here is a @kiln.jit function written over kiln.language and is
inlined where a kernel calls it; ``n_rounds`` (a constexpr, 10 by default as in Random123's
Philox4x32-10) unrolls that many rounds.

| function | returns |
| --- | --- |
| ``randint4x(seed, offset, n_rounds=10)`` | the four uint32 words of Philox(seed, offset) |
| ``randint(seed, offset, n_rounds=10)`` | the first of them |
| ``rand(seed, offset, n_rounds=10)``, ``rand4x`` | fp32 uniform in [0, 1) from the word(s) |
| ``randn(seed, offset, n_rounds=10)``, ``randn4x`` | fp32 standard normal (Box-Muller) |
| ``philox(seed, c0, c1, c2, c3, n_rounds=10)`` | Philox-4xW of a counter given word by word |
| ``philox_impl(c0, c1, c2, c3, k0, k1, n_rounds=10)`` | the rounds themselves, key given |
| ``uint_to_uniform_float(x)`` | a 32- or 64-bit random integer as fp32 in [0, 1) |
| ``pair_uniform_to_normal(u1, u2)`` | Box-Muller: two normals from two uniforms |

Seeds and offsets are scalars or tiles (broadcast together) of any integer dtype; a Python
int seed becomes a run-time scalar. Int64 offsets fill both counter words, so offsets past
2**32 draw new numbers. A float seed or offset is a CompilationError at the caller's line.

This module is imported on first use of one of its names (kiln.language's ``__getattr__``):
@kiln.jit lives in kiln.runtime.jit, which itself imports kiln.language.
"""

import re

from ..errors import CompilationError
from ..runtime.jit import jit
from . import core as tl
from . import math as _math
from .core import _gen, _unwrap, builtin, tensor

__all__ = ["philox", "philox_impl", "randint", "randint4x", "rand", "randn", "rand4x",
           "randn4x", "uint_to_uniform_float", "pair_uniform_to_normal", "N_ROUNDS_DEFAULT"]

N_ROUNDS_DEFAULT = tl.constexpr(10)  # Philox4x32-10: the rounds Random123 recommends

# Philox-4xW constants (Random123's philox.h): the round multipliers M0, M1 and the Weyl
# increments W0, W1 added to the key after every round (W0 from the golden ratio, W1 from
# sqrt(3) - 1), for 32-bit and for 64-bit words.
_PHILOX32_M0 = tl.constexpr(0xD2511F53)
_PHILOX32_M1 = tl.constexpr(0xCD9E8D57)
_PHILOX32_W0 = tl.constexpr(0x9E3779B9)
_PHILOX32_W1 = tl.constexpr(0xBB67AE85)
_PHILOX64_M0 = tl.constexpr(0xD2E7470EE14C6C93)
_PHILOX64_M1 = tl.constexpr(0xCA5A826395121157)
_PHILOX64_W0 = tl.constexpr(0x9E3779B97F4A7C15)
_PHILOX64_W1 = tl.constexpr(0xBB67AE8584CAA73B)

# uint_to_uniform_float: a w-bit word is folded onto [0, 2**(w-1)) and multiplied by a scale
# that keeps the largest value below 1 after fp32 rounding. 32 bits: the fp32 just below
# 2**-31 (2**31 - 1 rounds to 2**31 in fp32, and 2**31 * scale < 1). 64 bits: (1 - 2**-23) *
# 2**-63. Both are Triton's (4.6566127342e-10 and 1.0842020432385337e-19 rounded to fp32).
_UNIFORM_SCALE32 = tl.constexpr(float.fromhex("0x1.fffffep-32"))
_UNIFORM_SCALE64 = tl.constexpr(float.fromhex("0x1.fffffcp-64"))

# Box-Muller: u1 is clamped to this so that log(u1) stays finite; 2 pi (both rounded to fp32).
_MIN_UNIFORM = tl.constexpr(1.0e-7)
_TWO_PI = tl.constexpr(6.283185307179586)


# ---------------------------------------------------------------------------------------
# Argument checks: errors point at the user's call, not into this file
# ---------------------------------------------------------------------------------------

def _caller_error(message):
    """A CompilationError at the line where the kernel called into this module (the call
    site of the outermost frame of kiln.language.random), naming the function called."""
    g = _gen()
    frames = g.frames
    i = len(frames) - 1
    while i > 0 and frames[i - 1].info.fn.__module__ == __name__:
        i -= 1
    outer = frames[i]
    if outer.info.fn.__module__ != __name__ or outer.call_site is None:
        return TypeError(message)
    file, line = outer.call_site
    source = g._source_line(file, line)
    name = outer.info.name
    found = re.search(r"[\w.]*\b" + name + r"\s*\(", source or "")
    column = found.start() + 1 if found else 1
    return CompilationError(g.info.name, file, line, column, f"tl.{name}: {message}", source)


@builtin
def _int_operand(x, what):
    """`x` as a tensor of an integer dtype (a constexpr int becomes a run-time scalar of
    Triton's literal dtype: int32, uint32, int64 or uint64 by value)."""
    what = _unwrap(what)
    if not isinstance(x, tensor):
        v = _unwrap(x)
        if not isinstance(v, int):
            raise _caller_error(f"expected an integer {what} (a scalar or tile of int8 to "
                                f"int64 or uint8 to uint64), found {type(v).__name__} {v!r}")
        x = _gen().to_tensor(v, weak=False)
    if not x.dtype.is_int():
        raise _caller_error(f"expected an integer {what} (a scalar or tile of int8 to int64 "
                            f"or uint8 to uint64), found {x!r}")
    return x


@builtin
def _check_words(words, what):
    """Philox's counter words: all 32-bit or all 64-bit integers, as the first."""
    what = _unwrap(what)
    bits = words[0].dtype.primitive_bitwidth
    if bits not in (32, 64):
        raise _caller_error(f"expected 32- or 64-bit integer {what}, found {words[0]!r}")
    for w in words[1:]:
        if w.dtype.primitive_bitwidth != bits:
            raise _caller_error(f"expected {what} of one width, found {words[0]!r} and {w!r}")


@builtin
def _check_unsigned_words(c0):
    if c0.dtype.name not in ("uint32", "uint64"):
        raise _caller_error(f"expected uint32 or uint64 counter words, found {c0!r}")


@builtin
def _check_rounds(n_rounds):
    n = _unwrap(n_rounds)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise _caller_error(f"expected a non-negative constexpr int for n_rounds, found {n!r}")


# ---------------------------------------------------------------------------------------
# Philox
# ---------------------------------------------------------------------------------------

@jit
def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """`n_rounds` rounds of Philox-4xW on the counter (c0, c1, c2, c3) with the key (k0, k1):
    W = 32 for uint32 counter words, 64 for uint64. A round takes the double-width products
    M0 * c0 = (hi0, lo0) and M1 * c2 = (hi1, lo1) and makes the counter
    (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); the key then grows by (W0, W1), modulo 2**W."""
    _check_unsigned_words(c0)
    _check_rounds(n_rounds)
    if c0.dtype.primitive_bitwidth == 32:
        m0: tl.constexpr = _PHILOX32_M0
        m1: tl.constexpr = _PHILOX32_M1
        w0: tl.constexpr = _PHILOX32_W0
        w1: tl.constexpr = _PHILOX32_W1
    else:
        m0: tl.constexpr = _PHILOX64_M0
        m1: tl.constexpr = _PHILOX64_M1
        w0: tl.constexpr = _PHILOX64_W0
        w1: tl.constexpr = _PHILOX64_W1
    for _ in tl.static_range(n_rounds):
        hi0 = _math.umulhi(c0, m0)
        lo0 = c0 * m0
        hi1 = _math.umulhi(c2, m1)
        lo1 = c2 * m1
        c0 = hi1 ^ c1 ^ k0
        c1 = lo1
        c2 = hi0 ^ c3 ^ k1
        c3 = lo0
        k0 = k0 + w0
        k1 = k1 + w1
    return c0, c1, c2, c3


@jit
def philox(seed, c0, c1, c2, c3, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Philox-4xW of the counter (c0, c1, c2, c3) keyed by `seed`. 32-bit counter words (of
    any signedness, reinterpreted as uint32) run Philox-4x32 keyed by the seed's low and high
    32 bits (the seed widened to 64 bits first: a negative int32 seed sign-extends); 64-bit
    words run Philox-4x64 keyed by (seed, 0). Returns four words of the counters' width,
    unsigned."""
    seed = _int_operand(seed, "seed")
    c0 = _int_operand(c0, "counter word c0")
    c1 = _int_operand(c1, "counter word c1")
    c2 = _int_operand(c2, "counter word c2")
    c3 = _int_operand(c3, "counter word c3")
    _check_words((c0, c1, c2, c3), "counter words")
    seed = seed.to(tl.uint64)
    if c0.dtype.primitive_bitwidth == 32:
        word = tl.uint32
        k0 = seed.to(tl.uint32)
        k1 = (seed >> 32).to(tl.uint32)
    else:
        word = tl.uint64
        k0 = seed
        k1 = seed * 0
    return philox_impl(c0.to(word, bitcast=True), c1.to(word, bitcast=True),
                       c2.to(word, bitcast=True), c3.to(word, bitcast=True), k0, k1, n_rounds)


@jit
def randint4x(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Four tiles of random uint32 for `offset` (a scalar or tile of integers) and `seed`:
    Philox-4x32 of the counter (low 32 bits of offset, its high 32 bits or 0, 0, 0). The
    fastest way to draw several numbers per element."""
    offset = _int_operand(offset, "offset")
    low = offset.to(tl.uint32)
    zero = low * 0
    if offset.dtype.primitive_bitwidth > 32:
        high = (offset >> 32).to(tl.uint32)
    else:
        high = zero
    return philox(seed, low, high, zero, zero, n_rounds)


@jit
def randint(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """A tile of random uint32: the first word of randint4x(seed, offset)."""
    first, _, _, _ = randint4x(seed, offset, n_rounds)
    return first


# ---------------------------------------------------------------------------------------
# Uniform and normal floats
# ---------------------------------------------------------------------------------------

@jit
def uint_to_uniform_float(x):
    """A random 32- or 64-bit integer `x` (any signedness) as fp32 uniform in [0, 1): read as
    signed, negative values folded onto non-negative ones (~x == -x - 1), times the scale
    that maps the largest to the fp32 just below 1."""
    x = _int_operand(x, "x")
    _check_words((x,), "random words")
    if x.dtype.primitive_bitwidth == 32:
        signed = x.to(tl.int32, bitcast=True)
        scale: tl.constexpr = _UNIFORM_SCALE32
    else:
        signed = x.to(tl.int64, bitcast=True)
        scale: tl.constexpr = _UNIFORM_SCALE64
    return tl.where(signed < 0, ~signed, signed) * scale


@jit
def rand(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """A tile of fp32 uniform in [0, 1) for `seed` and `offset`."""
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


@jit
def rand4x(seed, offsets, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Four tiles of fp32 uniform in [0, 1): the four words of randint4x mapped."""
    a, b, c, d = randint4x(seed, offsets, n_rounds)
    return (uint_to_uniform_float(a), uint_to_uniform_float(b), uint_to_uniform_float(c),
            uint_to_uniform_float(d))


@jit
def pair_uniform_to_normal(u1, u2):
    """Box-Muller: two independent standard normals r cos(t), r sin(t) from two uniforms,
    with r = sqrt(-2 log(max(u1, 1e-7))) and t = 2 pi u2."""
    u1 = tl.maximum(_MIN_UNIFORM, u1)
    t = _TWO_PI * u2
    r = _math.sqrt(-2.0 * _math.log(u1))
    return r * _math.cos(t), r * _math.sin(t)


@jit
def randn(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """A tile of fp32 standard normal for `seed` and `offset`: the cosine half of Box-Muller
    on the first two words of randint4x."""
    a, b, _, _ = randint4x(seed, offset, n_rounds)
    normal, _ = pair_uniform_to_normal(uint_to_uniform_float(a), uint_to_uniform_float(b))
    return normal


@jit
def randn4x(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Four tiles of fp32 standard normal: Box-Muller on words (1, 2) and on words (3, 4)."""
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(u1, u2)
    n3, n4 = pair_uniform_to_normal(u3, u4)
    return n1, n2, n3, n4
