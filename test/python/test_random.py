"""tl.philox, philox_impl, randint, randint4x, rand, randn, rand4x, randn4x,
uint_to_uniform_float and pair_uniform_to_normal (kiln.language.random; semantics from Triton
3.6's triton.language.random): a numpy Philox-4x32 written here from the algorithm, checked
against Random123's known-answer vectors, then Kiln's functions against it bit for bit on the
CPU backend (1-D and 2-D tiles, scalar and tile seeds, int32 and int64 offsets, 7 and 10
rounds), a seeded dropout in the style of Triton's tutorial 04-low-memory-dropout, the errors,
and the same on the GPU (marker `gpu`), including a Triton run of the same dropout when
triton and torch are importable."""
import importlib.util
import inspect
import re
import sys

import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import marker_line

CPU = dict(device="cpu")
MASK32 = (1 << 32) - 1
MASK64 = (1 << 64) - 1

# Philox-4x32 and 4x64 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
# the round multipliers and the Weyl key increments (Random123's philox.h).
M32 = (0xD2511F53, 0xCD9E8D57)
W32 = (0x9E3779B9, 0xBB67AE85)
M64 = (0xD2E7470EE14C6C93, 0xCA5A826395121157)
W64 = (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B)

# Known-answer vectors of the Random123 distribution, tests/kat_vectors
# (https://github.com/DEShawResearch/random123, commit 9545ff64, the "philox4x32 7",
# "philox4x32 10", "philox4x64 7" and "philox4x64 10" lines): rounds, counter (4 words),
# key (2 words), expected output (4 words). The inputs are zeros, all ones, and the hex digits
# of pi.
KAT32 = [
    (7, [0, 0, 0, 0], [0, 0], [0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48]),
    (7, [MASK32] * 4, [MASK32] * 2, [0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662]),
    (7, [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0],
     [0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a]),
    (10, [0, 0, 0, 0], [0, 0], [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
    (10, [MASK32] * 4, [MASK32] * 2, [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
    (10, [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0],
     [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]),
]
KAT64 = [
    (7, [0] * 4, [0] * 2,
     [0x5dc8ee6268ec62cd, 0x139bc570b6c125a0, 0x84d6deb4fb65f49e, 0xaff7583376d378c2]),
    (7, [MASK64] * 4, [MASK64] * 2,
     [0x071dd84367903154, 0x48e2bbdc722b37d1, 0x6afa9890bb89f76c, 0x9194c8d8ada56ac7]),
    (7, [0x243f6a8885a308d3, 0x13198a2e03707344, 0xa4093822299f31d0, 0x082efa98ec4e6c89],
     [0x452821e638d01377, 0xbe5466cf34e90c6c],
     [0x513a366704edf755, 0xf05d9924c07044d3, 0xbef2cb9cbea74c6c, 0x8db948de4caa1f8a]),
    (10, [0] * 4, [0] * 2,
     [0x16554d9eca36314c, 0xdb20fe9d672d0fdc, 0xd7e772cee186176b, 0x7e68b68aec7ba23b]),
    (10, [MASK64] * 4, [MASK64] * 2,
     [0x87b092c3013fe90b, 0x438c3c67be8d0224, 0x9cc7d7c69cd777b6, 0xa09caebf594f0ba0]),
    (10, [0x243f6a8885a308d3, 0x13198a2e03707344, 0xa4093822299f31d0, 0x082efa98ec4e6c89],
     [0x452821e638d01377, 0xbe5466cf34e90c6c],
     [0xa528f45403e61d95, 0x38c72dbd566e9788, 0xa5a1610e72fd18b5, 0x57bd43b5e52b7fe6]),
]


# --- the numpy reference -------------------------------------------------------------------

def philox4x32_ref(counter, key, rounds):
    """Philox-4x32-R of uint32 arrays (broadcast together), as Random123 states it: the key
    is bumped before every round but the first; products are exact in uint64."""
    c = [np.asarray(x, np.uint64) & MASK32 for x in counter]
    k = [np.asarray(x, np.uint64) & MASK32 for x in key]
    for r in range(rounds):
        if r:
            k = [(k[0] + W32[0]) & MASK32, (k[1] + W32[1]) & MASK32]
        p0, p1 = np.uint64(M32[0]) * c[0], np.uint64(M32[1]) * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & MASK32, (p0 >> 32) ^ c[3] ^ k[1], p0 & MASK32]
    return [x.astype(np.uint32) for x in np.broadcast_arrays(*c)]


def philox4x64_ref(counter, key, rounds):
    """Philox-4x64-R of Python ints (the 128-bit products of Python's integers)."""
    c, k = list(counter), list(key)
    for r in range(rounds):
        if r:
            k = [(k[0] + W64[0]) & MASK64, (k[1] + W64[1]) & MASK64]
        p0, p1 = M64[0] * c[0], M64[1] * c[2]
        c = [(p1 >> 64) ^ c[1] ^ k[0], p1 & MASK64, (p0 >> 64) ^ c[3] ^ k[1], p0 & MASK64]
    return c


def seed_key(seed):
    """Triton's key of a seed: the seed widened to 64 bits (signed ones sign-extended), its
    low and high words."""
    s = np.asarray(seed)
    s64 = (s.astype(np.int64) if s.dtype.kind == "i" else s.astype(np.uint64)).view(np.uint64)
    return s64 & np.uint64(MASK32), s64 >> np.uint64(32)


def randint4x_ref(seed, offsets, rounds=10):
    """Triton 3.6's randint4x: the counter (offset's low word, its high word for 64-bit
    offsets else 0, 0, 0)."""
    offsets = np.asarray(offsets)
    low = offsets.astype(np.uint32)
    if offsets.dtype.itemsize == 8:
        high = (offsets.view(np.uint64) >> np.uint64(32)).astype(np.uint32)
    else:
        high = np.zeros_like(low)
    zero = np.zeros_like(low)
    return philox4x32_ref([low, high, zero, zero], seed_key(seed), rounds)


def uniform_ref(words):
    """Triton's uint_to_uniform_float: signed view, negatives folded (-x - 1), times the
    scale 4.6566127342e-10 (32-bit) or 1.0842020432385337e-19 (64-bit) in fp32."""
    if words.dtype.itemsize == 4:
        s, scale = words.view(np.int32), np.float32(4.6566127342e-10)
    else:
        s, scale = words.view(np.int64), np.float32(1.0842020432385337e-19)
    s = np.where(s < 0, -(s + 1), s)
    return s.astype(np.float32) * scale


def normal_ref(u1, u2):
    """Box-Muller in fp32, as Triton's pair_uniform_to_normal."""
    u1 = np.maximum(np.float32(1.0e-7), u1)
    th = np.float32(6.283185307179586) * u2
    r = np.sqrt(np.float32(-2.0) * np.log(u1))
    return r * np.cos(th), r * np.sin(th)


def draws_ref(seed, offsets, rounds):
    """What draw_* kernels store: ints [randint4x..., randint], floats [rand, rand4x...,
    randn, randn4x...]."""
    w = randint4x_ref(seed, offsets, rounds)
    u = [uniform_ref(x) for x in w]
    n12, n34 = normal_ref(u[0], u[1]), normal_ref(u[2], u[3])
    ints = w + [w[0]]
    floats = [u[0]] + u + [n12[0], n12[0], n12[1], n34[0], n34[1]]
    return np.stack(ints), np.stack(floats)


NORMAL_PLANES = slice(5, 10)  # randn and randn4x among the float planes


def check_draws(ints, floats, seed, offsets, rounds):
    """Integers and uniforms bit for bit; normals to a few ulp (log, cos and sin are not
    correctly rounded in numpy nor in the backends), and bit for bit where both agree."""
    want_i, want_f = draws_ref(seed, offsets, rounds)
    np.testing.assert_array_equal(ints, want_i)
    np.testing.assert_array_equal(floats[:5], want_f[:5])
    np.testing.assert_allclose(floats[NORMAL_PLANES], want_f[NORMAL_PLANES], rtol=1e-5,
                               atol=2e-6)
    assert np.all((floats[:5] >= 0) & (floats[:5] < 1))


def test_reference_matches_random123_known_answers():
    for rounds, ctr, key, want in KAT32:
        got = philox4x32_ref([np.uint32(x) for x in ctr], [np.uint32(x) for x in key], rounds)
        assert [int(x) for x in got] == want
    for rounds, ctr, key, want in KAT64:
        assert philox4x64_ref(ctr, key, rounds) == want


def test_reference_differs_with_rounds_key_and_counter():
    # The reference is not a constant: each input changes every word.
    base = philox4x32_ref([1, 2, 3, 4], [5, 6], 10)
    for ctr, key, rounds in [([1, 2, 3, 5], [5, 6], 10), ([1, 2, 3, 4], [5, 7], 10),
                             ([1, 2, 3, 4], [5, 6], 7)]:
        other = philox4x32_ref(ctr, key, rounds)
        assert all(int(a) != int(b) for a, b in zip(base, other))


# --- kernels -------------------------------------------------------------------------------

@kiln.jit
def philox_impl_kernel(c_ptr, k_ptr, out_ptr, ROUNDS: tl.constexpr):
    # The rounds alone, on scalars: Random123's known answers (32- or 64-bit words).
    a, b, c, d = tl.philox_impl(tl.load(c_ptr), tl.load(c_ptr + 1), tl.load(c_ptr + 2),
                                tl.load(c_ptr + 3), tl.load(k_ptr), tl.load(k_ptr + 1), ROUNDS)
    tl.store(out_ptr, a)
    tl.store(out_ptr + 1, b)
    tl.store(out_ptr + 2, c)
    tl.store(out_ptr + 3, d)


@kiln.jit
def store_draws(ints_ptr, floats_ptr, idx, numel, s, offs, ROUNDS: tl.constexpr):
    # Every function of the module for seed `s` and offsets `offs` (default, positional and
    # keyword n_rounds), stored as planes of `numel` elements.
    if ROUNDS == 10:
        a, b, c, d = tl.randint4x(s, offs)
        i = tl.randint(s, offs)
        u = tl.rand(s, offs)
        u1, u2, u3, u4 = tl.rand4x(s, offs)
        n = tl.randn(s, offs)
        n1, n2, n3, n4 = tl.randn4x(s, offs)
    else:
        a, b, c, d = tl.randint4x(s, offs, ROUNDS)
        i = tl.randint(s, offs, n_rounds=ROUNDS)
        u = tl.rand(s, offs, ROUNDS)
        u1, u2, u3, u4 = tl.rand4x(s, offs, n_rounds=ROUNDS)
        n = tl.randn(s, offs, ROUNDS)
        n1, n2, n3, n4 = tl.randn4x(s, offs, ROUNDS)
    tl.store(ints_ptr + idx, a)
    tl.store(ints_ptr + numel + idx, b)
    tl.store(ints_ptr + 2 * numel + idx, c)
    tl.store(ints_ptr + 3 * numel + idx, d)
    tl.store(ints_ptr + 4 * numel + idx, i)
    tl.store(floats_ptr + idx, u)
    tl.store(floats_ptr + numel + idx, u1)
    tl.store(floats_ptr + 2 * numel + idx, u2)
    tl.store(floats_ptr + 3 * numel + idx, u3)
    tl.store(floats_ptr + 4 * numel + idx, u4)
    tl.store(floats_ptr + 5 * numel + idx, n)
    tl.store(floats_ptr + 6 * numel + idx, n1)
    tl.store(floats_ptr + 7 * numel + idx, n2)
    tl.store(floats_ptr + 8 * numel + idx, n3)
    tl.store(floats_ptr + 9 * numel + idx, n4)


@kiln.jit
def draw_1d(seed, seed_ptr, off_ptr, ints_ptr, floats_ptr, N: tl.constexpr,
            TILE_SEED: tl.constexpr, ROUNDS: tl.constexpr):
    o = tl.arange(0, N)
    offs = tl.load(off_ptr + o)
    if TILE_SEED:
        s = tl.load(seed_ptr + o)
    else:
        s = seed
    store_draws(ints_ptr, floats_ptr, o, N, s, offs, ROUNDS)


@kiln.jit
def draw_2d(seed, seed_ptr, off_ptr, ints_ptr, floats_ptr, R: tl.constexpr, C: tl.constexpr,
            TILE_SEED: tl.constexpr, ROUNDS: tl.constexpr):
    idx = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    offs = tl.load(off_ptr + idx)
    if TILE_SEED:
        s = tl.load(seed_ptr + idx)
    else:
        s = seed
    store_draws(ints_ptr, floats_ptr, idx, R * C, s, offs, ROUNDS)


@kiln.jit
def draw_scalar(seed, base, ints_ptr, floats_ptr, ROUNDS: tl.constexpr):
    # A scalar seed and a scalar offset per program: scalar results.
    off = base + tl.program_id(0)
    store_draws(ints_ptr, floats_ptr, tl.program_id(0), tl.num_programs(0), seed, off, ROUNDS)


@kiln.jit
def draw_literal_seed(ints_ptr, N: tl.constexpr):
    # A constexpr seed becomes a run-time int32 scalar, as in Triton.
    o = tl.arange(0, N)
    tl.store(ints_ptr + o, tl.randint(1234, o))
    tl.store(ints_ptr + N + o, tl.randint(-7, o))


@kiln.jit
def philox_kernel(seed, c_ptr, out_ptr, N: tl.constexpr, ROUNDS: tl.constexpr):
    # tl.philox on a counter given word by word (of the pointer's dtype).
    o = tl.arange(0, N)
    a, b, c, d = tl.philox(seed, tl.load(c_ptr + o), tl.load(c_ptr + N + o),
                           tl.load(c_ptr + 2 * N + o), tl.load(c_ptr + 3 * N + o), ROUNDS)
    tl.store(out_ptr + o, a)
    tl.store(out_ptr + N + o, b)
    tl.store(out_ptr + 2 * N + o, c)
    tl.store(out_ptr + 3 * N + o, d)


@kiln.jit
def uniform_kernel(x_ptr, out_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(out_ptr + o, tl.uint_to_uniform_float(tl.load(x_ptr + o)))


@kiln.jit
def normal_kernel(u_ptr, out_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    n1, n2 = tl.pair_uniform_to_normal(tl.load(u_ptr + o), tl.load(u_ptr + N + o))
    tl.store(out_ptr + o, n1)
    tl.store(out_ptr + N + o, n2)


@kiln.jit
def seeded_dropout(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    # Triton's tutorial 04-low-memory-dropout, seeded: the mask is a function of the seed and
    # the element's offset, regenerated rather than stored.
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


# --- inputs --------------------------------------------------------------------------------

def offsets_of(dtype, shape, rng):
    """Offsets of `dtype`: consecutive ones from a large base, then random ones across the
    whole range (negative ones and, for int64, values past 2**32)."""
    n = int(np.prod(shape))
    info = np.iinfo(dtype)
    base = np.arange(n, dtype=np.int64) + (12345 if dtype == np.int32 else (5 << 32) - n // 2)
    offs = base.astype(dtype)
    offs[n // 2:] = rng.integers(info.min, info.max, n - n // 2, dtype=dtype, endpoint=True)
    offs[-2:] = [info.min, info.max]
    return offs.reshape(shape)


def seeds_of(dtype, shape, rng):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def run_draws(kernel, seed, seed_arr, offs, grid_meta, on_gpu=False):
    numel = offs.size
    ints = np.zeros((5,) + offs.shape, np.uint32)
    floats = np.zeros((10,) + offs.shape, np.float32)
    args = [seed, seed_arr, offs, ints, floats]
    if on_gpu:
        dev = [kiln.from_numpy(a) for a in args[1:]]
        kernel[(1,)](seed, *dev, **grid_meta)
        kiln.synchronize()
        ints, floats = dev[2].numpy(), dev[3].numpy()
    else:
        kernel[(1,)](*args, **grid_meta, **CPU)
    assert ints.size == 5 * numel
    return ints, floats


CASES_1D = [  # (offset dtype, seed: Python int or a tile dtype, rounds)
    (np.int32, 42, 10), (np.int32, 42, 7), (np.int64, 42, 10), (np.int64, 42, 7),
    (np.int32, -3, 10), (np.int64, 0x1234567890AB, 10), (np.int32, 1, 10),
    (np.int32, np.int32, 10), (np.int64, np.int64, 7), (np.int32, np.uint64, 10),
    (np.uint32, 7, 10), (np.uint64, 2 ** 63 + 5, 10), (np.uint64, np.uint32, 7),
]


def draw_1d_case(odt, seed, rounds, on_gpu=False):
    rng = np.random.default_rng(sum(map(ord, f"{np.dtype(odt).name}{seed}{rounds}")))
    n = 256
    offs = offsets_of(odt, (n,), rng)
    tile_seed = not isinstance(seed, int)
    seeds = seeds_of(seed, (n,), rng) if tile_seed else np.zeros(n, np.int32)
    ints, floats = run_draws(draw_1d, 0 if tile_seed else seed, seeds, offs,
                             dict(N=n, TILE_SEED=tile_seed, ROUNDS=rounds), on_gpu)
    check_draws(ints, floats, seeds if tile_seed else seed, offs, rounds)


def draw_2d_case(odt, tile_seed, rounds, on_gpu=False):
    rng = np.random.default_rng(7 + rounds)
    offs = offsets_of(odt, (16, 32), rng)
    seeds = seeds_of(np.int64, offs.shape, rng) if tile_seed else np.zeros(offs.shape, np.int64)
    seed = 0 if tile_seed else 987654321
    ints, floats = run_draws(draw_2d, seed, seeds, offs,
                             dict(R=16, C=32, TILE_SEED=tile_seed, ROUNDS=rounds), on_gpu)
    check_draws(ints, floats, seeds if tile_seed else seed, offs, rounds)


# --- CPU backend ---------------------------------------------------------------------------

@pytest.mark.parametrize("width,kat", [(32, KAT32), (64, KAT64)])
def test_philox_impl_known_answers_cpu(width, kat):
    dt = np.uint32 if width == 32 else np.uint64
    for rounds, ctr, key, want in kat:
        out = np.zeros(4, dt)
        philox_impl_kernel[(1,)](np.array(ctr, dt), np.array(key, dt), out, ROUNDS=rounds, **CPU)
        assert [int(x) for x in out] == want, (width, rounds, ctr)


@pytest.mark.parametrize("odt,seed,rounds", CASES_1D)
def test_draws_1d_cpu(odt, seed, rounds):
    draw_1d_case(odt, seed, rounds)


@pytest.mark.parametrize("odt", [np.int32, np.int64])
@pytest.mark.parametrize("tile_seed", [False, True])
@pytest.mark.parametrize("rounds", [7, 10])
def test_draws_2d_cpu(odt, tile_seed, rounds):
    draw_2d_case(odt, tile_seed, rounds)


@pytest.mark.parametrize("rounds", [7, 10])
def test_scalar_seed_and_offset_cpu(rounds):
    ints, floats = np.zeros((5, 8), np.uint32), np.zeros((10, 8), np.float32)
    base = (3 << 32) + 17  # an int64 scalar offset
    draw_scalar[(8,)](2024, base, ints, floats, ROUNDS=rounds, **CPU)
    check_draws(ints, floats, 2024, np.arange(base, base + 8, dtype=np.int64), rounds)


def test_literal_seeds_cpu():
    out = np.zeros(2 * 64, np.uint32)
    draw_literal_seed[(1,)](out, N=64, **CPU)
    o = np.arange(64, dtype=np.int32)
    np.testing.assert_array_equal(out[:64], randint4x_ref(np.int32(1234), o)[0])
    np.testing.assert_array_equal(out[64:], randint4x_ref(np.int32(-7), o)[0])


def test_int64_offsets_use_the_high_word_cpu():
    # Offsets 2**32 apart share their low word; the high word makes them differ (Triton 3.6).
    offs = np.array([5, 5 + (1 << 32), 5 + (2 << 32), -(1 << 40)] * 16, np.int64)
    ints, floats = run_draws(draw_1d, 11, np.zeros(64, np.int32), offs,
                             dict(N=64, TILE_SEED=False, ROUNDS=10))
    check_draws(ints, floats, 11, offs, 10)
    assert len(set(ints[0, :4].tolist())) == 4


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.uint64])
def test_philox_counter_words_cpu(dt):
    rng = np.random.default_rng(5)
    n = 64
    info = np.iinfo(dt)
    words = rng.integers(info.min, info.max, (4, n), dtype=dt, endpoint=True)
    out = np.zeros((4, n), dt)
    seed = -123456789
    philox_kernel[(1,)](seed, words, out, N=n, ROUNDS=10, **CPU)
    if info.bits == 32:
        want = philox4x32_ref(list(words.view(np.uint32)), seed_key(np.int32(seed)), 10)
        np.testing.assert_array_equal(out.view(np.uint32), np.stack(want))
    else:
        # 64-bit words: Philox-4x64 keyed by (seed widened to 64 bits, 0), as Triton.
        key = [seed & MASK64, 0]
        u = words.view(np.uint64)
        for j in range(n):
            want = philox4x64_ref([int(u[i, j]) for i in range(4)], key, 10)
            assert [int(x) for x in out.view(np.uint64)[:, j]] == want


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.uint64])
def test_uint_to_uniform_float_cpu(dt):
    info = np.iinfo(dt)
    x = np.random.default_rng(9).integers(info.min, info.max, 256, dtype=dt, endpoint=True)
    x[:6] = [info.min, info.max, 0, 1, info.max - 1, info.min + 1]
    # The words read as signed 2**(w-1) - 1 and -2**(w-1): the largest after folding.
    top = x.view(np.uint32 if info.bits == 32 else np.uint64)
    top[6:8] = [(1 << (info.bits - 1)) - 1, 1 << (info.bits - 1)]
    out = np.zeros(256, np.float32)
    uniform_kernel[(1,)](x, out, N=256, **CPU)
    np.testing.assert_array_equal(out, uniform_ref(x))
    assert out.max() < 1.0 and out.min() >= 0.0
    # They map to the fp32 just below 1 (32 bits; 64 bits: to 1 - 2**-23), never to 1.
    below = np.float32(1 - 2.0 ** (-24 if info.bits == 32 else -23))
    np.testing.assert_array_equal(out[6:8], [below, below])


def test_pair_uniform_to_normal_cpu():
    u = np.random.default_rng(10).random((2, 256), dtype=np.float32)
    u[0, :3] = [0.0, 1e-9, 0.5]  # clamped to 1e-7: finite
    out = np.zeros((2, 256), np.float32)
    normal_kernel[(1,)](u, out, N=256, **CPU)
    n1, n2 = normal_ref(u[0], u[1])
    np.testing.assert_allclose(out[0], n1, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(out[1], n2, rtol=1e-5, atol=2e-6)
    assert np.all(np.isfinite(out))


def test_normals_look_normal_cpu():
    # Not bits: 4 * 8192 draws (offsets 0 to 8191) have mean ~0 and variance ~1.
    n, z, u = 256, [], []
    for k in range(32):
        offs = np.arange(k * n, (k + 1) * n, dtype=np.int32)
        ints, floats = run_draws(draw_1d, 77, np.zeros(n, np.int32), offs,
                                 dict(N=n, TILE_SEED=False, ROUNDS=10))
        z.append(floats[6:10].ravel())
        u.append(floats[1:5].ravel())
    z, u = np.concatenate(z), np.concatenate(u)
    assert abs(z.mean()) < 0.03 and abs(z.var() - 1) < 0.05
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005


def dropout_ref(x, p, seed):
    keep = uniform_ref(randint4x_ref(seed, np.arange(x.size, dtype=np.int32))[0]) > \
        np.float32(p)
    return keep, np.where(keep, x / (np.float32(1) - np.float32(p)), np.float32(0))


def dropout_inputs(n=1000):
    rng = np.random.default_rng(3)
    return (rng.uniform(0.5, 1.5, n) * rng.choice([-1, 1], n)).astype(np.float32)


@pytest.mark.parametrize("p", [0.5, 0.1])
def test_seeded_dropout_cpu(p):
    x = dropout_inputs()
    masks = {}
    for seed in (123, 123, 512):
        out = np.zeros_like(x)
        seeded_dropout[(kiln.cdiv(x.size, 256),)](x, out, x.size, p, seed, BLOCK_SIZE=256, **CPU)
        keep, want = dropout_ref(x, p, seed)
        np.testing.assert_array_equal(out != 0, keep)
        np.testing.assert_allclose(out, want, rtol=1e-6)
        masks.setdefault(seed, []).append(keep)
    np.testing.assert_array_equal(masks[123][0], masks[123][1])  # same seed, same mask
    # Another seed, another mask: independent masks differ at 2 p (1 - p) of the elements.
    assert abs((masks[123][0] != masks[512][0]).mean() - 2 * p * (1 - p)) < 0.06
    assert abs(masks[512][0].mean() - (1 - p)) < 0.06


# --- errors --------------------------------------------------------------------------------

def expect_error(fn, signature, message, constexprs=None):
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(fn, signature=signature, constexprs=constexprs or {})
    err = info.value
    assert err.kernel == fn.__name__
    assert err.file == inspect.getsourcefile(fn.fn), str(err)
    assert err.line == marker_line(fn), str(err)
    assert re.search(message, err.message), err.message
    return err


@kiln.jit
def float_seed_kernel(out_ptr, seed):
    o = tl.arange(0, 16)
    tl.store(out_ptr + o, tl.rand(seed, o))  # ERR


@kiln.jit
def float_literal_seed_kernel(out_ptr):
    o = tl.arange(0, 16)
    tl.store(out_ptr + o, tl.randn(0.5, o))  # ERR


@kiln.jit
def float_offsets_kernel(out_ptr, seed):
    o = tl.arange(0, 16).to(tl.float32)
    a, b, c, d = tl.randint4x(seed, o)  # ERR
    tl.store(out_ptr + tl.arange(0, 16), a)


@kiln.jit
def pointer_offsets_kernel(out_ptr, seed):
    tl.store(out_ptr, tl.randint(seed, out_ptr))  # ERR


@kiln.jit
def negative_rounds_kernel(out_ptr, seed):
    o = tl.arange(0, 16)
    tl.store(out_ptr + o, tl.rand(seed, o, -1))  # ERR


@kiln.jit
def runtime_rounds_kernel(out_ptr, seed, n):
    o = tl.arange(0, 16)
    tl.store(out_ptr + o, tl.rand(seed, o, n))  # ERR


@kiln.jit
def int16_counter_kernel(out_ptr, seed):
    c = tl.arange(0, 16).to(tl.int16)
    a, b, c2, d = tl.philox(seed, c, c, c, c)  # ERR
    tl.store(out_ptr + tl.arange(0, 16), a)


@kiln.jit
def mixed_counter_kernel(out_ptr, seed):
    c = tl.arange(0, 16)
    a, b, c2, d = tl.philox(seed, c, c.to(tl.int64), c, c)  # ERR
    tl.store(out_ptr + tl.arange(0, 16), a)


@kiln.jit
def signed_impl_kernel(out_ptr, seed):
    c = tl.arange(0, 16)
    a, b, c2, d = tl.philox_impl(c, c, c, c, seed, seed)  # ERR
    tl.store(out_ptr + tl.arange(0, 16), a)


@kiln.jit
def float_uniform_kernel(out_ptr):
    o = tl.arange(0, 16)
    tl.store(out_ptr + o, tl.uint_to_uniform_float(o.to(tl.float32)))  # ERR


def test_float_seed_is_an_error():
    err = expect_error(float_seed_kernel, {"out_ptr": "*fp32", "seed": "fp32"},
                       r"tl.rand: expected an integer seed .* found tensor<fp32>")
    assert "tl.rand(seed, o)" in str(err)  # the user's line is shown, not kiln's
    expect_error(float_literal_seed_kernel, {"out_ptr": "*fp32"},
                 r"tl.randn: expected an integer seed .* found float 0.5")


def test_non_integer_offsets_are_errors():
    expect_error(float_offsets_kernel, {"out_ptr": "*u32", "seed": "i32"},
                 r"tl.randint4x: expected an integer offset .* found tensor<fp32\[16\]>")
    expect_error(pointer_offsets_kernel, {"out_ptr": "*u32", "seed": "i32"},
                 r"tl.randint: expected an integer offset")


def test_bad_rounds_are_errors():
    expect_error(negative_rounds_kernel, {"out_ptr": "*fp32", "seed": "i32"},
                 r"tl.rand: expected a non-negative constexpr int for n_rounds, found -1")
    expect_error(runtime_rounds_kernel, {"out_ptr": "*fp32", "seed": "i32", "n": "i32"},
                 r"tl.rand: expected a non-negative constexpr int for n_rounds, found "
                 r"tensor<int32>")


def test_bad_counters_are_errors():
    expect_error(int16_counter_kernel, {"out_ptr": "*u32", "seed": "i32"},
                 r"tl.philox: expected 32- or 64-bit integer counter words, found "
                 r"tensor<int16\[16\]>")
    expect_error(mixed_counter_kernel, {"out_ptr": "*u32", "seed": "i32"},
                 r"tl.philox: expected counter words of one width")
    expect_error(signed_impl_kernel, {"out_ptr": "*u32", "seed": "i32"},
                 r"tl.philox_impl: expected uint32 or uint64 counter words, found "
                 r"tensor<int32\[16\]>")
    expect_error(float_uniform_kernel, {"out_ptr": "*fp32"},
                 r"tl.uint_to_uniform_float: expected an integer x")


def test_ptx_of_the_draws():
    # The GPU path compiles here too (KILN_ARCH): 32-bit Philox is mul.hi.u32 and mul.lo.u32
    # (10 rounds x 2 multipliers, unrolled), 64-bit offsets need no 64-bit multiply.
    sig = {"seed": "i32", "seed_ptr": "*i32", "off_ptr": "*i64", "ints_ptr": "*u32",
           "floats_ptr": "*fp32"}
    ptx = kiln.compile(draw_1d, signature=sig, constexprs=dict(N=128, TILE_SEED=False,
                                                               ROUNDS=10)).asm["ptx"]
    assert "mul.hi.u32" in ptx and "mul.hi.u64" not in ptx
    ptx = kiln.compile(philox_impl_kernel, signature={"c_ptr": "*u64", "k_ptr": "*u64",
                                                      "out_ptr": "*u64"},
                       constexprs=dict(ROUNDS=7)).asm["ptx"]
    assert len(re.findall(r"mul\.hi\.u64", ptx)) == 14


def test_names_are_exported():
    for name in ["philox", "philox_impl", "randint", "randint4x", "rand", "randn", "rand4x",
                 "randn4x", "uint_to_uniform_float", "pair_uniform_to_normal"]:
        assert name in tl.__all__ and name in dir(tl)
        assert isinstance(getattr(tl, name), kiln.JITFunction)
        assert getattr(tl.random, name) is getattr(tl, name)
    params = inspect.signature(tl.rand.fn).parameters
    assert list(params) == ["seed", "offset", "n_rounds"]
    assert tl.random.N_ROUNDS_DEFAULT == 10 and params["n_rounds"].default == 10


# --- GPU -----------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("width,kat", [(32, KAT32), (64, KAT64)])
def test_philox_impl_known_answers_gpu(width, kat):
    dt = np.uint32 if width == 32 else np.uint64
    for rounds, ctr, key, want in kat:
        dev = [kiln.from_numpy(np.array(ctr, dt)), kiln.from_numpy(np.array(key, dt)),
               kiln.from_numpy(np.zeros(4, dt))]
        philox_impl_kernel[(1,)](*dev, ROUNDS=rounds)
        kiln.synchronize()
        assert [int(x) for x in dev[2].numpy()] == want, (width, rounds, ctr)


@pytest.mark.gpu
@pytest.mark.parametrize("odt,seed,rounds", CASES_1D)
def test_draws_1d_gpu(odt, seed, rounds):
    draw_1d_case(odt, seed, rounds, on_gpu=True)


@pytest.mark.gpu
@pytest.mark.parametrize("odt", [np.int32, np.int64])
@pytest.mark.parametrize("tile_seed", [False, True])
@pytest.mark.parametrize("rounds", [7, 10])
def test_draws_2d_gpu(odt, tile_seed, rounds):
    draw_2d_case(odt, tile_seed, rounds, on_gpu=True)


@pytest.mark.gpu
@pytest.mark.parametrize("rounds", [7, 10])
def test_scalar_seed_and_offset_gpu(rounds):
    dev = [kiln.from_numpy(np.zeros((5, 8), np.uint32)),
           kiln.from_numpy(np.zeros((10, 8), np.float32))]
    base = (3 << 32) + 17
    draw_scalar[(8,)](2024, base, *dev, ROUNDS=rounds)
    kiln.synchronize()
    check_draws(dev[0].numpy(), dev[1].numpy(), 2024,
                np.arange(base, base + 8, dtype=np.int64), rounds)


@pytest.mark.gpu
def test_literal_seeds_gpu():
    dev = kiln.from_numpy(np.zeros(2 * 64, np.uint32))
    draw_literal_seed[(1,)](dev, N=64)
    kiln.synchronize()
    out, o = dev.numpy(), np.arange(64, dtype=np.int32)
    np.testing.assert_array_equal(out[:64], randint4x_ref(np.int32(1234), o)[0])
    np.testing.assert_array_equal(out[64:], randint4x_ref(np.int32(-7), o)[0])


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [np.int32, np.uint64])
def test_uint_to_uniform_float_gpu(dt):
    info = np.iinfo(dt)
    x = np.random.default_rng(9).integers(info.min, info.max, 256, dtype=dt, endpoint=True)
    dev = [kiln.from_numpy(x), kiln.from_numpy(np.zeros(256, np.float32))]
    uniform_kernel[(1,)](*dev, N=256)
    kiln.synchronize()
    np.testing.assert_array_equal(dev[1].numpy(), uniform_ref(x))


@pytest.mark.gpu
@pytest.mark.parametrize("p", [0.5, 0.1])
def test_seeded_dropout_gpu(p):
    x = dropout_inputs()
    for seed in (123, 512):
        dev = [kiln.from_numpy(x), kiln.from_numpy(np.zeros_like(x))]
        seeded_dropout[(kiln.cdiv(x.size, 256),)](dev[0], dev[1], x.size, p, seed,
                                                   BLOCK_SIZE=256)
        kiln.synchronize()
        out = dev[1].numpy()
        keep, want = dropout_ref(x, p, seed)
        np.testing.assert_array_equal(out != 0, keep)
        np.testing.assert_allclose(out, want, rtol=1e-6)


# --- against Triton (GPU, when triton and torch are importable) ----------------------------

@kiln.jit
def draw_for_triton(out_i_ptr, out_f_ptr, seed, base, N: tl.constexpr):
    # The integers as int32 bits (torch's uint32 support is thin), then rand and randn.
    offs = base + tl.arange(0, N)
    a, b, c, d = tl.randint4x(seed, offs)
    o = tl.arange(0, N)
    tl.store(out_i_ptr + o, a.to(tl.int32, bitcast=True))
    tl.store(out_i_ptr + N + o, b.to(tl.int32, bitcast=True))
    tl.store(out_i_ptr + 2 * N + o, c.to(tl.int32, bitcast=True))
    tl.store(out_i_ptr + 3 * N + o, d.to(tl.int32, bitcast=True))
    tl.store(out_f_ptr + o, tl.rand(seed, offs))
    tl.store(out_f_ptr + N + o, tl.randn(seed, offs))


def triton_twin(kernel, tmp_path):
    """The same kernel compiled by Triton: its source with the decorator and `tl` rebound."""
    src = inspect.getsource(kernel.fn).replace("@kiln.jit", "@triton.jit")
    path = tmp_path / f"triton_{kernel.fn.__name__}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n" + src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return getattr(module, kernel.fn.__name__)


@pytest.mark.gpu
def test_same_bits_as_triton(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import torch
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    # The dropout: the same source compiled by both, the masks equal bit for bit.
    tri_dropout = triton_twin(seeded_dropout, tmp_path)
    x = torch.from_numpy(dropout_inputs(4096)).cuda()
    for p, seed in [(0.5, 123), (0.2, 2 ** 40 + 5), (0.7, -9)]:
        outs = []
        for fn in (tri_dropout, seeded_dropout):
            out = torch.zeros_like(x)
            fn[(triton_cdiv(x.numel(), 1024),)](x, out, x.numel(), p, seed, BLOCK_SIZE=1024)
            torch.cuda.synchronize()
            outs.append(out.cpu().numpy())
        np.testing.assert_array_equal(outs[1] != 0, outs[0] != 0)
        np.testing.assert_array_equal(outs[1], outs[0])
        np.testing.assert_array_equal(outs[1] != 0, dropout_ref(x.cpu().numpy(), p, seed)[0])
    # The integers and uniforms bit for bit; normals through each one's libdevice.
    tri_draw = triton_twin(draw_for_triton, tmp_path)
    n = 1024
    for seed, base in [(42, 0), (-5, 2 ** 31 - 100), (2 ** 35 + 3, 2 ** 33 + 7)]:
        res = []
        for fn in (tri_draw, draw_for_triton):
            ints = torch.zeros(4 * n, dtype=torch.int32, device="cuda")
            floats = torch.zeros(2 * n, dtype=torch.float32, device="cuda")
            fn[(1,)](ints, floats, seed, base, N=n)
            torch.cuda.synchronize()
            res.append((ints.cpu().numpy(), floats.cpu().numpy()))
        np.testing.assert_array_equal(res[1][0], res[0][0])
        np.testing.assert_array_equal(res[1][1][:n], res[0][1][:n])
        np.testing.assert_allclose(res[1][1][n:], res[0][1][n:], rtol=1e-6, atol=1e-6)


def triton_cdiv(a, b):
    return (a + b - 1) // b
