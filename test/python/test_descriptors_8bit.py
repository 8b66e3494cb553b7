"""8-bit matmuls through tensor descriptors (int8 -> int32, fp8 -> fp32): wgmma reads 8-bit
operands only K-major and the TMA copies a block as it is, so a B block read N x K and
transposed (`b_desc.load([n, k]).T`) is copied by the TMA, and a B block read K x N (N
contiguous) takes element loads staged K-major (it was a verifier error: a TMA ring with
k_major = false). A block of int8 was never copied by the TMA before (576 element loads a
program). The pointer form (Triton's tutorial matmul) is test_dot_scan's int8 tests and
test_fp8's."""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from cuda_torch import torch_or_skip  # noqa: E402


@kiln.jit
def matmul_blocks(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, B_NK: tl.constexpr, ACC: tl.constexpr):
    """One BM x BN tile of c = a @ b through descriptors (B's block N x K, transposed, or
    K x N), stored by pointers."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, K, BK):
        a = a_desc.load([pid_m * BM, k])
        if B_NK:
            b = b_desc.load([pid_n * BN, k]).T
        else:
            b = b_desc.load([k, pid_n * BN])
        acc = tl.dot(a, b, acc, out_dtype=ACC)  # (Triton asks for out_dtype with int8)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=mask)


@kiln.jit
def matmul_8bit_kernel(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr, B_NK: tl.constexpr, ACC: tl.constexpr):
    """matmul_blocks through host descriptors."""
    matmul_blocks(a_desc, b_desc, c_ptr, M, N, K, BM, BN, BK, B_NK, ACC)


@kiln.jit
def device_8bit_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr, B_NK: tl.constexpr, ACC: tl.constexpr):
    """matmul_blocks through descriptors made in the kernel (B stored N x K or K x N)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    if B_NK:
        b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BN, BK])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN])
    matmul_blocks(a_desc, b_desc, c_ptr, M, N, K, BM, BN, BK, B_NK, ACC)


TYPES = {"int8": ("i8", tl.int32, "i32"), "fp8e4nv": ("fp8e4nv", tl.float32, "fp32"),
         "fp8e5": ("fp8e5", tl.float32, "fp32")}
BM, BN, BK = 128, 128, 64


def compile_sm90a(dtype, b_nk, stages=3):
    elem, acc, out = TYPES[dtype]
    b_block = f"[{BN}, {BK}]" if b_nk else f"[{BK}, {BN}]"
    sig = dict(a_desc=f"tensordesc<{elem}[{BM}, {BK}]>", b_desc=f"tensordesc<{elem}{b_block}>",
               c_ptr=f"*{out}:16", M="i32", N="i32", K="i32")
    return kiln.compile(matmul_8bit_kernel, signature=sig,
                        constexprs=dict(BM=BM, BN=BN, BK=BK, B_NK=b_nk, ACC=acc),
                        target="sm_90a", num_warps=8, num_stages=stages)


@pytest.mark.parametrize("dtype", list(TYPES))
def test_k_major_blocks_take_the_tma(dtype):
    """No GPU needed: A (M x K) and B read N x K are copied by the TMA into K-major rings:
    one copy of each a stage, no element loads, wgmma on the 8-bit operands."""
    ptx = compile_sm90a(dtype, True).asm["ptx"]
    ptx_elem = {"int8": "s8", "fp8e4nv": "e4m3", "fp8e5": "e5m2"}[dtype]
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.\w+\.{ptx_elem}\.{ptx_elem}",
                     ptx)
    loop = ptx[ptx.index("mbarrier.try_wait"):ptx.index("wgmma.wait_group.sync.aligned 0")]
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", loop)) == 2
    assert "ld.global" not in ptx and "cp.async.cg" not in ptx


@pytest.mark.parametrize("dtype", ["int8", "fp8e4nv"])
def test_n_major_b_blocks_compile(dtype):
    """No GPU needed: a B block read K x N (N contiguous) is not the TMA's (its ring would be
    N-major, which 8-bit wgmma cannot read): A still goes by the TMA, B by loads staged K-major,
    and the kernel compiles (the verifier rejected the N-major TMA ring before)."""
    ptx = compile_sm90a(dtype, False).asm["ptx"]
    assert "wgmma.mma_async" in ptx
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", ptx)) >= 1
    assert "ld.global" in ptx


@pytest.mark.parametrize("dtype,code", [("int8", "c"), ("fp8e4nv", "e"), ("fp8e5", "E")])
def test_descriptors_made_in_the_kernel_take_the_tma(dtype, code):
    """No GPU needed: 8-bit descriptors made in the kernel get tensor maps the launcher
    encodes (recipes of dtype code 'c' / 'e' / 'E'); read K-major, both blocks go by the TMA;
    B read K x N keeps its map but is loaded element by element (not the TMA's)."""
    elem, acc, out = TYPES[dtype]
    sig = dict(a_ptr=f"*{elem}:16", b_ptr=f"*{elem}:16", c_ptr=f"*{out}:16", M="i32:16",
               N="i32:16", K="i32:16")
    for b_nk, copies in ((True, 2), (False, 1)):
        k = kiln.compile(device_8bit_kernel, signature=sig,
                         constexprs=dict(BM=BM, BN=BN, BK=BK, B_NK=b_nk, ACC=acc),
                         target="sm_90a", num_warps=8, num_stages=3)
        recipes = re.findall(r"tensor_map_recipe = array<i64: (\d+), (\d+),", k.asm["kiln"])
        assert [(int(b), int(c)) for b, c in recipes] == [(0, ord(code)), (1, ord(code))]
        ptx = k.asm["ptx"]
        loop = ptx[ptx.index("mbarrier.try_wait"):ptx.index("wgmma.wait_group.sync.aligned 0")]
        assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global",
                              loop)) == copies


def test_int8_on_the_host():
    """The CPU backend runs the same kernel (B read both ways), exact."""
    rng = np.random.default_rng(3)
    M, N, K = 40, 80, 96  # (row strides of multiples of 16 bytes)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    for b_nk in (True, False):
        bm, bn, bk = 16, 32, 32
        bsrc = np.ascontiguousarray(b.T) if b_nk else b
        c = np.full((M, N), -7, np.int32)
        descs = [kiln.TensorDescriptor.from_tensor(a, [bm, bk]),
                 kiln.TensorDescriptor.from_tensor(bsrc, [bn, bk] if b_nk else [bk, bn])]
        matmul_8bit_kernel[(kiln.cdiv(M, bm), kiln.cdiv(N, bn))](
            *descs, c, M, N, K, BM=bm, BN=bn, BK=bk, B_NK=b_nk, ACC=tl.int32, device="cpu")
        np.testing.assert_array_equal(c, ref)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["int8", "fp8e4nv", "fp8e5"])
@pytest.mark.parametrize("b_nk", [True, False])
@pytest.mark.parametrize("M,N,K", [(512, 384, 512), (200, 144, 1040)])
@pytest.mark.parametrize("stages", [3, 4])
@pytest.mark.parametrize("made", ["host", "kernel"])
def test_gpu_8bit_matmul_through_descriptors(dtype, b_nk, M, N, K, stages, made):
    """Against an fp64 product of the same 8-bit values: int8 exact; fp8 within 1e-3 (Hopper's
    fp8 wgmma keeps fewer mantissa bits while it accumulates than an fp32 sum: 2e-4 to 5.5e-4
    here on the H200, the same with B by the TMA and by loads; test_fp8's test_matmul_gpu).
    Ragged M, N and K (row strides of 16-byte multiples, as descriptors need) read zeros past
    the tensor (the TMA fills them)."""
    torch = torch_or_skip()
    g = torch.Generator(device="cuda").manual_seed(M + N + K + stages)
    if dtype == "int8":
        a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8, generator=g)
        bt = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8, generator=g)
        c = torch.full((M, N), -7, device="cuda", dtype=torch.int32)
        acc = tl.int32
    else:
        tt = torch.float8_e4m3fn if dtype == "fp8e4nv" else torch.float8_e5m2
        a = torch.randn(M, K, device="cuda", generator=g).to(tt)
        bt = torch.randn(N, K, device="cuda", generator=g).to(tt)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
        acc = tl.float32
    b = bt if b_nk else bt.t().contiguous()
    grid = (kiln.cdiv(M, BM), kiln.cdiv(N, BN))
    meta = dict(BM=BM, BN=BN, BK=BK, B_NK=b_nk, ACC=acc, num_warps=8, num_stages=stages)
    if made == "host":
        bd = kiln.TensorDescriptor.from_tensor(b, [BN, BK] if b_nk else [BK, BN])
        matmul_8bit_kernel[grid](kiln.TensorDescriptor.from_tensor(a, [BM, BK]), bd, c, M, N,
                                 K, **meta)
    else:
        device_8bit_kernel[grid](a, b, c, M, N, K, **meta)
    ref = a.double() @ bt.double().t()
    if dtype == "int8":
        assert torch.equal(c.long(), ref.long())
    else:
        err = ((c.double() - ref).norm() / ref.norm()).item()
        assert err < 1e-3, err
