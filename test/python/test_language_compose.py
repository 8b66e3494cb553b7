"""tl.swizzle2d, tl.ravel, tl.reduce_or, tl.reduce (and sum/max/min/xor_sum) with axis=None
over tiles of several dimensions, and tl.range's keywords (semantics from Triton 3.6's
documentation): numerics on the CPU backend against numpy references, the errors, and the
same numerics on the GPU (marker `gpu`)."""
import inspect

import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import expect_error

CPU = dict(device="cpu")


# --- swizzle2d ------------------------------------------------------------------------------

def swizzle_ref(size_i, size_j, size_g):
    """(new_i, new_j) for every (i, j), from the documented picture: within each group of
    size_g rows, the grid's positions taken column-major receive consecutive row-major
    indices; the element of row-major index i * size_j + j goes where that index lands."""
    order = np.zeros((size_i, size_j), np.int64)
    k = 0
    for first in range(0, size_i, size_g):
        rows = min(size_g, size_i - first)
        for c in range(size_j):
            for r in range(rows):
                order[first + r, c] = k
                k += 1
    new_i = np.zeros((size_i, size_j), np.int32)
    new_j = np.zeros((size_i, size_j), np.int32)
    for r in range(size_i):
        for c in range(size_j):
            p = order[r, c]
            new_i[p // size_j, p % size_j] = r
            new_j[p // size_j, p % size_j] = c
    return new_i, new_j


def test_swizzle_ref_matches_documented_example():
    ni, nj = swizzle_ref(4, 4, 2)
    # Triton's example: the picture of the 4 x 4 grid with size_g = 2.
    pic = np.array([[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]])
    got = np.zeros((4, 4), np.int64)
    for p in range(16):
        got[ni.flat[p], nj.flat[p]] = p
    np.testing.assert_array_equal(got, pic)


@kiln.jit
def swizzle_tile_kernel(oi_ptr, oj_ptr, SIZE_I: tl.constexpr, SIZE_J: tl.constexpr,
                        SIZE_G: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    # Tiles of indices; the sizes need not be powers of two (masked).
    i = tl.arange(0, BI)[:, None]
    j = tl.arange(0, BJ)[None, :]
    ni, nj = tl.swizzle2d(i, j, SIZE_I, SIZE_J, SIZE_G)
    m = (i < SIZE_I) & (j < SIZE_J)
    tl.store(oi_ptr + i * SIZE_J + j, ni, mask=m)
    tl.store(oj_ptr + i * SIZE_J + j, nj, mask=m)


@kiln.jit
def swizzle_pid_kernel(oi_ptr, oj_ptr, size_i, size_j, SIZE_G: tl.constexpr):
    # The matmul tutorial's use: one program per tile, run-time grid sizes, scalars.
    pid = tl.program_id(0)
    i = pid // size_j
    j = pid % size_j
    ni, nj = tl.swizzle2d(i, j, size_i, size_j, SIZE_G)
    tl.store(oi_ptr + pid, ni)
    tl.store(oj_ptr + pid, nj)


SWIZZLE_CASES = [(4, 4, 2), (8, 4, 3), (6, 5, 4), (7, 3, 1), (5, 8, 8)]


@pytest.mark.parametrize("si,sj,g", SWIZZLE_CASES)
def test_swizzle2d_tile(si, sj, g):
    oi, oj = np.full(si * sj, -1, np.int32), np.full(si * sj, -1, np.int32)
    swizzle_tile_kernel[(1,)](oi, oj, SIZE_I=si, SIZE_J=sj, SIZE_G=g, BI=8, BJ=8, **CPU)
    ri, rj = swizzle_ref(si, sj, g)
    np.testing.assert_array_equal(oi.reshape(si, sj), ri)
    np.testing.assert_array_equal(oj.reshape(si, sj), rj)


@pytest.mark.parametrize("si,sj,g", SWIZZLE_CASES)
def test_swizzle2d_program_ids(si, sj, g):
    oi, oj = np.full(si * sj, -1, np.int32), np.full(si * sj, -1, np.int32)
    swizzle_pid_kernel[(si * sj,)](oi, oj, si, sj, SIZE_G=g, **CPU)
    ri, rj = swizzle_ref(si, sj, g)
    np.testing.assert_array_equal(oi.reshape(si, sj), ri)
    np.testing.assert_array_equal(oj.reshape(si, sj), rj)
    # Every tile is visited exactly once.
    assert len(set(zip(oi.tolist(), oj.tolist()))) == si * sj


def test_swizzle2d_on_literals():
    @kiln.jit
    def k(o_ptr, I: tl.constexpr):
        ni, nj = tl.swizzle2d(I, 1, 4, 4, 2)
        tl.store(o_ptr, ni * 10 + nj)
    o = np.zeros(1, np.int32)
    for i, ref in [(0, 10), (2, 30), (3, 32)]:  # (i, 1) of 4 x 4 with groups of 2 rows
        k[(1,)](o, I=i, **CPU)
        ri, rj = swizzle_ref(4, 4, 2)
        assert o[0] == ref == ri[i, 1] * 10 + rj[i, 1]


# --- ravel ----------------------------------------------------------------------------------

@kiln.jit
def ravel_kernel(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                 MEMBER: tl.constexpr, REORDER: tl.constexpr):
    a = tl.arange(0, A)[:, None, None]
    b = tl.arange(0, B)[None, :, None]
    c = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + a * B * C + b * C + c)
    if MEMBER:
        r = x.ravel()
    else:
        r = tl.ravel(x, can_reorder=REORDER)
    tl.static_assert(r.shape[0] == A * B * C)
    tl.store(out_ptr + tl.arange(0, A * B * C), r)


@kiln.jit
def ravel_2d_kernel(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, A)[:, None] * B + tl.arange(0, B)[None, :])
    r = tl.ravel(x.T)  # column-major order of x
    tl.store(out_ptr + tl.arange(0, A * B), r)


@pytest.mark.parametrize("shape", [(2, 4, 8), (1, 16, 2), (4, 1, 1)])
@pytest.mark.parametrize("member", [False, True])
def test_ravel(shape, member):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = np.zeros(x.size, np.float32)
    ravel_kernel[(1,)](x, out, A=shape[0], B=shape[1], C=shape[2], MEMBER=member,
                       REORDER=False, **CPU)
    np.testing.assert_array_equal(out, np.ravel(x))


def test_ravel_can_reorder_keeps_the_elements():
    x = np.arange(64, dtype=np.float32).reshape(4, 4, 4)
    out = np.zeros(64, np.float32)
    ravel_kernel[(1,)](x, out, A=4, B=4, C=4, MEMBER=False, REORDER=True, **CPU)
    np.testing.assert_array_equal(np.sort(out), np.ravel(x))


def test_ravel_of_a_transpose_is_column_major():
    x = np.arange(32, dtype=np.int32).reshape(4, 8)
    out = np.zeros(32, np.int32)
    ravel_2d_kernel[(1,)](x, out, A=4, B=8, **CPU)
    np.testing.assert_array_equal(out, np.ravel(x.T))


# --- reduce_or ------------------------------------------------------------------------------

@kiln.jit
def reduce_or_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
                     KEEP: tl.constexpr, MEMBER: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    if MEMBER:
        r = x.reduce_or(AXIS, keep_dims=KEEP)
    else:
        r = tl.reduce_or(x, axis=AXIS, keep_dims=KEEP)
    if AXIS is None:
        if KEEP:
            tl.static_assert(r.shape[0] == 1 and r.shape[1] == 1)
            r = tl.reshape(r, [1])
            tl.store(out_ptr + tl.arange(0, 1), r)
        else:
            tl.store(out_ptr, r)
    elif AXIS == 0:
        if KEEP:
            tl.static_assert(r.shape[0] == 1)
            r = tl.reshape(r, [N])
        tl.store(out_ptr + tl.arange(0, N), r)
    else:
        if KEEP:
            tl.static_assert(r.shape[1] == 1)
            r = tl.reshape(r, [M])
        tl.store(out_ptr + tl.arange(0, M), r)


def _or_ref(x, axis):
    return np.bitwise_or.reduce(x, axis=axis) if axis is not None else \
        np.bitwise_or.reduce(x.ravel())


@pytest.mark.parametrize("dt", [np.int32, np.uint8, np.int64, np.uint32])
@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("keep", [False, True])
def test_reduce_or(dt, axis, keep):
    rng = np.random.default_rng(1)
    x = (np.uint64(1) << rng.integers(0, np.iinfo(dt).bits, (8, 16)).astype(np.uint64))
    x = x.astype(dt)
    ref = np.atleast_1d(_or_ref(x, axis))
    out = np.zeros(ref.size, dt)
    reduce_or_kernel[(1,)](x, out, M=8, N=16, AXIS=axis, KEEP=keep, MEMBER=False, **CPU)
    np.testing.assert_array_equal(out, ref)


def test_reduce_or_member_and_negative_values():
    x = np.array([[-8, 1, 2, 4], [16, 0, 0, 0]], np.int32)
    out = np.zeros(4, np.int32)
    reduce_or_kernel[(1,)](x, out, M=2, N=4, AXIS=0, KEEP=False, MEMBER=True, **CPU)
    np.testing.assert_array_equal(out, np.bitwise_or.reduce(x, axis=0))


@kiln.jit
def reduce_or_bool_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]) > 0
    r = tl.reduce_or(x, 1)
    tl.store(out_ptr + tl.arange(0, M), r.to(tl.int32))
    tl.store(out_ptr + M, tl.reduce_or(x, None).to(tl.int32))


def test_reduce_or_int1():
    x = np.zeros((4, 8), np.float32)
    x[1, 3] = 1.0
    x[3, 0] = 2.0
    out = np.full(5, -1, np.int32)
    reduce_or_bool_kernel[(1,)](x, out, M=4, N=8, **CPU)
    np.testing.assert_array_equal(out, [0, 1, 0, 1, 1])


@kiln.jit
def reduce_or_float_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    tl.store(x_ptr, tl.reduce_or(x, 0))  # ERR


def test_reduce_or_needs_integers():
    expect_error(reduce_or_float_kernel, {"x_ptr": "*fp32"},
                 r"expected an integer tile for tl.reduce_or, found .*fp32")


# --- reduce and the standard reductions with axis=None over several dimensions -------------

@kiln.jit
def add_fn(a, b):
    return a + b


@kiln.jit
def argmax_fn(v, i, w, j):
    # Ties go to the smaller index: associative and commutative.
    take = (w > v) | ((w == v) & (j < i))
    return tl.where(take, w, v), tl.where(take, j, i)


@kiln.jit
def reduce_all_kernel(x_ptr, out_ptr, idx_ptr, A: tl.constexpr, B: tl.constexpr,
                      C: tl.constexpr, KEEP: tl.constexpr):
    offs = (tl.arange(0, A)[:, None, None] * B * C + tl.arange(0, B)[None, :, None] * C +
            tl.arange(0, C)[None, None, :])
    x = tl.load(x_ptr + offs)
    s = tl.reduce(x, None, add_fn, keep_dims=KEEP)
    v, i = tl.reduce((x, offs), None, argmax_fn, keep_dims=KEEP)
    m = x.reduce(None, add_fn)  # member form, no keep_dims
    if KEEP:
        tl.static_assert(len(s.shape) == 3)
        tl.static_assert(s.shape[0] == 1 and s.shape[1] == 1 and s.shape[2] == 1)
        tl.static_assert(len(i.shape) == 3)
        s = tl.reshape(s, [1])
        v = tl.reshape(v, [1])
        i = tl.reshape(i, [1])
        o1 = tl.arange(0, 1)
        tl.store(out_ptr + o1, s)
        tl.store(out_ptr + 1 + o1, v)
        tl.store(idx_ptr + o1, i)
    else:
        tl.store(out_ptr, s)
        tl.store(out_ptr + 1, v)
        tl.store(idx_ptr, i)
    tl.store(out_ptr + 2, m)


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("shape", [(2, 4, 8), (4, 1, 16)])
def test_reduce_axis_none_3d(keep, shape):
    x = np.random.default_rng(2).integers(-50, 50, shape).astype(np.int32)
    x.flat[17] = 99
    x.flat[40 % x.size] = 99  # a tie: the smaller flat index wins
    out, idx = np.zeros(3, np.int32), np.zeros(1, np.int32)
    reduce_all_kernel[(1,)](x, out, idx, A=shape[0], B=shape[1], C=shape[2], KEEP=keep, **CPU)
    assert out[0] == x.sum() and out[2] == x.sum()
    assert out[1] == x.max() == 99
    assert idx[0] == 17


@kiln.jit
def std_reductions_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr,
                          KEEP: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    s = tl.sum(x, keep_dims=KEEP)
    hi = tl.max(x, axis=None, keep_dims=KEEP)
    lo = x.min(keep_dims=KEEP)
    xs = tl.xor_sum(x, keep_dims=KEEP)
    if KEEP:
        tl.static_assert(len(s.shape) == 2 and len(hi.shape) == 2 and len(xs.shape) == 2)
        s = tl.reshape(s, [1])
        hi = tl.reshape(hi, [1])
        lo = tl.reshape(lo, [1])
        xs = tl.reshape(xs, [1])
        o = tl.arange(0, 1)
        tl.store(out_ptr + o, s)
        tl.store(out_ptr + 1 + o, hi)
        tl.store(out_ptr + 2 + o, lo)
        tl.store(out_ptr + 3 + o, xs)
    else:
        tl.store(out_ptr, s)
        tl.store(out_ptr + 1, hi)
        tl.store(out_ptr + 2, lo)
        tl.store(out_ptr + 3, xs)


@pytest.mark.parametrize("keep", [False, True])
def test_standard_reductions_axis_none_2d(keep):
    x = np.random.default_rng(3).integers(-1000, 1000, (8, 32)).astype(np.int32)
    out = np.zeros(4, np.int32)
    std_reductions_kernel[(1,)](x, out, M=8, N=32, KEEP=keep, **CPU)
    np.testing.assert_array_equal(out, [x.sum(), x.max(), x.min(),
                                        np.bitwise_xor.reduce(x.ravel())])


# --- tl.range's keywords ---------------------------------------------------------------------

@kiln.jit
def range_keywords_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in tl.range(0, n, num_stages=2, loop_unroll_factor=4, disallow_acc_multi_buffer=True,
                      warp_specialize=False, disable_licm=True):
        acc += tl.load(x_ptr + i * BLOCK + o)
    for i in tl.range(n, 0, -1, 3):  # num_stages positionally, counting down
        acc += tl.load(x_ptr + (i - 1) * BLOCK + o)
    for i in tl.range(n, warp_specialize=True, num_stages=None, loop_unroll_factor=1):
        acc += 1.0
    for i in tl.range(1, n, step=2, flatten=False):
        acc += tl.load(x_ptr + i * BLOCK + o)
    tl.store(out_ptr + o, acc)


def test_range_accepts_every_triton_keyword():
    n, block = 5, 32
    x = np.random.default_rng(4).standard_normal((n, block)).astype(np.float32)
    out = np.zeros(block, np.float32)
    range_keywords_kernel[(1,)](x, out, n, BLOCK=block, **CPU)
    ref = 2 * x.sum(0) + n + x[1::2].sum(0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_range_warp_specialize_marks_its_loop():
    # tl.range(..., warp_specialize=True) marks its loop for -kiln-warp-specialize (sm_90a: a
    # producer warpgroup for a loop of TMA-fed dots, as kiln_kernels' FlashAttention-3 loop);
    # a loop that does not fit (here: no dots) compiles as written, on the program's warps.
    sig = {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "n": "i32"}
    k = kiln.compile(range_keywords_kernel, signature=sig, constexprs={"BLOCK": 32},
                     target="sm_90a", num_warps=4)
    assert k.asm["kiln"].count("kiln.warp_specialize") == 1
    assert ".maxntid 128, 1, 1" in k.asm["ptx"] and "setmaxnreg" not in k.asm["ptx"]


def test_range_signature_is_triton_36():
    params = inspect.signature(tl.range.__init__).parameters
    assert list(params)[1:] == ["arg1", "arg2", "step", "num_stages", "loop_unroll_factor",
                                "disallow_acc_multi_buffer", "flatten", "warp_specialize",
                                "disable_licm"]
    defaults = {k: p.default for k, p in params.items()}
    assert defaults["num_stages"] is None and defaults["loop_unroll_factor"] is None
    assert defaults["disallow_acc_multi_buffer"] is False and defaults["flatten"] is False
    assert defaults["warp_specialize"] is False and defaults["disable_licm"] is False


@kiln.jit
def ws_loads_before_kernel(desc_q, desc_k, desc_v, out_ptr, bias_ptr, scale_ptr, N,
                           D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    # A warp-specialized loop of two TMA-fed dots with loads before it: a scalar (both
    # roles read it) and a tile (the consumers' alone).
    scale = tl.load(scale_ptr)
    rows, cols = tl.arange(0, BM), tl.arange(0, D)
    bias = tl.load(bias_ptr + rows[:, None] * D + cols[None, :])
    q = desc_q.load([0, 0])
    acc = tl.zeros([BM, D], tl.float32)
    for j in tl.range(0, N, BN, warp_specialize=True):
        s = tl.dot(q, desc_k.load([j, 0]).T)
        p = tl.exp2(s * 0.125)
        acc = tl.dot(p.to(tl.float16), desc_v.load([j, 0]), acc)
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], (acc + bias) * scale)


def _ws_loads_before_case(device):
    """(arguments, reference) of ws_loads_before_kernel at BM 128, D 64, N 256, BN 64."""
    rng = np.random.default_rng(6)
    bm, d, n, bn = 128, 64, 256, 64
    q, k, v = (rng.standard_normal((r, d)).astype(np.float16) * 0.5 for r in (bm, n, n))
    bias = rng.standard_normal((bm, d)).astype(np.float32)
    scale = np.array([0.75], np.float32)
    s = q.astype(np.float32) @ k.astype(np.float32).T
    p = np.exp2(s * 0.125).astype(np.float16).astype(np.float32)
    ref = (p @ v.astype(np.float32) + bias) * scale[0]
    return (q, k, v, bias, scale), ref


def test_warp_specialized_loop_with_loads_before_it():
    (q, k, v, bias, scale), ref = _ws_loads_before_case("cpu")
    desc = lambda a, rows: kiln.TensorDescriptor(a, list(a.shape), [a.shape[1], 1], [rows, 64])  # noqa: E731
    out = np.zeros_like(bias)
    ws_loads_before_kernel[(1,)](desc(q, 128), desc(k, 64), desc(v, 64), out, bias, scale, 256,
                                 D=64, BM=128, BN=64, **CPU)
    np.testing.assert_allclose(out, ref, rtol=2e-2, atol=2e-2)
    # sm_90a: the loads do not keep the loop from its producer warpgroup (compile only)
    sig = {"desc_q": "tensordesc<fp16[128, 64]>", "desc_k": "tensordesc<fp16[64, 64]>",
           "desc_v": "tensordesc<fp16[64, 64]>", "out_ptr": "*fp32:16", "bias_ptr": "*fp32:16",
           "scale_ptr": "*fp32:16", "N": "i32:16"}
    ptx = kiln.compile(ws_loads_before_kernel, signature=sig, constexprs=dict(D=64, BM=128, BN=64),
                       target="sm_90a", num_warps=8, num_stages=3).asm["ptx"]
    assert ptx.count("setmaxnreg") == 2


@pytest.mark.gpu
def test_warp_specialized_loop_with_loads_before_it_gpu():
    from cuda_torch import torch_or_skip
    torch = torch_or_skip()
    args, ref = _ws_loads_before_case("cuda")
    q, k, v, bias, scale = (torch.from_numpy(a).cuda() for a in args)
    desc = lambda a, rows: kiln.TensorDescriptor(a, list(a.shape), [a.shape[1], 1], [rows, 64])  # noqa: E731
    out = torch.zeros_like(bias)
    ws_loads_before_kernel[(1,)](desc(q, 128), desc(k, 64), desc(v, 64), out, bias, scale, 256,
                                 D=64, BM=128, BN=64, num_warps=8, num_stages=3)
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=2e-2, atol=2e-2)


@kiln.jit
def range_flatten_kernel(x_ptr, out_ptr, tiles, K, BLOCK: tl.constexpr):
    # A persistent kernel's shape: a tile loop (flattened) around a K loop.
    o = tl.arange(0, BLOCK)
    for t in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=True):
        acc = tl.zeros([BLOCK], tl.float32)
        for k in range(0, K):
            acc += tl.load(x_ptr + (t * K + k) * BLOCK + o)
        tl.store(out_ptr + t * BLOCK + o, acc)


def test_range_flatten():
    tiles, K, block = 7, 3, 16
    x = np.random.default_rng(5).standard_normal((tiles, K, block)).astype(np.float32)
    out = np.zeros((tiles, block), np.float32)
    range_flatten_kernel[(3,)](x, out, tiles, K, BLOCK=block, **CPU)
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5, atol=1e-5)
    # On the GPU the loops are fused (compile-only: no GPU needed).
    kiln.compile(range_flatten_kernel, signature={"x_ptr": "*fp32", "out_ptr": "*fp32",
                                                  "tiles": "i32", "K": "i32"},
                 constexprs={"BLOCK": block}, target="sm_90")


@kiln.jit
def range_unknown_keyword_kernel(x_ptr, n):
    for i in tl.range(0, n, num_buffers=2):  # ERR
        tl.store(x_ptr + i, 1.0)


@kiln.jit
def range_tensor_hint_kernel(x_ptr, n):
    for i in tl.range(0, n, num_stages=n):  # ERR
        tl.store(x_ptr + i, 1.0)


@kiln.jit
def range_bad_flag_kernel(x_ptr, n):
    for i in tl.range(0, n, warp_specialize="yes"):  # ERR
        tl.store(x_ptr + i, 1.0)


def test_range_errors():
    sig = {"x_ptr": "*fp32", "n": "i32"}
    err = expect_error(range_unknown_keyword_kernel, sig,
                       r"tl.range\(\) got an unexpected keyword argument 'num_buffers'; it "
                       r"takes arg1, arg2, step, num_stages, loop_unroll_factor, "
                       r"disallow_acc_multi_buffer, flatten, warp_specialize, disable_licm")
    assert "range_unknown_keyword_kernel" in str(err)
    expect_error(range_tensor_hint_kernel, sig,
                 r"expected a constexpr integer for tl.range's num_stages")
    expect_error(range_bad_flag_kernel, sig,
                 r"expected a constexpr bool for tl.range's warp_specialize")


# --- the same on the GPU -------------------------------------------------------------------

def gpu_run(kernel, arrays, grid=(1,), *args, **meta):
    dev = [kiln.from_numpy(a) for a in arrays]
    kernel[grid](*dev, *args, **meta)
    kiln.synchronize()
    return [d.numpy() for d in dev]


@pytest.mark.gpu
def test_swizzle2d_gpu():
    si, sj, g = 8, 4, 3
    oi, oj = gpu_run(swizzle_tile_kernel, [np.zeros(si * sj, np.int32)] * 2,
                     SIZE_I=si, SIZE_J=sj, SIZE_G=g, BI=8, BJ=8)
    ri, rj = swizzle_ref(si, sj, g)
    np.testing.assert_array_equal(oi.reshape(si, sj), ri)
    np.testing.assert_array_equal(oj.reshape(si, sj), rj)
    oi, oj = gpu_run(swizzle_pid_kernel, [np.zeros(si * sj, np.int32)] * 2, (si * sj,),
                     si, sj, SIZE_G=g)
    np.testing.assert_array_equal(oi.reshape(si, sj), ri)
    np.testing.assert_array_equal(oj.reshape(si, sj), rj)


@pytest.mark.gpu
def test_ravel_gpu():
    x = np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float32)
    _, out = gpu_run(ravel_kernel, [x, np.zeros(64, np.float32)], A=2, B=4, C=8, MEMBER=False,
                     REORDER=False)
    np.testing.assert_array_equal(out, np.ravel(x))


@pytest.mark.gpu
@pytest.mark.parametrize("axis", [0, 1, None])
def test_reduce_or_gpu(axis):
    rng = np.random.default_rng(1)
    x = (1 << rng.integers(0, 31, (8, 16))).astype(np.int32)
    ref = np.atleast_1d(_or_ref(x, axis))
    _, out = gpu_run(reduce_or_kernel, [x, np.zeros(ref.size, np.int32)], M=8, N=16,
                     AXIS=axis, KEEP=True, MEMBER=False)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.gpu
def test_reduce_axis_none_gpu():
    x = np.random.default_rng(2).integers(-50, 50, (2, 4, 8)).astype(np.int32)
    x.flat[17] = 99
    x.flat[40] = 99
    _, out, idx = gpu_run(reduce_all_kernel, [x, np.zeros(3, np.int32), np.zeros(1, np.int32)],
                          A=2, B=4, C=8, KEEP=True)
    assert out[0] == x.sum() and out[2] == x.sum() and out[1] == 99 and idx[0] == 17


@pytest.mark.gpu
def test_range_keywords_and_flatten_gpu():
    n, block = 5, 32
    x = np.random.default_rng(4).standard_normal((n, block)).astype(np.float32)
    _, out = gpu_run(range_keywords_kernel, [x, np.zeros(block, np.float32)], (1,), n,
                     BLOCK=block)
    np.testing.assert_allclose(out, 2 * x.sum(0) + n + x[1::2].sum(0), rtol=1e-5, atol=1e-5)
    tiles, K = 7, 3
    x = np.random.default_rng(5).standard_normal((tiles, K, block)).astype(np.float32)
    _, out = gpu_run(range_flatten_kernel, [x, np.zeros((tiles, block), np.float32)], (3,),
                     tiles, K, BLOCK=block)
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5, atol=1e-5)
