"""tl.join, tl.split, tl.interleave, tl.cat, tl.flip, tl.sort, tl.topk, tl.histogram and
tl.gather, and the tensor methods x.split(), x.sort(), x.flip(), x.histogram(), x.gather()
(semantics from Triton 3.6's language and documentation): numerics on the CPU backend against
numpy over dtypes and ranks, bit for bit where values are only moved (-0.0 and NaN payloads
included), the PTX for sm_90 (compile-only), the errors at the user's line, and the same
numerics on the GPU (marker `gpu`)."""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import expect_error, marker_line

CPU = dict(device="cpu")
MOVE_DTYPES = [np.float32, np.float16, np.int32, np.int8, np.uint8, np.uint32, np.bool_]
SHAPES = [(1, 1, 16), (1, 4, 8), (2, 4, 8)]  # (A, B, C) of rank 1, 2 and 3


def rank_of(shape):
    return 1 if shape[:2] == (1, 1) else 2 if shape[0] == 1 else 3


def tile_shape(shape):
    return shape[3 - rank_of(shape):]


@kiln.jit
def offsets(R: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    # Row-major offsets of an (A, B, C) tile of rank R (leading unit dimensions dropped).
    if R == 1:
        o = tl.arange(0, C)
    elif R == 2:
        o = tl.arange(0, B)[:, None] * C + tl.arange(0, C)[None, :]
    else:
        o = (tl.arange(0, A)[:, None, None] * (B * C) + tl.arange(0, B)[None, :, None] * C
             + tl.arange(0, C)[None, None, :])
    return o


def bits(a):
    """The array's bits (floats compared as unsigned integers: -0.0 and NaN payloads count)."""
    a = np.asarray(a)
    return a.view(f"u{a.itemsize}") if a.dtype.kind == "f" else a


def assert_bits_equal(got, want):
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(bits(got), bits(want))


def values(dtype, shape, seed, specials=False):
    """Test values of `dtype`: small integers (so with duplicates), and for floats with
    specials -0.0, +0.0, NaNs with payloads and infinities mixed in."""
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 200), shape).astype(dtype)
    x = (rng.integers(-40, 40, shape) * 0.25).astype(dtype)
    if specials:
        flat = x.reshape(-1)
        n = flat.size
        ub = np.dtype(f"u{flat.itemsize}")
        nan = np.array([0x7FC00123 if flat.itemsize == 4 else 0x7E05], ub).view(dtype)[0]
        neg_nan = np.array([0xFFC00456 if flat.itemsize == 4 else 0xFE09], ub).view(dtype)[0]
        for i, v in enumerate([-0.0, 0.0, nan, neg_nan, np.inf, -np.inf]):
            flat[(i * 5 + 1) % n] = v
    return x


# --- join, split, interleave ----------------------------------------------------------------

@kiln.jit
def two(R: tl.constexpr):
    # arange(0, 2) shaped [1] * R + [2].
    t = tl.arange(0, 2)
    for _ in tl.static_range(R):
        t = tl.expand_dims(t, 0)
    return t


@kiln.jit
def join_kernel(a_ptr, b_ptr, out_ptr, R: tl.constexpr, A: tl.constexpr, B: tl.constexpr,
                C: tl.constexpr, BCAST: tl.constexpr):
    o = offsets(R, A, B, C)
    a = tl.load(a_ptr + o)
    if BCAST:
        b = tl.load(b_ptr + tl.arange(0, C))  # broadcast along the leading dimensions
    else:
        b = tl.load(b_ptr + o)
    j = tl.join(a, b)
    tl.static_assert(len(j.shape) == R + 1 and j.shape[R] == 2)
    tl.store(out_ptr + tl.expand_dims(o * 2, R) + two(R), j)


@kiln.jit
def split_kernel(x_ptr, a_ptr, b_ptr, R: tl.constexpr, A: tl.constexpr, B: tl.constexpr,
                 C: tl.constexpr, MEMBER: tl.constexpr):
    o = offsets(R, A, B, C)
    x = tl.load(x_ptr + tl.expand_dims(o * 2, R) + two(R))
    if MEMBER:
        a, b = x.split()
    else:
        a, b = tl.split(x)
    tl.store(a_ptr + o, a)
    tl.store(b_ptr + o, b)


@kiln.jit
def interleave_kernel(a_ptr, b_ptr, out_ptr, R: tl.constexpr, A: tl.constexpr,
                      B: tl.constexpr, C: tl.constexpr):
    o = offsets(R, A, B, C)
    r = tl.interleave(tl.load(a_ptr + o), tl.load(b_ptr + o))
    tl.static_assert(r.shape[R - 1] == 2 * C)
    tl.store(out_ptr + offsets(R, A, B, 2 * C), r)


@kiln.jit
def scalar_join_split_kernel(x_ptr, out_ptr, s_ptr):
    a = tl.load(x_ptr)
    b = tl.load(x_ptr + 1)
    j = tl.join(a, b)  # two scalars give [2]
    tl.static_assert(len(j.shape) == 1 and j.shape[0] == 2)
    tl.store(out_ptr + tl.arange(0, 2), j)
    i = tl.interleave(b, a)
    tl.store(out_ptr + 2 + tl.arange(0, 2), i)
    lo, hi = tl.split(j)  # [2] gives two scalars
    tl.store(s_ptr, hi)
    tl.store(s_ptr + 1, lo)
    tl.store(out_ptr + 4 + tl.arange(0, 2), tl.join(a, 7))  # a literal takes a's dtype


@pytest.mark.parametrize("dtype", MOVE_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_join_split_interleave(dtype, shape):
    ts = tile_shape(shape)
    a = values(dtype, ts, 1, specials=True)
    b = values(dtype, ts, 2, specials=True)
    meta = dict(R=rank_of(shape), A=shape[0], B=shape[1], C=shape[2])
    out = np.zeros(ts + (2,), dtype)
    join_kernel[(1,)](a, b, out, BCAST=False, **meta, **CPU)
    assert_bits_equal(out, np.stack([a, b], -1))
    x = values(dtype, ts + (2,), 3, specials=True)
    for member in (False, True):
        lo, hi = np.zeros(ts, dtype), np.zeros(ts, dtype)
        split_kernel[(1,)](x, lo, hi, MEMBER=member, **meta, **CPU)
        assert_bits_equal(lo, x[..., 0])
        assert_bits_equal(hi, x[..., 1])
    out = np.zeros(ts[:-1] + (2 * ts[-1],), dtype)
    interleave_kernel[(1,)](a, b, out, **meta, **CPU)
    assert_bits_equal(out, np.stack([a, b], -1).reshape(out.shape))


def test_join_broadcasts():
    a = values(np.float32, (2, 4, 8), 4)
    b = values(np.float32, (8,), 5)
    out = np.zeros((2, 4, 8, 2), np.float32)
    join_kernel[(1,)](a, b, out, R=3, A=2, B=4, C=8, BCAST=True, **CPU)
    assert_bits_equal(out, np.stack(np.broadcast_arrays(a, b), -1))


def test_join_split_interleave_of_scalars():
    x = np.array([-0.0, np.nan, 0, 0, 0, 0], np.float32)
    out, s = np.zeros(6, np.float32), np.zeros(2, np.float32)
    scalar_join_split_kernel[(1,)](x, out, s, **CPU)
    assert_bits_equal(out, np.array([-0.0, np.nan, np.nan, -0.0, -0.0, 7], np.float32))
    assert_bits_equal(s, np.array([np.nan, -0.0], np.float32))


# --- cat ------------------------------------------------------------------------------------

@kiln.jit
def cat_kernel(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    r = tl.cat(tl.load(a_ptr + o), tl.load(b_ptr + o), can_reorder=True)
    tl.static_assert(r.shape[0] == 2 * N)
    tl.store(out_ptr + tl.arange(0, 2 * N), r)


@pytest.mark.parametrize("dtype", MOVE_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [1, 16, 128])
def test_cat(dtype, n):
    a, b = values(dtype, (n,), 6, True), values(dtype, (n,), 7, True)
    out = np.zeros(2 * n, dtype)
    cat_kernel[(1,)](a, b, out, N=n, **CPU)
    # Triton leaves the order to the compiler with can_reorder=True; Kiln keeps a then b.
    assert_bits_equal(out, np.concatenate([a, b]))


# --- flip -----------------------------------------------------------------------------------

@kiln.jit
def flip_kernel(x_ptr, out_ptr, R: tl.constexpr, A: tl.constexpr, B: tl.constexpr,
                C: tl.constexpr, DIM: tl.constexpr, MEMBER: tl.constexpr):
    o = offsets(R, A, B, C)
    x = tl.load(x_ptr + o)
    if MEMBER:
        r = x.flip(DIM)
    elif DIM is None:
        r = tl.flip(x)
    else:
        r = tl.flip(x, dim=DIM)
    tl.store(out_ptr + o, r)


FLIP_CASES = [((1, 1, 16), None), ((1, 1, 1), None), ((1, 4, 8), None), ((1, 4, 8), 0),
              ((1, 4, 8), -2), ((2, 4, 8), 0), ((2, 4, 8), 1), ((2, 4, 8), -1),
              ((1, 8, 1), 0)]


@pytest.mark.parametrize("dtype", MOVE_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape,dim", FLIP_CASES, ids=str)
def test_flip(dtype, shape, dim):
    ts = tile_shape(shape)
    x = values(dtype, ts, 8, specials=True)
    out = np.zeros(ts, dtype)
    flip_kernel[(1,)](x, out, R=rank_of(shape), A=shape[0], B=shape[1], C=shape[2], DIM=dim,
                      MEMBER=False, **CPU)
    assert_bits_equal(out, np.flip(x, -1 if dim is None else dim))


def test_flip_member():
    x = values(np.float16, (4, 8), 9, specials=True)
    out = np.zeros_like(x)
    flip_kernel[(1,)](x, out, R=2, A=1, B=4, C=8, DIM=0, MEMBER=True, **CPU)
    assert_bits_equal(out, x[::-1])


# --- sort -----------------------------------------------------------------------------------

SORT_DTYPES = [np.float32, np.float16, np.int32, np.int8, np.uint8, np.uint32, np.int64,
               np.bool_]


@kiln.jit
def sort_kernel(x_ptr, out_ptr, R: tl.constexpr, A: tl.constexpr, B: tl.constexpr,
                C: tl.constexpr, DESC: tl.constexpr, MODE: tl.constexpr):
    o = offsets(R, A, B, C)
    x = tl.load(x_ptr + o)
    if MODE == 0:
        r = tl.sort(x, descending=DESC)
    elif MODE == 1:
        r = x.sort(descending=DESC)
    elif MODE == 2:
        r = tl.sort(x, dim=R - 1, descending=DESC)
    else:
        r = tl.sort(x, -1, DESC)
    tl.store(out_ptr + o, r)


def sorted_ref(x, desc):
    s = np.sort(x, axis=-1, kind="stable")
    return s[..., ::-1] if desc else s


@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES + [(1, 1, 1), (1, 1, 2), (1, 2, 256)], ids=str)
@pytest.mark.parametrize("desc", [False, True])
def test_sort(dtype, shape, desc):
    ts = tile_shape(shape)
    x = values(dtype, ts, 10)
    out = np.zeros(ts, dtype)
    sort_kernel[(1,)](x, out, R=rank_of(shape), A=shape[0], B=shape[1], C=shape[2],
                      DESC=desc, MODE=0, **CPU)
    assert_bits_equal(out, sorted_ref(x, desc))


@pytest.mark.parametrize("shape", [(1, 1, 1024), (1, 16, 128)], ids=str)
def test_sort_large_rows(shape):
    ts = tile_shape(shape)
    x = np.random.default_rng(20).standard_normal(ts).astype(np.float32)
    x.flat[::7] = 0.5  # duplicates
    for desc in (False, True):
        out = np.zeros_like(x)
        sort_kernel[(1,)](x, out, R=rank_of(shape), A=shape[0], B=shape[1], C=shape[2],
                          DESC=desc, MODE=0, **CPU)
        assert_bits_equal(out, sorted_ref(x, desc))


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_sort_member_and_dim_spellings(mode):
    x = values(np.int32, (4, 32), 11)
    out = np.zeros_like(x)
    sort_kernel[(1,)](x, out, R=2, A=1, B=4, C=32, DESC=True, MODE=mode, **CPU)
    assert_bits_equal(out, sorted_ref(x, True))


def test_sort_with_nans_is_a_permutation():
    # A NaN compares false: it stays in place in its compare-exchange steps, and the other
    # value of its pair is never lost (each row comes out as a permutation of itself).
    x = values(np.float32, (4, 64), 12, specials=True)
    out = np.zeros_like(x)
    sort_kernel[(1,)](x, out, R=2, A=1, B=4, C=64, DESC=False, MODE=0, **CPU)
    for row_in, row_out in zip(x, out):
        np.testing.assert_array_equal(np.sort(bits(row_in)), np.sort(bits(row_out)))
    # Without NaNs the order is numpy's (-0.0 and 0.0 are equal: compared as values).
    y = np.where(np.isnan(x), 1.0, x).astype(np.float32)
    sort_kernel[(1,)](y, out, R=2, A=1, B=4, C=64, DESC=False, MODE=0, **CPU)
    np.testing.assert_array_equal(out, np.sort(y, -1))


# --- topk -----------------------------------------------------------------------------------

@kiln.jit
def topk_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    r = tl.topk(x, K)
    tl.static_assert(r.shape[0] == M and r.shape[1] == K)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :], r)


@kiln.jit
def topk_1d_kernel(x_ptr, out_ptr, N: tl.constexpr, K: tl.constexpr):
    r = tl.topk(tl.load(x_ptr + tl.arange(0, N)), K, dim=0)
    tl.store(out_ptr + tl.arange(0, K), r)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8, np.uint8,
                                   np.uint32, np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n,k", [(16, 1), (16, 2), (16, 4), (16, 16), (64, 8), (128, 32)])
def test_topk(dtype, n, k):
    x = values(dtype, (4, n), 13)
    out = np.zeros((4, k), dtype)
    topk_kernel[(1,)](x, out, M=4, N=n, K=k, **CPU)
    assert_bits_equal(out, sorted_ref(x, True)[:, :k])


def test_topk_of_long_rows():
    x = np.random.default_rng(21).standard_normal((8, 1024)).astype(np.float32)
    out = np.zeros((8, 16), np.float32)
    topk_kernel[(1,)](x, out, M=8, N=1024, K=16, **CPU)
    assert_bits_equal(out, sorted_ref(x, True)[:, :16])


@pytest.mark.parametrize("n,k", [(64, 8), (512, 16)])
def test_bf16_topk_and_sort_are_the_f32_network(n, k):
    # bf16 compares and maxima run in f32 on the host (widened by integer ops: exact, vector
    # code; LLVM legalized <N x bfloat> ones element by element, and a 512-column topk took
    # 114 s to compile): the same network as on the values as f32, bit for bit, NaNs, signed
    # zeros and infinities included.
    ml = pytest.importorskip("ml_dtypes")
    x = values(np.float16, (4, n), 15, specials=True).astype(np.float32)
    x16 = x.astype(ml.bfloat16)
    x32 = x16.astype(np.float32)  # (the payload NaNs keep their bf16 bits)
    widen = lambda a: a.view(np.uint16).astype(np.uint32) << 16  # noqa: E731
    out16, out32 = np.zeros((4, k), ml.bfloat16), np.zeros((4, k), np.float32)
    topk_kernel[(1,)](x16, out16, M=4, N=n, K=k, **CPU)
    topk_kernel[(1,)](x32, out32, M=4, N=n, K=k, **CPU)
    np.testing.assert_array_equal(widen(out16), out32.view(np.uint32))
    s16, s32 = np.zeros_like(x16), np.zeros_like(x32)
    sort_kernel[(1,)](x16, s16, R=2, A=1, B=4, C=n, DESC=True, MODE=0, **CPU)
    sort_kernel[(1,)](x32, s32, R=2, A=1, B=4, C=n, DESC=True, MODE=0, **CPU)
    np.testing.assert_array_equal(widen(s16), s32.view(np.uint32))


def test_topk_1d_matches_triton_example():
    # Triton's documented example: top 4 of arange(0, 16) is [15, 14, 13, 12].
    x = np.random.default_rng(14).permutation(16).astype(np.int32)
    out = np.zeros(4, np.int32)
    topk_1d_kernel[(1,)](x, out, N=16, K=4, **CPU)
    np.testing.assert_array_equal(out, [15, 14, 13, 12])


# --- histogram ------------------------------------------------------------------------------

@kiln.jit
def histogram_kernel(x_ptr, m_ptr, out_ptr, N: tl.constexpr, BINS: tl.constexpr,
                     MODE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    if MODE == 0:
        h = tl.histogram(x, BINS)
    elif MODE == 1:
        h = tl.histogram(x, BINS, mask=tl.load(m_ptr + tl.arange(0, N)))
    elif MODE == 2:
        h = x.histogram(BINS)
    else:
        h = tl.histogram(x, BINS, True)  # a scalar mask broadcasts
    tl.static_assert(h.shape[0] == BINS)
    tl.store(out_ptr + tl.arange(0, BINS), h)


def histogram_ref(x, bins, mask=None):
    keep = (x.astype(np.int64) >= 0) & (x.astype(np.int64) < bins)
    if mask is not None:
        keep &= mask
    return np.bincount(x[keep].astype(np.int64), minlength=bins).astype(np.int32)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.int64, np.uint32, np.int16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n,bins", [(64, 16), (256, 32), (16, 1), (8, 64)])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_histogram(dtype, n, bins, mode):
    rng = np.random.default_rng(15)
    lo = 0 if np.issubdtype(dtype, np.unsignedinteger) else -5
    x = rng.integers(lo, bins + 5, n).astype(dtype)  # values below 0 and from num_bins up
    m = rng.integers(0, 2, n).astype(np.bool_)
    out = np.full(bins, -1, np.int32)
    histogram_kernel[(1,)](x, m, out, N=n, BINS=bins, MODE=mode, **CPU)
    np.testing.assert_array_equal(out, histogram_ref(x, bins, m if mode == 1 else None))


def test_histogram_of_bools():
    x = np.array([1, 0, 1, 1] * 4, np.bool_)
    out = np.zeros(4, np.int32)
    histogram_kernel[(1,)](x, x, out, N=16, BINS=4, MODE=0, **CPU)
    np.testing.assert_array_equal(out, [4, 12, 0, 0])


# --- gather ---------------------------------------------------------------------------------

@kiln.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, R: tl.constexpr, A: tl.constexpr,
                  B: tl.constexpr, C: tl.constexpr, IA: tl.constexpr, IB: tl.constexpr,
                  IC: tl.constexpr, AXIS: tl.constexpr, MEMBER: tl.constexpr):
    src = tl.load(src_ptr + offsets(R, A, B, C))
    oi = offsets(R, IA, IB, IC)
    idx = tl.load(idx_ptr + oi)
    if MEMBER:
        r = src.gather(idx, AXIS)
    else:
        r = tl.gather(src, idx, axis=AXIS)
    tl.store(out_ptr + oi, r)


# (src shape, index shape, axis): the index may be shorter or longer along the axis.
GATHER_CASES = [((1, 1, 16), (1, 1, 16), 0), ((1, 1, 16), (1, 1, 4), 0),
                ((1, 1, 8), (1, 1, 32), -1), ((1, 4, 8), (1, 16, 8), 0),
                ((1, 4, 8), (1, 4, 2), 1), ((2, 4, 8), (2, 8, 8), 1),
                ((2, 4, 8), (2, 4, 4), -1), ((2, 4, 8), (4, 4, 8), 0)]


def gather_ref(src, idx, axis):
    size = src.shape[axis]
    ok = (idx >= 0) & (idx < size)
    r = np.take_along_axis(src, np.where(ok, idx, 0).astype(np.int64), axis=axis)
    return np.where(ok, r, np.zeros((), src.dtype))


@pytest.mark.parametrize("dtype", MOVE_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("src_shape,idx_shape,axis", GATHER_CASES, ids=str)
def test_gather(dtype, src_shape, idx_shape, axis):
    r = rank_of(src_shape)
    ss, ist = tile_shape(src_shape), idx_shape[3 - r:]
    src = values(dtype, ss, 16, specials=True)
    idx = np.random.default_rng(17).integers(0, ss[axis], ist).astype(np.int32)
    out = np.zeros(ist, dtype)
    gather_kernel[(1,)](src, idx, out, R=r, A=src_shape[0], B=src_shape[1], C=src_shape[2],
                        IA=idx_shape[0], IB=idx_shape[1], IC=idx_shape[2], AXIS=axis,
                        MEMBER=False, **CPU)
    assert_bits_equal(out, gather_ref(src, idx, axis))


@pytest.mark.parametrize("src_shape,idx_shape,axis", [((1, 128, 64), (1, 256, 64), 0),
                                                     ((2, 64, 128), (2, 64, 256), -1)],
                         ids=str)
def test_gather_past_one_comparison_tile(src_shape, idx_shape, axis):
    """Triton's test_gather [128, 64] -> [256, 64]: 256 x 128 x 64 comparisons pass a tile's
    2^20 elements, so the index is gathered a half at a time (was a CompilationError)."""
    r = rank_of(src_shape)
    ss, ist = tile_shape(src_shape), idx_shape[3 - r:]
    src = values(np.float32, ss, 16, specials=True)
    idx = np.random.default_rng(19).integers(0, ss[axis], ist).astype(np.int32)
    out = np.zeros(ist, np.float32)
    gather_kernel[(1,)](src, idx, out, R=r, A=src_shape[0], B=src_shape[1], C=src_shape[2],
                        IA=idx_shape[0], IB=idx_shape[1], IC=idx_shape[2], AXIS=axis,
                        MEMBER=False, **CPU)
    assert_bits_equal(out, gather_ref(src, idx, axis))


@pytest.mark.parametrize("idx_dtype", [np.int64, np.uint8, np.int8, np.uint32],
                         ids=lambda d: np.dtype(d).name)
def test_gather_index_dtypes_and_out_of_range(idx_dtype):
    src = values(np.float32, (4, 8), 18, specials=True)
    info = np.iinfo(idx_dtype)
    idx = np.random.default_rng(19).integers(max(info.min, -3), 11, (4, 8)).astype(idx_dtype)
    out = np.full((4, 8), 5, np.float32)
    gather_kernel[(1,)](src, idx, out, R=2, A=1, B=4, C=8, IA=1, IB=4, IC=8, AXIS=1,
                        MEMBER=True, **CPU)
    assert_bits_equal(out, gather_ref(src, idx.astype(np.int64), 1))


# --- the PTX for sm_90 (compile-only) -------------------------------------------------------

def ptx_of(fn, signature, **constexprs):
    ptx = kiln.compile(fn, signature=signature, constexprs=constexprs, target="sm_90").asm["ptx"]
    assert re.search(r"\.visible \.entry " + fn.__name__, ptx)
    return ptx


@pytest.mark.parametrize("shape", [(1, 1, 128), (1, 16, 32), (2, 4, 64)], ids=str)
def test_ptx_of_every_op(shape):
    meta = dict(R=rank_of(shape), A=shape[0], B=shape[1], C=shape[2])
    f32 = {"a_ptr": "*fp32", "b_ptr": "*fp32", "out_ptr": "*fp32"}
    ptx_of(join_kernel, f32, BCAST=False, **meta)
    ptx_of(split_kernel, {"x_ptr": "*fp16", "a_ptr": "*fp16", "b_ptr": "*fp16"}, MEMBER=True,
           **meta)
    ptx_of(interleave_kernel, {"a_ptr": "*i8", "b_ptr": "*i8", "out_ptr": "*i8"}, **meta)
    ptx_of(flip_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, DIM=0, MEMBER=False, **meta)
    ptx_of(sort_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, DESC=True, MODE=0, **meta)
    ptx_of(gather_kernel, {"src_ptr": "*fp32", "idx_ptr": "*i32", "out_ptr": "*fp32"},
           IA=shape[0], IB=shape[1], IC=shape[2], AXIS=0, MEMBER=False, **meta)
    ptx_of(sort_kernel, {"x_ptr": "*i32", "out_ptr": "*i32"}, DESC=False, MODE=0, **meta)


def test_ptx_of_a_long_sort_moves_data_between_steps_by_shuffles():
    # The network runs on the rows viewed as [R, 2, ..., 2]: a step's partners are a reduction
    # along one dimension (registers, shuffles, or shared memory across warps), not a reshape
    # through shared memory per step. 1024 elements are 55 compare-exchange steps.
    ptx = ptx_of(sort_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, R=1, A=1, B=1, C=1024,
                 DESC=False, MODE=0)
    assert "shfl.sync.bfly" in ptx
    assert len(re.findall(r"\bbar\.sync\b|\bbarrier\.sync\b", ptx)) < 55


def test_ptx_of_cat_topk_histogram():
    ptx_of(cat_kernel, {"a_ptr": "*fp32", "b_ptr": "*fp32", "out_ptr": "*fp32"}, N=128)
    ptx_of(topk_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, M=16, N=128, K=8)
    ptx_of(topk_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, M=8, N=1024, K=16)
    ptx_of(topk_kernel, {"x_ptr": "*i32", "out_ptr": "*i32"}, M=1, N=256, K=256)
    ptx_of(histogram_kernel, {"x_ptr": "*i32", "m_ptr": "*i1", "out_ptr": "*i32"}, N=512,
           BINS=64, MODE=1)


# --- errors ---------------------------------------------------------------------------------

@kiln.jit
def split_wrong_last_dim(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4)[:, None] * 8 + tl.arange(0, 8)[None, :])
    a, b = tl.split(x)  # ERR


@kiln.jit
def split_scalar(x_ptr):
    a, b = tl.split(tl.load(x_ptr))  # ERR


@kiln.jit
def join_mismatched_shapes(x_ptr):
    a = tl.load(x_ptr + tl.arange(0, 4))
    b = tl.load(x_ptr + tl.arange(0, 8))
    tl.store(x_ptr + tl.arange(0, 8), tl.sum(tl.join(a, b), 1))  # ERR


@kiln.jit
def join_mismatched_dtypes(x_ptr):
    a = tl.load(x_ptr + tl.arange(0, 4))
    j = tl.join(a, a.to(tl.int32))  # ERR


@kiln.jit
def interleave_mismatched_shapes(x_ptr):
    a = tl.load(x_ptr + tl.arange(0, 4)[:, None] + tl.arange(0, 2)[None, :])
    b = tl.load(x_ptr + tl.arange(0, 4)[:, None] + tl.arange(0, 4)[None, :])
    j = tl.interleave(a, b)  # ERR


@kiln.jit
def cat_without_reorder(x_ptr):
    a = tl.load(x_ptr + tl.arange(0, 4))
    c = tl.cat(a, a)  # ERR


@kiln.jit
def cat_mismatched_shapes(x_ptr):
    a = tl.load(x_ptr + tl.arange(0, 4))
    c = tl.cat(a, tl.load(x_ptr + tl.arange(0, 8)), can_reorder=True)  # ERR


@kiln.jit
def cat_2d(x_ptr):
    a = tl.load(x_ptr + tl.arange(0, 4)[:, None] + tl.arange(0, 4)[None, :])
    c = tl.cat(a, a, True)  # ERR


@kiln.jit
def flip_bad_dim(x_ptr):
    a = tl.load(x_ptr + tl.arange(0, 4)[:, None] + tl.arange(0, 4)[None, :])
    c = tl.flip(a, 2)  # ERR


@kiln.jit
def sort_not_last_dim(x_ptr):
    a = tl.load(x_ptr + tl.arange(0, 4)[:, None] + tl.arange(0, 4)[None, :])
    c = tl.sort(a, dim=0)  # ERR


@kiln.jit
def sort_scalar(x_ptr):
    c = tl.sort(tl.load(x_ptr))  # ERR


@kiln.jit
def sort_pointers(x_ptr):
    c = tl.sort(x_ptr + tl.arange(0, 4))  # ERR


@kiln.jit
def topk_k_not_power_of_two(x_ptr):
    c = tl.topk(tl.load(x_ptr + tl.arange(0, 16)), 3)  # ERR


@kiln.jit
def topk_k_too_large(x_ptr):
    c = tl.topk(tl.load(x_ptr + tl.arange(0, 16)), 32)  # ERR


@kiln.jit
def histogram_bins_not_power_of_two(x_ptr):
    h = tl.histogram(tl.load(x_ptr + tl.arange(0, 16)), 12)  # ERR


@kiln.jit
def histogram_of_floats(x_ptr):
    h = tl.histogram(tl.load(x_ptr + tl.arange(0, 16)), 16)  # ERR


@kiln.jit
def histogram_2d(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4)[:, None] + tl.arange(0, 4)[None, :])
    h = tl.histogram(x, 16)  # ERR


@kiln.jit
def histogram_int_mask(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    h = tl.histogram(x, 16, mask=x)  # ERR


@kiln.jit
def histogram_too_many_comparisons(x_ptr):
    h = tl.histogram(tl.load(x_ptr + tl.arange(0, 4096)), 512)  # ERR


@kiln.jit
def gather_mismatched_dims(x_ptr):
    src = tl.load(x_ptr + tl.arange(0, 4)[:, None] + tl.arange(0, 8)[None, :])
    idx = tl.zeros([2, 2], tl.int32)
    g = tl.gather(src, idx, 1)  # ERR


@kiln.jit
def gather_rank_mismatch(x_ptr):
    src = tl.load(x_ptr + tl.arange(0, 4)[:, None] + tl.arange(0, 8)[None, :])
    g = tl.gather(src, tl.arange(0, 4), 0)  # ERR


@kiln.jit
def gather_float_index(x_ptr):
    src = tl.load(x_ptr + tl.arange(0, 8))
    g = tl.gather(src, src, 0)  # ERR


@kiln.jit
def gather_bad_axis(x_ptr):
    src = tl.load(x_ptr + tl.arange(0, 8))
    g = tl.gather(src, tl.arange(0, 8), 1)  # ERR


F32 = {"x_ptr": "*fp32"}
I32 = {"x_ptr": "*i32"}


@pytest.mark.parametrize("fn,signature,message", [
    (split_wrong_last_dim, F32, r"expected a tile whose last dimension is 2 for split, "
                                r"found fp32\[4, 8\]"),
    (split_scalar, F32, r"expected a tile whose last dimension is 2 for split, found fp32"),
    (join_mismatched_shapes, F32, r"cannot broadcast shapes \[4\] and \[8\]"),
    (join_mismatched_dtypes, F32, r"expected join operands of one dtype, found fp32\[4\] and "
                                  r"int32\[4\]"),
    (interleave_mismatched_shapes, F32, r"cannot broadcast shapes \[4, 2\] and \[4, 4\]"),
    (cat_without_reorder, F32, r"expected can_reorder=True for cat"),
    (cat_mismatched_shapes, F32, r"expected cat operands of one dtype and shape .* found "
                                 r"fp32\[4\] and fp32\[8\]"),
    (cat_2d, F32, r"expected two 1-D tiles for cat, found fp32\[4, 4\]"),
    (flip_bad_dim, F32, r"expected a flip dim in \[-2, 2\) for fp32\[4, 4\], found 2"),
    (sort_not_last_dim, F32, r"expected sort along the last dimension of fp32\[4, 4\] \(dim "
                             r"None, 1 or -1, as Triton supports\), found dim 0"),
    (sort_scalar, F32, r"expected a tile for sort, found fp32"),
    (sort_pointers, F32, r"expected a tile of numbers for sort, found pointer<fp32>\[4\]"),
    (topk_k_not_power_of_two, F32, r"expected topk's k to be a power of two in \[1, 16\] for "
                                   r"fp32\[16\], found 3"),
    (topk_k_too_large, F32, r"expected topk's k to be a power of two in \[1, 16\]"),
    (histogram_bins_not_power_of_two, I32, r"expected histogram's num_bins to be a power of "
                                           r"two, found 12"),
    (histogram_of_floats, F32, r"expected a 1-D integer tile for histogram \(as Triton\), "
                               r"found fp32\[16\]"),
    (histogram_2d, I32, r"expected a 1-D integer tile for histogram"),
    (histogram_int_mask, I32, r"expected an int1 mask for histogram, found int32\[16\]"),
    (histogram_too_many_comparisons, I32, r"expected at most 1048576 elements in a tile for "
                                          r"histogram's comparison of values and bins"),
    (gather_mismatched_dims, F32, r"expected gather's index to match src in every dimension "
                                  r"but axis 1, found int32\[2, 2\] and fp32\[4, 8\]"),
    (gather_rank_mismatch, F32, r"expected gather's index to have the rank of src "
                                r"fp32\[4, 8\], found int32\[4\]"),
    (gather_float_index, F32, r"expected an integer tile as gather's index, found fp32\[8\]"),
    (gather_bad_axis, F32, r"expected a gather axis in \[-1, 1\), found 1"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_errors_name_the_line(fn, signature, message):
    expect_error(fn, signature, message)


@kiln.jit
def const_args_kernel(x_ptr, K: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    c = tl.topk(x, K)  # ERR


def test_topk_k_must_be_a_constexpr():
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(const_args_kernel, signature={"x_ptr": "*fp32"}, constexprs={"K": 2.0})
    assert "expected a constexpr integer for topk's k" in info.value.message
    assert info.value.line == marker_line(const_args_kernel)


# --- the same on the GPU -------------------------------------------------------------------

def gpu_run(kernel, arrays, **meta):
    dev = [kiln.from_numpy(a) for a in arrays]
    kernel[(1,)](*dev, **meta)
    kiln.synchronize()
    return [d.numpy() for d in dev]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_join_split_interleave_gpu(dtype, shape):
    ts = tile_shape(shape)
    meta = dict(R=rank_of(shape), A=shape[0], B=shape[1], C=shape[2])
    a, b = values(dtype, ts, 1, True), values(dtype, ts, 2, True)
    out = gpu_run(join_kernel, [a, b, np.zeros(ts + (2,), dtype)], BCAST=False, **meta)[2]
    assert_bits_equal(out, np.stack([a, b], -1))
    x = values(dtype, ts + (2,), 3, True)
    _, lo, hi = gpu_run(split_kernel, [x, np.zeros(ts, dtype), np.zeros(ts, dtype)],
                        MEMBER=True, **meta)
    assert_bits_equal(lo, x[..., 0])
    assert_bits_equal(hi, x[..., 1])
    out = gpu_run(interleave_kernel, [a, b, np.zeros(ts[:-1] + (2 * ts[-1],), dtype)],
                  **meta)[2]
    assert_bits_equal(out, np.stack([a, b], -1).reshape(out.shape))


@pytest.mark.gpu
def test_join_split_of_scalars_and_cat_gpu():
    x = np.array([-0.0, np.nan, 0, 0, 0, 0], np.float32)
    _, out, s = gpu_run(scalar_join_split_kernel, [x, np.zeros(6, np.float32),
                                                   np.zeros(2, np.float32)])
    assert_bits_equal(out, np.array([-0.0, np.nan, np.nan, -0.0, -0.0, 7], np.float32))
    assert_bits_equal(s, np.array([np.nan, -0.0], np.float32))
    a, b = values(np.float32, (128,), 6, True), values(np.float32, (128,), 7, True)
    out = gpu_run(cat_kernel, [a, b, np.zeros(256, np.float32)], N=128)[2]
    assert_bits_equal(out, np.concatenate([a, b]))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dim", FLIP_CASES, ids=str)
def test_flip_gpu(shape, dim):
    ts = tile_shape(shape)
    x = values(np.float32, ts, 8, specials=True)
    out = gpu_run(flip_kernel, [x, np.zeros(ts, np.float32)], R=rank_of(shape), A=shape[0],
                  B=shape[1], C=shape[2], DIM=dim, MEMBER=False)[1]
    assert_bits_equal(out, np.flip(x, -1 if dim is None else dim))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES + [(1, 2, 256)], ids=str)
@pytest.mark.parametrize("desc", [False, True])
def test_sort_gpu(dtype, shape, desc):
    ts = tile_shape(shape)
    x = values(dtype, ts, 10)
    out = gpu_run(sort_kernel, [x, np.zeros(ts, dtype)], R=rank_of(shape), A=shape[0],
                  B=shape[1], C=shape[2], DESC=desc, MODE=0)[1]
    assert_bits_equal(out, sorted_ref(x, desc))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 1, 1024), (1, 16, 128)], ids=str)
def test_sort_large_rows_gpu(shape):
    ts = tile_shape(shape)
    x = np.random.default_rng(20).standard_normal(ts).astype(np.float32)
    x.flat[::7] = 0.5
    for desc in (False, True):
        out = gpu_run(sort_kernel, [x, np.zeros_like(x)], R=rank_of(shape), A=shape[0],
                      B=shape[1], C=shape[2], DESC=desc, MODE=0)[1]
        assert_bits_equal(out, sorted_ref(x, desc))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n,k", [(16, 1), (16, 4), (64, 8), (128, 128), (1024, 16)])
def test_topk_gpu(dtype, n, k):
    x = values(dtype, (4, n), 13)
    out = gpu_run(topk_kernel, [x, np.zeros((4, k), dtype)], M=4, N=n, K=k)[1]
    assert_bits_equal(out, sorted_ref(x, True)[:, :k])


@pytest.mark.gpu
@pytest.mark.parametrize("n,bins", [(64, 16), (256, 32), (8, 64)])
@pytest.mark.parametrize("mode", [0, 1])
def test_histogram_gpu(n, bins, mode):
    rng = np.random.default_rng(15)
    x = rng.integers(-5, bins + 5, n).astype(np.int32)
    m = rng.integers(0, 2, n).astype(np.bool_)
    out = gpu_run(histogram_kernel, [x, m, np.full(bins, -1, np.int32)], N=n, BINS=bins,
                  MODE=mode)[2]
    np.testing.assert_array_equal(out, histogram_ref(x, bins, m if mode == 1 else None))


@pytest.mark.gpu
@pytest.mark.parametrize("src_shape,idx_shape,axis", GATHER_CASES, ids=str)
def test_gather_gpu(src_shape, idx_shape, axis):
    r = rank_of(src_shape)
    ss, ist = tile_shape(src_shape), idx_shape[3 - r:]
    src = values(np.float32, ss, 16, specials=True)
    idx = np.random.default_rng(17).integers(-1, ss[axis] + 1, ist).astype(np.int32)
    out = gpu_run(gather_kernel, [src, idx, np.zeros(ist, np.float32)], R=r, A=src_shape[0],
                  B=src_shape[1], C=src_shape[2], IA=idx_shape[0], IB=idx_shape[1],
                  IC=idx_shape[2], AXIS=axis, MEMBER=False)[2]
    assert_bits_equal(out, gather_ref(src, idx, axis))
