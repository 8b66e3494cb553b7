"""kiln_models attention kernels on the GPU, continued from test_models_attention.py (whose cases,
references and helpers this file imports): prefill, decode, its tiles and RoPE on torch CUDA
tensors against SDPA (marked `gpu`: skipped without one)."""

import math

import numpy as np
import pytest

import kiln
from cuda_torch import torch_or_skip
from test_models_attention import ATOL, Case, att, check, f64, rope_reference, rope_tables

# ---------------------------------------------------------------- GPU: torch CUDA tensors


def to_cuda(case, dtype):
    """The arrays of a float32 Case as CUDA tensors, activations in `dtype`."""
    torch = torch_or_skip()
    t = getattr(torch, dtype)
    dev = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to("cuda")  # noqa: E731
    return dict(qkv=dev(case.qkv).to(t), k_cache=dev(case.k_cache).to(t),
                v_cache=dev(case.v_cache).to(t), cu_seqlens=dev(case.cu),
                block_tables=dev(case.tables), context_lens=dev(case.context_lens))


def sdpa_reference(case, g, scale):
    """[T, Hq * D] float64: SDPA per sequence over the K/V gathered from the cache tensors
    through the block table, the causal mask offset by the context before the new tokens."""
    torch = torch_or_skip()
    F = torch.nn.functional
    Hq, Hkv, D = case.Hq, case.Hkv, case.D
    out = torch.zeros(g["qkv"].shape[0], Hq * D, dtype=torch.float64, device="cuda")
    kc = g["k_cache"].reshape(-1, Hkv, D)
    vc = g["v_cache"].reshape(-1, Hkv, D)
    for b, (n, ctx) in enumerate(zip(case.new_lens, case.ctx_lens)):
        if n == 0 or ctx == 0:
            continue
        lo, hi = int(case.cu[b]), int(case.cu[b + 1])
        q = g["qkv"][lo:hi, :Hq * D].reshape(n, Hq, D).transpose(0, 1).double()
        slots = torch.from_numpy(case.slots(b)).to("cuda")
        k = kc[slots].transpose(0, 1).double().repeat_interleave(Hq // Hkv, dim=0)
        v = vc[slots].transpose(0, 1).double().repeat_interleave(Hq // Hkv, dim=0)
        j = torch.arange(ctx, device="cuda")
        mask = j[None, :] <= (ctx - n + torch.arange(n, device="cuda"))[:, None]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        out[lo:hi] = o.transpose(0, 1).reshape(n, Hq * D)
    return out


def check_gpu(out, ref, dtype):
    torch = torch_or_skip()
    assert not torch.isnan(out).any()
    err = (out.double() - ref).abs().max().item()
    assert err < ATOL[dtype], f"max |out - sdpa| = {err:.3g}"


GPU_PREFILL = {
    # Llama-3.2-1B heads; fresh, continued and single-token sequences
    "bf16-llama1b": ([300, 1, 129, 64], [300, 40, 700, 64], 32, 8, 64, "bfloat16", 16),
    "fp16-d128-gqa4": ([200, 77], [200, 500], 16, 4, 128, "float16", 16),
    "fp32-d64-mha": ([100, 30], [100, 61], 4, 4, 64, "float32", 32),
}


@pytest.mark.gpu
@pytest.mark.parametrize("kv_from_qkv", [False, True], ids=["paged", "from-qkv"])
@pytest.mark.parametrize("name", list(GPU_PREFILL))
def test_prefill_gpu(name, kv_from_qkv):
    torch = torch_or_skip()
    new, ctx, Hq, Hkv, D, dtype, bs = GPU_PREFILL[name]
    if kv_from_qkv:
        ctx = new
    case = Case(new, ctx, Hq, Hkv, D, "float32", bs, seed=11)
    g = to_cuda(case, dtype)
    out = torch.full((g["qkv"].shape[0], Hq * D), float("nan"), device="cuda",
                     dtype=g["qkv"].dtype)
    scale = 1.0 / math.sqrt(D)
    att.prefill_attention(g["qkv"], g["k_cache"], g["v_cache"], g["cu_seqlens"],
                          g["block_tables"], g["context_lens"], out, max(new), Hq, Hkv, D,
                          scale, kv_from_qkv=kv_from_qkv)
    check_gpu(out, sdpa_reference(case, g, scale), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,Hq,Hkv,D", [("bfloat16", 32, 8, 64), ("float16", 8, 8, 128),
                                            ("float32", 8, 2, 64)])
@pytest.mark.parametrize("batch", [1, 16])
def test_decode_gpu(batch, dtype, Hq, Hkv, D):
    """Contexts of 1 to 1,500 keys without scratch, with scratch combined by a second launch,
    and with counters (combined in the kernel; three launches, as a CUDA graph replays)."""
    torch = torch_or_skip()
    rng = np.random.default_rng(batch)
    ctx = [int(c) for c in rng.integers(1, 1500, size=batch)]
    ctx[0] = 1
    case = Case([1] * batch, ctx, Hq, Hkv, D, "float32", 16, seed=12)
    g = to_cuda(case, dtype)
    scale = 1.0 / math.sqrt(D)
    ref = sdpa_reference(case, g, scale)
    shapes = att.decode_attention_scratch(batch, Hq, D, 2048, n_kv_heads=Hkv, counters=True)
    part = tuple(torch.empty(s, device="cuda") for s in shapes[:2])
    counters = torch.zeros(shapes[2], device="cuda", dtype=torch.int32)
    for scratch, launches in ((None, 1), (part, 1), (part + (counters,), 3)):
        for _ in range(launches):
            out = torch.full((batch, Hq * D), float("nan"), device="cuda",
                             dtype=g["qkv"].dtype)
            att.decode_attention(g["qkv"], g["k_cache"], g["v_cache"], g["block_tables"],
                                 g["context_lens"], out, Hq, Hkv, D, scale, scratch=scratch)
            check_gpu(out, ref, dtype)
    assert int(counters.abs().sum()) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("tile,prefetch", [((64, 8), True), ((128, 8), True), ((32, 2), True),
                                          ((64, 4), False)])
def test_decode_tiles_gpu(tile, prefetch):
    """The tiles bench_models_attention.py sweeps (and the loop without its software
    pipelining) with the in-kernel combine (Llama-3.2-1B heads, bf16, batch 3 of contexts 1,
    700 and 2,900) against SDPA."""
    torch = torch_or_skip()
    Hq, Hkv, D, ctx = 32, 8, 64, [1, 700, 2900]
    case = Case([1] * 3, ctx, Hq, Hkv, D, "float32", 16, seed=40)
    g = to_cuda(case, "bfloat16")
    ref = sdpa_reference(case, g, 0.125)
    shapes = att.decode_attention_scratch(3, Hq, D, 4096, n_kv_heads=Hkv, counters=True)
    scratch = tuple(torch.empty(s, device="cuda") for s in shapes[:2]) + (
        torch.zeros(shapes[2], device="cuda", dtype=torch.int32),)
    for _ in range(2):
        out = torch.full((3, Hq * D), float("nan"), device="cuda", dtype=torch.bfloat16)
        att.decode_attention(g["qkv"], g["k_cache"], g["v_cache"], g["block_tables"],
                             g["context_lens"], out, Hq, Hkv, D, 0.125, scratch=scratch,
                             tile=tile, prefetch=prefetch)
        check_gpu(out, ref, "bfloat16")
    assert int(scratch[2].abs().sum()) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [1, 4])
def test_decode_rope_gpu(batch):
    """decode_attention with RoPE fused (Llama-3.2-1B heads, bf16, in-kernel combine) against
    rope_cache then decode_attention on the same inputs: outputs within bf16 rounding, the
    caches equal."""
    torch = torch_or_skip()
    Hq, Hkv, D = 32, 8, 64
    rng = np.random.default_rng(30 + batch)
    ctx = [int(c) for c in rng.integers(1, 3000, size=batch)]
    case = Case([1] * batch, ctx, Hq, Hkv, D, "float32", 16, seed=31)
    g = to_cuda(case, "bfloat16")
    cos, sin = rope_tables(D, 4096, 500000.0)
    dev = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to("cuda")  # noqa: E731
    pos = dev(np.array([c - 1 for c in ctx], np.int32))
    slots = dev(np.array([case.slots(b)[-1] for b in range(batch)], np.int32))
    cos_d, sin_d = dev(cos), dev(sin)
    shapes = att.decode_attention_scratch(batch, Hq, D, 4096, n_kv_heads=Hkv, counters=True)
    scratch = tuple(torch.empty(s, device="cuda") for s in shapes[:2]) + (
        torch.zeros(shapes[2], device="cuda", dtype=torch.int32),)
    kc1, vc1, qkv1 = g["k_cache"].clone(), g["v_cache"].clone(), g["qkv"].clone()
    att.rope_cache(qkv1, pos, cos_d, sin_d, kc1, vc1, slots, Hq, Hkv, D)
    out1 = torch.empty(batch, Hq * D, device="cuda", dtype=torch.bfloat16)
    att.decode_attention(qkv1, kc1, vc1, g["block_tables"], g["context_lens"], out1, Hq, Hkv,
                         D, 0.125, scratch=scratch)
    kc2, vc2 = g["k_cache"].clone(), g["v_cache"].clone()
    kc2.view(-1, Hkv, D)[slots.long()] = float("nan")
    vc2.view(-1, Hkv, D)[slots.long()] = float("nan")
    for _ in range(2):
        out2 = torch.full((batch, Hq * D), float("nan"), device="cuda", dtype=torch.bfloat16)
        att.decode_attention(g["qkv"], kc2, vc2, g["block_tables"], g["context_lens"], out2,
                             Hq, Hkv, D, 0.125, scratch=scratch, positions=pos, cos=cos_d,
                             sin=sin_d, slot_mapping=slots)
        check_gpu(out2, out1.double(), "bfloat16")
    # within one bf16 ulp of the products (the two kernels may contract x*c - x'*s
    # differently; where the difference cancels, an ulp of the head's largest value)
    # (the case's unused cache slots hold NaN in both: equal; the new keys' slots were NaN in
    # kc2 only, so one the fused kernel did not write fails)
    k1, k2 = kc1.double(), kc2.double()
    both_nan = k1.isnan() & k2.isnan()
    tol = (k1.abs() + k1.nan_to_num().abs().amax(-1, keepdim=True)) * 2 ** -7
    assert (((k2 - k1).abs() <= tol) | both_nan).all()
    assert torch.equal(vc2.nan_to_num(123.0), vc1.nan_to_num(123.0))
    assert torch.equal(vc2.isnan(), vc1.isnan())
    assert int(scratch[2].abs().sum()) == 0


@pytest.mark.gpu
def test_rope_cache_gpu():
    torch = torch_or_skip()
    T, Hq, Hkv, D, bs = 37, 32, 8, 64, 16
    rng = np.random.default_rng(13)
    qkv = rng.standard_normal((T, (Hq + 2 * Hkv) * D), dtype=np.float32)
    inv = 1.0 / 500000 ** (np.arange(0, D, 2) / D)
    ang = np.arange(4096)[:, None] * inv[None, :]
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pos = rng.integers(0, 4096, size=T).astype(np.int32)
    slots = rng.permutation(8 * bs)[:T].astype(np.int32)
    slots[5] = -1
    g = torch.from_numpy(qkv).to("cuda", torch.bfloat16)
    before = g.double().cpu().numpy()
    kc = torch.zeros(8, bs, Hkv, D, device="cuda", dtype=torch.bfloat16)
    vc = torch.zeros_like(kc)
    dev = lambda a: torch.from_numpy(a).to("cuda")  # noqa: E731
    att.rope_cache(g, dev(pos), dev(cos), dev(sin), kc, vc, dev(slots), Hq, Hkv, D)
    got = g.double().cpu().numpy()
    ref_q = rope_reference(before[:, :Hq * D].reshape(T, Hq, D), pos, cos, sin)
    ref_k = rope_reference(before[:, Hq * D:(Hq + Hkv) * D].reshape(T, Hkv, D), pos, cos, sin)
    assert np.abs(got[:, :Hq * D] - ref_q.reshape(T, -1)).max() < 2e-2
    assert np.abs(got[:, Hq * D:(Hq + Hkv) * D] - ref_k.reshape(T, -1)).max() < 2e-2
    kflat = kc.reshape(-1, Hkv * D).double().cpu().numpy()
    vflat = vc.reshape(-1, Hkv * D).double().cpu().numpy()
    for t in range(T):
        if slots[t] >= 0:
            assert (kflat[slots[t]] == got[t, Hq * D:(Hq + Hkv) * D]).all()
            assert (vflat[slots[t]] == before[t, (Hq + Hkv) * D:]).all()


@pytest.mark.gpu
def test_prefill_llama1b_shape_gpu():
    """The target shape, 4 x 2048 fresh tokens of Llama-3.2-1B in bf16, from qkv and through
    the block table, against SDPA."""
    torch = torch_or_skip()
    new = [2048] * 4
    case = Case(new, new, 32, 8, 64, "float32", 16, seed=14)
    g = to_cuda(case, "bfloat16")
    scale = 0.125
    ref = sdpa_reference(case, g, scale)
    for kv_from_qkv in (True, False):
        out = torch.empty(sum(new), 32 * 64, device="cuda", dtype=torch.bfloat16)
        att.prefill_attention(g["qkv"], g["k_cache"], g["v_cache"], g["cu_seqlens"],
                              g["block_tables"], g["context_lens"], out, 2048, 32, 8, 64, scale,
                              kv_from_qkv=kv_from_qkv)
        check_gpu(out, ref, "bfloat16")


@pytest.mark.gpu
def test_ops_on_kiln_device_arrays():
    """rope_cache, prefill (both K/V sources) and decode on kiln.DeviceArray (fp16; no torch)
    against the numpy references of the same values."""
    Hq, Hkv, D, bs = 8, 2, 64, 16
    case = Case([40, 3], [40, 70], Hq, Hkv, D, "float16", bs, seed=15)
    dev = {name: kiln.from_numpy(getattr(case, name)) for name in
           ("qkv", "k_cache", "v_cache", "cu", "tables", "context_lens")}
    scale = 1.0 / math.sqrt(D)
    out = kiln.empty((case.qkv.shape[0], Hq * D), "float16")
    att.prefill_attention(dev["qkv"], dev["k_cache"], dev["v_cache"], dev["cu"],
                          dev["tables"], dev["context_lens"], out, 40, Hq, Hkv, D, scale)
    check(out.numpy(), case.reference(scale), "float16")

    fresh = Case([40, 3], [40, 3], Hq, Hkv, D, "float16", bs, seed=16)
    q = kiln.from_numpy(fresh.qkv)
    att.prefill_attention(q, dev["k_cache"], dev["v_cache"], kiln.from_numpy(fresh.cu),
                          dev["tables"], kiln.from_numpy(fresh.context_lens), out, 40, Hq,
                          Hkv, D, scale, kv_from_qkv=True)
    check(out.numpy(), fresh.reference(scale), "float16")

    step = Case([1, 1], [40, 70], Hq, Hkv, D, "float16", bs, seed=17)
    shapes = att.decode_attention_scratch(2, Hq, D, 128, n_kv_heads=Hkv, num_splits=4)
    scratch = tuple(kiln.empty(s, "float32") for s in shapes)
    out2 = kiln.empty((2, Hq * D), "float16")
    att.decode_attention(kiln.from_numpy(step.qkv), kiln.from_numpy(step.k_cache),
                         kiln.from_numpy(step.v_cache), kiln.from_numpy(step.tables),
                         kiln.from_numpy(step.context_lens), out2, Hq, Hkv, D, scale,
                         scratch=scratch, split_min_tokens=16)
    check(out2.numpy(), step.reference(scale), "float16")

    T = 5
    x = np.random.default_rng(18).standard_normal((T, (Hq + 2 * Hkv) * D)).astype(np.float16)
    ang = np.arange(16)[:, None] / 10000 ** (np.arange(0, D, 2) / D)[None, :]
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pos = np.array([0, 3, 15, 7, 7], np.int32)
    g = kiln.from_numpy(x)
    kc = kiln.zeros((2, bs, Hkv, D), "float16")
    vc = kiln.zeros((2, bs, Hkv, D), "float16")
    att.rope_cache(g, kiln.from_numpy(pos), kiln.from_numpy(cos), kiln.from_numpy(sin), kc, vc,
                   kiln.from_numpy(np.array([0, 1, 2, 31, -1], np.int32)), Hq, Hkv, D)
    got = f64(g.numpy())
    ref_q = rope_reference(f64(x[:, :Hq * D]).reshape(T, Hq, D), pos, cos, sin)
    assert np.abs(got[:, :Hq * D] - ref_q.reshape(T, -1)).max() < 1e-2
    kflat = f64(kc.numpy()).reshape(-1, Hkv * D)
    assert (kflat[31] == got[3, Hq * D:(Hq + Hkv) * D]).all()
