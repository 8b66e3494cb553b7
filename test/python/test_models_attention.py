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
- GPU (marker `gpu`): the same ops on torch CUDA tensors against SDPA on gathered K/V.
"""
import math
import os
import sys

import numpy as np
import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))

from kiln_models.ops import attention as att  # noqa: E402

CPU = dict(device="cpu")
# max |out - ref| for outputs of magnitude ~1: fp32 (exact products), bf16 (p and the output
# rounded to 2^-8)
ATOL = {"float32": 2e-5, "bfloat16": 2e-2}


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


def run_decode(case, num_splits=None, split_min_tokens=16, spare_batch=0):
    scale = 1.0 / math.sqrt(case.D)
    B = len(case.new_lens)
    out = np.full((B, case.Hq * case.D), np.nan, np.float32).astype(case.qkv.dtype)
    scratch = None
    if num_splits:
        shapes = att.decode_attention_scratch(B + spare_batch, case.Hq, case.D, 0,
                                              n_kv_heads=case.Hkv, num_splits=num_splits)
        scratch = tuple(np.full(s, np.nan, np.float32) for s in shapes)
    att.decode_attention(case.qkv, case.k_cache, case.v_cache, case.tables, case.context_lens,
                         out, sm_scale=scale, scratch=scratch,
                         split_min_tokens=split_min_tokens, **case.heads(), **CPU)
    check(out, case.reference(scale), case.dtype)


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

@pytest.mark.parametrize("num_splits", [None, 3])
def test_decode_fp32_gqa2(num_splits):
    # contexts of 1, 7, a whole number of tiles, 53 and 0 (a padding row: zeros)
    case = Case([1] * 5, [1, 7, 32, 53, 0], 4, 2, 16, "float32", 4, seed=4)
    run_decode(case, num_splits)


def test_decode_bf16_gqa4_many_splits():
    # 8 splits of at least 16 keys: the 100-key context uses 7, the others one; the scratch
    # was sized for a larger batch
    case = Case([1] * 3, [1, 100, 17], 4, 1, 64, "bfloat16", 16, seed=5)
    run_decode(case, num_splits=8, spare_batch=2)


def test_decode_mha_d64():
    case = Case([1] * 2, [40, 9], 2, 2, 64, "float32", 32, seed=6)
    run_decode(case, num_splits=2)


def test_decode_split_count():
    assert att.decode_split_count(1, 8, 640) == 5          # 640 / 128 keys
    assert att.decode_split_count(1, 8, 100000) == 33      # 2 * 132 / 8 programs
    assert att.decode_split_count(16, 8, 100000) == 3
    assert att.decode_split_count(64, 8, 100000) == 1
    assert att.decode_split_count(1, 8, 5) == 1
    assert att.decode_attention_scratch(4, 32, 64, 640, n_kv_heads=8) == \
        ((4, 32, 5, 64), (4, 32, 5))


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

def test_prefill_compiles_to_ptx():
    # the Llama-3.2-1B shape (Hq 32, Hkv 8, D 64) in bf16, from qkv and through the table
    for paged in (False, True):
        sig = dict(qkv="*bf16:16", k_cache="*bf16:16", v_cache="*bf16:16",
                   cu_seqlens="*i32:16", block_tables="*i32:16", context_lens="*i32:16",
                   out="*bf16:16", sm_scale="fp32", max_blocks="i32:16", max_seqlen="i32:16")
        bm, bn, nw, ns, ov = att.prefill_tile_config(64, "bfloat16")
        k = kiln.compile(att._prefill_kernel, signature=sig,
                         constexprs=dict(N_HEADS=32, N_KV_HEADS=8, HEAD_DIM=64, BLOCK_M=bm,
                                         BLOCK_N=bn, BLOCK_SIZE=16, PAGED=paged, OVERLAP=ov),
                         target="sm_90a", num_warps=nw, num_stages=ns)
        ptx = k.asm["ptx"]
        assert ".entry _prefill_kernel" in ptx and "wgmma.mma_async" in ptx
        assert "ex2.approx" in ptx


def test_overlap_prefill_compiles_to_ptx():
    sig = dict(qkv="*fp16:16", k_cache="*fp16:16", v_cache="*fp16:16", cu_seqlens="*i32:16",
               block_tables="*i32:16", context_lens="*i32:16", out="*fp16:16",
               sm_scale="fp32", max_blocks="i32", max_seqlen="i32")
    bm, bn, nw, ns, ov = att.prefill_tile_config(128, "float16")
    assert ov
    k = kiln.compile(att._prefill_kernel, signature=sig,
                     constexprs=dict(N_HEADS=32, N_KV_HEADS=8, HEAD_DIM=128, BLOCK_M=bm,
                                     BLOCK_N=bn, BLOCK_SIZE=16, PAGED=False, OVERLAP=True),
                     target="sm_90a", num_warps=nw, num_stages=ns)
    assert "wgmma.mma_async" in k.asm["ptx"]


def test_decode_and_rope_compile_to_ptx():
    bn, nw = att.decode_tile_config()
    sig = dict(qkv="*bf16:16", k_cache="*bf16:16", v_cache="*bf16:16",
               block_tables="*i32:16", context_lens="*i32:16", out="*bf16:16",
               part_out="*fp32:16", part_lse="*fp32:16", sm_scale="fp32", max_blocks="i32",
               min_chunk="i32:16")
    k = kiln.compile(att._decode_kernel, signature=sig,
                     constexprs=dict(N_HEADS=32, N_KV_HEADS=8, HEAD_DIM=64, GROUP_PAD=16,
                                     BLOCK_N=bn, BLOCK_SIZE=16, NUM_SPLITS=8),
                     target="sm_90a", num_warps=nw)
    assert ".entry _decode_kernel" in k.asm["ptx"]
    k = kiln.compile(att._decode_combine,
                     signature=dict(part_out="*fp32:16", part_lse="*fp32:16", out="*bf16:16"),
                     constexprs=dict(N_HEADS=32, HEAD_DIM=64, NUM_SPLITS=8, BLOCK_S=8),
                     target="sm_90a", num_warps=4)
    assert ".entry _decode_combine" in k.asm["ptx"]
    sig = dict(qkv="*bf16:16", positions="*i32:16", cos="*fp32:16", sin="*fp32:16",
               k_cache="*bf16:16", v_cache="*bf16:16", slot_mapping="*i32:16", n_pos="i32",
               n_slots="i32")
    k = kiln.compile(att._rope_cache_kernel, signature=sig,
                     constexprs=dict(N_HEADS=32, N_KV_HEADS=8, HEAD_DIM=64, BLOCK_HQ=32,
                                     BLOCK_HKV=8),
                     target="sm_90a", num_warps=4)
    assert ".entry _rope_cache_kernel" in k.asm["ptx"]
