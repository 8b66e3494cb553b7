"""Stores of a dot's accumulator that its tensor-core fragment layout would write one element
at a time (C reached through a pointer of unknown alignment, an odd row stride, C stored
column-major) go through a layout conversion to a coalesced layout (-kiln-assign-layouts'
step 2c) that moves the tile through shared memory one band of columns at a time
(kiln_gpu::planColumnBands). The PTX checks run without a GPU; the `gpu` tests compare the
results with torch, with C poisoned first."""
import os
import re
import sys

import pytest

import kiln
import kiln.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench"))
import cliff_sources as cs  # noqa: E402
from cuda_torch import torch_or_skip  # noqa: E402

GROUPED_SIG = {"group_a_ptrs": "*i64", "group_b_ptrs": "*i64", "group_c_ptrs": "*i64",
               "group_gemm_sizes": "*i32", "g_lds": "*i32", "group_size": "i32"}


@kiln.jit
def matmul_strided_c(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, stride_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def ptx_of_grouped(BM, BN, BK, warps, stages):
    k = kiln.compile(cs.mm_grouped, signature=GROUPED_SIG,
                     constexprs={"NUM_SM": 132, "BLOCK_SIZE_M": BM, "BLOCK_SIZE_N": BN,
                                 "BLOCK_SIZE_K": BK},
                     target="sm_90a", num_warps=warps, num_stages=stages)
    return k.asm["ptx"]


def scratch_bytes(ptx):
    m = re.search(r"__kiln_scratch\[(\d+)\]", ptx)
    return int(m.group(1)) if m else 0


def test_grouped_gemm_stores_through_column_bands():
    # Tutorial 08's C pointers come from an int64 table and its row stride from an int32
    # table: nothing is known of their alignment. 128 x 256 fp16 on 8 warps: a band of 64
    # columns (128 rows of 72 elements, 18432 bytes), each thread's column pairs stored as
    # one 32-bit word, the result read back an element at a time; C written 2 bytes a thread,
    # 32 consecutive elements a warp.
    ptx = ptx_of_grouped(128, 256, 64, 8, 3)
    assert scratch_bytes(ptx) == 128 * 72 * 2
    assert len(re.findall(r"st\.shared\.b32", ptx)) == 64
    assert len(re.findall(r"ld\.shared\.b16", ptx)) == 128
    assert len(re.findall(r"st\.global\.b16", ptx)) == 128


def test_aligned_c_keeps_the_fragment_layout():
    # C, its row stride and N divisible by 16: the fragment layout writes whole pairs, no
    # scratch. With C unaligned (or N unknown: the mask may change at any column) it
    # converts: two bands of 64 columns.
    def sig(c_aligned):
        s = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16", "M": "i32",
             "N": "i32", "K": "i32", "stride_am": "i32:16", "stride_bk": "i32:16",
             "stride_cm": "i32"}
        if c_aligned:  # N too: the mask is constant over 16 columns
            s.update(c_ptr="*fp16:16", stride_cm="i32:16", N="i32:16")
        return s

    consts = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "stride_cn": 1}
    aligned = kiln.compile(matmul_strided_c, signature=sig(True), constexprs=consts,
                           target="sm_90a", num_warps=8, num_stages=3)
    assert scratch_bytes(aligned.asm["ptx"]) == 0
    assert re.search(r"st\.global\.b32|st\.global\.v2\.b16", aligned.asm["ptx"])
    unaligned = kiln.compile(matmul_strided_c, signature=sig(False), constexprs=consts,
                             target="sm_90a", num_warps=8, num_stages=3)
    assert scratch_bytes(unaligned.asm["ptx"]) == 128 * (64 + 8) * 2


def triton_cdiv(a, b):
    return (a + b - 1) // b


@pytest.mark.gpu
@pytest.mark.parametrize("BM,BN,BK,warps", [(128, 256, 64, 8), (64, 64, 32, 4),
                                             (128, 128, 32, 4), (64, 128, 32, 8)])
@pytest.mark.parametrize("layout", ["offset", "odd_stride", "column_major"])
@pytest.mark.parametrize("out", ["fp16", "fp32"])
@pytest.mark.parametrize("ragged", [False, True])
def test_unaligned_accumulator_stores(BM, BN, BK, warps, layout, out, ragged):
    # (64, 128, 32, 8): 8 rows a warp, too few for wgmma: the mma.sync accumulator layout.
    # ragged: M and N not multiples of the tile, so the converted store's mask cuts rows and
    # columns of the last tiles.
    torch = torch_or_skip()
    torch.manual_seed(0)
    Mp, Np, K = 2 * BM, 3 * BN, 4 * BK
    M, N = (Mp - 5, Np - 7) if ragged else (Mp, Np)
    # A and B loaded unmasked: the last tiles read the padding rows and columns
    a = torch.randn(Mp, K, device="cuda", dtype=torch.float16)[:M]
    b = torch.randn(K, Np, device="cuda", dtype=torch.float16)[:, :N]
    dtype = {"fp16": torch.float16, "fp32": torch.float32}[out]
    if layout == "offset":  # C one element past an aligned address
        base = torch.full((M * N + 1,), float("nan"), device="cuda", dtype=dtype)
        c = base[1:].view(M, N)
    elif layout == "odd_stride":  # rows N + 1 elements apart
        base = torch.full((M, N + 1), float("nan"), device="cuda", dtype=dtype)
        c = base[:, :N]
    else:  # column-major C
        base = torch.full((N, M), float("nan"), device="cuda", dtype=dtype)
        c = base.t()
    grid = (triton_cdiv(M, BM), triton_cdiv(N, BN))
    matmul_strided_c[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                           c.stride(1), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=warps,
                           num_stages=3)
    ref = (a.float() @ b.float()).to(dtype)
    torch.testing.assert_close(c, ref, rtol=2e-2, atol=2e-2)
    if layout == "odd_stride":  # the column past each row untouched
        assert torch.isnan(base[:, N]).all()


@pytest.mark.gpu
def test_grouped_gemm_on_gpu():
    torch = torch_or_skip()
    torch.manual_seed(1)
    problems = [(256, 512, 128), (128, 256, 64), (384, 256, 192)]
    A = [torch.randn(m, k, device="cuda", dtype=torch.float16) for m, n, k in problems]
    B = [torch.randn(k, n, device="cuda", dtype=torch.float16) for m, n, k in problems]
    C = [torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
         for m, n, k in problems]
    table = [torch.tensor([x.data_ptr() for x in xs], device="cuda", dtype=torch.int64)
             for xs in (A, B, C)]
    sizes = torch.tensor([x for p in problems for x in p], device="cuda", dtype=torch.int32)
    lds = torch.tensor([x for a, b in zip(A, B) for x in (a.shape[1], b.shape[1], b.shape[1])],
                       device="cuda", dtype=torch.int32)
    cs.mm_grouped[(7,)](*table, sizes, lds, len(problems), NUM_SM=7, BLOCK_SIZE_M=128,
                        BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, num_warps=8, num_stages=3)
    for a, b, c in zip(A, B, C):
        torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=2e-2, atol=2e-2)
