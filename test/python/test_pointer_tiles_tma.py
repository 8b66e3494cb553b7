"""A matmul written with pointers, as Triton's tutorial 03 writes it, copies its operands with
the tensor memory accelerator on sm_90a (-kiln-pointer-tiles-to-descriptors): the loop's
pointer tiles become loads of tensor maps the compiler appends to the kernel and the launcher
encodes from the arguments, in a loop versioned on the facts that takes (starts not
negative, extents and strides positive; tiles whose rows `% M` do not wrap, unless the rows
that wrap are never stored, as C's masked store in the tutorial); other tiles run the loop as
written. The
IR and PTX for sm_90a, the recipes the launcher gets, and (marker `gpu`) results against
torch at shapes that take either loop, strided and sliced operands, K = 0, bf16."""
import os
import re
import sys

import pytest

import kiln
import kiln.language as tl

from cuda_torch import torch_or_skip

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench"))
# Tutorial 03's matmul as bench_cliffs runs it (case ptr): B stored K x N, rows of A and
# columns of B taken % M and % N, K masked, an optional leaky_relu epilogue.
from cliff_sources import mm_ptr as tutorial_mm  # noqa: E402


@kiln.jit
def other_one_mm(a_ptr, b_ptr, c_ptr, K, N, stride_am, stride_bk, BM: tl.constexpr,
                 BN: tl.constexpr, BK: tl.constexpr):
    # other=1.0: the TMA fills zeros, so this load stays a pointer load.
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=1.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


SIG = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32:16",
       "N": "i32:16", "K": "i32:16", "stride_am": "i32:16", "stride_ak": "i32:1",
       "stride_bk": "i32:16", "stride_bn": "i32:1", "stride_cm": "i32:16", "stride_cn": "i32:1"}
CONSTS = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8,
          "ACTIVATION": ""}


def test_tutorial_matmul_copies_operands_with_the_tma_on_sm90a():
    k = kiln.compile(tutorial_mm, signature=SIG, constexprs=CONSTS, target="sm_90a",
                     num_warps=8, num_stages=3)
    ir = k.asm["kiln"]
    # Three tensor maps appended, A's (base a_ptr, f16, [128, 64], extents M and K, row stride
    # stride_am), B's ([64, 128], extents K and N, row stride stride_bk) and C's ([128, 128],
    # extents M and N from the store's mask, row stride stride_cm), in kernel parameter
    # numbers (the stride-1 parameters are constants, not parameters).
    recipes = re.findall(r"kiln\.tensor_map_recipe = array<i64: ([0-9, ]+)>", ir)
    assert recipes == ["0, 104, 2, 128, 64, 3, 5, 6", "1, 104, 2, 64, 128, 5, 4, 7",
                       "2, 104, 2, 128, 128, 3, 4, 8"], recipes
    ptx = k.asm["ptx"]
    # The versioned loop: TMA copies where the tile does not wrap, cp.async elsewhere; C
    # through shared memory and TMA stores where its tile starts inside, pointers elsewhere.
    assert "cp.async.bulk.tensor.2d.shared::cluster" in ptx
    assert "cp.async.cg.shared.global" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx
    assert "st.global" in ptx
    assert len(re.findall(r"\.param \.align 64 \.b8 mm_ptr_param_\d+\[128\]", ptx)) == 3


@kiln.jit
def row_masked_mm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, MASK_N: tl.constexpr):
    # Tutorial 03's tiles (rows % M, columns % N); C's store masked by rows < M, and by
    # columns < N only with MASK_N.
    rm = (tl.program_id(0) * BM + tl.arange(0, BM)) % M
    rn = (tl.program_id(1) * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    cm = tl.program_id(0) * BM + tl.arange(0, BM)
    cn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = cm[:, None] < M
    if MASK_N:
        mask = mask & (cn[None, :] < N)
    tl.store(c_ptr + cm[:, None] * stride_cm + cn[None, :], acc.to(tl.float16), mask=mask)


def wrap_facts(kernel):
    """The loop guard's `start + block <= M` facts (64-bit compares) in the IR for sm_90a."""
    return len(re.findall(r"arith\.cmpi sle, .* : i64", kernel.asm["kiln"]))


def test_edge_tiles_take_the_tma_where_wrapped_rows_are_never_stored():
    # The tutorial's C store is masked by offs_cm < M and offs_cn < N, so the rows of A and
    # columns of B that `% M`, `% N` wrap reach no stored element: the loop needs no fact that
    # they do not wrap, and the edge tiles read zeros past the tensor's end through the TMA.
    for act in ("", "leaky_relu"):
        k = kiln.compile(tutorial_mm, signature=SIG, constexprs=dict(CONSTS, ACTIVATION=act),
                         target="sm_90a", num_warps=8, num_stages=3)
        assert wrap_facts(k) == 0
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32:16",
           "N": "i32:16", "K": "i32:16", "stride_am": "i32:16", "stride_bk": "i32:16",
           "stride_cm": "i32:16"}
    consts = {"BM": 128, "BN": 128, "BK": 64}
    k = kiln.compile(row_masked_mm, signature=sig, constexprs=dict(consts, MASK_N=True),
                     target="sm_90a", num_warps=8, num_stages=3)
    assert "cp.async.bulk.tensor.2d.shared::cluster" in k.asm["ptx"]
    assert wrap_facts(k) == 0
    # Columns not masked at the store: B's wrapped columns are stored, so B's wrap keeps its
    # fact (A's does not need one).
    k = kiln.compile(row_masked_mm, signature=sig, constexprs=dict(consts, MASK_N=False),
                     target="sm_90a", num_warps=8, num_stages=3)
    assert wrap_facts(k) == 1


def test_no_tensor_maps_where_the_tma_cannot_copy():
    # sm_80 has no TMA; other=1.0 is not what the TMA fills.
    k = kiln.compile(tutorial_mm, signature=SIG, constexprs=CONSTS, target="sm_80",
                     num_warps=8, num_stages=3)
    assert "tensor_map_recipe" not in k.asm["kiln"]
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "K": "i32:16",
           "N": "i32", "stride_am": "i32:16", "stride_bk": "i32:16"}
    k = kiln.compile(other_one_mm, signature=sig, constexprs={"BM": 64, "BN": 64, "BK": 32},
                     target="sm_90a", num_warps=4, num_stages=3)
    # A loop's operands go all by the TMA or all by cp.async: A keeps B a pointer load too.
    assert "tensor_map_recipe" not in k.asm["kiln"]
    assert "cp.async.bulk.tensor.2d.shared" not in k.asm["ptx"]


def test_unaligned_operands_keep_pointer_loads():
    # A row stride not known to be a multiple of 16 bytes: no tensor map for A, so none for
    # B (the loop's operands all by cp.async); C's store still through the TMA. With an fp32
    # C none at all (the launcher encodes f16 and bf16 maps).
    sig = dict(SIG, stride_am="i32")
    k = kiln.compile(tutorial_mm, signature=sig, constexprs=CONSTS, target="sm_90a",
                     num_warps=8, num_stages=3)
    recipes = re.findall(r"kiln\.tensor_map_recipe = array<i64: ([0-9, ]+)>", k.asm["kiln"])
    assert recipes == ["2, 104, 2, 128, 128, 3, 4, 8"], recipes
    assert "cp.async.cg.shared.global" in k.asm["ptx"]
    k = kiln.compile(tutorial_mm, signature=dict(sig, c_ptr="*fp32:16"), constexprs=CONSTS,
                     target="sm_90a", num_warps=8, num_stages=3)
    assert "tensor_map_recipe" not in k.asm["kiln"]


# ---------------------------------------------------------------- GPU

def run_tutorial(torch, a, b, c, BM=128, BN=128, BK=64, warps=8, stages=3, act=""):
    M, K = a.shape
    N = b.shape[1]
    grid = (kiln.cdiv(M, BM) * kiln.cdiv(N, BN),)
    tutorial_mm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                      c.stride(0), c.stride(1), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
                      BLOCK_SIZE_K=BK, GROUP_SIZE_M=8, ACTIVATION=act, num_warps=warps,
                      num_stages=stages)


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(512, 512, 512), (200, 136, 100), (384, 256, 1000),
                                   (128, 128, 16), (1000, 520, 64)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tutorial_matmul_on_gpu(M, N, K, dtype):
    torch = torch_or_skip()
    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(K, N, device="cuda", dtype=dt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    run_tutorial(torch, a, b, c)
    ref = (a.float() @ b.float()).to(dt)
    torch.testing.assert_close(c.float(), ref.float(), rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("mask_n", [True, False])
def test_row_masked_matmul_edge_tiles_on_gpu(mask_n):
    # Edge tiles in both dimensions (row strides multiples of 16 elements, so that the TMA
    # takes the loop); without MASK_N the columns past N are stored, from B's wrapped
    # columns, as the pointer loads read them (C is wide enough to hold them).
    torch = torch_or_skip()
    torch.manual_seed(3)
    M, N, K = 200, 144, 96
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    width = N if mask_n else 256
    c = torch.full((M, width), float("nan"), device="cuda", dtype=torch.float16)
    row_masked_mm[(kiln.cdiv(M, 128), kiln.cdiv(N, 128))](
        a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), BM=128, BN=128, BK=64,
        MASK_N=mask_n, num_warps=8, num_stages=3)
    ref = a.float() @ b.float()
    if not mask_n:
        ref = ref[:, torch.arange(width, device="cuda") % N]
    torch.testing.assert_close(c.float(), ref.half().float(), rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_tutorial_matmul_strided_operands_on_gpu():
    # A a column slice of a wider matrix (row stride 3 K), B a row slice, C strided: the
    # tensor maps take the row strides; the epilogue's leaky_relu as in the tutorial.
    torch = torch_or_skip()
    torch.manual_seed(1)
    M, N, K = 384, 256, 192
    big_a = torch.randn(M, 3 * K, device="cuda", dtype=torch.float16)
    a = big_a[:, K:2 * K]
    big_b = torch.randn(2 * K, N, device="cuda", dtype=torch.float16)
    b = big_b[K:]
    big_c = torch.full((M, 2 * N), float("nan"), device="cuda", dtype=torch.float16)
    c = big_c[:, :N]
    run_tutorial(torch, a, b, c, act="leaky_relu")
    ref = a.float() @ b.float()
    ref = torch.where(ref >= 0, ref, 0.01 * ref).half()
    torch.testing.assert_close(c.float(), ref.float(), rtol=2e-2, atol=5e-2)
    assert torch.isnan(big_c[:, N:]).all()  # nothing written past C


@pytest.mark.gpu
def test_tutorial_matmul_k_zero_on_gpu():
    # K = 0: the tensor maps cannot be encoded (an extent 0); the loop runs no iteration
    # either way and C is zero.
    torch = torch_or_skip()
    a = torch.empty(256, 0, device="cuda", dtype=torch.float16)
    b = torch.empty(0, 128, device="cuda", dtype=torch.float16)
    c = torch.full((256, 128), float("nan"), device="cuda", dtype=torch.float16)
    run_tutorial(torch, a, b, c)
    assert (c == 0).all()


@pytest.mark.gpu
def test_tutorial_matmul_in_a_cuda_graph_on_gpu():
    # The launcher encodes the tensor maps at capture; replays read the captured inputs.
    torch = torch_or_skip()
    torch.manual_seed(2)
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 256, device="cuda", dtype=torch.float16)
    c = torch.zeros(256, 256, device="cuda", dtype=torch.float16)
    run_tutorial(torch, a, b, c)  # compile outside the capture
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s), torch.cuda.graph(g, stream=s):
        run_tutorial(torch, a, b, c)
    torch.cuda.current_stream().wait_stream(s)
    a.copy_(torch.randn_like(a))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), (a.float() @ b.float()).half().float(), rtol=2e-2,
                               atol=5e-2)


def test_knob_keeps_pointer_loads():
    with kiln.knobs.compilation.scope():
        kiln.knobs.compilation.tma_pointer_tiles = False
        k = kiln.compile(tutorial_mm, signature=SIG, constexprs=CONSTS, target="sm_90a",
                         num_warps=8, num_stages=3)
    assert "tensor_map_recipe" not in k.asm["kiln"]
    assert "cp.async.bulk.tensor" not in k.asm["ptx"]


@kiln.jit
def unmasked_mm(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, stride_cm, BM: tl.constexpr,
                BN: tl.constexpr, BK: tl.constexpr):
    # No masks anywhere (M, N, K multiples of the tiles): every dimension's extent is 2^31 - 1.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16))


def test_unmasked_matmul_takes_the_tma_on_sm90a():
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "K": "i32:16",
           "stride_am": "i32:16", "stride_bk": "i32:16", "stride_cm": "i32:16"}
    k = kiln.compile(unmasked_mm, signature=sig, constexprs={"BM": 128, "BN": 128, "BK": 64},
                     target="sm_90a", num_warps=8, num_stages=3)
    recipes = re.findall(r"kiln\.tensor_map_recipe = array<i64: ([-0-9, ]+)>", k.asm["kiln"])
    big = "-2147483648"
    assert recipes == [f"0, 104, 2, 128, 64, {big}, {big}, 4",
                       f"1, 104, 2, 64, 128, {big}, {big}, 5",
                       f"2, 104, 2, 128, 128, {big}, {big}, 6"], recipes
    assert "cp.async.bulk.tensor.2d.shared::cluster" in k.asm["ptx"]


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(256, 384, 512), (128, 128, 64)])
def test_unmasked_matmul_on_gpu(M, N, K):
    torch = torch_or_skip()
    torch.manual_seed(3)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    big_c = torch.full((M + 8, N), float("nan"), device="cuda", dtype=torch.float16)
    c = big_c[:M]
    unmasked_mm[(M // 128, N // 128)](a, b, c, K, a.stride(0), b.stride(0), c.stride(0),
                                      BM=128, BN=128, BK=64, num_warps=8, num_stages=3)
    torch.testing.assert_close(c.float(), (a.float() @ b.float()).half().float(), rtol=2e-2,
                               atol=5e-2)
    assert torch.isnan(big_c[M:]).all()  # nothing written past C's rows
