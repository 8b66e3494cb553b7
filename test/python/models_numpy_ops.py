"""A numpy stand-in for kiln_models.ops, for tests only: the ops' contract (issue #24) written
with numpy on host arrays, fp32 math, results cast to the output's dtype. Tests run the model
with it to check the model's own plumbing (buffers, views, the paged cache's slots and block
tables, batching) apart from the kernels; the kernels' tests and the model tests with the real
ops check the rest. Never used by the model itself."""

import numpy as np


def _f32(a):
    return np.asarray(a).astype(np.float32)


def embedding(ids, table, out, stream=None, device=None):
    out[...] = table[ids]


def rmsnorm(x, w, out, eps, stream=None, device=None):
    x32 = _f32(x)
    n = x32 / np.sqrt(np.mean(x32 * x32, axis=-1, keepdims=True) + np.float32(eps))
    out[...] = (_f32(n.astype(out.dtype)) * _f32(w)).astype(out.dtype)


def add_rmsnorm(x, residual, w, out, eps, stream=None, device=None):
    residual[...] = (_f32(residual) + _f32(x)).astype(residual.dtype)
    rmsnorm(residual, w, out, eps)


def linear(x, w, out, scratch=None, stream=None, device=None):
    out[...] = (_f32(x) @ _f32(w).T).astype(out.dtype)


def silu_mul(gate_up, out, stream=None, device=None):
    inter = out.shape[1]
    g, u = _f32(gate_up[:, :inter]), _f32(gate_up[:, inter:])
    out[...] = (g / (1 + np.exp(-g)) * u).astype(out.dtype)


def gather_rows(x, rows, out, stream=None, device=None):
    out[...] = x[rows]


def argmax(logits, out, scratch=None, stream=None, device=None):
    out[...] = np.argmax(_f32(logits), axis=-1)


def rope_cache(qkv, positions, cos, sin, k_cache, v_cache, slot_mapping, n_heads, n_kv_heads,
               head_dim, stream=None, device=None):
    T, D, half = qkv.shape[0], head_dim, head_dim // 2
    heads = qkv.reshape(T, n_heads + 2 * n_kv_heads, D)
    c, s = cos[positions][:, None, :], sin[positions][:, None, :]
    qk = _f32(heads[:, :n_heads + n_kv_heads])
    x1, x2 = qk[..., :half], qk[..., half:]
    heads[:, :n_heads + n_kv_heads] = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s],
                                                     axis=-1).astype(qkv.dtype)
    bs = k_cache.shape[1]
    for t, slot in enumerate(slot_mapping):
        k_cache[slot // bs, slot % bs] = heads[t, n_heads:n_heads + n_kv_heads]
        v_cache[slot // bs, slot % bs] = heads[t, n_heads + n_kv_heads:]


def _attend(q, k_cache, v_cache, table, context, first_pos, n_heads, n_kv_heads, sm_scale):
    """Causal attention of queries q [n, Hq, D] at positions first_pos.. over the cached keys
    0..context of one request."""
    bs, D = k_cache.shape[1], q.shape[-1]
    pos = np.arange(context)
    keys = _f32(k_cache[np.asarray(table)[pos // bs], pos % bs])  # [S, Hkv, D]
    vals = _f32(v_cache[np.asarray(table)[pos // bs], pos % bs])
    group = n_heads // n_kv_heads
    keys, vals = np.repeat(keys, group, axis=1), np.repeat(vals, group, axis=1)
    scores = np.einsum("thd,shd->hts", _f32(q), keys) * np.float32(sm_scale)
    qpos = first_pos + np.arange(q.shape[0])
    scores = np.where(pos[None, None, :] <= qpos[None, :, None], scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hts,shd->thd", p, vals).reshape(q.shape[0], n_heads * D)


def prefill_attention(qkv, k_cache, v_cache, cu_seqlens, block_tables, context_lens, out,
                      max_seqlen, n_heads, n_kv_heads, head_dim, sm_scale, kv_from_qkv=False,
                      stream=None, device=None):
    """kv_from_qkv (every context is its new tokens) reads the same keys from the cache."""
    for b in range(len(context_lens)):
        lo, hi = cu_seqlens[b], cu_seqlens[b + 1]
        q = qkv[lo:hi, :n_heads * head_dim].reshape(hi - lo, n_heads, head_dim)
        ctx = int(context_lens[b])
        out[lo:hi] = _attend(q, k_cache, v_cache, block_tables[b], ctx, ctx - (hi - lo),
                             n_heads, n_kv_heads, sm_scale).astype(out.dtype)


def decode_attention(qkv, k_cache, v_cache, block_tables, context_lens, out, n_heads,
                     n_kv_heads, head_dim, sm_scale, scratch=None, stream=None, device=None,
                     positions=None, cos=None, sin=None, slot_mapping=None):
    if positions is not None:  # RoPE and the cache write fused (qkv itself is not written)
        qkv = qkv.copy()
        rope_cache(qkv, positions, cos, sin, k_cache, v_cache, slot_mapping, n_heads,
                   n_kv_heads, head_dim)
    for b in range(len(context_lens)):
        q = qkv[b:b + 1, :n_heads * head_dim].reshape(1, n_heads, head_dim)
        ctx = int(context_lens[b])
        out[b:b + 1] = _attend(q, k_cache, v_cache, block_tables[b], ctx, ctx - 1, n_heads,
                               n_kv_heads, sm_scale).astype(out.dtype)


def sample(logits, out, temperature, top_k, top_p, seed, step, scratch=None, stream=None,
           device=None, keys=None):
    """Top-k / top-p sampling with numpy's generator seeded by (seed, step, the row's key:
    keys[b] or b); step an int or an int32 array [1] (read when the call runs, as the kernel
    reads it on the device)."""
    step = int(np.asarray(step).reshape(-1)[0])
    for b in range(logits.shape[0]):
        z = _f32(logits[b]) / np.float32(temperature)
        order = np.argsort(-z, kind="stable")
        if top_k:
            order = order[:top_k]
        p = np.exp(z[order] - z[order[0]])
        p /= p.sum()
        keep = np.searchsorted(np.cumsum(p), top_p) + 1
        order, p = order[:keep], p[:keep] / p[:keep].sum()
        u = np.random.default_rng([seed, step, int(keys[b]) if keys is not None else b]).random()
        out[b] = order[min(np.searchsorted(np.cumsum(p), u), len(order) - 1)]



def quantize_int8(w):
    from kiln_models.ops import quant  # the quantizers are numpy host code
    return quant.quantize_int8(w)


def quantize_int4(w, group=128):
    from kiln_models.ops import quant
    return quant.quantize_int4(w, group)


def linear_int8(x, q, scales, out, scratch=None, stream=None, device=None):
    w = q.astype(np.float32) * scales[:, None]
    out[...] = (_f32(x) @ w.T).astype(out.dtype)


def linear_int4(x, packed, scales, out, group=128, scratch=None, stream=None, device=None):
    q = np.empty((packed.shape[0], 2 * packed.shape[1]), np.float32)
    q[:, 0::2] = (packed & 15).astype(np.float32) - 8
    q[:, 1::2] = (packed >> 4).astype(np.float32) - 8
    w = q * np.repeat(scales, group, axis=1)
    out[...] = (_f32(x) @ w.T).astype(out.dtype)
