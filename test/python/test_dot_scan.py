"""tl.dot (and `a @ b`), tl.cumsum, tl.cumprod and tl.associative_scan.

- Triton's tutorial matmul kernel (03-matrix-multiplication: grouped ordering, masks on K;
  only the imports changed, and the output is stored in the output pointer's dtype) on the CPU
  backend with numpy arrays, against numpy float64 products of the same (rounded) inputs:
  fp16 (fp32 accumulation, fp32 and fp16 outputs), bf16 (ml_dtypes), fp32 with
  input_precision="ieee" (tight) and the default tf32 (looser, and measurably not ieee),
  int8 -> int32 (exact); shapes aligned and not (100 x 72 x 48 with 32/64 blocks);
- the same matmul cases marked `gpu` (torch CUDA tensors, or kiln device arrays without
  torch), skipped without a GPU;
- scans of 2-D tiles along both axes, reversed, with Triton's dtype rules; associative_scan
  with a user combine (running max) and with two operands (a first-order linear recurrence,
  forwards and backwards);
- errors (K mismatch, dimensions below 16, dtype pairs, accumulators, precision names, scan
  axes and combine results) at the user's line with what was expected.
"""
import inspect
import re

import os

import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import marker_line

CPU = dict(device="cpu")


def f64(a):
    return np.asarray(a).astype(np.float64)


def relerr(out, ref):
    out, ref = f64(out), f64(ref)
    return float(np.linalg.norm((out - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-300))


def bf16():
    return pytest.importorskip("ml_dtypes").bfloat16


def st(a, d):
    """Stride of dimension d in elements."""
    return a.strides[d] // a.itemsize


# ---------------------------------------------------------------- the tutorial kernel

@kiln.jit
def matmul_kernel(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        stride_cm, stride_cn,
        BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr, ACC_DTYPE: tl.constexpr, PRECISION: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=ACC_DTYPE)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator, input_precision=PRECISION)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


# (M, N, K, BLOCK_M, BLOCK_N, BLOCK_K): aligned, unaligned everywhere, K shorter than a block.
# (Blocks stay small: the host compile of a 64 x 32 x 64 dot takes ~40 s on 2 cores.)
SHAPES = [(64, 64, 64, 32, 32, 32), (100, 72, 48, 32, 64, 32), (37, 90, 20, 16, 32, 16)]

# (input dtype, output dtype, accumulator dtype, input_precision, tolerance on ||err||/||ref||).
# The reference is the float64 product of the rounded inputs: what is left is fp32
# accumulation (1e-5), the fp16 output's rounding (2^-11), or tf32's 10-bit inputs.
CASES = {
    "fp16": ("float16", "float32", tl.float32, None, 1e-5),
    "fp16-out-fp16": ("float16", "float16", tl.float32, None, 2e-3),
    "bf16": ("bfloat16", "float32", tl.float32, None, 1e-5),
    "fp32-ieee": ("float32", "float32", tl.float32, "ieee", 1e-6),
    "fp32-tf32x3": ("float32", "float32", tl.float32, "tf32x3", 1e-5),
    "fp32-tf32": ("float32", "float32", tl.float32, None, 5e-3),
    "int8": ("int8", "int32", tl.int32, None, 0.0),
}


def make_inputs(case, M, N, K, seed=0):
    in_dtype = CASES[case][0]
    rng = np.random.default_rng(seed)
    if in_dtype == "int8":
        a = rng.integers(-128, 128, (M, K), dtype=np.int8)
        b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    else:
        np_in = bf16() if in_dtype == "bfloat16" else np.dtype(in_dtype)
        a = rng.standard_normal((M, K), dtype=np.float32).astype(np_in)
        b = rng.standard_normal((K, N), dtype=np.float32).astype(np_in)
    return a, b


def launch_matmul(a, b, c, M, N, K, BM, BN, BK, acc_dtype, precision, **launch):
    grid = (kiln.cdiv(M, BM) * kiln.cdiv(N, BN),)
    sa, sb, sc = launch.pop("strides")
    matmul_kernel[grid](a, b, c, M, N, K, *sa, *sb, *sc, BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
                        BLOCK_SIZE_K=BK, GROUP_SIZE_M=2, ACC_DTYPE=acc_dtype,
                        PRECISION=precision, **launch)


def check(case, out, a, b):
    _, _, _, _, tol = CASES[case]
    ref = f64(a) @ f64(b)
    if tol == 0.0:
        assert out.dtype == np.int32
        np.testing.assert_array_equal(out.astype(np.int64), ref.astype(np.int64))
    else:
        err = relerr(out, ref)
        assert err < tol, f"{case}: relative error {err:.3g} >= {tol}"
    return ref


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("case", list(CASES))
def test_tutorial_matmul_cpu(case, shape):
    M, N, K, BM, BN, BK = shape
    _, out_dtype, acc_dtype, precision, _ = CASES[case]
    a, b = make_inputs(case, M, N, K)
    c = np.full((M, N), -7, dtype=np.dtype(out_dtype))  # poison: every element is written
    launch_matmul(a, b, c, M, N, K, BM, BN, BK, acc_dtype, precision,
                  strides=((st(a, 0), st(a, 1)), (st(b, 0), st(b, 1)), (st(c, 0), st(c, 1))),
                  **CPU)
    ref = check(case, c, a, b)
    if case == "fp32-tf32":
        # Triton's default for fp32 is TF32: measurably less exact than ieee.
        assert relerr(c, ref) > 1e-5


def test_matmul_transposed_b_strides_cpu():
    # b given as the transpose of a row-major N x K array: only the strides change.
    M, N, K = 64, 32, 48
    a, bt = make_inputs("fp16", M, K, K)[0], make_inputs("fp16", N, K, K, seed=1)[0]
    b = bt.T
    c = np.zeros((M, N), np.float32)
    launch_matmul(a, b, c, M, N, K, 32, 32, 16, tl.float32, None,
                  strides=((st(a, 0), st(a, 1)), (st(b, 0), st(b, 1)), (st(c, 0), st(c, 1))),
                  **CPU)
    check("fp16", c, a, b)


# ---------------------------------------------------------------- dot variants in one tile

@kiln.jit
def tile_dot_kernel(a_ptr, b_ptr, acc_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr,
                    K: tl.constexpr, MODE: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.load(acc_ptr + rm[:, None] * N + rn[None, :])
    if MODE == "matmul":
        c = a @ b + acc
    elif MODE == "acc":
        c = tl.dot(a, b, acc, allow_tf32=False)
    elif MODE == "fp16-acc":
        c = tl.dot(a, b, acc.to(tl.float16), out_dtype=tl.float16)
    else:  # "trans": a @ (b^T)^T
        c = tl.dot(a, tl.trans(tl.trans(b)), input_precision="ieee") + acc
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@pytest.mark.parametrize("mode", ["matmul", "acc", "trans"])
def test_matmul_operator_and_accumulator_fp32(mode):
    M, N, K = 32, 16, 64
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    acc = rng.standard_normal((M, N), dtype=np.float32)
    c = np.full((M, N), np.nan, np.float32)
    tile_dot_kernel[(1,)](a, b, acc, c, M, N, K, MODE=mode, **CPU)
    ref = f64(a) @ f64(b) + f64(acc)
    # `a @ b` is tl.dot's default: TF32 for fp32 inputs; allow_tf32=False is ieee.
    tol = 5e-3 if mode == "matmul" else 1e-6
    assert relerr(c, ref) < tol
    if mode == "matmul":
        assert relerr(c, ref) > 1e-5


def test_fp16_accumulator():
    M, N, K = 16, 32, 32
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((M, K), dtype=np.float32) * 0.25).astype(np.float16)
    b = (rng.standard_normal((K, N), dtype=np.float32) * 0.25).astype(np.float16)
    acc = rng.standard_normal((M, N), dtype=np.float32)
    c = np.full((M, N), np.nan, np.float32)
    tile_dot_kernel[(1,)](a, b, acc, c, M, N, K, MODE="fp16-acc", **CPU)
    ref = f64(a) @ f64(b) + f64(acc.astype(np.float16))
    assert relerr(c, ref) < 4e-3


# ---------------------------------------------------------------- GPU (skipped without one)

def _gpu_arrays():
    """(to_device(numpy array), to_numpy(device array)): torch CUDA tensors when torch has
    CUDA, else kiln device arrays."""
    try:
        import torch
        if torch.cuda.is_available():
            def to_dev(x):
                if x.dtype == bf16():
                    return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).cuda()
                return torch.from_numpy(np.ascontiguousarray(x)).cuda()

            def to_np(t):
                torch.cuda.synchronize()
                return t.cpu().numpy()
            return to_dev, to_np
    except ImportError:
        pass

    def to_dev_k(x):
        return kiln.from_numpy(np.ascontiguousarray(x))

    def to_np_k(t):
        kiln.synchronize()
        return t.numpy()
    return to_dev_k, to_np_k


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("case", list(CASES))
def test_tutorial_matmul_gpu(case, shape):
    M, N, K, BM, BN, BK = shape
    _, out_dtype, acc_dtype, precision, _ = CASES[case]
    to_dev, to_np = _gpu_arrays()
    a, b = make_inputs(case, M, N, K)
    c = np.full((M, N), -7, dtype=np.dtype(out_dtype))
    da, db, dc = to_dev(a), to_dev(b), to_dev(c)
    launch_matmul(da, db, dc, M, N, K, BM, BN, BK, acc_dtype, precision,
                  strides=((K, 1), (N, 1), (N, 1)), device="gpu")
    ref = check(case, to_np(dc), a, b)
    if case == "fp32-tf32":
        assert relerr(to_np(dc), ref) > 1e-5


# Tiles Hopper's warpgroup tensor cores take (16 rows per warp): on an H100 these run through
# the cp.async rings and wgmma. (M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, num_warps): aligned;
# rows 16-byte aligned but sizes not multiples of the blocks (masked edges and K tail); rows
# not 16-byte aligned (the copies fall back to 2-byte elements); a 128 x 256 tile on 8 warps.
WGMMA_SHAPES = [(256, 256, 256, 128, 128, 64, 4), (1000, 520, 328, 128, 128, 64, 4),
                (129, 257, 65, 64, 256, 64, 4), (384, 512, 192, 128, 256, 64, 8)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", WGMMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("case", ["fp16", "fp16-out-fp16", "bf16"])
def test_tutorial_matmul_warpgroup_tiles_gpu(case, shape):
    M, N, K, BM, BN, BK, warps = shape
    _, out_dtype, acc_dtype, precision, _ = CASES[case]
    to_dev, to_np = _gpu_arrays()
    a, b = make_inputs(case, M, N, K, seed=M + N + K)
    c = np.full((M, N), -7, dtype=np.dtype(out_dtype))
    da, db, dc = to_dev(a), to_dev(b), to_dev(c)
    launch_matmul(da, db, dc, M, N, K, BM, BN, BK, acc_dtype, precision,
                  strides=((K, 1), (N, 1), (N, 1)), device="gpu", num_warps=warps)
    check(case, to_np(dc), a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", WGMMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("b_order", ["row", "col"])
@pytest.mark.parametrize("stages", [1, 3, 4])
def test_int8_matmul_warpgroup_tiles_gpu(shape, b_order, stages):
    """int8 x int8 -> int32 on Hopper's tensor cores, exact: wgmma reads 8-bit operands
    K-major only, so B is staged transposed (through registers with 1 stage; with more, rings
    whose copies move 16 bytes when B is column-major and one byte when it is row-major)."""
    M, N, K, BM, BN, BK, warps = shape
    to_dev, to_np = _gpu_arrays()
    a, b = make_inputs("int8", M, N, K, seed=M + N + K)
    c = np.full((M, N), -7, dtype=np.int32)
    # A column-major B is the transpose of an N x K row-major array.
    db = to_dev(b) if b_order == "row" else to_dev(np.ascontiguousarray(b.T))
    sb = (N, 1) if b_order == "row" else (1, K)
    dc = to_dev(c)
    launch_matmul(to_dev(a), db, dc, M, N, K, BM, BN, BK, tl.int32, None,
                  strides=((K, 1), sb, (N, 1)), device="gpu", num_warps=warps,
                  num_stages=stages)
    check("int8", to_np(dc), a, b)


def test_int8_dot_runs_on_tensor_cores():
    """No GPU needed: int8 dots compiled for sm_90a multiply with wgmma (k32 steps, operands
    K-major: A and a column-major B are copied by the TMA, tensor maps of dtype code 'c', and
    16 bytes at a time by cp.async in the version for tensors the TMA cannot take), for sm_80
    and sm_90 with mma.sync.m16n8k32; K = 16 (below one mma) stays on the CUDA cores."""
    sig = dict(a_ptr="*i8:16", b_ptr="*i8:16", c_ptr="*i32:16", M="i32:16", N="i32:16",
               K="i32:16", stride_am="i32:16", stride_bn="i32:16", stride_cm="i32:16")
    consts = dict(stride_ak=1, stride_bk=1, stride_cn=1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                  BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACC_DTYPE=tl.int32, PRECISION=None)
    k = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target="sm_90a",
                     num_warps=8, num_stages=4)
    ptx = k.asm["ptx"]
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.s32\.s8\.s8", ptx)
    recipes = re.findall(r"tensor_map_recipe = array<i64: (\d+), (\d+),", k.asm["kiln"])
    assert [(int(b), int(c)) for b, c in recipes][:2] == [(0, ord("c")), (1, ord("c"))]
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", ptx)
    assert "cp.async.cg.shared.global" in ptx and "ld.global.b8" not in ptx
    for arch in ("sm_80", "sm_90"):
        ptx = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target=arch,
                           num_warps=8).asm["ptx"]
        assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in ptx and "wgmma" not in ptx
    ptx = kiln.compile(matmul_kernel, signature=sig, constexprs=dict(consts, BLOCK_SIZE_K=16),
                       target="sm_90a", num_warps=8).asm["ptx"]
    assert "mma" not in ptx


def test_int8_row_major_b_is_transposed_in_registers():
    """No GPU needed: wgmma reads 8-bit operands K-major only, so a row-major int8 B is copied
    into its ring by loads of 4 rows of 16 bytes, byte permutes that make columns of 4 k, and
    32-bit shared stores (not one byte at a time)."""
    sig = dict(a_ptr="*i8:16", b_ptr="*i8:16", c_ptr="*i32:16", M="i32:16", N="i32:16",
               K="i32:16", stride_am="i32:16", stride_bk="i32:16", stride_cm="i32:16")
    consts = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                  BLOCK_SIZE_K=128, GROUP_SIZE_M=8, ACC_DTYPE=tl.int32, PRECISION=None)
    ptx = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target="sm_90a",
                       num_warps=8, num_stages=4).asm["ptx"]
    assert "wgmma.mma_async" in ptx and "prmt.b32" in ptx
    assert "ld.global.b8" not in ptx and "st.shared.b8" not in ptx
    assert "ld.global.v4.b32" in ptx


@kiln.jit
def wgmma_rows_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, max_ptr, cum_ptr, M: tl.constexpr,
                      N: tl.constexpr, K: tl.constexpr):
    """Row-wise uses of a wgmma accumulator: its rows are where wgmma computes them, so a row
    bias, a row maximum and a scan down the columns must each find the right row."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.dot(a, b)
    c = acc + tl.load(bias_ptr + rm)[:, None]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)
    tl.store(max_ptr + rm, tl.max(c, axis=1))
    tl.store(cum_ptr + rm[:, None] * N + rn[None, :], tl.cumsum(c, axis=0))


# (M, N, K, num_warps): one 64-row block per warpgroup, two warpgroups taking blocks in
# turn (M = 256 on 8 warps), and one warpgroup with two blocks.
@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("shape", [(128, 128, 64, 8), (256, 64, 32, 8), (64, 128, 32, 4),
                                   (128, 64, 64, 4)], ids=lambda s: "x".join(map(str, s)))
def test_wgmma_accumulator_rows(shape, device):
    M, N, K, warps = shape
    to_dev, to_np = _gpu_arrays() if device == "gpu" else (lambda x: x, lambda x: x)
    rng = np.random.default_rng(M + N + K)
    a = rng.integers(-3, 4, (M, K)).astype(np.float16)
    b = rng.integers(-3, 4, (K, N)).astype(np.float16)
    bias = (np.arange(M) * 16.0).astype(np.float32)  # integers: every sum below is exact
    c, mx, cum = (np.zeros((M, N), np.float32), np.zeros(M, np.float32),
                  np.zeros((M, N), np.float32))
    da, db, dbias, dc, dmx, dcum = map(to_dev, (a, b, bias, c, mx, cum))
    launch = {"num_warps": warps} if device == "gpu" else CPU
    wgmma_rows_kernel[(1,)](da, db, dbias, dc, dmx, dcum, M=M, N=N, K=K, **launch)
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias[:, None]
    np.testing.assert_array_equal(to_np(dc), ref)
    np.testing.assert_array_equal(to_np(dmx), ref.max(axis=1))
    np.testing.assert_array_equal(to_np(dcum), np.cumsum(ref, axis=0))


@kiln.jit
def rings_and_scratch_kernel(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                             BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    # The transpose moves the 128 KiB accumulator through the static scratch pool.
    tl.store(c_ptr + rn[:, None] * BM + rm[None, :], tl.trans(acc))


def test_shared_memory_past_the_block_limit_is_an_error():
    """Rings of 4 stages of 128x64 and 64x256 fp16 (192 KiB) next to a 128 KiB scratch for
    the transpose pass the 227 KiB a block may use: an error naming the kernel, not a launch
    the driver refuses. 128x128 tiles on 2 stages fit."""
    sig = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", c_ptr="*fp32:16", K="i32:16")
    with pytest.raises(kiln.CompilationError,
                       match=r"kernel 'rings_and_scratch_kernel' needs \d+ bytes of shared "
                             r"memory \(196608 for the rings of its dots, \d+ for scratch and "
                             r"buffers\), more than the 232448 a block may use: lower "
                             r"num_stages or the tile sizes"):
        kiln.compile(rings_and_scratch_kernel, signature=sig,
                     constexprs=dict(BM=128, BN=256, BK=64), target="sm_90a", num_warps=8,
                     num_stages=4)
    k = kiln.compile(rings_and_scratch_kernel, signature=sig,
                     constexprs=dict(BM=128, BN=128, BK=64), target="sm_90a", num_warps=8,
                     num_stages=2)
    assert k.metadata.dynamic_shared == 2 * (128 * 64 + 64 * 128) * 2


@kiln.jit
def invariant_a_kernel(a_ptr, b_ptr, c_ptr, n, M: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr):
    """acc = sum over i of 0.5^(n-1-i) * a @ b_i: A (column-major) is loaded once before the
    loop, so on sm_90a it is stored to shared memory once; the scaled accumulator keeps the
    dot synchronous (no rings overlap)."""
    offs_m, offs_n, offs_k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + offs_m[:, None] + offs_k[None, :] * M)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for i in range(n):
        b = tl.load(b_ptr + i * K * N + offs_k[:, None] * N + offs_n[None, :])
        acc = tl.dot(a, b, acc)
        acc = acc * 0.5
    tl.store(c_ptr + (offs_m * N)[:, None] + offs_n[None, :], acc)


def invariant_a_reference(a, b, n):
    acc = np.zeros((a.shape[0], b.shape[2]))
    for i in range(n):
        acc = (acc + f64(a) @ f64(b[i])) * 0.5
    return acc


def test_invariant_a_is_stored_once_on_sm90a():
    """No GPU needed. Without rings (num_stages=1) A's 16-byte stores sit before the loop, B's
    inside, in one buffer. With rings A is copied once (cp.async, before the loop) into a
    one-slot buffer and B streams through a ring: no operand passes through registers."""
    sig = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", c_ptr="*fp32:16", n="i32")
    consts = dict(M=128, N=64, K=128)
    ptx = kiln.compile(invariant_a_kernel, signature=sig, constexprs=consts, target="sm_90a",
                       num_warps=8, num_stages=1).asm["ptx"]
    loop = ptx.index("$L__BB0_2:")
    assert ptx[:loop].count("st.shared.v4.b32") == 8
    assert ptx[loop:].count("st.shared.v4.b32") == 4
    assert len(re.findall(r"\.shared \.align 1024 \.b8 __kiln_wgmma_smem_hoisted\[49152\]", ptx)) == 1

    ptx = kiln.compile(invariant_a_kernel, signature=sig, constexprs=consts, target="sm_90a",
                       num_warps=8, num_stages=3).asm["ptx"]
    assert "st.shared" not in ptx and "__kiln_wgmma_smem" not in ptx
    copy = "cp.async.cg.shared.global"
    body = ptx.index("cp.async.wait_group 1;")
    # before the loop: A (128x128, 8 copies a thread) and B's first two iterations (4 each)
    assert ptx[:body].count(copy) == 8 + 2 * 4
    assert ptx[body:].count(copy) == 4
    assert ptx.count("wgmma.mma_async") == 128 // 16  # a 64-row block per warpgroup, K = 128


@pytest.mark.gpu
def test_invariant_a_gpu():
    to_dev, to_np = _gpu_arrays()
    M, N, K, n = 128, 64, 128, 5
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((n, K, N), dtype=np.float32).astype(np.float16)
    c = np.full((M, N), -7, dtype=np.float32)
    dc = to_dev(c)
    # Column-major A: element (m, k) at m + k * M.
    invariant_a_kernel[(1,)](to_dev(np.ascontiguousarray(a.T)), to_dev(b), dc, n, M=M, N=N,
                             K=K, num_warps=8, device="gpu")
    assert relerr(to_np(dc), invariant_a_reference(a, b, n)) < 1e-5


def test_tutorial_matmul_takes_rings_and_wgmma_on_sm90a():
    """No GPU needed: the tutorial kernel compiled for sm_90a copies its operands with cp.async
    (16 bytes) into shared rings and multiplies with wgmma, leaving it running across
    iterations; compiled for sm_90 it stays on mma.sync."""
    sig = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", c_ptr="*fp16:16", M="i32:16", N="i32:16",
               K="i32:16", stride_am="i32:16", stride_bk="i32:16", stride_cm="i32:16")
    consts = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                  BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACC_DTYPE=tl.float32, PRECISION=None)
    ptx = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target="sm_90a",
                       num_warps=4).asm["ptx"]
    assert "cp.async.cg.shared.global" in ptx and "ld.global" not in ptx.split("$L__BB0")[1]
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16", ptx)
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    assert ".extern .shared .align 1024 .b8 __kiln_dynamic_smem[]" in ptx
    ptx90 = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target="sm_90",
                         num_warps=4).asm["ptx"]
    assert "wgmma" not in ptx90 and "mma.sync.aligned.m16n8k16" in ptx90


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tutorial_matmul_takes_rings_and_ldmatrix_without_wgmma(arch):
    """No GPU needed: without wgmma the tutorial kernel's operands still go through cp.async
    rings (16-byte copies, no global loads in the loop), and each k-step reads them with
    ldmatrix (B row-major: .trans) into mma.sync; no proxy fence (that is wgmma's)."""
    sig = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", c_ptr="*fp16:16", M="i32:16", N="i32:16",
               K="i32:16", stride_am="i32:16", stride_bk="i32:16", stride_cm="i32:16")
    consts = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                  BLOCK_SIZE_K=32, GROUP_SIZE_M=8, ACC_DTYPE=tl.float32, PRECISION=None)
    ptx = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target=arch,
                       num_warps=4, num_stages=4).asm["ptx"]
    loop = ptx.split("$L__BB0")[1]
    assert "cp.async.cg.shared.global" in ptx and "ld.global" not in loop
    assert "cp.async.wait_group 2;" in ptx and "fence.proxy.async" not in ptx
    # 2 x 2 warps of 64 x 64: per k16 step 4 x4 loads of A, 4 x4.trans of B, 32 mma.sync.
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 8
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 8
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 64
    assert "wgmma" not in ptx


@pytest.mark.parametrize("arch,limit_kib", [("sm_90", 227), ("sm_80", 163), ("sm_86", 99)])
def test_ring_stages_fit_the_targets_shared_memory(arch, limit_kib):
    """No GPU needed: four 48 KiB stages of a 128x256x64 tile fit an sm_90 block; on sm_80
    (163 KiB a block) the rings drop to three stages and on sm_86 (99 KiB) to two, so the
    launch does not ask for more shared memory than the GPU has."""
    sig = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", c_ptr="*fp16:16", M="i32:16", N="i32:16",
               K="i32:16", stride_am="i32:16", stride_bk="i32:16", stride_cm="i32:16")
    consts = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                  BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACC_DTYPE=tl.float32, PRECISION=None)
    k = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target=arch,
                     num_warps=8, num_stages=4)
    stages = {"sm_90": 4, "sm_80": 3, "sm_86": 2}[arch]
    assert k.metadata.dynamic_shared == stages * 48 * 1024, k.metadata.shared
    assert k.metadata.shared <= limit_kib * 1024
    assert f"cp.async.wait_group {stages - 2};" in k.asm["ptx"]


@pytest.mark.gpu
def test_tutorial_matmul_mma_sync_rings_gpu():
    """The mma.sync path with cp.async rings and ldmatrix on the GPU: mma_sync_worker.py runs
    the tutorial kernel compiled for plain sm_90 (no wgmma) over fp16/bf16/int8, seven tile
    and stage configurations and row- or column-major operands, and the flattened persistent
    kernel, checking every result."""
    import subprocess
    import sys
    worker = os.path.join(os.path.dirname(__file__), "mma_sync_worker.py")
    env = dict(os.environ, KILN_ARCH="sm_90")
    r = subprocess.run([sys.executable, worker], env=env, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert r.stdout.count("ok  ") == 4 * 7 * 3 + 3, r.stdout


@pytest.mark.parametrize("stages,in_flight", [(1, None), (2, 0), (3, 1), (4, 1), (5, 2)])
def test_num_stages_sets_the_ring_depth(stages, in_flight):
    """No GPU needed: Triton's num_stages is the number of ring slots feeding the dot, and 1
    leaves the operands staged through registers (no cp.async). The dot runs on into the next
    iteration from 3 slots up; copies then run 2 iterations ahead with 3 slots (issued after
    the dot) and S - 2 with more, so the wait at the top lets 1, 1, 2 groups stay in flight;
    with 2 slots the dot completes in its iteration and copies run 1 ahead."""
    sig = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", c_ptr="*fp16:16", M="i32:16", N="i32:16",
               K="i32:16", stride_am="i32:16", stride_bk="i32:16", stride_cm="i32:16")
    consts = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                  BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACC_DTYPE=tl.float32, PRECISION=None)
    k = kiln.compile(matmul_kernel, signature=sig, constexprs=consts, target="sm_90a",
                     num_warps=4, num_stages=stages)
    ptx = k.asm["ptx"]
    # The option travels beside the module (CompileOptions), never inside its text.
    assert "stages" not in k.asm["kiln"] and k.metadata.num_stages == stages
    if stages == 1:
        # No copies into shared memory (the C store may go through the TMA: sm_90a takes a
        # matmul's pointer store as a TMA store, -kiln-pointer-tiles-to-descriptors).
        assert not re.search(r"cp\.async\.(ca|cg)|cp\.async\.bulk\.tensor\.\dd\.shared", ptx)
        assert "wgmma.mma_async" in ptx
        return
    waits = re.findall(r"cp\.async\.wait_group (\d+);", ptx)
    assert waits and int(waits[0]) == in_flight and waits[-1] == "0"


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["matmul", "acc", "trans"])
def test_matmul_operator_and_accumulator_fp32_gpu(mode):
    M, N, K = 32, 16, 64
    to_dev, to_np = _gpu_arrays()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    acc = rng.standard_normal((M, N), dtype=np.float32)
    dc = to_dev(np.full((M, N), np.nan, np.float32))
    tile_dot_kernel[(1,)](to_dev(a), to_dev(b), to_dev(acc), dc, M, N, K, MODE=mode,
                          device="gpu")
    ref = f64(a) @ f64(b) + f64(acc)
    assert relerr(to_np(dc), ref) < (5e-3 if mode == "matmul" else 1e-6)


# ---------------------------------------------------------------- scans

@kiln.jit
def scan_kernel(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr, OP: tl.constexpr,
                AXIS: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    if OP == "cumsum":
        y = tl.cumsum(x, axis=AXIS, reverse=REVERSE)
    elif OP == "cumprod":
        y = tl.cumprod(x, AXIS, REVERSE)
    elif OP == "method":
        y = x.cumsum(AXIS, reverse=REVERSE)
    else:
        y = x.cumprod(axis=AXIS, reverse=REVERSE)
    tl.store(y_ptr + offs, y)


def np_scan(x, op, axis, reverse):
    x = f64(x)
    if reverse:
        x = np.flip(x, axis)
    y = np.cumsum(x, axis) if op in ("cumsum", "method") else np.cumprod(x, axis)
    return np.flip(y, axis) if reverse else y


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "method", "method-prod"])
def test_scan_float32(op, axis, reverse):
    M, N = 16, 32
    rng = np.random.default_rng(5)
    if op in ("cumprod", "method-prod"):
        x = rng.uniform(0.7, 1.4, (M, N)).astype(np.float32)
    else:
        x = rng.standard_normal((M, N), dtype=np.float32)
    y = np.full((M, N), np.nan, np.float32)
    scan_kernel[(1,)](x, y, M, N, OP=op, AXIS=axis, REVERSE=reverse, **CPU)
    assert relerr(y, np_scan(x, op, axis, reverse)) < 1e-6


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_cumsum_int8_widens_to_int32(axis, reverse):
    # 64 values of 100 overflow int8 at once: the scan runs in int32 (Triton's rule).
    M, N = 64, 64
    x = np.full((M, N), 100, np.int8)
    x[::3] = -77
    y = np.zeros((M, N), np.int32)
    scan_kernel[(1,)](x, y, M, N, OP="cumsum", AXIS=axis, REVERSE=reverse, **CPU)
    np.testing.assert_array_equal(y, np_scan(x, "cumsum", axis, reverse).astype(np.int32))


def test_cumprod_int32_and_bf16():
    M, N = 16, 16
    rng = np.random.default_rng(6)
    x = rng.integers(-3, 4, (M, N)).astype(np.int32)
    y = np.zeros((M, N), np.int32)
    scan_kernel[(1,)](x, y, M, N, OP="cumprod", AXIS=1, REVERSE=False, **CPU)
    np.testing.assert_array_equal(y, np.cumprod(x.astype(np.int64), 1).astype(np.int32))
    # bf16 is scanned in fp32 and rounded once when stored.
    xb = rng.uniform(0.7, 1.4, (M, N)).astype(np.float32).astype(bf16())
    yb = np.zeros((M, N), bf16())
    scan_kernel[(1,)](xb, yb, M, N, OP="cumsum", AXIS=0, REVERSE=False, **CPU)
    ref = np_scan(xb, "cumsum", 0, False)
    assert relerr(yb, ref) < 4e-3
    np.testing.assert_array_equal(yb, ref.astype(np.float32).astype(bf16()))


@kiln.jit
def scan_dtypes_kernel(i8_ptr, u8_ptr, bf_ptr, f16_ptr):
    offs = tl.arange(0, 16)
    i8 = tl.load(i8_ptr + offs)
    u8 = tl.load(u8_ptr + offs)
    bf = tl.load(bf_ptr + offs)
    h = tl.load(f16_ptr + offs)
    tl.static_assert(tl.cumsum(i8).dtype == tl.int32)
    tl.static_assert(tl.cumsum(u8).dtype == tl.uint32)
    tl.static_assert(tl.cumsum(i8 > 0).dtype == tl.uint32)
    tl.static_assert(tl.cumsum(i8, dtype=tl.int64).dtype == tl.int64)
    tl.static_assert(tl.cumsum(bf).dtype == tl.float32)
    tl.static_assert(tl.cumsum(h).dtype == tl.float16)
    tl.static_assert(tl.cumprod(i8).dtype == tl.int8)
    tl.static_assert(tl.cumprod(bf).dtype == tl.float32)
    tl.store(i8_ptr + offs, tl.cumsum(i8).to(tl.int8))


def test_scan_dtypes_follow_triton():
    kiln.compile(scan_dtypes_kernel, signature={"i8_ptr": "*i8", "u8_ptr": "*u8",
                                                "bf_ptr": "*bf16", "f16_ptr": "*fp16"})


@kiln.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@kiln.jit
def _linear_combine(a1, b1, a2, b2):
    # (a1, b1) then (a2, b2): h -> a2 * (a1 * h + b1) + b2.
    return a1 * a2, a2 * b1 + b2


@kiln.jit
def assoc_scan_kernel(x_ptr, g_ptr, y_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr,
                      KIND: tl.constexpr, AXIS: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    if KIND == "max":
        y = tl.associative_scan(x, AXIS, _max_combine, reverse=REVERSE)
        tl.store(y_ptr + offs, y)
    elif KIND == "method":
        y = x.associative_scan(AXIS, _max_combine, REVERSE)
        tl.store(y_ptr + offs, y)
    else:
        g = tl.load(g_ptr + offs)
        gs, h = tl.associative_scan((g, x), AXIS, _linear_combine, reverse=REVERSE)
        tl.store(y_ptr + offs, h)
        tl.store(z_ptr + offs, gs)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("kind", ["max", "method"])
def test_associative_scan_running_max(kind, axis, reverse):
    M, N = 32, 16
    rng = np.random.default_rng(7)
    x = rng.standard_normal((M, N), dtype=np.float32)
    y = np.full((M, N), np.nan, np.float32)
    assoc_scan_kernel[(1,)](x, x, y, y, M, N, KIND=kind, AXIS=axis, REVERSE=reverse, **CPU)
    xs = np.flip(x, axis) if reverse else x
    ref = np.maximum.accumulate(xs, axis)
    np.testing.assert_array_equal(y, np.flip(ref, axis) if reverse else ref)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_associative_scan_two_operands_linear_recurrence(axis, reverse):
    # h[t] = g[t] * h[t-1] + x[t] (h[-1] = 0) along `axis`; with reverse, from the end:
    # h[t] = g[t] * h[t+1] + x[t]. The combine is associative but not commutative.
    M, N = 16, 32
    rng = np.random.default_rng(8)
    x = rng.standard_normal((M, N), dtype=np.float32)
    g = rng.uniform(0.5, 1.0, (M, N)).astype(np.float32)
    h = np.full((M, N), np.nan, np.float32)
    gs = np.full((M, N), np.nan, np.float32)
    assoc_scan_kernel[(1,)](x, g, h, gs, M, N, KIND="linear", AXIS=axis, REVERSE=reverse,
                            **CPU)
    xt, gt = (f64(x), f64(g)) if axis == 1 else (f64(x).T, f64(g).T)
    ref_h, ref_g = np.zeros_like(xt), np.zeros_like(xt)
    n = xt.shape[1]
    order = range(n - 1, -1, -1) if reverse else range(n)
    prev_h, prev_g = np.zeros(xt.shape[0]), np.ones(xt.shape[0])
    for t in order:
        prev_h = gt[:, t] * prev_h + xt[:, t]
        prev_g = gt[:, t] * prev_g
        ref_h[:, t], ref_g[:, t] = prev_h, prev_g
    if axis == 0:
        ref_h, ref_g = ref_h.T, ref_g.T
    assert relerr(h, ref_h) < 1e-6
    assert relerr(gs, ref_g) < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_scans_gpu(axis, reverse):
    M, N = 16, 32
    to_dev, to_np = _gpu_arrays()
    rng = np.random.default_rng(9)
    x = rng.standard_normal((M, N), dtype=np.float32)
    for op in ("cumsum", "cumprod"):
        xi = rng.uniform(0.7, 1.4, (M, N)).astype(np.float32) if op == "cumprod" else x
        dy = to_dev(np.full((M, N), np.nan, np.float32))
        scan_kernel[(1,)](to_dev(xi), dy, M, N, OP=op, AXIS=axis, REVERSE=reverse,
                          device="gpu")
        assert relerr(to_np(dy), np_scan(xi, op, axis, reverse)) < 1e-6, op
    g = rng.uniform(0.5, 1.0, (M, N)).astype(np.float32)
    dh, dg = to_dev(np.full((M, N), np.nan, np.float32)), to_dev(np.full((M, N), np.nan,
                                                                         np.float32))
    assoc_scan_kernel[(1,)](to_dev(x), to_dev(g), dh, dg, M, N, KIND="linear", AXIS=axis,
                            REVERSE=reverse, device="gpu")
    h = np.full((M, N), np.nan, np.float32)
    gs = np.full((M, N), np.nan, np.float32)
    assoc_scan_kernel[(1,)](x, g, h, gs, M, N, KIND="linear", AXIS=axis, REVERSE=reverse,
                            **CPU)
    assert relerr(to_np(dh), h) < 1e-6
    assert relerr(to_np(dg), gs) < 1e-6


# ---------------------------------------------------------------- errors

def expect_error(fn, message, signature, constexprs=None):
    """Compiles `fn`: a CompilationError at its line marked `# ERR<WHAT>` (`# ERR` without a
    WHAT constexpr) whose message matches `message` (a regular expression), with the source
    line and a caret."""
    constexprs = constexprs or {}
    marker = f"# ERR<{constexprs['WHAT']}>" if "WHAT" in constexprs else "# ERR"
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(fn, signature=signature, constexprs=constexprs)
    err = info.value
    assert err.kernel == fn.__name__
    assert err.file == inspect.getsourcefile(fn.fn)
    assert err.line == marker_line(fn, marker), str(err)
    assert re.search(message, err.message), err.message
    assert marker in err.source_line
    assert f":{err.line}:{err.column}: error: in kernel '{fn.__name__}'" in str(err)
    return err


@kiln.jit
def dot_err_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                   KB: tl.constexpr, WHAT: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, KB)[:, None] * N + tl.arange(0, N)[None, :])
    if WHAT == "dot":
        c = tl.dot(a, b)  # ERR<dot>
    elif WHAT == "matmul":
        c = a @ b  # ERR<matmul>
    elif WHAT == "acc":
        c = tl.dot(a, b, tl.zeros((M, 2 * N), dtype=tl.float32))  # ERR<acc>
    elif WHAT == "acc-dtype":
        c = tl.dot(a, b, acc=tl.zeros((M, N), dtype=tl.float16))  # ERR<acc-dtype>
    elif WHAT == "precision":
        c = tl.dot(a, b, input_precision="fp64")  # ERR<precision>
    elif WHAT == "both-precisions":
        c = tl.dot(a, b, input_precision="ieee", allow_tf32=False)  # ERR<both-precisions>
    else:
        c = tl.dot(a, b.to(tl.float32))  # ERR<mixed>
    tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


F16 = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}
F32 = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"}


def dims(M, N, K, KB, what="dot"):
    return dict(M=M, N=N, K=K, KB=KB, WHAT=what)


def test_dot_k_mismatch():
    expect_error(dot_err_kernel, r"expected the K dimensions of dot to match \(a is M x K, b is "
                 r"K x N\), found a fp16\[32, 64\] \(K = 64\) and b fp16\[32, 16\] \(K = 32\)",
                 F16, dims(32, 16, 64, 32))


def test_matmul_operator_k_mismatch_points_at_operator():
    err = expect_error(dot_err_kernel, r"expected the K dimensions of dot to match", F16,
                       dims(32, 16, 64, 32, "matmul"))
    assert err.source_line[err.column - 1] == "@"


@pytest.mark.parametrize("m,n,k", [(16, 16, 8), (1, 16, 4)])
def test_dot_k_below_16(m, n, k):
    # Triton's bounds on NVIDIA GPUs: K from 16, M and N from 1.
    expect_error(dot_err_kernel, rf"expected dot dimensions that are powers of two, K >= 16, "
                 rf"found K = {k} \(a fp32\[{m}, {k}\], b fp32\[{k}, {n}\]\)",
                 F32, dims(m, n, k, k))


@pytest.mark.parametrize("m,n,k,dt", [(1, 64, 64, "fp32"), (64, 2, 64, "fp32"),
                                      (8, 16, 32, "fp16"), (2, 4, 16, "fp16")])
def test_dot_m_or_n_below_16(m, n, k, dt):
    # M or N under 16 (Triton's test_dot small_mn cases; a decode step's one query row): the
    # products summed over K on the CUDA cores; it compiles for sm_90a too.
    rng = np.random.default_rng(m * 100 + n)
    npt = np.float32 if dt == "fp32" else np.float16
    a = rng.standard_normal((m, k)).astype(npt)
    b = rng.standard_normal((k, n)).astype(npt)
    acc = rng.standard_normal((m, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    tile_dot_kernel[(1,)](a, b, acc, c, M=m, N=n, K=k, MODE="acc", device="cpu")
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32) + acc,
                               rtol=1e-4, atol=1e-4)
    sig = {"a_ptr": f"*{dt}:16", "b_ptr": f"*{dt}:16", "acc_ptr": "*fp32:16", "c_ptr": "*fp32:16"}
    kiln.compile(tile_dot_kernel, signature=sig, constexprs={"M": m, "N": n, "K": k,
                                                             "MODE": "acc"},
                 target="sm_90a", num_warps=4)


def test_dot_dtype_pairs():
    expect_error(dot_err_kernel, r"expected a and b of one dtype for dot, found fp16 and fp32",
                 F16, dims(16, 16, 16, 16, "mixed"))
    expect_error(dot_err_kernel, r"expected dot operands of dtype fp16, bf16, fp32, fp8e4nv, fp8e5 or int8, "
                 r"found int32", {"a_ptr": "*i32", "b_ptr": "*i32", "c_ptr": "*fp32"},
                 dims(16, 16, 16, 16))
    expect_error(dot_err_kernel, r"expected dot operands of dtype fp16, bf16, fp32, fp8e4nv, fp8e5 or int8, "
                 r"found uint8", {"a_ptr": "*u8", "b_ptr": "*u8", "c_ptr": "*fp32"},
                 dims(16, 16, 16, 16))


def test_dot_accumulator_mismatch():
    expect_error(dot_err_kernel, r"expected the dot accumulator to be fp32\[32, 16\], found "
                 r"fp32\[32, 32\]", F16, dims(32, 16, 16, 16, "acc"))
    expect_error(dot_err_kernel, r"expected the dot accumulator to be fp32\[32, 16\], found "
                 r"fp16\[32, 16\]", F16, dims(32, 16, 16, 16, "acc-dtype"))


def test_dot_precision_names():
    expect_error(dot_err_kernel, r"expected input_precision 'tf32', 'tf32x3' or 'ieee' for "
                 r"dot, found 'fp64'", F32, dims(16, 16, 16, 16, "precision"))
    expect_error(dot_err_kernel, r"only one of input_precision and allow_tf32",
                 F32, dims(16, 16, 16, 16, "both-precisions"))


@kiln.jit
def out_dtype_err_kernel(a_ptr):
    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    a = tl.load(a_ptr + offs)
    c = tl.dot(a, a, out_dtype=tl.bfloat16)  # ERR
    tl.store(a_ptr + offs, c)


def test_dot_out_dtype():
    expect_error(out_dtype_err_kernel, r"expected out_dtype fp32 for dot of bf16 tiles, found "
                 r"bf16 \(cast the fp32 result with \.to\(tl\.bfloat16\)\)", {"a_ptr": "*bf16"})
    expect_error(out_dtype_err_kernel, r"expected out_dtype fp32 or fp16 for dot of fp16 tiles, "
                 r"found bf16", {"a_ptr": "*fp16"})


@kiln.jit
def _bad_combine(a, b):
    return a + b, a


@kiln.jit
def scan_err_kernel(x_ptr, WHAT: tl.constexpr):
    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    x = tl.load(x_ptr + offs)
    if WHAT == "axis":
        y = tl.cumsum(x, axis=2)  # ERR<axis>
    elif WHAT == "scalar":
        y = tl.cumprod(tl.sum(x, axis=None))  # ERR<scalar>
    else:
        y = tl.associative_scan(x, 0, _bad_combine)  # ERR<combine>
    tl.store(x_ptr + offs, y)


def test_scan_errors():
    sig = {"x_ptr": "*fp32"}
    expect_error(scan_err_kernel, r"expected a scan axis in \[-2, 2\), found 2", sig,
                 {"WHAT": "axis"})
    expect_error(scan_err_kernel, r"expected a tile for cumprod, found a scalar of fp32", sig,
                 {"WHAT": "scalar"})
    expect_error(scan_err_kernel, r"expected the combine function to return 1 values, found 2",
                 sig, {"WHAT": "combine"})


def test_fp16_result_dot_takes_the_tensor_cores():
    # out_dtype=tl.float16 accumulates in fp32 and rounds once a dot: on sm_90a wgmma with fp32
    # accumulators, where the fp16 accumulator left it to scalar FMAs (0 mma, 128 fma.rn.f16,
    # found running Triton's test_dot); the product then matches fp32 math rounded to fp16.
    import re
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "acc_ptr": "*fp16:16", "c_ptr": "*fp16:16"}
    ptx = kiln.compile(tile_dot_kernel, signature=sig,
                       constexprs={"M": 128, "N": 128, "K": 64, "MODE": "fp16-acc"},
                       target="sm_90a", num_warps=4).asm["ptx"]
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16", ptx)
    assert "fma.rn.f16" not in ptx
    M, N, K = 32, 16, 64
    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    acc = rng.standard_normal((M, N)).astype(np.float16)
    c = np.zeros((M, N), np.float16)
    tile_dot_kernel[(1,)](a, b, acc, c, M=M, N=N, K=K, MODE="fp16-acc", device="cpu")
    want = (a.astype(np.float32) @ b.astype(np.float32) + acc.astype(np.float32))
    np.testing.assert_allclose(c.astype(np.float32), want.astype(np.float16).astype(np.float32),
                               rtol=1e-3, atol=1e-2)



@kiln.jit
def precision_dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr,
                         K: tl.constexpr, PREC: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :],
             tl.dot(a, b, input_precision=PREC))


def test_tf32x3_dot_takes_the_tensor_cores():
    # input_precision="tf32x3": three TF32 dots (Triton's passes) on sm_90a's tensor cores,
    # where it was exact fp32 on scalar FMAs (128 fma.rn.f32 for 128x128x64); near fp32 on the
    # CPU against a float64 product.
    sig = {"a_ptr": "*fp32:16", "b_ptr": "*fp32:16", "c_ptr": "*fp32:16"}
    ptx = kiln.compile(precision_dot_kernel, signature=sig,
                       constexprs={"M": 128, "N": 128, "K": 64, "PREC": "tf32x3"},
                       target="sm_90a", num_warps=4).asm["ptx"]
    assert ".tf32" in ptx and "fma.rn.f32" not in ptx
    rng = np.random.default_rng(6)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    c = np.zeros((32, 32), np.float32)
    precision_dot_kernel[(1,)](a, b, c, M=32, N=32, K=64, PREC="tf32x3", device="cpu")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6
