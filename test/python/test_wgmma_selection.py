"""Which dots take Hopper's wgmma on sm_90a, beyond the shapes of Kiln's own kernels: the
formulations others write (issue #23's generality). No GPU needed for the PTX checks; the
`gpu` tests run the same kernels on the device against numpy."""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from cuda_torch import torch_or_skip


def dot_kinds(ptx):
    return sorted(set(re.findall(r"(?:wgmma\.mma_async|mma\.sync)[.\w]*", ptx)))


@kiln.jit
def prefill_scores_kernel(Q, K, Out, n, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    """lightllm's prefill attention's first dot as it writes it: Q loaded once, K^T by pointer
    arithmetic a key block at a time (num_stages=1 at its default launch)."""
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])
    acc = tl.zeros((BM, BN), tl.float32)
    for i in range(0, n, BN):
        kt = tl.load(K + (i + offs_n[None, :]) * D + offs_d[:, None])
        acc += tl.dot(q, kt)
    tl.store(Out + offs_m[:, None] * BN + offs_n[None, :], acc)


@kiln.jit
def one_dot_kernel(A, B, C, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """One dot outside any loop: both operands staged once."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(A + rm[:, None] * K + rk[None, :])
    b = tl.load(B + rk[:, None] * N + rn[None, :])
    tl.store(C + rm[:, None] * N + rn[None, :], tl.dot(a, b))


PREFILL_SIG = dict(Q="*fp16:16", K="*fp16:16", Out="*fp32:16", n="i32")


@pytest.mark.parametrize("D,stages", [(128, 1), (128, 3), (64, 1)])
def test_operands_past_48_kib_take_wgmma(D, stages):
    """A 128x128 tile with K = 128 has 64 KiB of operands. Staged outside the rings
    (num_stages=1) they went to mma.sync, 230 registers and a 68 KiB scratch; they take wgmma
    like Triton, the invariant Q stored once."""
    k = kiln.compile(prefill_scores_kernel, signature=PREFILL_SIG,
                     constexprs=dict(BM=128, BN=128, D=D), target="sm_90a", num_warps=8,
                     num_stages=stages)
    assert dot_kinds(k.asm["ptx"]) == ["wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"]
    assert k.metadata.shared <= 128 * 1024


def test_one_dot_outside_a_loop_takes_wgmma():
    sig = dict(A="*bf16:16", B="*bf16:16", C="*fp32:16")
    ptx = kiln.compile(one_dot_kernel, signature=sig, constexprs=dict(M=128, N=256, K=128),
                       target="sm_90a", num_warps=8).asm["ptx"]
    assert dot_kinds(ptx) == ["wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"]


@pytest.mark.gpu
@pytest.mark.parametrize("D,stages", [(128, 1), (128, 3), (64, 1)])
def test_prefill_scores_gpu(D, stages):
    torch = torch_or_skip()
    rng = np.random.default_rng(D + stages)
    n, BM, BN = 512, 128, 128
    q = rng.standard_normal((BM, D)).astype(np.float16)
    kk = rng.standard_normal((n, D)).astype(np.float16)
    out = torch.full((BM, BN), float("nan"), device="cuda")
    prefill_scores_kernel[(1,)](torch.from_numpy(q).cuda(), torch.from_numpy(kk).cuda(), out,
                                n, BM=BM, BN=BN, D=D, num_warps=8, num_stages=stages)
    want = sum(q.astype(np.float64) @ kk[i:i + BN].astype(np.float64).T
               for i in range(0, n, BN))
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_one_dot_gpu():
    torch = torch_or_skip()
    a = torch.randn(128, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(128, 256, device="cuda")
    one_dot_kernel[(1,)](a, b, c, M=128, N=256, K=128, num_warps=8)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-2)
