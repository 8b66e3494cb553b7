"""kernels/python/kiln_kernels/matmul.py: act(A @ B + bias) through tensor descriptors (the
TMA on sm_90a) or pointers.

CPU backend: both kernels against numpy, shapes that are not multiples of the tiles, each
activation, with and without bias; the sm_90a PTX of the descriptor kernel (TMA copies, TMA
stores, wgmma). GPU (marker `gpu`): `matmul` against torch for fp16 and bf16, aligned and
unaligned shapes (the latter take the pointer kernel), a transposed B view, every activation;
errors are ||out - ref|| / ||ref|| against fp64: fp16 < 5e-4 (bf16 < 2e-3) as issue 6 asks.
"""
import os
import sys

import numpy as np
import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))

from kiln_kernels import matmul as mm  # noqa: E402


def reference(a, b, bias, activation):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if bias is not None:
        ref = ref + bias.astype(np.float64)
    if activation == "relu":
        ref = np.maximum(ref, 0.0)
    elif activation == "gelu":
        ref = 0.5 * ref * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (ref + 0.044715 * ref ** 3)))
    elif activation == "silu":
        ref = ref / (1.0 + np.exp(-ref))
    return ref


def relerr(out, ref):
    return np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref)


# (M, N, K, descriptors): tiles of 32 x 32 x 16 over edges on every side; rows of A of 20
# elements (40 bytes) do not meet the descriptor rules, so that case takes pointers.
@pytest.mark.parametrize("shape", [(64, 48, 40, True), (50, 64, 32, True), (70, 33, 20, False)],
                         ids=lambda s: "x".join(map(str, s[:3])) + ("-desc" if s[3] else "-ptr"))
@pytest.mark.parametrize("activation", list(mm.ACTIVATIONS))
def test_matmul_kernels_cpu(shape, activation):
    M, N, K, descriptors = shape
    rng = np.random.default_rng(M * N + K)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    bias = rng.standard_normal(N).astype(np.float32) if activation != "relu" else None
    c = np.full((M, N), np.nan, np.float16)
    bm, bn, bk = 32, 32, 16
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=2, HAS_BIAS=bias is not None,
                ACTIVATION=activation or "", device="cpu")
    grid = (-(-M // bm) * -(-N // bn),)
    bias_arg = bias if bias is not None else c
    if descriptors:
        desc = kiln.TensorDescriptor.from_tensor
        mm.matmul_tma_kernel[grid](desc(a, [bm, bk]), desc(b, [bk, bn]), desc(c, [bm, bn]),
                                   bias_arg, M, N, K, **meta)
    else:
        mm.matmul_kernel[grid](a, b, c, bias_arg, M, N, K, K, 1, N, 1, N, 1, **meta)
    assert relerr(c, reference(a, b, bias, activation)) < 5e-4


def test_descriptor_kernel_takes_the_tma_on_sm90a():
    sig = {"a_desc": "tensordesc<bf16[128, 64]>", "b_desc": "tensordesc<bf16[64, 256]>",
           "c_desc": "tensordesc<bf16[128, 256]>", "bias_ptr": "*fp32", "M": "i32", "N": "i32",
           "K": "i32"}
    k = kiln.compile(mm.matmul_tma_kernel, signature=sig,
                     constexprs={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8,
                                 "HAS_BIAS": True, "ACTIVATION": "gelu"},
                     target="sm_90a", num_warps=8, num_stages=4)
    ptx = k.asm["ptx"]
    # Three stages ahead, each one A box and four B strips of 64 columns; C in 4 TMA stores.
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == 15
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 4
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in ptx
    assert "ex2.approx" in ptx  # the activation
    assert k.metadata.tma_box_rows[0] == 128


def test_config_for():
    assert mm.config_for(8192, 8192, 8192) == (128, 256, 64, 8, 4)
    assert mm.config_for(512, 512, 512) == (128, 128, 64, 4, 4)


# ---------------------------------------------------------------- GPU, against torch

def _torch():
    return pytest.importorskip("torch")


GPU_SHAPES = [(512, 384, 256), (1000, 520, 328), (129, 257, 65), (4096, 4096, 512)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("activation", list(mm.ACTIVATIONS))
def test_matmul_gpu(shape, dtype, activation):
    torch = _torch()
    M, N, K = shape
    dt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = torch.randn(M, K, device="cuda", dtype=dt, generator=g)
    b = torch.randn(K, N, device="cuda", dtype=dt, generator=g)
    bias = torch.randn(N, device="cuda", dtype=torch.float32, generator=g)
    out = mm.matmul(a, b, bias=bias, activation=activation)
    assert out.dtype == dt and tuple(out.shape) == (M, N)
    ref = reference(a.float().cpu().numpy(), b.float().cpu().numpy(), bias.cpu().numpy(),
                    activation)
    tol = 5e-4 if dtype == "float16" else 2e-3
    assert relerr(out.float().cpu().numpy(), ref) < tol


@pytest.mark.gpu
def test_matmul_transposed_b_and_out_gpu():
    torch = _torch()
    a = torch.randn(300, 200, device="cuda", dtype=torch.float16)
    bt = torch.randn(136, 200, device="cuda", dtype=torch.float16)
    out = torch.empty(300, 136, device="cuda", dtype=torch.float16)
    res = mm.matmul(a, bt.t(), out=out)  # b's last dimension is not contiguous: pointers
    assert res is out
    ref = reference(a.float().cpu().numpy(), bt.t().float().cpu().numpy(), None, None)
    assert relerr(out.float().cpu().numpy(), ref) < 5e-4


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(512, 384, 256), (1000, 520, 328), (4096, 4096, 512)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("order", ["row", "col"])
@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_matmul_fp8_gpu(shape, dtype, order, out_dtype):
    # fp8 operands (B row-major, or column-major: b.t() of a contiguous [N, K]), fp32
    # accumulation, bias and gelu fused; against the same fp8 values multiplied in fp32.
    # Hopper's fp8 wgmma accumulates with fewer bits than fp32 (test_fp8.py: 1-3e-4).
    torch = _torch()
    M, N, K = shape
    dt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(M + 2 * N + K)
    a = torch.randn(M, K, device="cuda", generator=g).to(dt)
    b = (torch.randn(K, N, device="cuda", generator=g) if order == "row"
         else torch.randn(N, K, device="cuda", generator=g).t()).to(dt)
    bias = torch.randn(N, device="cuda", dtype=torch.float32, generator=g)
    out = mm.matmul(a, b, bias=bias, activation="gelu", out_dtype=getattr(torch, out_dtype))
    assert out.dtype == getattr(torch, out_dtype) and tuple(out.shape) == (M, N)
    ref = reference(a.float().cpu().numpy(), b.float().cpu().numpy(), bias.cpu().numpy(),
                    "gelu")
    assert relerr(out.float().cpu().numpy(), ref) < (2e-3 if out_dtype == "float16" else 1e-3)


@pytest.mark.gpu
def test_matmul_fp8_default_out_gpu():
    torch = _torch()
    a = torch.randn(256, 128, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(128, 64, device="cuda").to(torch.float8_e4m3fn)
    out = mm.matmul(a, b)
    assert out.dtype == torch.float16
    ref = reference(a.float().cpu().numpy(), b.float().cpu().numpy(), None, None)
    assert relerr(out.float().cpu().numpy(), ref) < 2e-3


@pytest.mark.gpu
def test_matmul_errors_gpu():
    torch = _torch()
    a = torch.randn(64, 32, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"expected a \[M, K\] and b \[K, N\]"):
        mm.matmul(a, torch.randn(16, 8, device="cuda", dtype=torch.float16))
    with pytest.raises(TypeError, match="both float16, both bfloat16, both float8_e4m3fn"):
        mm.matmul(a, torch.randn(32, 8, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="both float16, both bfloat16, both float8_e4m3fn"):
        mm.matmul(a.float(), torch.randn(32, 8, device="cuda"))
    with pytest.raises(TypeError, match="expected out_dtype float16, bfloat16 or float32"):
        mm.matmul(a, torch.randn(32, 8, device="cuda", dtype=torch.float16),
                  out_dtype=torch.int32)
    with pytest.raises(ValueError, match="expected activation in"):
        mm.matmul(a, torch.randn(32, 8, device="cuda", dtype=torch.float16), activation="tanh")
    with pytest.raises(ValueError, match=r"expected a bias of shape \[8\]"):
        mm.matmul(a, torch.randn(32, 8, device="cuda", dtype=torch.float16),
                  bias=torch.randn(9, device="cuda"))
