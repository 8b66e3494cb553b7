"""Flash attention backward (kernels/python/kiln_kernels/flash_attention_bwd.py) and the
autograd wrapper (flash_attention.attention with inputs that require grad).

- CPU backend (numpy arrays; fp16 and bf16 through ml_dtypes): dq, dk, dv against float64
  numpy gradients of the same rounded inputs, from the kernel's own forward output and
  logsumexp; head dims 64 and 128, causal and not, sequence lengths that are multiples of the
  tiles and not (debug mode: every load and store bounds-checked), (B, S, H, D)-strided
  arrays, a non-default scale, grouped-query attention (4 query heads over 2 and over 1).
  Small tiles (16/32): the host compile of a dot grows fast.
- compile-only: the GPU tiles compile to PTX for sm_90a.
- argument errors.
- GPU (marker `gpu`): against torch autograd through scaled_dot_product_attention, fp16 and
  bf16, D = 64 / 128, causal and not, S = 1024 / 1000 / 128; D = 16, 32 and 256 at S = 320;
  grouped-query attention (8 query heads over 2); and a training step through `attention`
  (torch.autograd).
"""
import math
import os
import sys

import numpy as np
import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))

from kiln_kernels import flash_attention as fa  # noqa: E402
from kiln_kernels import flash_attention_bwd as fab  # noqa: E402
from cuda_torch import torch_or_skip  # noqa: E402

CPU = dict(device="cpu")
# max |grad - ref| / max |ref| per gradient: dS and P are rounded to the input dtype before
# their products (fp16 2^-11, bf16 2^-8), as in the forward.
RTOL = {"float16": 1e-2, "bfloat16": 4e-2}


def np_dtype(name):
    if name == "bfloat16":
        return pytest.importorskip("ml_dtypes").bfloat16
    return np.dtype(name)


def reference_grads(q, k, v, do, causal, sm_scale):
    """float64 (dq, dk, dv) of softmax(q k^T * sm_scale) v for the output gradient do."""
    q, k, v, do = (np.asarray(x).astype(np.float64) for x in (q, k, v, do))
    s = q @ k.transpose(0, 1, 3, 2) * sm_scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    dv = p.transpose(0, 1, 3, 2) @ do
    dp = do @ v.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return ds @ k * sm_scale, ds.transpose(0, 1, 3, 2) @ q * sm_scale, dv


def arrays(shape, dtype, layout, rng, n):
    B, H, S, D = shape
    full = (B, S, H, D) if layout == "bshd" else shape
    out = []
    for _ in range(n):
        x = rng.standard_normal(full, dtype=np.float32).astype(np_dtype(dtype))
        out.append(x.transpose(0, 2, 1, 3) if layout == "bshd" else x)
    return out


def empty_like(x, layout):
    if layout == "bshd":
        B, H, S, D = x.shape
        return np.full((B, S, H, D), np.nan, dtype=x.dtype).transpose(0, 2, 1, 3)
    return np.full(x.shape, np.nan, dtype=x.dtype)


def run_cpu(shape, dtype, causal, sm_scale=None, layout="bhsd", **kw):
    rng = np.random.default_rng(0)
    q, k, v, do = arrays(shape, dtype, layout, rng, 4)
    B, H, S, D = shape
    scale = sm_scale or 1.0 / math.sqrt(D)
    out = empty_like(q, layout)
    lse = np.full((B, H, S), np.nan, dtype=np.float32)
    fa.attention_forward(q, k, v, out, lse, causal=causal, sm_scale=sm_scale, **CPU, **kw)
    dq, dk, dv = (empty_like(q, layout) for _ in range(3))
    delta = np.full((B, H, S), np.nan, dtype=np.float32)
    fab.attention_backward(q, k, v, out, do, lse, dq, dk, dv, causal=causal, sm_scale=sm_scale,
                           delta=delta, **CPU, **kw)
    refs = reference_grads(q, k, v, do, causal, scale)
    for name, got, ref in zip(("dq", "dk", "dv"), (dq, dk, dv), refs):
        assert got.dtype == q.dtype
        err = np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max()
        assert err < RTOL[dtype], f"{name}: max |grad - ref| / max |ref| = {err:.3g}"


# ---------------------------------------------------------------- CPU backend

@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
def test_attention_bwd_cpu_fp16(D, causal):
    run_cpu((1, 2, 64, D), "float16", causal)


def test_attention_bwd_cpu_bf16_causal():
    run_cpu((1, 2, 64, 64), "bfloat16", True)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_bwd_cpu_tail(causal):
    # 50 rows: neither a multiple of the 32-key nor of the 32-query tiles. Debug mode: every
    # unmasked load and store is checked against the arrays' bounds.
    run_cpu((2, 1, 50, 64), "float16", causal, debug=True)


@pytest.mark.parametrize("h_kv", [2, 1])
def test_attention_bwd_cpu_gqa(h_kv):
    # Grouped-query attention: 4 query heads over 2 (or 1) key/value heads. The reference
    # repeats each key/value head for its query heads and sums their gradients back.
    rng = np.random.default_rng(1)
    B, H, S, D = 1, 4, 48, 64
    q, do = arrays((B, H, S, D), "float16", "bhsd", rng, 2)
    k, v = arrays((B, h_kv, S, D), "float16", "bhsd", rng, 2)
    out = np.full(q.shape, np.nan, dtype=q.dtype)
    lse = np.full((B, H, S), np.nan, dtype=np.float32)
    fa.attention_forward(q, k, v, out, lse, causal=True, **CPU)
    dq = np.full(q.shape, np.nan, dtype=q.dtype)
    dk, dv = (np.full(k.shape, np.nan, dtype=k.dtype) for _ in range(2))
    fab.attention_backward(q, k, v, out, do, lse, dq, dk, dv, causal=True,
                           delta=np.zeros((B, H, S), np.float32), debug=True, **CPU)
    rep = H // h_kv
    kr, vr = (np.repeat(x, rep, axis=1) for x in (k, v))
    ref_q, ref_k, ref_v = reference_grads(q, kr, vr, do, True, 1.0 / math.sqrt(D))
    ref_k = ref_k.reshape(B, h_kv, rep, S, D).sum(axis=2)
    ref_v = ref_v.reshape(B, h_kv, rep, S, D).sum(axis=2)
    for name, got, ref in (("dq", dq, ref_q), ("dk", dk, ref_k), ("dv", dv, ref_v)):
        err = np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max()
        assert err < RTOL["float16"], f"{name}: {err:.3g}"


def test_attention_bwd_cpu_strided_and_scale():
    run_cpu((1, 2, 64, 64), "float16", True, sm_scale=0.3, layout="bshd")


def test_attention_bwd_errors():
    q = np.zeros((1, 1, 16, 64), dtype=np.float16)
    lse = np.zeros((1, 1, 16), dtype=np.float32)
    with pytest.raises(ValueError, match="dk and dv of k's shape"):
        fab.attention_backward(q, q, q, q, q, lse, q, q, np.zeros((1, 1, 8, 64), np.float16),
                               **CPU)
    q3, k2 = (np.zeros((1, h, 16, 64), dtype=np.float16) for h in (3, 2))
    with pytest.raises(ValueError, match="H a multiple of H_KV"):
        fab.attention_backward(q3, k2, k2, q3, q3, np.zeros((1, 3, 16), np.float32), q3, k2, k2,
                               **CPU)
    with pytest.raises(ValueError, match="lse of shape"):
        fab.attention_backward(q, q, q, q, q, lse[:, :, :8], q, q, q, **CPU)
    with pytest.raises(ValueError, match="sm_scale"):
        fab.attention_backward(q, q, q, q, q, lse, q, q, q, sm_scale=-1.0, **CPU)
    with pytest.raises(ValueError, match="multiple"):
        fab.attention_backward(q, q, q, q, q, lse, q, q, q, tiles=((32, 16), (32, 16)), **CPU)
    with pytest.raises(ValueError, match="delta"):
        fab.attention_backward(q, q, q, q, q, lse, q, q, q, **CPU)


# ---------------------------------------------------------------- compile only

@pytest.mark.parametrize("D,causal", [(128, False), (64, True)])
def test_bwd_compiles_to_ptx(D, causal):
    (m1, n1), (m2, n2), nw, ns = fab.bwd_tile_config(D)
    ptr = "*fp16:16"
    common = dict(Q=ptr, K=ptr, V=ptr, DO=ptr, LSE="*fp32:16", Delta="*fp32:16",
                  sm_scale="fp32", H="i32", N_CTX="i32:16")
    for kernel, extra, tiles in ((fab._attn_bwd_dkdv, dict(DK=ptr, DV=ptr), (m1, n1)),
                                 (fab._attn_bwd_dq, dict(DQ=ptr), (m2, n2))):
        names = kernel.info.arg_names
        sig = {n: t for n, t in {**common, **extra}.items() if n in names}
        consts = dict(HEAD_DIM=D, BLOCK_M=tiles[0], BLOCK_N=tiles[1], CAUSAL=causal,
                      BOUNDS=False)
        for n in names:
            if n.startswith("stride_"):
                if n.endswith("k"):
                    consts[n] = 1
                else:
                    sig[n] = "i32:16"
        k = kiln.compile(kernel, signature=sig, constexprs=consts, target="sm_90a",
                         num_warps=nw, num_stages=ns)
        ptx = k.asm["ptx"]
        assert "wgmma.mma_async" in ptx, kernel.info.name


# ---------------------------------------------------------------- GPU


def check_grads(got, want, rtol):
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        err = ((g.double() - w.double()).abs().max() / w.double().abs().max()).item()
        assert err < rtol, f"{name}: max |grad - ref| / max |ref| = {err:.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("S", [1024, 1000, 128])
def test_attention_bwd_gpu(S, D, causal, dtype):
    torch = torch_or_skip()
    F = torch.nn.functional
    t = getattr(torch, dtype)
    torch.manual_seed(0)
    B, H = 2, 3
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=t, requires_grad=True)
               for _ in range(3))
    do = torch.randn(B, H, S, D, device="cuda", dtype=t)
    out = fa.attention(q, k, v, causal=causal)
    out.backward(do)
    # reference: fp32 SDPA (math) on the same rounded inputs
    qr, kr, vr = (x.detach().float().requires_grad_() for x in (q, k, v))
    ref = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
    ref.backward(do.float())
    assert (out.double() - ref.double()).abs().max().item() < 3e-2
    check_grads((q.grad, k.grad, v.grad), (qr.grad, kr.grad, vr.grad), RTOL[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [16, 32, 256])
def test_attention_bwd_gpu_head_dims(D, causal):
    # The other head dimensions (D = 256 on its own, smaller tiles).
    torch = torch_or_skip()
    F = torch.nn.functional
    torch.manual_seed(4)
    q, k, v = (torch.randn(1, 2, 320, D, device="cuda", dtype=torch.float16,
                           requires_grad=True) for _ in range(3))
    do = torch.randn(1, 2, 320, D, device="cuda", dtype=torch.float16)
    fa.attention(q, k, v, causal=causal).backward(do)
    qr, kr, vr = (x.detach().float().requires_grad_() for x in (q, k, v))
    F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal).backward(do.float())
    check_grads((q.grad, k.grad, v.grad), (qr.grad, kr.grad, vr.grad), RTOL["float16"])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D,S", [(128, 1024), (64, 1000)])
def test_attention_gqa_gpu(D, S, causal, dtype):
    # Grouped-query attention (8 query heads over 2 key/value heads, as Llama's 4:1), forward
    # and backward, against fp32 SDPA on the key/value heads repeated for their query heads.
    torch = torch_or_skip()
    F = torch.nn.functional
    t = getattr(torch, dtype)
    torch.manual_seed(5)
    B, H, H_KV = 2, 8, 2
    q = torch.randn(B, H, S, D, device="cuda", dtype=t, requires_grad=True)
    k, v = (torch.randn(B, H_KV, S, D, device="cuda", dtype=t, requires_grad=True)
            for _ in range(2))
    do = torch.randn(B, H, S, D, device="cuda", dtype=t)
    out = fa.attention(q, k, v, causal=causal)
    out.backward(do)
    qr, kr, vr = (x.detach().float().requires_grad_() for x in (q, k, v))
    ref = F.scaled_dot_product_attention(qr, kr.repeat_interleave(H // H_KV, dim=1),
                                         vr.repeat_interleave(H // H_KV, dim=1),
                                         is_causal=causal)
    ref.backward(do.float())
    assert k.grad.shape == k.shape
    assert (out.double() - ref.double()).abs().max().item() < 3e-2
    check_grads((q.grad, k.grad, v.grad), (qr.grad, kr.grad, vr.grad), RTOL[dtype])


@pytest.mark.gpu
def test_attention_bwd_gpu_strided_and_scale():
    torch = torch_or_skip()
    F = torch.nn.functional
    torch.manual_seed(1)
    B, S, H, D = 2, 512, 4, 128
    base = [torch.randn(B, S, H, D, device="cuda", dtype=torch.float16, requires_grad=True)
            for _ in range(3)]
    q, k, v = (x.transpose(1, 2) for x in base)
    do = torch.randn(B, S, H, D, device="cuda", dtype=torch.float16).transpose(1, 2)
    out = fa.attention(q, k, v, causal=True, sm_scale=0.05)
    out.backward(do)
    refs = [x.detach().float().requires_grad_() for x in base]
    ref = F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in refs), is_causal=True,
                                         scale=0.05)
    ref.backward(do.float())
    check_grads([x.grad for x in base], [x.grad for x in refs], RTOL["float16"])


@pytest.mark.gpu
def test_attention_training_step_gpu():
    # A few optimizer steps of a one-layer attention block through Kiln's forward and
    # backward track the same steps through SDPA.
    torch = torch_or_skip()
    F = torch.nn.functional
    torch.manual_seed(2)
    B, H, S, D = 2, 4, 256, 64
    x = torch.randn(B, S, H * D, device="cuda", dtype=torch.bfloat16)
    target = torch.randn(B, S, H * D, device="cuda", dtype=torch.float32)
    losses = {}
    for which in ("kiln", "sdpa"):
        torch.manual_seed(3)
        w = torch.nn.Linear(H * D, 3 * H * D, bias=False, device="cuda", dtype=torch.bfloat16)
        opt = torch.optim.SGD(w.parameters(), lr=0.1)
        for _ in range(3):
            q, k, v = w(x).view(B, S, 3, H, D).permute(2, 0, 3, 1, 4)
            if which == "kiln":
                o = fa.attention(q, k, v, causal=True)
            else:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            loss = (o.transpose(1, 2).reshape(B, S, H * D).float() - target).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses[which] = loss.item()
    assert abs(losses["kiln"] - losses["sdpa"]) < 1e-2 * abs(losses["sdpa"]), losses
