"""tl.dot_scaled (Triton 3.6): the product of two microscaled blocks, emulated as Triton
emulates it without scaled MMA (Hopper, the CPU): each operand upcast to bf16 (fp16 when a
format is fp16), times 2^(scale - 127) per 32 elements along K, then tl.dot.

- every format pair of e2m1 (packed along K, or along M / N), e4m3, e5m2 (uint8 bits or fp8
  tiles), bf16 and fp16 (uint16 bits or float tiles), with and without scales and an
  accumulator, 2-D and 3-D, on the CPU backend against float64 numpy products of the decoded
  values (exact products: the tolerance covers the fp32 accumulation), and marked `gpu`;
- e8m0 edge codes as Triton's emulation gives them: 255 is NaN (infinity with fast_math),
  0 gives zero;
- errors at the call: unknown formats, operand and scale dtypes and shapes, k_pack.
"""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from test_dot_scan import _gpu_arrays, expect_error, f64, relerr

CPU = dict(device="cpu")
# e2m1 codes 0..7 (sign bit 3 clear): exponent bits 2..1 (bias 1), mantissa bit 0.
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def ml():
    return pytest.importorskip("ml_dtypes")


@kiln.jit
def dot_scaled_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, acc_ptr, c_ptr, M: tl.constexpr,
                      N: tl.constexpr, K: tl.constexpr, AR: tl.constexpr, AC: tl.constexpr,
                      BR: tl.constexpr, BC: tl.constexpr, LF: tl.constexpr, RF: tl.constexpr,
                      SCALED: tl.constexpr, USE_ACC: tl.constexpr, FAST: tl.constexpr,
                      LKP: tl.constexpr, RKP: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, AR)[:, None] * AC + tl.arange(0, AC)[None, :])
    b = tl.load(b_ptr + tl.arange(0, BR)[:, None] * BC + tl.arange(0, BC)[None, :])
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    acc = None
    if USE_ACC:
        acc = tl.load(acc_ptr + rm * N + rn)
    if SCALED:
        a_scale = tl.load(as_ptr + rm * (K // 32) + tl.arange(0, K // 32)[None, :])
        b_scale = tl.load(bs_ptr + tl.arange(0, N)[:, None] * (K // 32) +
                          tl.arange(0, K // 32)[None, :])
        c = tl.dot_scaled(a, a_scale, LF, b, b_scale, RF, acc, fast_math=FAST,
                          lhs_k_pack=LKP, rhs_k_pack=RKP)
    else:
        c = tl.dot_scaled(a, None, LF, b, None, RF, acc, lhs_k_pack=LKP, rhs_k_pack=RKP)
    tl.store(c_ptr + rm * N + rn, c)


# ----------------------------------------------------------------------------- inputs

def fp4_codes(rng, shape):
    return rng.integers(0, 16, shape).astype(np.uint8)


def fp4_values(codes):
    return np.where(codes & 8, -1.0, 1.0) * E2M1[codes & 7]


def pack_fp4(codes, axis):
    """Two e2m1 codes per byte along `axis`, the first in the low four bits."""
    lo = np.take(codes, np.arange(0, codes.shape[axis], 2), axis=axis)
    hi = np.take(codes, np.arange(1, codes.shape[axis], 2), axis=axis)
    return (lo | (hi << 4)).astype(np.uint8)


def operand(fmt, shape, rng, axis, bits):
    """(kernel array, float64 values) of an operand in `fmt` of logical `shape`; e2m1 packed
    along `axis`; `bits`: fp8 as uint8 and 16-bit floats as uint16."""
    if fmt == "e2m1":
        codes = fp4_codes(rng, shape)
        return pack_fp4(codes, axis), fp4_values(codes)
    x = rng.standard_normal(shape).astype(np.float32) * 2
    dt = {"e4m3": ml().float8_e4m3fn, "e5m2": ml().float8_e5m2, "bf16": ml().bfloat16,
          "fp16": np.float16}[fmt]
    x = x.astype(dt)
    values = x.astype(np.float64)
    if bits:
        x = x.view(np.uint8 if x.itemsize == 1 else np.uint16)
    return x, values


def scales(rng, rows, k):
    """e8m0 scales near 1 (2^-6 .. 2^6): every scaled value stays exact in bf16 and fp16."""
    return rng.integers(121, 134, (rows, k // 32)).astype(np.uint8)


def scaled(values, s, k_axis):
    f = np.exp2(s.astype(np.float64) - 127)
    f = np.where(s == 255, np.nan, np.where(s == 0, 0.0, f))
    f = np.repeat(f, 32, axis=1)  # [rows, K]
    return values * (f if k_axis == 1 else f.T)


def make_case(lf, rf, M, N, K, scaled_ops=True, use_acc=False, lkp=True, rkp=True, bits=False,
              seed=0):
    rng = np.random.default_rng(seed)
    a, av = operand(lf, (M, K), rng, 1 if lkp else 0, bits)
    b, bv = operand(rf, (K, N), rng, 0 if rkp else 1, bits)
    sa, sb = scales(rng, M, K), scales(rng, N, K)
    acc = rng.standard_normal((M, N)).astype(np.float32)
    if scaled_ops:
        av, bv = scaled(av, sa, 1), scaled(bv, sb, 0)
    ref = av @ bv + (f64(acc) if use_acc else 0)
    return a, sa, b, sb, acc, ref


def launch(lf, rf, a, sa, b, sb, acc, c, M, N, K, scaled_ops=True, use_acc=False, fast=False,
           lkp=True, rkp=True, **options):
    dot_scaled_kernel[(1,)](a, sa, b, sb, acc, c, M, N, K, a.shape[0], a.shape[1], b.shape[0],
                            b.shape[1], LF=lf, RF=rf, SCALED=scaled_ops, USE_ACC=use_acc,
                            FAST=fast, LKP=lkp, RKP=rkp, **options)


FORMATS = ["e2m1", "e4m3", "e5m2", "bf16", "fp16"]
PAIRS = [(lf, rf) for lf in FORMATS for rf in FORMATS]


# ------------------------------------------------------------------------- CPU backend

@pytest.mark.parametrize("use_acc", [False, True], ids=["no-acc", "acc"])
@pytest.mark.parametrize("lf,rf", PAIRS, ids=lambda v: v)
def test_dot_scaled_formats_cpu(lf, rf, use_acc):
    M, N, K = 16, 32, 64
    a, sa, b, sb, acc, ref = make_case(lf, rf, M, N, K, use_acc=use_acc)
    c = np.full((M, N), -7, np.float32)
    launch(lf, rf, a, sa, b, sb, acc, c, M, N, K, use_acc=use_acc, **CPU)
    assert relerr(c, ref) < 1e-6, relerr(c, ref)


@pytest.mark.parametrize("lf,rf", [("e4m3", "e5m2"), ("bf16", "fp16"), ("e2m1", "bf16")])
def test_dot_scaled_from_bits_cpu(lf, rf):
    """fp8 operands as uint8 and 16-bit floats as uint16 (their bits), as Triton takes them."""
    M, N, K = 32, 16, 64
    a, sa, b, sb, acc, ref = make_case(lf, rf, M, N, K, bits=True, seed=1)
    c = np.zeros((M, N), np.float32)
    launch(lf, rf, a, sa, b, sb, acc, c, M, N, K, **CPU)
    assert relerr(c, ref) < 1e-6, relerr(c, ref)


@pytest.mark.parametrize("lf,rf", [("e4m3", "e4m3"), ("e2m1", "e2m1"), ("bf16", "bf16")])
def test_dot_scaled_without_scales_cpu(lf, rf):
    M, N, K = 16, 16, 32
    a, sa, b, sb, acc, ref = make_case(lf, rf, M, N, K, scaled_ops=False, seed=2)
    c = np.zeros((M, N), np.float32)
    launch(lf, rf, a, sa, b, sb, acc, c, M, N, K, scaled_ops=False, **CPU)
    assert relerr(c, ref) < 1e-6, relerr(c, ref)


@pytest.mark.parametrize("lkp,rkp", [(False, True), (True, False), (False, False)])
def test_dot_scaled_fp4_packed_along_m_and_n_cpu(lkp, rkp):
    """lhs_k_pack=False: lhs bytes pack two rows (M); rhs_k_pack=False: two columns (N)."""
    M, N, K = 32, 32, 64
    a, sa, b, sb, acc, ref = make_case("e2m1", "e2m1", M, N, K, lkp=lkp, rkp=rkp, seed=3)
    assert a.shape == ((M, K // 2) if lkp else (M // 2, K))
    c = np.zeros((M, N), np.float32)
    launch("e2m1", "e2m1", a, sa, b, sb, acc, c, M, N, K, lkp=lkp, rkp=rkp, **CPU)
    assert relerr(c, ref) < 1e-6, relerr(c, ref)


def test_dot_scaled_e8m0_edge_codes_cpu():
    """Scale 255 (e8m0 NaN) makes its row (lhs) or column (rhs) NaN; with fast_math it is
    2^128 = infinity, as Triton's bit-shift conversion; scale 0 gives zero (Triton's
    conversion, not 2^-127)."""
    M, N, K = 16, 16, 64
    a, sa, b, sb, acc, _ = make_case("e4m3", "e4m3", M, N, K, seed=4)
    sa[3, 1] = 255
    sb[5, 0] = 255
    sa[7, :] = 0
    c = np.zeros((M, N), np.float32)
    launch("e4m3", "e4m3", a, sa, b, sb, acc, c, M, N, K, **CPU)
    assert np.isnan(c[3]).all() and np.isnan(c[:, 5]).all()
    assert (c[7][np.arange(N) != 5] == 0).all()
    ok = np.ones((M, N), bool)
    ok[3, :] = ok[:, 5] = ok[7, :] = False
    a_v = f64(a.view(ml().float8_e4m3fn)) if a.dtype == np.uint8 else f64(a)
    b_v = f64(b)
    ref = scaled(a_v, np.where(sa == 255, 127, sa), 1) @ scaled(b_v, np.where(sb == 255, 127,
                                                                               sb), 0)
    assert relerr(c[ok], ref[ok]) < 1e-6
    fast = np.zeros((M, N), np.float32)
    launch("e4m3", "e4m3", a, sa, b, sb, acc, fast, M, N, K, fast=True, **CPU)
    assert not np.isfinite(fast[3]).any() and not np.isfinite(fast[:, 5]).any()
    np.testing.assert_array_equal(fast[ok], c[ok])


@kiln.jit
def dot_scaled_3d_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, B: tl.constexpr,
                         M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, M)[None, :, None]
    rn = tl.arange(0, N)[None, None, :]
    rs = tl.arange(0, K // 32)[None, None, :]
    a = tl.load(a_ptr + rb * M * (K // 2) + rm * (K // 2) + tl.arange(0, K // 2)[None, None, :])
    b = tl.load(b_ptr + rb * K * N + tl.arange(0, K)[None, :, None] * N + rn)
    a_scale = tl.load(as_ptr + rb * M * (K // 32) + rm * (K // 32) + rs)
    b_scale = tl.load(bs_ptr + rb * N * (K // 32) + tl.arange(0, N)[None, :, None] * (K // 32)
                      + rs)
    c = tl.dot_scaled(a, a_scale, "e2m1", b, b_scale, "e4m3")
    tl.store(c_ptr + rb * M * N + rm * N + rn, c)


def test_dot_scaled_3d_cpu():
    """Batched: lhs [B, M, K] (e2m1 packed: [B, M, K/2]), rhs [B, K, N], scales [B, M, K/32]
    and [B, N, K/32]."""
    Bt, M, N, K = 2, 16, 16, 64
    rng = np.random.default_rng(5)
    a, b, sa, sb, ref = [], [], [], [], []
    for _ in range(Bt):
        ai, sai, bi, sbi, _acc, refi = make_case("e2m1", "e4m3", M, N, K,
                                                 seed=int(rng.integers(1 << 30)))
        a.append(ai), b.append(bi.view(np.uint8)), sa.append(sai), sb.append(sbi)
        ref.append(refi)
    c = np.zeros((Bt, M, N), np.float32)
    dot_scaled_3d_kernel[(1,)](np.stack(a), np.stack(sa), np.stack(b), np.stack(sb), c, Bt, M,
                               N, K, **CPU)
    assert relerr(c, np.stack(ref)) < 1e-6


# --------------------------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.parametrize("lf,rf", [("e2m1", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "bf16"),
                                   ("bf16", "fp16"), ("e2m1", "e2m1")], ids=lambda v: v)
@pytest.mark.parametrize("num_warps", [4, 8])
def test_dot_scaled_gpu(lf, rf, num_warps):
    to_dev, to_np = _gpu_arrays()
    M, N, K = 64, 64, 128
    a, sa, b, sb, acc, ref = make_case(lf, rf, M, N, K, use_acc=True, bits=lf in ("e4m3",
                                                                              "e5m2"), seed=6)
    if b.dtype.itemsize == 1 and b.dtype != np.uint8:
        b = b.view(np.uint8)
    c = to_dev(np.zeros((M, N), np.float32))
    launch(lf, rf, to_dev(a), to_dev(sa), to_dev(b), to_dev(sb), to_dev(acc), c, M, N, K,
           use_acc=True, num_warps=num_warps)
    assert relerr(to_np(c), ref) < 1e-6


@pytest.mark.gpu
def test_dot_scaled_fp4_packed_along_m_and_n_gpu():
    to_dev, to_np = _gpu_arrays()
    M, N, K = 64, 32, 64
    a, sa, b, sb, acc, ref = make_case("e2m1", "e2m1", M, N, K, lkp=False, rkp=False, seed=7)
    c = to_dev(np.zeros((M, N), np.float32))
    launch("e2m1", "e2m1", to_dev(a), to_dev(sa), to_dev(b), to_dev(sb), to_dev(acc), c, M, N,
           K, lkp=False, rkp=False)
    assert relerr(to_np(c), ref) < 1e-6


@pytest.mark.parametrize("arch,instruction", [
    ("sm_80", r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32"),
    ("sm_90a", r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.bf16\.bf16")])
def test_dot_scaled_compiles_to_a_bf16_tensor_core_dot(arch, instruction):
    """No GPU needed: the emulated product is a bf16 dot on the tensor cores."""
    sig = dict(a_ptr="*u8:16", as_ptr="*u8:16", b_ptr="*u8:16", bs_ptr="*u8:16",
               acc_ptr="*fp32:16", c_ptr="*fp32:16")
    consts = dict(M=64, N=64, K=64, AR=64, AC=32, BR=64, BC=64, LF="e2m1", RF="e4m3",
                  SCALED=True, USE_ACC=True, FAST=False, LKP=True, RKP=True)
    ptx = kiln.compile(dot_scaled_kernel, signature=sig, constexprs=consts, target=arch,
                       num_warps=4).asm["ptx"]
    assert re.search(instruction, ptx)


# ------------------------------------------------------------------------------ errors

@kiln.jit
def dot_scaled_err_kernel(a_ptr, s_ptr, b_ptr, c_ptr, WHAT: tl.constexpr):
    r16 = tl.arange(0, 16)
    a8 = tl.load(a_ptr + r16[:, None] * 32 + tl.arange(0, 32)[None, :])
    b8 = tl.load(b_ptr + tl.arange(0, 32)[:, None] * 16 + r16[None, :])
    s = tl.load(s_ptr + r16)
    if WHAT == "format":
        c = tl.dot_scaled(a8, None, "e2m3", b8, None, "e4m3")  # ERR<format>
    elif WHAT == "dtype":
        c = tl.dot_scaled(a8.to(tl.int8), None, "e4m3", b8, None, "e4m3")  # ERR<dtype>
    elif WHAT == "kpack":
        c = tl.dot_scaled(a8, None, "e4m3", b8, None, "e4m3", lhs_k_pack=False)  # ERR<kpack>
    elif WHAT == "scale_shape":
        c = tl.dot_scaled(a8, s[None, :], "e4m3", b8, None, "e4m3")  # ERR<scale_shape>
    elif WHAT == "scale_dtype":
        sf = s[:, None].to(tl.float32)
        c = tl.dot_scaled(a8, sf, "e4m3", b8, None, "e4m3")  # ERR<scale_dtype>
    else:
        c = tl.dot_scaled(a8, None, "e2m1", b8, None, "e4m3")  # ERR<k>
    tl.store(c_ptr + r16[:, None] * 16 + r16[None, :], c)


@pytest.mark.parametrize("what,message", [
    ("format", r"dot_scaled's lhs_format 'e2m3' is not supported: expected one of e2m1, "
               r"e4m3, e5m2, bf16, fp16"),
    ("dtype", r"dot_scaled's lhs in format 'e4m3' must be fp8e4nv or uint8 \(its bits\), "
              r"found int8"),
    ("kpack", r"lhs_k_pack=False applies to the packed format e2m1 only, found format 'e4m3'"),
    ("scale_shape", r"dot_scaled's lhs_scale must have shape \[16, 1\] \(one e8m0 scale per "
                    r"32 elements along K = 32\), found \[1, 16\]"),
    ("scale_dtype", r"dot_scaled's lhs_scale must be uint8 \(e8m0 scales\), found fp32"),
    ("k", r"dot_scaled's operands hold different K once unpacked: lhs \[16, 64\] and rhs "
          r"\[32, 16\]"),
])
def test_dot_scaled_errors(what, message):
    sig = dict(a_ptr="*u8", s_ptr="*u8", b_ptr="*u8", c_ptr="*fp32")
    expect_error(dot_scaled_err_kernel, message, sig, dict(WHAT=what))
