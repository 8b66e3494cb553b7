"""The attention ops of kiln_models (kernels/python/kiln_models/ops/attention.py).

- CPU backend (numpy arrays, fp32 and ml_dtypes' bf16) against float64 numpy references:
  rope_cache against HF's rotate-half (qkv rotated in place, k and v written to their slots,
  negative slots skipped); prefill_attention over a paged cache (mixed new and context
  lengths: fresh prompts, continued prompts, single tokens, lengths that are not multiples of
  the block size or of the tiles; block sizes below, at and above the key tile) and from qkv
  (kv_from_qkv); decode_attention with one split and several (contexts of 0, 1, ...; a split
  count larger than a context needs), GQA ratios 1, 2 and 4, D 16 and 64. Cache slots that no
  sequence uses, and table entries past a context, hold NaN / -1: a kernel that read them
  would show it (NaN outputs, or the CPU backend's bounds check).
- rope_cache then prefill then decode steps against attention over the whole sequence.
- compile-only: the GPU variants compile to PTX for sm_90a (wgmma in the bf16 prefill).
- argument errors: each names the op and the argument.
- GPU (marker `gpu`): the same ops on torch CUDA tensors against SDPA on gathered K/V, in
  test_models_attention_gpu.py.
"""
import math
import os
import re
import sys

import numpy as np
import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))

from kiln_models.ops import attention as att  # noqa: E402

CPU = dict(device="cpu")
# max |out - ref| for outputs of magnitude ~1: fp32 (exact products), bf16 (p and the output
# rounded to 2^-8)
ATOL = {"float32": 2e-5, "bfloat16": 2e-2, "float16": 1e-2}


def np_dtype(name):
    if name == "bfloat16":
        return pytest.importorskip("ml_dtypes").bfloat16
    return np.dtype(name)


def f64(a):
    return np.asarray(a).astype(np.float64)


# ---------------------------------------------------------------- numpy references

def rope_reference(x, pos, cos, sin):
    """HF rotate-half on x [T, H, D] (float64) at positions pos: x * cos + rotate_half(x) *
    sin with cos/sin [P, D/2] repeated twice."""
    c = np.concatenate([cos[pos], cos[pos]], axis=-1)[:, None, :].astype(np.float64)
    s = np.concatenate([sin[pos], sin[pos]], axis=-1)[:, None, :].astype(np.float64)
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * c + rot * s


def attention_reference(q, k, v, scale):
    """q [n, Hq, D] (the last n positions of a context of len(k)), k, v [ctx, Hkv, D]:
    causal GQA attention in float64, [n, Hq, D]."""
    n, Hq, D = q.shape
    ctx, Hkv, _ = k.shape
    group = Hq // Hkv
    kk = np.repeat(k, group, axis=1)
    vv = np.repeat(v, group, axis=1)
    s = np.einsum("ihd,jhd->hij", q, kk) * scale
    visible = np.arange(ctx)[None, :] <= (ctx - n + np.arange(n))[:, None]
    s = np.where(visible[None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("hij,jhd->ihd", p, vv)


# ---------------------------------------------------------------- cases

class Case:
    """A batch over a paged cache: sequence b has new_lens[b] new tokens (rows of qkv) and a
    context of ctx_lens[b] keys whose last new_lens[b] are the new tokens' k and v. Blocks are
    handed out in a random order; unused slots hold NaN, unused table entries -1."""

    def __init__(self, new_lens, ctx_lens, Hq, Hkv, D, dtype, block_size, seed=0):
        rng = np.random.default_rng(seed)
        dt = np_dtype(dtype)
        self.Hq, self.Hkv, self.D, self.dtype = Hq, Hkv, D, dtype
        self.new_lens, self.ctx_lens = list(new_lens), list(ctx_lens)
        self.block_size = block_size
        B, T = len(new_lens), sum(new_lens)
        self.cu = np.concatenate([[0], np.cumsum(new_lens)]).astype(np.int32)
        self.qkv = rng.standard_normal((T, (Hq + 2 * Hkv) * D), dtype=np.float32).astype(dt)
        need = [-(-c // block_size) for c in ctx_lens]
        max_blocks = max(need + [1]) + 1
        num_blocks = sum(need) + 2
        order = rng.permutation(num_blocks)
        self.tables = np.full((B, max_blocks), -1, np.int32)
        i = 0
        for b, nb in enumerate(need):
            self.tables[b, :nb] = order[i:i + nb]
            i += nb
        shape = (num_blocks, block_size, Hkv, D)
        self.k_cache = np.full(shape, np.nan, np.float32).astype(dt)
        self.v_cache = np.full(shape, np.nan, np.float32).astype(dt)
        self.keys, self.values = [], []  # per sequence, float64 [ctx, Hkv, D]
        kc = self.k_cache.reshape(-1, Hkv, D)
        vc = self.v_cache.reshape(-1, Hkv, D)
        for b in range(B):
            ctx, n = ctx_lens[b], new_lens[b]
            rows = self.qkv[self.cu[b]:self.cu[b + 1]]
            k = rng.standard_normal((ctx, Hkv, D), dtype=np.float32).astype(dt)
            v = rng.standard_normal((ctx, Hkv, D), dtype=np.float32).astype(dt)
            m = min(n, ctx)  # a decode padding row has a new token and no context
            k[ctx - m:] = rows[n - m:, Hq * D:(Hq + Hkv) * D].reshape(m, Hkv, D)
            v[ctx - m:] = rows[n - m:, (Hq + Hkv) * D:].reshape(m, Hkv, D)
            slots = self.slots(b)
            kc[slots], vc[slots] = k, v
            self.keys.append(f64(k))
            self.values.append(f64(v))
        self.context_lens = np.array(ctx_lens, np.int32)

    def slots(self, b):
        j = np.arange(self.ctx_lens[b])
        return self.tables[b, j // self.block_size] * self.block_size + j % self.block_size

    def q(self, b):
        rows = f64(self.qkv[self.cu[b]:self.cu[b + 1]])
        return rows[:, :self.Hq * self.D].reshape(-1, self.Hq, self.D)

    def reference(self, scale):
        out = np.zeros((self.qkv.shape[0], self.Hq * self.D))
        for b in range(len(self.new_lens)):
            if self.new_lens[b] and self.ctx_lens[b]:  # no context: zeros
                o = attention_reference(self.q(b), self.keys[b], self.values[b], scale)
                out[self.cu[b]:self.cu[b + 1]] = o.reshape(self.new_lens[b], -1)
        return out

    def heads(self):
        return dict(n_heads=self.Hq, n_kv_heads=self.Hkv, head_dim=self.D)


def check(out, ref, dtype):
    assert not np.isnan(f64(out)).any(), "NaN in the output"
    err = np.abs(f64(out) - ref).max()
    assert err < ATOL[dtype], f"max |out - ref| = {err:.3g}"


def run_prefill(case, kv_from_qkv=False, scale=None, **kw):
    scale = scale or 1.0 / math.sqrt(case.D)
    out = np.full((case.qkv.shape[0], case.Hq * case.D), np.nan, np.float32)
    out = out.astype(case.qkv.dtype)
    att.prefill_attention(case.qkv, case.k_cache, case.v_cache, case.cu, case.tables,
                          case.context_lens, out, max(case.new_lens), sm_scale=scale,
                          kv_from_qkv=kv_from_qkv, **case.heads(), **CPU, **kw)
    check(out, case.reference(scale), case.dtype)


def run_decode(case, num_splits=None, split_min_tokens=16, spare_batch=0, counters=False,
               launches=1, tile=None, single_split_tokens=None, prefetch=True):
    """decode_attention of `case` with `num_splits` splits of scratch (None: no scratch),
    combined in the kernel (counters) or by a second launch, `launches` times (a CUDA graph's
    replays: the counters must come back to zero each time)."""
    scale = 1.0 / math.sqrt(case.D)
    B = len(case.new_lens)
    scratch = None
    if num_splits:
        shapes = att.decode_attention_scratch(B + spare_batch, case.Hq, case.D, 0,
                                              n_kv_heads=case.Hkv, num_splits=num_splits,
                                              counters=counters)
        scratch = tuple(np.full(s, np.nan, np.float32) for s in shapes[:2])
        if counters:
            scratch += (np.zeros(shapes[2], np.int32),)
    for _ in range(launches):
        out = np.full((B, case.Hq * case.D), np.nan, np.float32).astype(case.qkv.dtype)
        att.decode_attention(case.qkv, case.k_cache, case.v_cache, case.tables,
                             case.context_lens, out, sm_scale=scale, scratch=scratch,
                             num_splits=num_splits, split_min_tokens=split_min_tokens,
                             tile=tile, single_split_tokens=single_split_tokens,
                             prefetch=prefetch, **case.heads(), **CPU)
        check(out, case.reference(scale), case.dtype)
        if counters:
            assert (scratch[2] == 0).all(), "the kernel left a counter non-zero"
    return out


# ---------------------------------------------------------------- rope_cache

@pytest.mark.parametrize("dtype,Hq,Hkv,D", [("float32", 4, 2, 16), ("bfloat16", 4, 1, 64),
                                            ("float32", 2, 2, 64)])
def test_rope_cache(dtype, Hq, Hkv, D):
    rng = np.random.default_rng(1)
    dt = np_dtype(dtype)
    T, P, bs, num_blocks = 7, 50, 4, 5
    qkv = rng.standard_normal((T, (Hq + 2 * Hkv) * D), dtype=np.float32).astype(dt)
    before = f64(qkv)
    inv = 1.0 / 10000 ** (np.arange(0, D, 2) / D)
    ang = np.arange(P)[:, None] * inv[None, :]
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pos = np.array([0, 3, 49, 17, 17, 8, 1], np.int32)
    slots = np.array([0, 5, 19, -1, 7, 12, -1], np.int32)  # -1: padding rows
    k_cache = np.full((num_blocks, bs, Hkv, D), np.nan, np.float32).astype(dt)
    v_cache = np.full((num_blocks, bs, Hkv, D), np.nan, np.float32).astype(dt)
    att.rope_cache(qkv, pos, cos, sin, k_cache, v_cache, slots, Hq, Hkv, D, **CPU)

    q, k = before[:, :Hq * D], before[:, Hq * D:(Hq + Hkv) * D]
    ref_q = rope_reference(q.reshape(T, Hq, D), pos, cos, sin).reshape(T, -1)
    ref_k = rope_reference(k.reshape(T, Hkv, D), pos, cos, sin).reshape(T, -1)
    tol = 1e-5 if dtype == "float32" else 2e-2
    assert np.abs(f64(qkv[:, :Hq * D]) - ref_q).max() < tol
    assert np.abs(f64(qkv[:, Hq * D:(Hq + Hkv) * D]) - ref_k).max() < tol
    assert (f64(qkv[:, (Hq + Hkv) * D:]) == before[:, (Hq + Hkv) * D:]).all()  # v untouched
    kc, vc = f64(k_cache).reshape(-1, Hkv * D), f64(v_cache).reshape(-1, Hkv * D)
    for t, s in enumerate(slots):
        if s >= 0:  # the cache holds exactly what qkv holds
            assert (kc[s] == f64(qkv[t, Hq * D:(Hq + Hkv) * D])).all()
            assert (vc[s] == before[t, (Hq + Hkv) * D:]).all()
    written = sorted(int(s) for s in slots if s >= 0)
    others = np.setdiff1d(np.arange(kc.shape[0]), written)
    assert np.isnan(kc[others]).all() and np.isnan(vc[others]).all()


# ---------------------------------------------------------------- prefill

PREFILL_CASES = {
    # fresh prompt, a prompt continued after 4 tokens, one token after 8, a long tail
    "fp32-d16-gqa2-bs4": (([5, 1, 19, 37], [5, 9, 40, 37], 4, 2, 16, "float32", 4)),
    "bf16-d64-gqa4-bs16": (([33, 7], [33, 50], 4, 1, 64, "bfloat16", 16)),
    "fp32-d64-mha-bs32": (([20, 3], [45, 3], 2, 2, 64, "float32", 32)),
}


@pytest.mark.parametrize("name", list(PREFILL_CASES))
def test_prefill_paged(name):
    run_prefill(Case(*PREFILL_CASES[name]))


@pytest.mark.parametrize("dtype,Hq,Hkv,D", [("float32", 4, 2, 16), ("bfloat16", 4, 1, 64)])
def test_prefill_from_qkv(dtype, Hq, Hkv, D):
    # fresh prompts only; the cache holds NaN everywhere: nothing may read it
    case = Case([5, 1, 37, 32], [5, 1, 37, 32], Hq, Hkv, D, dtype, 4, seed=2)
    case.k_cache[:] = np.nan
    case.v_cache[:] = np.nan
    run_prefill(case, kv_from_qkv=True)


def test_prefill_scale_and_empty_sequence():
    # a sequence with no new tokens, and a non-default scale
    run_prefill(Case([6, 0, 17], [6, 4, 20], 4, 2, 16, "float32", 4, seed=3), scale=0.7)


# ---------------------------------------------------------------- decode

@pytest.mark.parametrize("num_splits,counters", [(None, False), (3, False), (3, True)])
def test_decode_fp32_gqa2(num_splits, counters):
    # contexts of 1, 7, a whole number of tiles, 53 and 0 (a padding row: zeros)
    case = Case([1] * 5, [1, 7, 32, 53, 0], 4, 2, 16, "float32", 4, seed=4)
    run_decode(case, num_splits, counters=counters, launches=2 if counters else 1)


@pytest.mark.parametrize("counters", [False, True])
def test_decode_bf16_gqa4_many_splits(counters):
    # 8 splits of at least 16 keys: the 100-key context uses 7, the others one; the scratch
    # was sized for a larger batch
    case = Case([1] * 3, [1, 100, 17], 4, 1, 64, "bfloat16", 16, seed=5)
    run_decode(case, num_splits=8, spare_batch=2, counters=counters)


@pytest.mark.parametrize("counters", [False, True])
def test_decode_mha_d64(counters):
    case = Case([1] * 2, [40, 9], 2, 2, 64, "float32", 32, seed=6)
    run_decode(case, num_splits=2, counters=counters)


def test_decode_fused_combine_many_splits_gqa8():
    # a group of 8 heads (no padding of the combine's rows) over 16 splits, which the combine
    # takes in two steps of BLOCK_C = 8 (4,096 / (8 heads * 64)); contexts of 250 and 70 keys
    # use 16 and 5 splits
    case = Case([1] * 3, [250, 70, 16], 8, 1, 64, "float32", 8, seed=9)
    assert att.decode_launch_config(3, 8, 1, 64, 16, cpu=True)[0]["BLOCK_C"] == 8
    run_decode(case, num_splits=16, counters=True, launches=3)


def test_decode_tile_choice():
    # a 32-key tile (chunks of 32: the 53-key context in 2 splits of 3) and a 64-key one
    case = Case([1] * 3, [53, 64, 2], 4, 2, 16, "float32", 4, seed=23)
    run_decode(case, num_splits=3, counters=True, tile=(32, 2), single_split_tokens=0)
    run_decode(case, num_splits=2, counters=True, tile=(64, 8), single_split_tokens=0)
    run_decode(case, num_splits=3, counters=True, single_split_tokens=0, prefetch=False)
    with pytest.raises(ValueError, match=r"expected tile = \(BLOCK_N, num_warps\), .* found "
                                         r"\(48, 4\)"):
        run_decode(case, tile=(48, 4))


@pytest.mark.parametrize("single", [None, 40, 0])
def test_decode_short_contexts_run_in_one_split(single):
    """Contexts of at most single_split_tokens keys (default 2 * split_min_tokens = 32 here)
    run in one split that writes out directly (the scratch's NaN left as it was); longer
    ones split."""
    case = Case([1] * 3, [32, 40, 90], 4, 2, 16, "float32", 4, seed=24)
    shapes = att.decode_attention_scratch(3, 4, 16, 0, n_kv_heads=2, num_splits=4,
                                          counters=True)
    scratch = tuple(np.full(s, np.nan, np.float32) for s in shapes[:2]) + (
        np.zeros(shapes[2], np.int32),)
    out = np.full((3, 64), np.nan, np.float32)
    att.decode_attention(case.qkv, case.k_cache, case.v_cache, case.tables, case.context_lens,
                         out, 4, 2, 16, 0.25, scratch=scratch, split_min_tokens=16,
                         single_split_tokens=single, **CPU)
    check(out, case.reference(0.25), "float32")
    limit = 32 if single is None else single
    for b, ctx in enumerate(case.ctx_lens):
        assert np.isnan(scratch[1][b]).all() == (ctx <= limit), (b, ctx)
    with pytest.raises(ValueError, match="non-negative int single_split_tokens, found -1"):
        att.decode_attention(case.qkv, case.k_cache, case.v_cache, case.tables,
                             case.context_lens, out, 4, 2, 16, 0.25, scratch=scratch,
                             single_split_tokens=-1, **CPU)


def test_decode_split_count():
    assert att.decode_split_count(1, 8, 640) == 10          # 640 / 64 keys
    assert att.decode_split_count(1, 8, 100000) == 33       # 2 * 132 / 8 programs
    assert att.decode_split_count(16, 8, 100000) == 2       # 256 programs: one wave
    assert att.decode_split_count(4, 8, 100000) == 8
    assert att.decode_split_count(64, 8, 100000) == 1
    assert att.decode_split_count(1, 8, 5) == 1
    # scratch holds what batch 1 launches, which serves every batch up to 4
    assert att.decode_attention_scratch(4, 32, 64, 640, n_kv_heads=8) == \
        ((4, 32, 10, 64), (4, 32, 10))
    assert att.decode_attention_scratch(4, 32, 64, 4096, n_kv_heads=8, counters=True) == \
        ((4, 32, 33, 64), (4, 32, 33), (4, 8))


def test_decode_launch_split_count():
    """Without num_splits a launch takes decode_split_count of its own batch and table width,
    capped by scratch: a batch of 1 over a 32-block table of 16 keys (512 keys) takes 8 of a
    scratch of 33, a batch of 64 one (and then writes out without the scratch)."""
    case = Case([1], [300], 4, 1, 16, "float32", 16, seed=10)
    case.tables = np.concatenate([case.tables, np.full((1, 32 - case.tables.shape[1]), -1,
                                                       np.int32)], axis=1)
    shapes = att.decode_attention_scratch(1, 4, 16, 4096, n_kv_heads=1, counters=True)
    scratch = [np.full(s, np.nan, np.float32) for s in shapes[:2]]
    scratch.append(np.zeros(shapes[2], np.int32))
    out = np.zeros((1, 64), np.float32)
    att.decode_attention(case.qkv, case.k_cache, case.v_cache, case.tables, case.context_lens,
                         out, 4, 1, 16, 0.25, scratch=tuple(scratch), **CPU)
    check(out, case.reference(0.25), "float32")
    lse = scratch[1][0, 0]
    # 300 keys in chunks of max(cdiv(300, 8) -> 64, 64): 5 splits wrote partials
    assert np.isfinite(lse[:5]).all() and np.isnan(lse[5:]).all()


# ---------------------------------------------------------------- decode with RoPE fused

def rope_tables(D, P, base=10000.0):
    ang = np.arange(P)[:, None] / base ** (np.arange(0, D, 2) / D)[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def run_decode_rope(case, num_splits=None, counters=False, split_min_tokens=16,
                    pad_slot=()):
    """decode_attention with RoPE fused (qkv unrotated, the new key's slot NaN in the cache)
    against rope_cache then decode_attention, and against the float64 reference over the
    rotated sequence. pad_slot: rows whose slot_mapping is -1 (the new k/v not stored)."""
    B, D, Hq, Hkv = len(case.new_lens), case.D, case.Hq, case.Hkv
    cos, sin = rope_tables(D, max(case.ctx_lens) + 3)
    pos = np.array([max(c - 1, 0) for c in case.ctx_lens], np.int32)
    slots = np.array([case.slots(b)[-1] if c else -1 for b, c in enumerate(case.ctx_lens)],
                     np.int32)
    slots[list(pad_slot)] = -1
    scale = 1.0 / math.sqrt(D)

    def scratch():
        if not num_splits:
            return None
        shapes = att.decode_attention_scratch(B, Hq, D, 0, n_kv_heads=Hkv,
                                              num_splits=num_splits, counters=counters)
        return tuple(np.full(s, np.nan, np.float32) for s in shapes[:2]) + (
            (np.zeros(shapes[2], np.int32),) if counters else ())

    # unfused: rope_cache rotates a copy of qkv and writes the caches
    k1, v1, qkv1 = case.k_cache.copy(), case.v_cache.copy(), case.qkv.copy()
    att.rope_cache(qkv1, pos, cos, sin, k1, v1, slots, Hq, Hkv, D, **CPU)
    out1 = np.zeros((B, Hq * D), np.float32).astype(case.qkv.dtype)
    att.decode_attention(qkv1, k1, v1, case.tables, case.context_lens, out1, Hq, Hkv, D, scale,
                         scratch=scratch(), num_splits=num_splits,
                         split_min_tokens=split_min_tokens, **CPU)
    # fused, with the new keys' slots NaN: the kernel must take them from qkv
    k2, v2 = case.k_cache.copy(), case.v_cache.copy()
    for b, c in enumerate(case.ctx_lens):
        if c:
            k2.reshape(-1, Hkv, D)[case.slots(b)[-1]] = np.nan
            v2.reshape(-1, Hkv, D)[case.slots(b)[-1]] = np.nan
    qkv2 = case.qkv.copy()
    out2 = np.full((B, Hq * D), np.nan, np.float32).astype(case.qkv.dtype)
    sc = scratch()
    att.decode_attention(qkv2, k2, v2, case.tables, case.context_lens, out2, Hq, Hkv, D, scale,
                         scratch=sc, num_splits=num_splits, split_min_tokens=split_min_tokens,
                         positions=pos, cos=cos, sin=sin, slot_mapping=slots, **CPU)
    assert (f64(qkv2) == f64(case.qkv)).all(), "the fused op wrote qkv"
    if counters:
        assert (sc[2] == 0).all()
    tol = 1e-6 if case.dtype == "float32" else 1e-2
    # the caches: what rope_cache wrote, at the written slots; NaN where slot_mapping is -1
    for b, c in enumerate(case.ctx_lens):
        if c:
            j = case.slots(b)[-1]
            got_k, got_v = f64(k2.reshape(-1, Hkv, D)[j]), f64(v2.reshape(-1, Hkv, D)[j])
            if slots[b] >= 0:
                assert np.abs(got_k - f64(k1.reshape(-1, Hkv, D)[j])).max() <= tol
                assert (got_v == f64(v1.reshape(-1, Hkv, D)[j])).all()
            else:
                assert np.isnan(got_k).all() and np.isnan(got_v).all()
    # (a row without a slot: rope_cache wrote nothing, so the unfused decode read the stale
    # cache entry; only the reference below speaks for it)
    stored = slots >= 0
    check(out2[stored], f64(out1)[stored], case.dtype)
    # the reference: q and the new key rotated, the cached keys as they are
    ref = np.zeros((B, Hq * D))
    for b, c in enumerate(case.ctx_lens):
        if not c:
            continue
        row = f64(case.qkv[b])
        q = rope_reference(row[:Hq * D].reshape(1, Hq, D), pos[b:b + 1], cos, sin)
        k_new = rope_reference(row[Hq * D:(Hq + Hkv) * D].reshape(1, Hkv, D), pos[b:b + 1],
                               cos, sin)
        keys = case.keys[b].copy()
        keys[-1] = f64(k_new.astype(np.float32).astype(case.qkv.dtype))[0]
        ref[b] = attention_reference(q, keys, case.values[b], scale).reshape(-1)
    check(out2, ref, case.dtype)


@pytest.mark.parametrize("num_splits,counters", [(None, False), (4, False), (4, True)])
def test_decode_rope_fp32(num_splits, counters):
    # contexts of 1 (the new key alone), 7, 53 (the new key in the last of 4 splits) and 0
    # (a padding row: zeros, nothing written)
    case = Case([1] * 4, [1, 7, 53, 0], 4, 2, 16, "float32", 4, seed=20)
    run_decode_rope(case, num_splits, counters)


def test_decode_rope_bf16_gqa4_d64():
    # bf16, head_dim 64; row 1's slot is -1: its new k/v are used but not stored
    case = Case([1] * 3, [100, 33, 64], 4, 1, 64, "bfloat16", 16, seed=21)
    run_decode_rope(case, num_splits=8, counters=True, pad_slot=(1,))


def test_decode_rope_slot_must_be_last_key():
    case = Case([1, 1], [9, 5], 4, 2, 16, "float32", 4, seed=22)
    cos, sin = rope_tables(16, 16)
    slots = np.array([case.slots(0)[-1], case.slots(1)[-2]], np.int32)
    with pytest.raises(ValueError, match=r"slot_mapping\[1\] = \d+ is not the slot of key "
                                         r"context_lens\[1\] - 1 = 4"):
        att.decode_attention(case.qkv, case.k_cache, case.v_cache, case.tables,
                             case.context_lens, np.zeros((2, 64), np.float32), 4, 2, 16, 0.25,
                             positions=np.array([8, 4], np.int32), cos=cos, sin=sin,
                             slot_mapping=slots, **CPU)
    with pytest.raises(ValueError, match=r"decode_attention: expected positions of shape"):
        att.decode_attention(case.qkv, case.k_cache, case.v_cache, case.tables,
                             case.context_lens, np.zeros((2, 64), np.float32), 4, 2, 16, 0.25,
                             positions=np.array([8], np.int32), cos=cos, sin=sin,
                             slot_mapping=slots, **CPU)
    with pytest.raises(ValueError, match=r"expected an array for cos, found NoneType"):
        att.decode_attention(case.qkv, case.k_cache, case.v_cache, case.tables,
                             case.context_lens, np.zeros((2, 64), np.float32), 4, 2, 16, 0.25,
                             positions=np.array([8, 4], np.int32), sin=sin,
                             slot_mapping=slots, **CPU)


# ---------------------------------------------------------------- rope, prefill, decode

def test_prompt_then_decode_steps():
    """A prompt of 21 tokens prefilled in two chunks (13, then 8 continuing it) and two
    decode steps, every step's k/v written by rope_cache, against attention over the whole
    rotated sequence."""
    rng = np.random.default_rng(7)
    Hq, Hkv, D, bs = 4, 2, 16, 4
    W = (Hq + 2 * Hkv) * D
    total = 23
    seq = rng.standard_normal((total, W), dtype=np.float32)
    inv = 1.0 / 500000 ** (np.arange(0, D, 2) / D)
    ang = np.arange(64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    k_cache = np.full((9, bs, Hkv, D), np.nan, np.float32)
    v_cache = np.full_like(k_cache, np.nan)
    table = np.array([[4, 0, 7, 2, 5, 8, -1]], np.int32)
    scale = 1.0 / math.sqrt(D)
    rows = np.zeros((total, W))
    outs = np.zeros((total, Hq * D), np.float32)
    for lo, hi in ((0, 13), (13, 21), (21, 22), (22, 23)):
        qkv = seq[lo:hi].copy()
        pos = np.arange(lo, hi, dtype=np.int32)
        slots = (table[0, pos // bs] * bs + pos % bs).astype(np.int32)
        att.rope_cache(qkv, pos, cos, sin, k_cache, v_cache, slots, Hq, Hkv, D, **CPU)
        rows[lo:hi] = qkv
        ctx = np.array([hi], np.int32)
        out = np.zeros((hi - lo, Hq * D), np.float32)
        if hi - lo > 1:
            att.prefill_attention(qkv, k_cache, v_cache, np.array([0, hi - lo], np.int32),
                                  table, ctx, out, hi - lo, Hq, Hkv, D, scale, **CPU)
        else:
            att.decode_attention(qkv, k_cache, v_cache, table, ctx, out, Hq, Hkv, D, scale,
                                 **CPU)
        outs[lo:hi] = out
    q = rope_reference(f64(seq[:, :Hq * D]).reshape(total, Hq, D), np.arange(total), cos, sin)
    k = rope_reference(f64(seq[:, Hq * D:(Hq + Hkv) * D]).reshape(total, Hkv, D),
                       np.arange(total), cos, sin)
    v = f64(seq[:, (Hq + Hkv) * D:]).reshape(total, Hkv, D)
    ref = attention_reference(q, k, v, scale).reshape(total, -1)
    assert np.abs(f64(outs) - ref).max() < 1e-5


# ---------------------------------------------------------------- compile-only (sm_90a)

TY = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@pytest.mark.parametrize("dtype,D,paged", [("bfloat16", 64, False), ("bfloat16", 64, True),
                                           ("float16", 128, False), ("float16", 128, True),
                                           ("bfloat16", 256, False), ("float32", 64, True)])
def test_prefill_compiles_to_ptx(dtype, D, paged):
    # Llama-3.2-1B's heads (Hq 32, Hkv 8) with the GPU tiles of each case
    ty = TY[dtype]
    sig = dict(qkv=f"*{ty}:16", k_cache=f"*{ty}:16", v_cache=f"*{ty}:16",
               cu_seqlens="*i32:16", block_tables="*i32:16", context_lens="*i32:16",
               out=f"*{ty}:16", sm_scale="fp32", max_blocks="i32", max_seqlen="i32")
    bm, bn, nw, ns, ov = att.prefill_tile_config(D, dtype, paged=paged)
    assert ov == (D == 128 and not paged)
    k = kiln.compile(att._prefill_kernel, signature=sig,
                     constexprs=dict(N_HEADS=32, N_KV_HEADS=8, HEAD_DIM=D, BLOCK_M=bm,
                                     BLOCK_N=bn, BLOCK_SIZE=16, PAGED=paged, OVERLAP=ov),
                     target="sm_90a", num_warps=nw, num_stages=ns)
    ptx = k.asm["ptx"]
    assert ".entry _prefill_kernel" in ptx and "ex2.approx" in ptx
    if dtype != "float32":  # both products on the warpgroup tensor cores
        assert "wgmma.mma_async" in ptx and "mma.sync" not in ptx
    if not paged and dtype != "float32":
        # K and V from qkv's rows stream through cp.async rings, as in flash_attention (the
        # output may go through shared memory after the last product: 16-byte stores)
        assert "cp.async.cg.shared.global" in ptx
        assert "st.shared" not in ptx[:ptx.rindex("wgmma.wait_group")]
    if paged:
        # the gathered rows are read in 16-byte vectors
        assert "ld.global.v4" in ptx and "ld.global.b16" not in ptx


def compile_decode(dtype, D, Hq, Hkv, splits, combine, rope, prefetch=True):
    ty = TY[dtype]
    sig = dict(qkv=f"*{ty}:16", k_cache=f"*{ty}:16", v_cache=f"*{ty}:16",
               block_tables="*i32:16", context_lens="*i32:16", out=f"*{ty}:16",
               part_out="*fp32:16", part_lse="*fp32:16", counters="*i32:16",
               positions="*i32:16", cos="*fp32:16", sin="*fp32:16", slot_mapping="*i32:16",
               sm_scale="fp32", max_blocks="i32", min_chunk="i32:16", one_split="i32",
               n_pos="i32", n_slots="i32")
    cfg, nw = att.decode_launch_config(1, Hq, Hkv, D, splits, dtype=dtype)
    bs = cfg.pop("BLOCK_S")
    assert bs == kiln.next_power_of_2(splits)
    k = kiln.compile(att._decode_kernel, signature=sig,
                     constexprs=dict(N_HEADS=Hq, N_KV_HEADS=Hkv, HEAD_DIM=D, BLOCK_SIZE=16,
                                     NUM_SPLITS=splits, PART_STRIDE=splits, COMBINE=combine,
                                     ROPE=rope, PREFETCH=prefetch, **cfg),
                     target="sm_90a", num_warps=nw)
    return k.asm["ptx"], cfg["BLOCK_N"], nw


def loop_body(ptx):
    """The PTX of the decode kernel's key loop: the longest stretch from a label to a branch
    back to it."""
    bodies = []
    for label in re.findall(r"^\$(L__BB0_\d+):", ptx, re.M):
        body = ptx.split(f"${label}:", 1)[1]
        m = re.search(rf"bra(\.uni)?\s+\${label};", body)
        if m:
            bodies.append(body[:m.start()])
    assert bodies, "no loop in the PTX"
    return max(bodies, key=len)


@pytest.mark.parametrize("dtype,D,Hq,Hkv,splits,combine,rope", [
    ("bfloat16", 64, 32, 8, 1, 0, False), ("bfloat16", 64, 32, 8, 8, 2, False),
    ("bfloat16", 64, 32, 8, 8, 2, True), ("bfloat16", 64, 32, 8, 8, 1, True),
    ("float16", 128, 8, 8, 1, 0, True), ("bfloat16", 256, 32, 8, 8, 2, True),
    ("float32", 64, 8, 2, 3, 2, False), ("float32", 256, 8, 2, 3, 2, True)])
def test_decode_compiles_to_ptx(dtype, D, Hq, Hkv, splits, combine, rope):
    ptx, bn, nw = compile_decode(dtype, D, Hq, Hkv, splits, combine, rope)
    assert ".entry _decode_kernel" in ptx
    body = loop_body(ptx)
    # the loop gathers the next block's K and V rows in 16-byte vectors (two tiles of
    # [BLOCK_N, D]: BLOCK_N * D * size / (16 bytes * threads) loads each) before this block's
    # math
    size = 4 if dtype == "float32" else 2
    vec = 2 * bn * D * size // (16 * 32 * nw)
    assert body.count("ld.global.v4.b32") == vec and "ld.global.b16" not in body
    assert body.index("ld.global.v4.b32") < body.index("mma" if size == 2 else "fma")
    # every store (RoPE's cache write included) follows the loop: no load waits behind one
    assert ptx.index("st.global") > ptx.index(body)
    if (dtype, D) == ("bfloat16", 64):  # s^T = k q^T: 64 keys x 16 heads on wgmma
        assert "wgmma.mma_async.sync.aligned.m64n16k16" in body
    if rope and (dtype, D, combine) == ("bfloat16", 64, 2):
        # RoPE's cos and sin rows depend on the position only: loaded before gdc_wait with
        # the position and slot (2 + 4 table loads more than without RoPE), not after it
        plain = compile_decode(dtype, D, Hq, Hkv, splits, combine, False)[0]
        early = [len(re.findall(r"ld\.global", p.split("griddepcontrol.wait")[0]))
                 for p in (plain, ptx)]
        assert early[1] - early[0] >= 6, early
    elif size == 2:  # 8 warps: mma.sync
        assert "mma.sync.aligned.m16n8k16" in body
    # the registers hold the current and the prefetched K/V tiles: nothing spills
    ptxas = "/usr/local/cuda/bin/ptxas"
    if os.path.exists(ptxas):
        import subprocess
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
            f.write(ptx)
            f.flush()
            r = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                               capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert " 0 bytes spill stores" in r.stderr, r.stderr
    if combine == 2:  # one ticket per program; the partials read back from L2
        assert ptx.count("atom.acq_rel.gpu.global.add.u32") == 1
        assert "ld.global.cg.v4.b32" in ptx
    else:
        assert "atom." not in ptx
    if combine == 1:
        k = kiln.compile(att._decode_combine,
                         signature=dict(part_out="*fp32:16", part_lse="*fp32:16",
                                        out=f"*{TY[dtype]}:16"),
                         constexprs=dict(N_HEADS=Hq, HEAD_DIM=D, NUM_SPLITS=splits,
                                         PART_STRIDE=splits,
                                         BLOCK_S=kiln.next_power_of_2(splits)),
                         target="sm_90a", num_warps=4)
        assert ".entry _decode_combine" in k.asm["ptx"]


def test_decode_without_prefetch_compiles_to_ptx():
    """prefetch=False: each block's table entries, then its K and V rows (16-byte loads),
    are loaded in the loop before its math; nothing is loaded a block ahead."""
    ptx, bn, nw = compile_decode("bfloat16", 64, 32, 8, 8, 2, True, prefetch=False)
    body = loop_body(ptx)
    assert body.count("ld.global.v4.b32") == 2 * bn * 64 * 2 // (16 * 32 * nw)
    assert body.index("ld.global.b32") < body.index("ld.global.v4.b32") < body.index("mma")
    assert "ld.global.b16" not in body


def test_rope_cache_compiles_to_ptx():
    sig = dict(qkv="*bf16:16", positions="*i32:16", cos="*fp32:16", sin="*fp32:16",
               k_cache="*bf16:16", v_cache="*bf16:16", slot_mapping="*i32:16", n_pos="i32",
               n_slots="i32")
    k = kiln.compile(att._rope_cache_kernel, signature=sig,
                     constexprs=dict(N_HEADS=32, N_KV_HEADS=8, HEAD_DIM=64, BLOCK_HQ=32,
                                     BLOCK_HKV=8),
                     target="sm_90a", num_warps=4)
    ptx = k.asm["ptx"]
    assert ".entry _rope_cache_kernel" in ptx
    # q, k and v are read in 16-byte (v: 8-byte) vectors, all before the first store (a load
    # cannot move above a store to qkv: each would wait for memory again)
    assert ptx.rindex("ld.global") < ptx.index("st.global")
    assert "ld.global.b16" not in ptx and "st.global.b16" not in ptx


# ---------------------------------------------------------------- errors

def small_case():
    return Case([3, 2], [3, 6], 4, 2, 16, "float32", 4, seed=8)


def prefill_args(case, **over):
    args = dict(qkv=case.qkv, k_cache=case.k_cache, v_cache=case.v_cache, cu_seqlens=case.cu,
                block_tables=case.tables, context_lens=case.context_lens,
                out=np.zeros((case.qkv.shape[0], case.Hq * case.D), np.float32),
                max_seqlen=max(case.new_lens), n_heads=case.Hq, n_kv_heads=case.Hkv,
                head_dim=case.D, sm_scale=0.25)
    args.update(over)
    return args


@pytest.mark.parametrize("over,match", [
    (dict(n_heads=3), r"prefill_attention: expected n_heads \(3\) to be a multiple of "
                      r"n_kv_heads \(2\)"),
    (dict(head_dim=24), "prefill_attention: expected head_dim of 16, 32, 64, 128 or 256, "
                        "found 24"),
    (dict(n_kv_heads=0), "expected a positive int n_kv_heads, found 0"),
    (dict(qkv=np.zeros((5, 95), np.float32)), r"expected qkv of shape \(T, 128\)"),
    (dict(qkv=np.zeros((5, 128), np.float64)), "expected qkv of dtype"),
    (dict(qkv=np.zeros((128, 5), np.float32).T), "expected qkv to be contiguous"),
    (dict(out=np.zeros((5, 32), np.float32)), r"expected out of shape \(5, 64\)"),
    (dict(out=np.zeros((5, 64), np.float16)), "expected out of dtype float32"),
    (dict(k_cache=np.zeros((7, 3, 2, 16), np.float32)),
     "expected a power-of-two block_size .* found 3"),
    (dict(k_cache=np.zeros((7, 4, 1, 16), np.float32)),
     r"expected k_cache of shape \(num_blocks, block_size, 2, 16\)"),
    (dict(v_cache=np.zeros((8, 4, 2, 16), np.float32)), "k_cache and v_cache of one shape"),
    (dict(cu_seqlens=np.array([0, 3, 5], np.int64)), "expected cu_seqlens of dtype int32"),
    (dict(cu_seqlens=np.array([0, 4, 2], np.int32)), "cu_seqlens non-decreasing"),
    (dict(cu_seqlens=np.array([0, 3, 9], np.int32)), r"<= T \(5\)"),
    (dict(max_seqlen=2), r"sequence 0 has 3 new tokens, more than max_seqlen \(2\)"),
    (dict(context_lens=np.array([2, 6], np.int32)),
     r"context_lens\[0\] = 2 is outside \[3, 12\]"),
    (dict(context_lens=np.array([3, 13], np.int32)),
     r"context_lens\[1\] = 13 is outside \[2, 12\]"),
    (dict(context_lens=np.array([3], np.int32)), r"expected context_lens of shape \(2,\)"),
    (dict(block_tables=np.zeros((3, 3), np.int32)),
     r"expected block_tables of shape \(2, max_blocks\)"),
    (dict(sm_scale=-1.0), "positive, finite sm_scale, found -1.0"),
    (dict(sm_scale=float("nan")), "positive, finite sm_scale, found nan"),
    (dict(kv_from_qkv=True), r"kv_from_qkv=True expects .* context_lens\[1\] = 6 and 2 new"),
])
def test_prefill_errors(over, match):
    with pytest.raises(ValueError, match=match):
        att.prefill_attention(**prefill_args(small_case(), **over), **CPU)


def test_block_table_errors():
    case = small_case()
    bad = case.tables.copy()
    bad[1, 1] = -1  # a block the context uses
    with pytest.raises(ValueError, match=r"block_tables\[1, 1\] = -1 is not a cache block"):
        att.prefill_attention(**prefill_args(case, block_tables=bad), **CPU)
    bad[1, 1] = case.k_cache.shape[0]
    with pytest.raises(ValueError, match=r"block_tables\[1, 1\] = \d+ is not a cache block"):
        att.decode_attention(case.qkv[:2], case.k_cache, case.v_cache, bad, case.context_lens,
                             np.zeros((2, 64), np.float32), 4, 2, 16, 0.25, **CPU)


def test_decode_errors():
    case = small_case()
    qkv, out = case.qkv[:2].copy(), np.zeros((2, 64), np.float32)
    args = (qkv, case.k_cache, case.v_cache, case.tables, case.context_lens, out, 4, 2, 16, 0.25)
    with pytest.raises(ValueError, match=r"expected scratch = \(partial_out, partial_lse\[, "
                                         r"counters\]\)"):
        att.decode_attention(*args, scratch=np.zeros(3, np.float32), **CPU)
    lse = np.zeros((2, 4, 3), np.float32)
    with pytest.raises(ValueError, match=r"scratch's partial_out of shape \(2, 4, 3, 16\)"):
        att.decode_attention(*args, scratch=(np.zeros((2, 4, 2, 16), np.float32), lse), **CPU)
    with pytest.raises(ValueError, match=r"scratch's partial_lse of shape \(>= 2, 4, "):
        att.decode_attention(*args, scratch=(np.zeros((1, 4, 3, 16), np.float32),
                                             lse[:1]), **CPU)
    with pytest.raises(ValueError, match="scratch's partial_lse of dtype float32"):
        att.decode_attention(*args, scratch=(np.zeros((2, 4, 3, 16), np.float32),
                                             lse.astype(np.float16)), **CPU)
    with pytest.raises(ValueError, match="positive int split_min_tokens, found 0"):
        att.decode_attention(*args, split_min_tokens=0, **CPU)
    with pytest.raises(ValueError, match=r"decode_attention: expected out of shape \(2, 64\)"):
        att.decode_attention(*args[:5], np.zeros((3, 64), np.float32), *args[6:], **CPU)
    with pytest.raises(ValueError, match=r"num_splits in \[1, 64\], found 0"):
        att.decode_attention_scratch(2, 4, 16, 100, n_kv_heads=2, num_splits=0)
    with pytest.raises(ValueError, match="at most 64 splits in scratch, found 65"):
        att.decode_attention(*args, scratch=(np.zeros((2, 4, 65, 16), np.float32),
                                             np.zeros((2, 4, 65), np.float32)), **CPU)
    part = (np.zeros((2, 4, 3, 16), np.float32), lse)
    with pytest.raises(ValueError, match=r"scratch's counters of shape \(2, 2\)"):
        att.decode_attention(*args, scratch=part + (np.zeros((2, 4), np.int32),), **CPU)
    with pytest.raises(ValueError, match="scratch's counters of dtype int32"):
        att.decode_attention(*args, scratch=part + (np.zeros((2, 2), np.int64),), **CPU)
    with pytest.raises(ValueError, match=r"num_splits in \[1, 3\] \(the splits scratch holds\), "
                                         r"found 4"):
        att.decode_attention(*args, scratch=part, num_splits=4, **CPU)
    with pytest.raises(ValueError, match=r"num_splits in \[1, 1\] .* found 2"):
        att.decode_attention(*args, num_splits=2, **CPU)


def test_rope_cache_errors():
    T, Hq, Hkv, D = 3, 4, 2, 16
    qkv = np.zeros((T, (Hq + 2 * Hkv) * D), np.float32)
    pos = np.zeros(T, np.int32)
    cos = np.zeros((8, D // 2), np.float32)
    cache = np.zeros((2, 4, Hkv, D), np.float32)
    slots = np.zeros(T, np.int32)
    args = dict(qkv=qkv, positions=pos, cos=cos, sin=cos, k_cache=cache, v_cache=cache,
                slot_mapping=slots, n_heads=Hq, n_kv_heads=Hkv, head_dim=D)
    for over, match in [
            (dict(positions=pos.astype(np.int64)), "expected positions of dtype int32"),
            (dict(positions=pos[:2]), r"expected positions of shape \(3,\)"),
            (dict(cos=np.zeros((8, D), np.float32)), r"expected cos of shape \(P, 8\)"),
            (dict(sin=np.zeros((9, D // 2), np.float32)), "cos and sin of one shape"),
            (dict(sin=cos.astype(np.float16)), "expected sin of dtype float32"),
            (dict(k_cache=cache.astype(np.float16)), "expected k_cache of dtype float32"),
            (dict(positions=np.array([0, 8, 1], np.int32)),
             r"positions\[1\] = 8 is outside the cos/sin table \(P = 8\)"),
            (dict(slot_mapping=np.array([0, -1, 8], np.int32)),
             r"slot_mapping\[2\] = 8 is past the cache's 8 slots"),
            (dict(head_dim=D, n_heads=5), "n_heads \\(5\\) to be a multiple"),
            (dict(cos=None), "expected an array for cos, found NoneType")]:
        with pytest.raises(ValueError, match=match):
            att.rope_cache(**{**args, **over}, **CPU)
