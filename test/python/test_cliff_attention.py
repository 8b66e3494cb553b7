"""bench/cliff_sources_attention.py (issue #23's attention in the style of Triton's tutorial 06,
run by bench/cliffs_attention.py under Kiln and Triton) on Kiln's CPU backend against float64
numpy: the forward (O and the base-2 logsumexp M) and the backward (preprocess, then dK/dV
and dQ in one kernel), causal and not, at tiny shapes and small tiles (the host compile of a
dot grows fast with the tile). The speed side is bench/cliffs_attention.py's."""
import math
import os
import sys

import numpy as np
import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench"))
import cliff_sources_attention as ca  # noqa: E402

CPU = dict(device="cpu")
LOG2E = 1.0 / math.log(2.0)


def inputs(shape, seed, n):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape, dtype=np.float32).astype(np.float16) for _ in range(n)]


def reference(q, k, v, do, causal, sm_scale):
    """float64 O, M (base-2 logsumexp of the scaled scores), dQ, dK, dV."""
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    s = q @ k.transpose(0, 1, 3, 2) * sm_scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    e = np.exp(s - mx)
    den = e.sum(axis=-1, keepdims=True)
    p = e / den
    o = p @ v
    lse2 = ((mx + np.log(den)) * LOG2E)[..., 0]
    dv = p.transpose(0, 1, 3, 2) @ do
    dp = do @ v.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return o, lse2, ds @ k * sm_scale, ds.transpose(0, 1, 3, 2) @ q * sm_scale, dv


def strides(x):  # numpy strides are in bytes; kernels take elements
    return [s // x.itemsize for s in x.strides]


def relmax(got, want):
    return np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D,BLOCK_M,BLOCK_N", [(64, 32, 16), (32, 32, 32)])
def test_forward(D, BLOCK_M, BLOCK_N, causal):
    B, H, S = 1, 2, 128
    q, k, v = inputs((B, H, S, D), D + causal, 3)
    sm_scale = 1.0 / math.sqrt(D)
    o = np.full(q.shape, np.nan, np.float16)
    m = np.full((B, H, S), np.nan, np.float32)
    ca.attn_fwd[(S // BLOCK_M, B * H)](q, k, v, sm_scale, m, o,
                                       *strides(q), *strides(k), *strides(v), *strides(o),
                                       H, S, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                       STAGE=3 if causal else 1, **CPU)
    ref_o, ref_m = reference(q, k, v, q, causal, sm_scale)[:2]
    assert relmax(o, ref_o) < 1e-2
    np.testing.assert_allclose(m, ref_m, rtol=0, atol=2e-3)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_forward_fa2_style(causal):
    # FlashAttention-2's Triton style: K's and V's pointers from the loop's start_n (the loop
    # variable rebound by tl.multiple_of), K transposed in the dot, causal by a mask.
    B, H, S, D = 1, 2, 64, 32
    q, k, v = inputs((B, H, S, D), 5 + causal, 3)
    o = np.full(q.shape, np.nan, np.float16)
    ca.attn_fwd_fa2[(S // 32, B * H)](q, k, v, 0.2, o, *strides(q)[:3], H, S, HEAD_DIM=D,
                                      BLOCK_M=32, BLOCK_N=16, CAUSAL=causal, **CPU)
    assert relmax(o, reference(q, k, v, q, causal, 0.2)[0]) < 1e-2


def test_forward_strided_heads():
    # (B, S, H, D) storage seen as (B, H, S, D): every stride of the kernels is used
    B, H, S, D = 2, 2, 64, 32
    q, k, v = (x.transpose(0, 2, 1, 3) for x in inputs((B, S, H, D), 5, 3))
    sm_scale = 0.3
    o = np.full((B, S, H, D), np.nan, np.float16).transpose(0, 2, 1, 3)
    m = np.full((B, H, S), np.nan, np.float32)
    ca.attn_fwd[(S // 32, B * H)](q, k, v, sm_scale, m, o,
                                  *strides(q), *strides(k), *strides(v), *strides(o),
                                  H, S, HEAD_DIM=D, BLOCK_M=32, BLOCK_N=16, STAGE=3, **CPU)
    ref_o, ref_m = reference(q, k, v, q, True, sm_scale)[:2]
    assert relmax(o, ref_o) < 1e-2
    np.testing.assert_allclose(m, ref_m, rtol=0, atol=2e-3)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_forward_descriptors(causal):
    # attn_fwd_desc: q, k, v, o as (B * H * S, D) matrices through host descriptors
    B, H, S, D, BM, BN = 1, 2, 128, 32, 32, 16
    q, k, v = inputs((B, H, S, D), 11 + causal, 3)
    sm_scale = 1.0 / math.sqrt(D)
    o = np.full(q.shape, np.nan, np.float16)
    m = np.full((B, H, S), np.nan, np.float32)
    rows = B * H * S
    desc = [kiln.TensorDescriptor(x.reshape(rows, D), shape=[rows, D], strides=[D, 1],
                                  block_shape=[b, D]) for x, b in ((q, BM), (k, BN), (v, BN))]
    desc_o = kiln.TensorDescriptor(o.reshape(rows, D), shape=[rows, D], strides=[D, 1],
                                   block_shape=[BM, D])
    ca.attn_fwd_desc[(S // BM, B * H)](*desc, sm_scale, m, desc_o, H, S, HEAD_DIM=D,
                                       BLOCK_M=BM, BLOCK_N=BN, STAGE=3 if causal else 1,
                                       **CPU)
    ref_o, ref_m = reference(q, k, v, q, causal, sm_scale)[:2]
    assert relmax(o, ref_o) < 1e-2
    np.testing.assert_allclose(m, ref_m, rtol=0, atol=2e-3)


BWD_TILES = {  # (BLOCK_M1, BLOCK_N1, BLOCK_M2, BLOCK_N2, BLK_SLICE_FACTOR)
    "slice2": (32, 64, 64, 32, 2),
    "slice1": (16, 32, 32, 16, 1),
}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D,tiles", [(32, "slice2"), (64, "slice1")])
def test_backward(D, tiles, causal):
    B, H, S = 1, 2, 128
    M1, N1, M2, N2, slice_factor = BWD_TILES[tiles]
    q, k, v, do = inputs((B, H, S, D), 7 + D + causal, 4)
    sm_scale = 1.0 / math.sqrt(D)
    o = np.full(q.shape, np.nan, np.float16)
    m = np.full((B, H, S), np.nan, np.float32)
    ca.attn_fwd[(S // 32, B * H)](q, k, v, sm_scale, m, o,
                                  *strides(q), *strides(k), *strides(v), *strides(o),
                                  H, S, HEAD_DIM=D, BLOCK_M=32, BLOCK_N=16,
                                  STAGE=3 if causal else 1, **CPU)
    delta = np.full((B, H, S), np.nan, np.float32)
    ca.attn_bwd_preprocess[(S // 32, B * H)](o, do, delta, *strides(o), H, S, BLOCK_M=32,
                                             HEAD_DIM=D, **CPU)
    np.testing.assert_allclose(
        delta, (o.astype(np.float64) * do.astype(np.float64)).sum(-1), rtol=1e-4, atol=1e-3)
    dq, dk, dv = (np.full(q.shape, np.nan, np.float16) for _ in range(3))
    ca.attn_bwd[(S // N1, B * H)](q, k, v, sm_scale, do, dq, dk, dv, m, delta, *strides(q),
                                  H, S, BLOCK_M1=M1, BLOCK_N1=N1, BLOCK_M2=M2, BLOCK_N2=N2,
                                  BLK_SLICE_FACTOR=slice_factor, HEAD_DIM=D, CAUSAL=causal,
                                  **CPU)
    ref = reference(q, k, v, do, causal, sm_scale)[2:]
    for name, got, want in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
        err = relmax(got, want)
        assert err < 1e-2, f"{name}: max |grad - ref| / max |ref| = {err:.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_tutorial_attention_on_the_gpu(D, causal):
    # The bench's launchers at its own tiles, Kiln on the GPU against torch's SDPA (fp16): the
    # backward's loads read by two dots each (qT and dO, K^T) go through rings of their own.
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    import cliffs_attention as bench
    F = torch.nn.functional
    B, H, S = 1, 2, 512
    torch.manual_seed(D + causal)
    q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(4))
    qr, kr, vr = (x.clone().requires_grad_() for x in (q, k, v))
    ref = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
    grads = torch.autograd.grad(ref, (qr, kr, vr), do)
    o = torch.full_like(q, float("nan"))
    m = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
    for cfg in bench.FWD_CONFIGS:  # through descriptors: K, V by the TMA, q copied once
        bench.fwd_desc_launcher(ca, kiln.TensorDescriptor, q, k, v, o, m, causal, cfg)()
        torch.cuda.synchronize()
        err = ((o.double() - ref.double()).norm() / ref.double().norm()).item()
        assert err < 5e-3, (cfg, err)
        o.fill_(float("nan"))
    for cfg in bench.FWD_CONFIGS:  # FlashAttention-2's style
        bench.fwd_fa2_launcher(ca, q, k, v, o, causal, cfg)()
        torch.cuda.synchronize()
        err = ((o.double() - ref.double()).norm() / ref.double().norm()).item()
        assert err < 5e-3, (cfg, err)
        o.fill_(float("nan"))
    bench.fwd_launcher(ca, q, k, v, o, m, causal, bench.FWD_CONFIGS[0])()
    dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
    delta = torch.empty((B, H, S), device="cuda", dtype=torch.float32)
    for cfg in bench.BWD_CONFIGS:
        bench.bwd_launcher(ca, q, k, v, o, m, do, dq, dk, dv, delta, causal, cfg)()
        torch.cuda.synchronize()
        for got, want in ((o, ref), (dq, grads[0]), (dk, grads[1]), (dv, grads[2])):
            err = ((got.double() - want.double()).norm() / want.double().norm()).item()
            assert err < 5e-3, (cfg, err)
