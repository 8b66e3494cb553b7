"""fp8 tiles: tl.float8e4nv (e4m3fn) and tl.float8e5 (e5m2), Triton's names.

- Conversions: f32 -> fp8 rounds to nearest even and saturates to the largest finite value
  (448, 57344) as PTX's cvt.rn.satfinite does, NaN staying NaN; fp8 -> f32 is exact. Checked
  code by code against ml_dtypes on the CPU (every code, every midpoint between neighbours, random
  values) and against torch on the GPU.
- Arithmetic with an fp8 operand computes in fp32.
- dot: on sm_90a wgmma multiplies fp8 directly (k32 steps, operands K-major); elsewhere
  (the CPU, sm_80/sm_90, tiles wgmma does not take) the operands become f16, which holds every
  fp8 value, so the products are exact there and only the fp32 accumulation rounds.
"""
import re
import sys
import os

import numpy as np
import pytest

import kiln
import kiln.language as tl

sys.path.insert(0, os.path.dirname(__file__))
from test_dot_scan import WGMMA_SHAPES, matmul_kernel  # noqa: E402
from cuda_torch import torch_or_skip  # noqa: E402

try:
    import ml_dtypes
except ImportError:  # the CPU tests need it; the GPU tests use torch's fp8 types
    ml_dtypes = None
CPU = dict(device="cpu")
FORMATS = {"fp8e4nv": (tl.float8e4nv, "float8_e4m3fn", 448.0),
           "fp8e5": (tl.float8e5, "float8_e5m2", 57344.0)}


@kiln.jit
def roundtrip_kernel(x_ptr, q_ptr, y_ptr, n, FMT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    q = x.to(FMT)
    tl.store(q_ptr + offs, q, mask=m)
    tl.store(y_ptr + offs, q.to(tl.float32), mask=m)


def need_ml_dtypes():
    if ml_dtypes is None:
        pytest.skip("ml_dtypes (numpy fp8 arrays) not installed")


def conversion_inputs(codes, max_finite, seed=0):
    """Every finite code (`codes`: the 256 codes as f32), the midpoints of neighbouring codes
    (ties: round to even), random values of several scales."""
    finite = np.unique(codes[np.isfinite(codes)])
    mids = (finite[:-1] + finite[1:]) / 2
    rng = np.random.default_rng(seed)
    x = np.concatenate([finite, mids, rng.standard_normal(500).astype(np.float32) * 3,
                        rng.standard_normal(200).astype(np.float32) * 1e-3]).astype(np.float32)
    return x[np.abs(x) <= max_finite]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_conversions_cpu(fmt):
    need_ml_dtypes()
    tl_type, np_name, max_finite = FORMATS[fmt]
    np_type = getattr(ml_dtypes, np_name)
    x = conversion_inputs(np.arange(256, dtype=np.uint8).view(np_type).astype(np.float32),
                          max_finite)
    q = np.zeros(x.size, np_type)
    y = np.zeros(x.size, np.float32)
    roundtrip_kernel[(kiln.cdiv(x.size, 256),)](x, q, y, x.size, FMT=tl_type, BLOCK=256, **CPU)
    ref = x.astype(np_type)
    np.testing.assert_array_equal(q.view(np.uint8), ref.view(np.uint8))
    np.testing.assert_array_equal(y, ref.astype(np.float32))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_saturation_and_nan_cpu(fmt):
    need_ml_dtypes()
    tl_type, np_name, max_finite = FORMATS[fmt]
    x = np.array([1e6, -1e6, np.inf, -np.inf, np.nan, max_finite * 1.01, 1e-30, -0.0],
                 np.float32)
    q = np.zeros(x.size, getattr(ml_dtypes, np_name))
    y = np.zeros(x.size, np.float32)
    roundtrip_kernel[(1,)](x, q, y, x.size, FMT=tl_type, BLOCK=16, **CPU)
    m = max_finite
    np.testing.assert_array_equal(y, np.array([m, -m, m, -m, np.nan, m, 0.0, -0.0], np.float32))
    assert np.signbit(y[-1])


@kiln.jit
def arith_kernel(x_ptr, out_ptr, FMT: tl.constexpr):
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + offs).to(FMT)
    y = x * 2.0 + (-x) + tl.abs(x)
    tl.static_assert(y.dtype == tl.float32)
    tl.store(out_ptr + offs, y + tl.exp(x.to(tl.float32) * 0.0))


def test_arithmetic_computes_in_fp32_cpu():
    need_ml_dtypes()
    x = np.linspace(-4, 4, 16).astype(np.float32)
    out = np.zeros(16, np.float32)
    arith_kernel[(1,)](x, out, FMT=tl.float8e4nv, **CPU)
    q = x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    np.testing.assert_allclose(out, q * 2 - q + np.abs(q) + 1, rtol=1e-6)


@kiln.jit
def reductions_kernel(x_ptr, sum_ptr, max_ptr, cum_ptr):
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + offs[:, None] * 16 + offs[None, :])
    s = tl.sum(x, axis=1)
    m = tl.max(x, axis=0)
    c = tl.cumsum(x, axis=1)
    tl.static_assert(s.dtype == tl.float32 and m.dtype == tl.float32 and c.dtype == tl.float32)
    tl.store(sum_ptr + offs, s)
    tl.store(max_ptr + offs, m)
    tl.store(cum_ptr + offs[:, None] * 16 + offs[None, :], c)


def test_reductions_and_scans_compute_in_fp32_cpu():
    need_ml_dtypes()
    x = np.random.default_rng(3).standard_normal((16, 16)).astype(ml_dtypes.float8_e5m2)
    s, m, c = np.zeros(16, np.float32), np.zeros(16, np.float32), np.zeros((16, 16), np.float32)
    reductions_kernel[(1,)](x, s, m, c, **CPU)
    xf = x.astype(np.float32)
    np.testing.assert_allclose(s, xf.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m, xf.max(axis=0))
    np.testing.assert_allclose(c, np.cumsum(xf, axis=1), rtol=1e-5, atol=1e-5)


@kiln.jit
def atomic_kernel(x_ptr, out_ptr):
    tl.atomic_add(out_ptr + tl.arange(0, 16), tl.load(x_ptr + tl.arange(0, 16)))


def test_atomics_on_fp8_are_errors():
    with pytest.raises(kiln.CompilationError, match=r"expected a pointer to a dtype atomics take "
                       r"\(integers, fp16, bf16, fp32, fp64\) for atomic_add, found "):
        kiln.compile(atomic_kernel, signature=dict(x_ptr="*fp32", out_ptr="*fp8e4nv"),
                     target="sm_90a")


def fp8_inputs(fmt, M, N, K, seed=0):
    need_ml_dtypes()
    np_type = getattr(ml_dtypes, FORMATS[fmt][1])
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((M, K)) * 2).astype(np_type)
    b = rng.standard_normal((K, N)).astype(np_type)
    return a, b


def check_matmul_cpu(a, b, BM, BN, BK):
    """The tutorial matmul of fp8 arrays a (M x K) and b (K x N) on the CPU backend, against
    the fp64 product of the same values."""
    (M, K), N = a.shape, b.shape[1]
    c = np.zeros((M, N), np.float32)
    grid = (kiln.cdiv(M, BM) * kiln.cdiv(N, BN),)
    matmul_kernel[grid](a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
                        BLOCK_SIZE_K=BK, GROUP_SIZE_M=2, ACC_DTYPE=tl.float32, PRECISION=None,
                        **CPU)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("shape", [(48, 40, 96, 16, 16, 32), (64, 64, 64, 32, 32, 32)])
def test_matmul_cpu(fmt, shape):
    M, N, K, BM, BN, BK = shape
    check_matmul_cpu(*fp8_inputs(fmt, M, N, K), BM, BN, BK)


@pytest.mark.parametrize("fmt_a,fmt_b", [("fp8e4nv", "fp8e5"), ("fp8e5", "fp8e4nv")])
def test_dot_of_mixed_fp8_formats_cpu(fmt_a, fmt_b):
    """As Triton: fp8 formats in any pairing (e4m3 activations x e5m2 gradients, FP8
    training's backward), against the fp64 product of the same values (it was an error)."""
    M, N, K = 48, 40, 96
    check_matmul_cpu(fp8_inputs(fmt_a, M, N, K, seed=1)[0], fp8_inputs(fmt_b, M, N, K, seed=2)[1],
                     16, 16, 32)


def test_dot_of_mixed_fp8_formats_widens_to_f16():
    """No GPU needed: a mixed pair is widened to f16 (exact: f16 holds every fp8 value) on every
    target, wgmma k16 f16 on sm_90a (one fp8 type a dot is what Kiln's wgmma rings take)."""
    sig = dict(a_ptr="*fp8e4nv:16", b_ptr="*fp8e5:16", c_ptr="*fp32:16", M="i32:16",
               N="i32:16", K="i32:16", stride_am="i32:16", stride_bn="i32:16",
               stride_cm="i32:16")
    consts = dict(stride_ak=1, stride_bk=1, stride_cn=1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                  BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACC_DTYPE=tl.float32, PRECISION=None)
    ptx = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target="sm_90a",
                       num_warps=8, num_stages=3).asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert not re.search(r"wgmma[^\n]*e[45]m[23]", ptx)
    ptx = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target="sm_90",
                       num_warps=8, num_stages=3).asm["ptx"]
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 3])
def test_dot_of_mixed_fp8_formats_gpu(stages):
    """e4m3 x e5m2 on the GPU against the fp64 product of the same values (f16 operands:
    exact products, fp32 sums)."""
    torch = torch_or_skip()
    M, N, K = 256, 192, 320
    gen = torch.Generator().manual_seed(3)
    da = (torch.randn(M, K, generator=gen) * 2).to(torch.float8_e4m3fn).cuda()
    db = torch.randn(K, N, generator=gen).to(torch.float8_e5m2).cuda()
    c = torch.full((M, N), float("nan"), device="cuda")
    grid = (kiln.cdiv(M, 128) * kiln.cdiv(N, 64),)
    matmul_kernel[grid](da, db, c, M, N, K, da.stride(0), da.stride(1), db.stride(0),
                        db.stride(1), c.stride(0), c.stride(1), BLOCK_SIZE_M=128, BLOCK_SIZE_N=64,
                        BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACC_DTYPE=tl.float32, PRECISION=None,
                        num_warps=8, num_stages=stages)
    ref = da.cpu().float().double() @ db.cpu().float().double()
    assert ((c.cpu().double() - ref).norm() / ref.norm()).item() < 1e-5


def tutorial_args(fmt, c_type, block_n, b_major="col"):
    """The signature and constexprs of the fp8 tutorial matmul (matmul_kernel) with A
    row-major, B column-major ("col": K contiguous) or row-major ("row"), C of `c_type`."""
    sig = dict(a_ptr=f"*{fmt}:16", b_ptr=f"*{fmt}:16", c_ptr=f"*{c_type}:16", M="i32:16",
               N="i32:16", K="i32:16", stride_am="i32:16", stride_cm="i32:16")
    consts = dict(stride_ak=1, stride_cn=1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=block_n,
                  BLOCK_SIZE_K=128, GROUP_SIZE_M=8, ACC_DTYPE=tl.float32, PRECISION=None)
    unit, strided = ("stride_bk", "stride_bn") if b_major == "col" else ("stride_bn", "stride_bk")
    consts[unit] = 1
    sig[strided] = "i32:16"
    return sig, consts


@pytest.mark.parametrize("fmt,ptx_type", [("fp8e4nv", "e4m3"), ("fp8e5", "e5m2")])
def test_dot_runs_on_wgmma(fmt, ptx_type):
    """No GPU needed: on sm_90a the fp8 tutorial matmul with a column-major B copies both
    operands into K-major rings (the TMA; cp.async, 16 bytes at a time, in the loop version
    for tensors the TMA cannot take) and multiplies with wgmma k32; compiled for sm_90 the
    operands are widened to f16 for mma.sync."""
    sig, consts = tutorial_args(fmt, "fp32", 128)
    k = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target="sm_90a",
                     num_warps=8, num_stages=4)
    ptx = k.asm["ptx"]
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.f32\.{ptx_type}\."
                     rf"{ptx_type} ", ptx)
    assert "cp.async.cg.shared.global" in ptx and "ld.global.b8" not in ptx
    ptx = kiln.compile(matmul_kernel, signature=sig, constexprs=dict(consts, BLOCK_SIZE_K=32),
                       target="sm_90", num_warps=8).asm["ptx"]
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx and "wgmma" not in ptx


@pytest.mark.parametrize("fmt,code", [("fp8e4nv", ord("e")), ("fp8e5", ord("E"))])
def test_column_major_operands_take_the_tma(fmt, code):
    """No GPU needed: on sm_90a the fp8 tutorial matmul's A (K contiguous) and column-major B
    (K contiguous) are read through tensor maps the launcher encodes (dtype code 'e' / 'E':
    bytes to the TMA) into K-major rings, as 16-bit tiles are; a row-major B (N contiguous)
    keeps every operand on cp.async, whose copies transpose 8-bit blocks for wgmma (the TMA
    does not)."""
    sig, consts = tutorial_args(fmt, "fp16", 256)
    k = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target="sm_90a",
                     num_warps=8, num_stages=3)
    recipes = re.findall(r"tensor_map_recipe = array<i64: (\d+), (\d+),", k.asm["kiln"])
    assert [(int(b), int(c)) for b, c in recipes][:2] == [(0, code), (1, code)]
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", k.asm["ptx"])
    sig, consts = tutorial_args(fmt, "fp16", 256, b_major="row")
    k = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target="sm_90a",
                     num_warps=8, num_stages=3)
    assert not re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster", k.asm["ptx"])
    assert "cp.async.cg.shared.global" in k.asm["ptx"]


@kiln.jit
def widths_kernel(x_ptr, q_ptr, y_ptr, z_ptr, n, FMT: tl.constexpr, BLOCK: tl.constexpr):
    """x (f16, f32 or bf16) -> fp8 -> x's type, and -> bf16."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    q = x.to(FMT)
    tl.store(q_ptr + offs, q, mask=m)
    tl.store(y_ptr + offs, q.to(x.dtype), mask=m)
    tl.store(z_ptr + offs, q.to(tl.bfloat16), mask=m)


@pytest.mark.parametrize("arch,hardware", [("sm_90a", True), ("sm_89", True), ("sm_80", False)])
@pytest.mark.parametrize("fmt,ptx", [("fp8e4nv", "e4m3x2"), ("fp8e5", "e5m2x2")])
@pytest.mark.parametrize("src", ["fp32", "fp16"])
def test_conversions_take_the_cvt_instructions(arch, hardware, fmt, ptx, src):
    """No GPU needed: from sm_89 on, conversions go through PTX's cvt of pairs (as Triton's),
    not 15-25 integer instructions an element; sm_80 has no fp8 cvt."""
    sig = dict(x_ptr=f"*{src}:16", q_ptr=f"*{fmt}:16", y_ptr=f"*{src}:16", z_ptr="*bf16:16",
               n="i32")
    ptx_text = kiln.compile(widths_kernel, signature=sig,
                            constexprs=dict(FMT=FORMATS[fmt][0], BLOCK=1024), target=arch,
                            num_warps=4).asm["ptx"]
    down = f"cvt.rn.satfinite.{ptx}.{'f32' if src == 'fp32' else 'f16x2'}"
    up = f"cvt.rn.f16x2.{ptx}"
    if hardware:
        # 8 elements a thread: 4 pairs each way (twice up: to x's type and to bf16, unless
        # common subexpressions merge them)
        assert ptx_text.count(down) == 4, ptx_text.count(down)
        assert 4 <= ptx_text.count(up) <= 8
    else:
        assert "e4m3x2" not in ptx_text and "e5m2x2" not in ptx_text


# ---------------------------------------------------------------- GPU


TORCH_TYPES = {"fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2"}


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_conversions_gpu(fmt):
    torch = torch_or_skip()
    tl_type, _, max_finite = FORMATS[fmt]
    tt = getattr(torch, TORCH_TYPES[fmt])
    codes = torch.arange(256, dtype=torch.uint8).view(tt).float().numpy()
    x = torch.from_numpy(conversion_inputs(codes, max_finite)).cuda()
    q = torch.zeros(x.numel(), dtype=tt, device="cuda")
    y = torch.zeros(x.numel(), device="cuda")
    roundtrip_kernel[(kiln.cdiv(x.numel(), 256),)](x, q, y, x.numel(), FMT=tl_type, BLOCK=256)
    ref = x.to(tt)
    assert torch.equal(q.view(torch.uint8), ref.view(torch.uint8))
    assert torch.equal(y, ref.float())


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("src", ["float16", "bfloat16", "float32"])
def test_conversion_widths_gpu(fmt, src):
    """Every code's value and every midpoint from f16, bf16 and f32 (cvt of f16 pairs, or f32
    pairs for the others), back to the source type and to bf16: bit for bit torch's, and
    infinities and out-of-range values saturate, NaN stays NaN (torch gives NaN for those, so
    the expected codes are written out)."""
    torch = torch_or_skip()
    tl_type, _, max_finite = FORMATS[fmt]
    tt, st = getattr(torch, TORCH_TYPES[fmt]), getattr(torch, src)
    codes = torch.arange(256, dtype=torch.uint8).view(tt).float().numpy()
    x = torch.from_numpy(conversion_inputs(codes, max_finite)).to(st).cuda()
    big = 1e30 if src != "float16" else 6e4  # past both formats' largest finite value
    special = torch.tensor([float("inf"), -float("inf"), big,
                            float("nan")], dtype=st, device="cuda")
    x = torch.cat([x, special])
    n = x.numel()
    q = torch.zeros(n, dtype=tt, device="cuda")
    y = torch.zeros(n, dtype=st, device="cuda")
    z = torch.zeros(n, dtype=torch.bfloat16, device="cuda")
    widths_kernel[(kiln.cdiv(n, 256),)](x, q, y, z, n, FMT=tl_type, BLOCK=256)
    torch.cuda.synchronize()
    body = n - 4
    # torch rounds from the source type directly; f16 and bf16 values are exact in f32
    ref = x[:body].to(tt)
    assert torch.equal(q[:body].view(torch.uint8), ref.view(torch.uint8))
    assert torch.equal(y[:body], ref.to(st))
    assert torch.equal(z[:body], ref.float().to(torch.bfloat16))
    m = max_finite
    tail = y[body:].float().cpu().numpy()
    np.testing.assert_array_equal(tail[:3], np.array([m, -m, m], np.float32))
    assert np.isnan(tail[3])


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("shape", WGMMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("b_order", ["row", "col"])
@pytest.mark.parametrize("stages", [1, 4])
def test_matmul_gpu(fmt, shape, b_order, stages):
    """The tutorial matmul on fp8 tiles, fp32 out, against the fp64 product of the same fp8
    values (wgmma on the H100). Hopper's fp8 wgmma keeps fewer mantissa bits while it
    accumulates than an fp32 sum: relative errors of 1e-4 to 3e-4 at K = 192..328 on the H100,
    the same with 1 and 4 stages (and Triton's kernel gives Kiln's errors to the digit in
    bench_matmul.py fp8)."""
    torch = torch_or_skip()
    M, N, K, BM, BN, BK, warps = shape
    tt = getattr(torch, TORCH_TYPES[fmt])
    gen = torch.Generator().manual_seed(M + N + K)
    da = (torch.randn(M, K, generator=gen) * 2).to(tt).cuda()
    db = torch.randn(K, N, generator=gen).to(tt).cuda()
    a, b = da.cpu().float().numpy(), db.cpu().float().numpy()
    if b_order == "col":
        db = db.t().contiguous().t()
    c = torch.full((M, N), float("nan"), device="cuda")
    grid = (kiln.cdiv(M, BM) * kiln.cdiv(N, BN),)
    matmul_kernel[grid](da, db, c, M, N, K, da.stride(0), da.stride(1), db.stride(0),
                        db.stride(1), c.stride(0), c.stride(1), BLOCK_SIZE_M=BM,
                        BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8,
                        ACC_DTYPE=tl.float32, PRECISION=None, num_warps=warps,
                        num_stages=stages)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = c.cpu().numpy().astype(np.float64)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-3
