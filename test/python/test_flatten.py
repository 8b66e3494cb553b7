"""tl.range(..., flatten=True): Triton's persistent matmul (tutorial 09's pointer kernel) with
its tile loop and K loop fused into one loop by -kiln-flatten-loops, so that the cp.async
rings stream the next tile's operands in while this tile's last dots and its store run, and
wgmma's accumulator stays chained across tiles (scale-d = 0 at each tile's first dot). Checked
against numpy on the CPU (which runs the loops as written) and on the GPU with and without
flattening, including K = 0 (no inner iteration: the outer loop runs alone)."""
import numpy as np
import pytest

import kiln
import kiln.language as tl


@kiln.jit
def persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                      stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
                      FLATTEN: tl.constexpr):
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=FLATTEN):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_am = tl.where(offs_am < M, offs_am, 0)
        offs_bn = tl.where(offs_bn < N, offs_bn, 0)
        offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
        offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak,
                        mask=offs_k[None, :] < K, other=0.0)
            b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                        mask=offs_k[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        tl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn,
                 acc.to(c_ptr.dtype.element_ty),
                 mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


SIG = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", c_ptr="*fp16:16", M="i32:16", N="i32:16",
           K="i32:16", stride_am="i32:16", stride_bk="i32:16", stride_cm="i32:16")
CONSTS = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64,
              GROUP_M=8, NUM_SMS=132)


def test_flattened_loop_keeps_the_dots_chained_sm90a():
    """No GPU needed: flattened, the persistent kernel still copies with cp.async rings and
    leaves each wgmma running into the next iteration (wait_group 1), waiting for it to
    finish (wait_group 0) only in the epilogue branch and after the loop."""
    k = kiln.compile(persistent_matmul, signature=SIG, constexprs=dict(CONSTS, FLATTEN=True),
                     target="sm_90a", num_warps=8, num_stages=4)
    assert "kiln.flatten" in k.asm["kiln"]
    ptx = k.asm["ptx"]
    assert "cp.async.cg.shared.global" in ptx and "ld.global" not in ptx
    assert ptx.count("wgmma.wait_group.sync.aligned 1;") == 1
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == 2


def test_flatten_must_be_constexpr():
    @kiln.jit
    def bad(x_ptr, n, f):
        for i in tl.range(0, n, flatten=f):
            tl.store(x_ptr + i, i)

    with pytest.raises(Exception, match="constexpr bool for tl.range's flatten"):
        kiln.compile(bad, signature=dict(x_ptr="*i32", n="i32", f="i32"), target="sm_90a")


def _inputs(M, N, K, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K), dtype=np.float32).astype(dtype)
    b = rng.standard_normal((K, N), dtype=np.float32).astype(dtype)
    return a, b


def _launch(a, b, c, M, N, K, BM, BN, BK, sms, flatten, **launch):
    persistent_matmul[(sms,)](a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_M=BM, BLOCK_N=BN,
                              BLOCK_K=BK, GROUP_M=4, NUM_SMS=sms, FLATTEN=flatten, **launch)


def test_flattened_kernel_cpu():
    """The host path runs the loops as written (flatten is a GPU pipelining hint)."""
    M, N, K = 70, 40, 48
    a, b = _inputs(M, N, K, np.float16, 1)
    c = np.zeros((M, N), np.float16)
    _launch(a, b, c, M, N, K, 32, 16, 16, 3, True, device="cpu")
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2e-2, atol=2e-2)


# (M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, programs): several tiles per program with
# masked edges and a K tail; K shorter than a block; no K at all (the unflattened branch);
# 128 x 256 on 8 warps; more programs than tiles.
GPU_SHAPES = [(1000, 520, 328, 128, 128, 64, 4, 7), (256, 384, 40, 128, 128, 64, 4, 3),
              (300, 200, 0, 128, 128, 64, 4, 5), (512, 1024, 256, 128, 256, 64, 8, 5),
              (128, 128, 128, 64, 64, 32, 4, 9)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("flatten", [True, False])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("stages", [3, 4])
def test_persistent_matmul_gpu(shape, flatten, dtype, stages):
    import torch
    M, N, K, BM, BN, BK, warps, sms = shape
    tdt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = torch.randn(M, K, device="cuda", dtype=tdt, generator=gen)
    b = torch.randn(K, N, device="cuda", dtype=tdt, generator=gen)
    c = torch.full((M, N), -7.0, device="cuda", dtype=tdt)
    _launch(a, b, c, M, N, K, BM, BN, BK, sms, flatten, num_warps=warps, num_stages=stages)
    ref = a.float() @ b.float()
    if K == 0:
        assert torch.count_nonzero(c).item() == 0
        return
    err = ((c.float() - ref).norm() / ref.norm()).item()
    assert err < (2e-3 if dtype == "float16" else 1e-2), err
