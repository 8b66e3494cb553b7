"""Attention of the model's hot path on a paged KV cache: RoPE fused with the cache write,
prefill (flash attention over variable-length sequences) and decode (flash-decoding).

Layouts (every array contiguous; integer arrays int32; activations fp32, bf16 or fp16, one
dtype for qkv, the caches and out; math in fp32, the two attention products on tensor cores
with fp32 accumulation for bf16/fp16 and exact fp32 products for fp32):

- qkv `[T, (Hq + 2 * Hkv) * D]`: row t holds the q heads in columns [0, Hq*D), the k heads in
  [Hq*D, (Hq+Hkv)*D), the v heads after them (the fused QKV projection's output).
- k_cache, v_cache `[num_blocks, block_size, Hkv, D]`: block_size a power of two; key position
  j of sequence b lives in slot `block_tables[b, j // block_size] * block_size + j %
  block_size` (a slot is `block * block_size + offset`).
- D (head_dim) is 16, 32, 64, 128 or 256; Hq a multiple of Hkv (grouped-query attention:
  query head h reads key/value head h // (Hq / Hkv)).

Ops (each launches kernels only: outputs and scratch come preallocated, nothing is allocated
or copied and nothing waits for the device; `stream` is a CUstream as an int, `device="cpu"`
forces the CPU backend; numpy arrays run there anyway):

- `rope_cache(qkv, positions, cos, sin, k_cache, v_cache, slot_mapping, n_heads, n_kv_heads,
  head_dim)`: in place, RoPE (HF rotate-half: x * cos + rotate_half(x) * sin, cos/sin the D/2
  frequencies repeated twice) on the q and k heads of each row t of qkv at position
  positions[t] (cos, sin `[P, D/2]` fp32, made by the model with its frequency scaling), then
  the rotated k and the v of row t written to cache slot slot_mapping[t]; a negative slot
  (a padding row) writes nothing to the cache; every row's position, padding rows' too, must
  index the table. One program per row, every head in one tile.
- `prefill_attention(qkv, k_cache, v_cache, cu_seqlens, block_tables, context_lens, out,
  max_seqlen, n_heads, n_kv_heads, head_dim, sm_scale, kv_from_qkv=False)`: for each sequence
  b, its new tokens are rows cu_seqlens[b] .. cu_seqlens[b+1] of qkv (n_b of them, at most
  max_seqlen) and its context is keys 0 .. context_lens[b] (n_b or more: the new keys are its
  last n_b, already in the cache through rope_cache); new token i attends causally to keys
  0 .. context_lens[b] - n_b + i; out `[T, Hq * D]` gets the result in qkv's rows.
  FlashAttention-2: a program per (BLOCK_M new tokens, sequence, query head), the heaviest
  query blocks launched first. `kv_from_qkv=True` is the caller's promise that every context
  is only its new tokens (a fresh prompt; numpy inputs: the promise is checked): keys and
  values are then read from qkv's own rows, a fixed stride apart, as
  kiln_kernels.flash_attention reads them (the keys left of the block's first row in an
  unmasked loop, the diagonal ones in a masked one, cp.async rings on sm_80+, the rotated
  loop at D = 128), which is the fast path. Through the block table (the default, and the
  only way for a prompt continued after cached tokens) the K and V rows are gathered with
  addresses loaded in the loop, which Kiln's pipeliner does not copy ahead: they pass through
  registers (one masked loop over all the keys, 16-byte loads).
- `decode_attention(qkv, k_cache, v_cache, block_tables, context_lens, out, n_heads,
  n_kv_heads, head_dim, sm_scale, scratch=None)`: one query per sequence (row b of qkv) over
  its context_lens[b] cached keys (the new one included). Flash-decoding: a program per
  (sequence, KV head, split) holds the Hq/Hkv query heads of that KV group (padded to 16)
  and computes their scores transposed, k [BLOCK_N, D] x q^T [D, GROUP] (K and V read once
  per group, K as loaded as the row-major operand), walks its split's keys
  through the block table and leaves a normalized partial output and its log-sum-exp in
  `scratch`; a combine kernel per (sequence, query head) weighs the splits. The split count is
  scratch's (fixed, so the launch can be captured in a CUDA graph); each sequence divides its
  own context among the splits in chunks of at least `split_min_tokens` keys, so a short
  context runs in one split and the others exit at once. Without scratch: one split, the
  output written directly. A context of 0 keys gives a zero output row (padding rows).
- `decode_attention_scratch(batch, n_heads, head_dim, max_context, n_kv_heads=None, ...)`:
  the shapes `(partial_out, partial_lse)` = `((batch, Hq, S, D), (batch, Hq, S))` of the fp32
  scratch decode_attention takes, S chosen so that batch * Hkv * S programs fill the GPU
  (two per SM) without giving a split fewer than `split_min_tokens` of max_context's keys.
  Scratch allocated for a larger batch also serves smaller ones.

Bad shapes, dtypes, layouts and (for numpy inputs, where reading them costs nothing) bad
index values raise ValueError naming the op and the argument. Device-resident index arrays
are not read by the host; debug mode (KILN_DEBUG=1) checks them with device asserts.
"""
import math

import numpy as np

import kiln
import kiln.language as tl

__all__ = ["rope_cache", "prefill_attention", "decode_attention", "decode_attention_scratch"]

NUM_SMS = 132              # H100 SXM: what the split heuristic fills by default
SPLIT_MIN_TOKENS = 128     # fewest keys a decode split is given (when the context has them)
MAX_SPLITS = 64            # the combine kernel reads all of a row's splits as one tile
HEAD_DIMS = (16, 32, 64, 128, 256)


# ---------------------------------------------------------------- kernels: RoPE + cache write

@kiln.jit
def _rope_cache_kernel(qkv, positions, cos, sin, k_cache, v_cache, slot_mapping, n_pos,
                       n_slots, N_HEADS: tl.constexpr, N_KV_HEADS: tl.constexpr,
                       HEAD_DIM: tl.constexpr, BLOCK_HQ: tl.constexpr,
                       BLOCK_HKV: tl.constexpr):
    """Grid (T,): row t of qkv rotated in place, its k and v copied to slot slot_mapping[t]."""
    HALF: tl.constexpr = HEAD_DIM // 2
    ROW: tl.constexpr = (N_HEADS + 2 * N_KV_HEADS) * HEAD_DIM
    KV_ROW: tl.constexpr = N_KV_HEADS * HEAD_DIM
    t = tl.program_id(0)
    pos = tl.load(positions + t)
    slot = tl.load(slot_mapping + t)
    tl.device_assert((pos >= 0) & (pos < n_pos), "rope_cache: position outside the cos table")
    tl.device_assert(slot < n_slots, "rope_cache: slot past the end of the cache")
    d = tl.arange(0, HALF)
    c = tl.load(cos + pos.to(tl.int64) * HALF + d)[None, :]
    s = tl.load(sin + pos.to(tl.int64) * HALF + d)[None, :]
    row = qkv + t.to(tl.int64) * ROW

    hq = tl.arange(0, BLOCK_HQ)
    q_off = hq[:, None] * HEAD_DIM + d[None, :]
    q_ok = hq[:, None] < N_HEADS
    x1 = tl.load(row + q_off, mask=q_ok, other=0.0).to(tl.float32)
    x2 = tl.load(row + q_off + HALF, mask=q_ok, other=0.0).to(tl.float32)
    tl.store(row + q_off, (x1 * c - x2 * s).to(qkv.dtype.element_ty), mask=q_ok)
    tl.store(row + q_off + HALF, (x2 * c + x1 * s).to(qkv.dtype.element_ty), mask=q_ok)

    hk = tl.arange(0, BLOCK_HKV)
    kv_ok = hk[:, None] < N_KV_HEADS
    k_off = N_HEADS * HEAD_DIM + hk[:, None] * HEAD_DIM + d[None, :]
    x1 = tl.load(row + k_off, mask=kv_ok, other=0.0).to(tl.float32)
    x2 = tl.load(row + k_off + HALF, mask=kv_ok, other=0.0).to(tl.float32)
    k1 = (x1 * c - x2 * s).to(qkv.dtype.element_ty)
    k2 = (x2 * c + x1 * s).to(qkv.dtype.element_ty)
    tl.store(row + k_off, k1, mask=kv_ok)
    tl.store(row + k_off + HALF, k2, mask=kv_ok)

    cache_ok = kv_ok & (slot >= 0)
    c_off = slot.to(tl.int64) * KV_ROW + hk[:, None] * HEAD_DIM + d[None, :]
    tl.store(k_cache + c_off, k1.to(k_cache.dtype.element_ty), mask=cache_ok)
    tl.store(k_cache + c_off + HALF, k2.to(k_cache.dtype.element_ty), mask=cache_ok)
    dv = tl.arange(0, HEAD_DIM)
    v_off = (N_HEADS + N_KV_HEADS) * HEAD_DIM + hk[:, None] * HEAD_DIM + dv[None, :]
    v = tl.load(row + v_off, mask=cache_ok, other=0.0)
    tl.store(v_cache + slot.to(tl.int64) * KV_ROW + hk[:, None] * HEAD_DIM + dv[None, :],
             v.to(v_cache.dtype.element_ty), mask=cache_ok)


# ---------------------------------------------------------------- kernels: prefill

@kiln.jit
def _prefill_inner(acc, l_i, m_i, q, k_base, v_base, bt, stride_n: tl.constexpr, qk_scale,
                   qpos, lo, hi, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_SIZE: tl.constexpr, PAGED: tl.constexpr, MASKED: tl.constexpr):
    """Folds keys [lo, hi) into the online softmax (acc, l_i, m_i). A key j sits at
    k_base + row(j) (+ d): row(j) = j * stride_n (qkv's rows), or, PAGED, the slot of j in the
    block table bt times stride_n. MASKED: keys past hi are not read, and query rows see only
    keys j <= qpos (causal); unmasked blocks are whole and fully visible."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        key_ok = cols < hi
        if PAGED:
            if MASKED:
                blk = tl.load(bt + cols // BLOCK_SIZE, mask=key_ok, other=0)
            else:
                blk = tl.load(bt + cols // BLOCK_SIZE)
            rows = (blk.to(tl.int64) * BLOCK_SIZE + cols % BLOCK_SIZE) * stride_n
        else:
            rows = cols * stride_n
        v_ptrs = v_base + rows[:, None] + offs_d[None, :]
        if PAGED:
            # gathered rows: loaded [BLOCK_N, D] (16-byte vectors along D), transposed for
            # the dot
            k_ptrs = k_base + rows[:, None] + offs_d[None, :]
            if MASKED:
                k = tl.load(k_ptrs, mask=key_ok[:, None], other=0.0)
            else:
                k = tl.load(k_ptrs)
            kT = tl.trans(k)
        else:
            # K read transposed (flash_attention's form; cp.async copies it into its ring)
            kT_ptrs = k_base + offs_d[:, None] + rows[None, :]
            if MASKED:
                kT = tl.load(kT_ptrs, mask=key_ok[None, :], other=0.0)
            else:
                kT = tl.load(kT_ptrs)
        if MASKED:
            v = tl.load(v_ptrs, mask=key_ok[:, None], other=0.0)
        else:
            v = tl.load(v_ptrs)
        qk = tl.dot(q, kT, input_precision="ieee")
        if MASKED:
            # Every row sees key lo (lo <= the block's first position), so the first masked
            # block gives each row a finite maximum and no exp2 sees inf - inf. Keys at or
            # past hi (not read: zeros) lie after every stored row's position (hi is at least
            # the last row's position + 1 or the context's end), so the causal mask hides them.
            keep = qpos[:, None] >= cols[None, :]
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, axis=1))
            qk = qk - m_ij[:, None]
        else:
            # qk_scale > 0: scale the row maximum once, then scale and centre in one fma
            m_ij = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.exp2(qk)
        alpha = tl.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision="ieee")
        m_i = m_ij
    return acc, l_i, m_i


@kiln.jit
def _prefill_inner_overlap(acc, l_i, m_i, q, k_base, v_base, stride_n: tl.constexpr, qk_scale,
                           lo, hi, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr):
    """_prefill_inner for whole, unmasked blocks of keys in qkv's rows, rotated: iteration j
    issues q k_j^T and p_(j-1) v_(j-1) together, so the tensor cores add the second while the
    softmax of block j runs (kiln_kernels.flash_attention's overlap loop). One iteration more
    than there are blocks: the first has no p (zeros, v not read), the last no keys."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    p = tl.zeros([BLOCK_M, BLOCK_N], dtype=q.dtype)
    for start_n in range(lo, hi + BLOCK_N, BLOCK_N):
        has_keys = start_n < hi
        cols = start_n + offs_n
        kT = tl.load(k_base + offs_d[:, None] + cols[None, :] * stride_n, mask=has_keys,
                     other=0.0)
        v = tl.load(v_base + (cols - BLOCK_N)[:, None] * stride_n + offs_d[None, :],
                    mask=start_n > lo, other=0.0)
        qk = tl.dot(q, kT)
        acc = tl.dot(p, v, acc)
        m_ij = tl.where(has_keys, tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale), m_i)
        p_f32 = tl.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.where(has_keys, tl.exp2(m_i - m_ij), 1.0)  # m_i is -inf before block 0
        l_i = l_i * alpha + tl.where(has_keys, tl.sum(p_f32, axis=1), 0.0)
        acc = acc * alpha[:, None]
        p = p_f32.to(q.dtype)
        m_i = m_ij
    return acc, l_i, m_i


@kiln.jit
def _prefill_kernel(qkv, k_cache, v_cache, cu_seqlens, block_tables, context_lens, out,
                    sm_scale, max_blocks, max_seqlen,
                    N_HEADS: tl.constexpr, N_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                    PAGED: tl.constexpr, OVERLAP: tl.constexpr):
    """Grid (B * Hq, cdiv(max_seqlen, BLOCK_M)); axis 1 counts query blocks from the last, so
    the longest causal walks start first. A block past its sequence's end runs empty loops
    and stores nothing (no early exit around the loops)."""
    GROUP: tl.constexpr = N_HEADS // N_KV_HEADS
    ROW: tl.constexpr = (N_HEADS + 2 * N_KV_HEADS) * HEAD_DIM
    OUT_ROW: tl.constexpr = N_HEADS * HEAD_DIM
    pid_bh = tl.program_id(0)
    b = pid_bh // N_HEADS
    h = pid_bh % N_HEADS
    hk = h // GROUP
    start_m = tl.num_programs(1) - 1 - tl.program_id(1)
    seq_start = tl.load(cu_seqlens + b)
    n = tl.load(cu_seqlens + b + 1) - seq_start
    tl.device_assert((n >= 0) & (n <= max_seqlen), "prefill_attention: a sequence is longer "
                     "than max_seqlen (or cu_seqlens decreases)")
    if PAGED:
        ctx = tl.load(context_lens + b)
        tl.device_assert((ctx >= n) & (ctx <= max_blocks * BLOCK_SIZE),
                         "prefill_attention: context_lens outside [new tokens, table size]")
    else:
        ctx = n
    first = seq_start.to(tl.int64) * ROW

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < n
    q = tl.load(qkv + first + h * HEAD_DIM + offs_m[:, None] * ROW + offs_d[None, :],
                mask=row_ok[:, None], other=0.0)

    # New token i sits at position ctx - n + i. Keys left of the block's first position p0
    # are seen by every row (whole blocks up to diag_lo, unmasked); the rest up to the last
    # row's position are masked.
    active = start_m * BLOCK_M < n
    p0 = ctx - n + start_m * BLOCK_M
    qpos = offs_m + (ctx - n)
    diag_lo = tl.where(active, (p0 // BLOCK_N) * BLOCK_N, 0)
    diag_hi = tl.where(active, tl.minimum(p0 + BLOCK_M, ctx), 0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e): exp2 replaces exp
    if PAGED:
        KV_ROW: tl.constexpr = N_KV_HEADS * HEAD_DIM
        bt = block_tables + b.to(tl.int64) * max_blocks
        k_base = k_cache + hk * HEAD_DIM
        v_base = v_cache + hk * HEAD_DIM
        # One masked walk over all the keys: with an unmasked loop before it, Kiln today
        # gives the second loop's gathered K and V loads 2-byte accesses instead of 16-byte
        # vectors (the masks cost a compare and a select per score).
        acc, l_i, m_i = _prefill_inner(acc, l_i, m_i, q, k_base, v_base, bt, KV_ROW,
                                       qk_scale, qpos, 0, diag_hi, HEAD_DIM, BLOCK_N,
                                       BLOCK_SIZE, True, True)
    else:
        k_base = qkv + first + (N_HEADS + hk) * HEAD_DIM
        v_base = qkv + first + (N_HEADS + N_KV_HEADS + hk) * HEAD_DIM
        if OVERLAP:
            acc, l_i, m_i = _prefill_inner_overlap(acc, l_i, m_i, q, k_base, v_base, ROW,
                                                   qk_scale, 0, diag_lo, HEAD_DIM, BLOCK_M,
                                                   BLOCK_N)
        else:
            acc, l_i, m_i = _prefill_inner(acc, l_i, m_i, q, k_base, v_base, block_tables,
                                           ROW, qk_scale, qpos, 0, diag_lo, HEAD_DIM,
                                           BLOCK_N, BLOCK_SIZE, False, False)
        acc, l_i, m_i = _prefill_inner(acc, l_i, m_i, q, k_base, v_base, block_tables, ROW,
                                       qk_scale, qpos, diag_lo, diag_hi, HEAD_DIM, BLOCK_N,
                                       BLOCK_SIZE, False, True)

    o = acc / l_i[:, None]  # rows past n (l_i 0 in empty blocks) are not stored
    tl.store(out + seq_start.to(tl.int64) * OUT_ROW + h * HEAD_DIM + offs_m[:, None] * OUT_ROW
             + offs_d[None, :], o.to(out.dtype.element_ty), mask=row_ok[:, None])


# ---------------------------------------------------------------- kernels: decode

@kiln.jit
def _decode_kernel(qkv, k_cache, v_cache, block_tables, context_lens, out, part_out,
                   part_lse, sm_scale, max_blocks, min_chunk,
                   N_HEADS: tl.constexpr, N_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
                   GROUP_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                   NUM_SPLITS: tl.constexpr):
    """Grid (B, Hkv, NUM_SPLITS). The GROUP query heads of KV head hk are the rows of q
    (padded to GROUP_PAD >= 16 for tl.dot). Sequence b's keys are cut into NUM_SPLITS chunks
    of a whole number of BLOCK_N, at least min_chunk keys each; split s takes chunk s (none
    when the context is shorter). One split writes out; several write the normalized partial
    output and its base-2 log-sum-exp (-inf: no keys) for _decode_combine."""
    GROUP: tl.constexpr = N_HEADS // N_KV_HEADS
    ROW: tl.constexpr = (N_HEADS + 2 * N_KV_HEADS) * HEAD_DIM
    KV_ROW: tl.constexpr = N_KV_HEADS * HEAD_DIM
    b = tl.program_id(0)
    hk = tl.program_id(1)
    split = tl.program_id(2)
    ctx = tl.load(context_lens + b)
    tl.device_assert((ctx >= 0) & (ctx <= max_blocks * BLOCK_SIZE),
                     "decode_attention: context_lens outside [0, table size]")
    if NUM_SPLITS == 1:
        lo = 0
        hi = ctx
    else:
        chunk = ((ctx + NUM_SPLITS - 1) // NUM_SPLITS + BLOCK_N - 1) // BLOCK_N * BLOCK_N
        chunk = tl.maximum(chunk, min_chunk)
        lo = split * chunk
        hi = tl.minimum(lo + chunk, ctx)

    g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    g_ok = g < GROUP
    heads = hk * GROUP + g
    # q^T [D, GROUP_PAD]: the scores come out transposed, s^T = k q^T [BLOCK_N, GROUP_PAD],
    # so that k (rows of D contiguous elements) is the row-major A operand as it is loaded and
    # only p^T, GROUP_PAD / D the size of k, is transposed for p v.
    qT = tl.load(qkv + b.to(tl.int64) * ROW + heads[None, :] * HEAD_DIM + offs_d[:, None],
                 mask=g_ok[None, :], other=0.0)
    bt = block_tables + b.to(tl.int64) * max_blocks
    k_base = k_cache + hk * HEAD_DIM
    v_base = v_cache + hk * HEAD_DIM
    qk_scale = sm_scale * 1.4426950408889634

    m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        key_ok = cols < hi
        blk = tl.load(bt + cols // BLOCK_SIZE, mask=key_ok, other=0)
        rows = (blk.to(tl.int64) * BLOCK_SIZE + cols % BLOCK_SIZE) * KV_ROW
        k = tl.load(k_base + rows[:, None] + offs_d[None, :], mask=key_ok[:, None], other=0.0)
        v = tl.load(v_base + rows[:, None] + offs_d[None, :], mask=key_ok[:, None], other=0.0)
        sT = tl.dot(k, qT, input_precision="ieee")
        # key start_n < hi is in every block, so m_ij is finite
        sT = tl.where(key_ok[:, None], sT * qk_scale, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(sT, axis=0))
        pT = tl.exp2(sT - m_ij[None, :])
        alpha = tl.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(pT, axis=0)
        acc = acc * alpha[:, None]
        acc = tl.dot(tl.trans(pT.to(v.dtype)), v, acc, input_precision="ieee")
        m_i = m_ij

    has_keys = l_i > 0
    o = acc / tl.where(has_keys, l_i, 1.0)[:, None]  # no keys: zeros
    if NUM_SPLITS == 1:
        tl.store(out + b.to(tl.int64) * (N_HEADS * HEAD_DIM) + heads[:, None] * HEAD_DIM
                 + offs_d[None, :], o.to(out.dtype.element_ty), mask=g_ok[:, None])
    else:
        part = (b.to(tl.int64) * N_HEADS + heads) * NUM_SPLITS + split
        tl.store(part_out + part[:, None] * HEAD_DIM + offs_d[None, :], o, mask=g_ok[:, None])
        lse = tl.where(has_keys, m_i + tl.log2(tl.where(has_keys, l_i, 1.0)), float("-inf"))
        tl.store(part_lse + part, lse, mask=g_ok)


@kiln.jit
def _decode_combine(part_out, part_lse, out, N_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
                    NUM_SPLITS: tl.constexpr, BLOCK_S: tl.constexpr):
    """Grid (B * Hq): out = sum_s w_s o_s / sum_s w_s with w_s = 2^(lse_s - max lse); splits
    without keys (lse -inf) weigh 0, and a row without any keys is 0."""
    bh = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    s_ok = s < NUM_SPLITS
    lse = tl.load(part_lse + bh * NUM_SPLITS + s, mask=s_ok, other=float("-inf"))
    top = tl.max(lse, axis=0)
    top = tl.where(top == float("-inf"), 0.0, top)
    w = tl.exp2(lse - top)
    used = s_ok & (lse > float("-inf"))
    o = tl.load(part_out + (bh * NUM_SPLITS + s[:, None]) * HEAD_DIM + offs_d[None, :],
                mask=used[:, None], other=0.0)
    total = tl.sum(w, axis=0)
    res = tl.sum(o * w[:, None], axis=0) / tl.where(total > 0, total, 1.0)
    tl.store(out + bh * HEAD_DIM + offs_d, res.to(out.dtype.element_ty))


# ---------------------------------------------------------------- host side: checks

def _dtype(a):
    """The numpy-style name of an array's dtype: numpy (ml_dtypes' bfloat16 too),
    kiln.DeviceArray, torch."""
    dt = getattr(a, "dtype", None)
    name = dt if isinstance(dt, str) else getattr(dt, "name", None)
    if name is None:
        name = str(dt)
    return str(name).replace("torch.", "")


def _shape(a):
    return tuple(int(x) for x in a.shape)


def _contiguous(a):
    flags = getattr(a, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    if callable(getattr(a, "is_contiguous", None)):
        return bool(a.is_contiguous())
    return True  # kiln.DeviceArray: always contiguous


def _host(a):
    """a as a numpy array when it is one (its values are free to read), else None."""
    return a if isinstance(a, np.ndarray) else None


ACT_DTYPES = ("float32", "bfloat16", "float16")


def _check_array(op, name, a, shape=None, dtype=None):
    if a is None or not hasattr(a, "shape"):
        raise ValueError(f"{op}: expected an array for {name}, found {type(a).__name__}")
    if shape is not None and _shape(a) != tuple(shape):
        raise ValueError(f"{op}: expected {name} of shape {tuple(shape)}, found {_shape(a)}")
    if dtype is not None and _dtype(a) not in ((dtype,) if isinstance(dtype, str) else dtype):
        raise ValueError(f"{op}: expected {name} of dtype {dtype}, found {_dtype(a)}")
    if not _contiguous(a):
        raise ValueError(f"{op}: expected {name} to be contiguous (row-major)")


def _check_heads(op, n_heads, n_kv_heads, head_dim):
    for name, v in (("n_heads", n_heads), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{op}: expected a positive int {name}, found {v!r}")
    if n_heads % n_kv_heads:
        raise ValueError(f"{op}: expected n_heads ({n_heads}) to be a multiple of n_kv_heads "
                         f"({n_kv_heads})")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"{op}: expected head_dim of 16, 32, 64, 128 or 256, found "
                         f"{head_dim}")
    return int(n_heads), int(n_kv_heads), int(head_dim)


def _check_qkv(op, qkv, rows, n_heads, n_kv_heads, head_dim):
    """qkv [rows, (Hq + 2 Hkv) D] of an activation dtype; rows None: any. Its dtype."""
    width = (n_heads + 2 * n_kv_heads) * head_dim
    _check_array(op, "qkv", qkv, dtype=ACT_DTYPES)
    if len(qkv.shape) != 2 or qkv.shape[1] != width or (rows is not None
                                                        and qkv.shape[0] != rows):
        want = f"({'T' if rows is None else rows}, {width})"
        raise ValueError(f"{op}: expected qkv of shape {want} ((n_heads + 2 * n_kv_heads) * "
                         f"head_dim columns), found {_shape(qkv)}")
    return _dtype(qkv)


def _check_cache(op, k_cache, v_cache, n_kv_heads, head_dim, dtype):
    """k_cache, v_cache [num_blocks, block_size, Hkv, D] of qkv's dtype; (num_blocks,
    block_size)."""
    for name, c in (("k_cache", k_cache), ("v_cache", v_cache)):
        _check_array(op, name, c, dtype=dtype)
        s = _shape(c)
        if len(s) != 4 or s[2:] != (n_kv_heads, head_dim) or s[0] < 1:
            raise ValueError(f"{op}: expected {name} of shape (num_blocks, block_size, "
                             f"{n_kv_heads}, {head_dim}), found {s}")
        if s[1] < 1 or s[1] & (s[1] - 1):
            raise ValueError(f"{op}: expected a power-of-two block_size (dimension 1 of "
                             f"{name}), found {s[1]}")
    if _shape(k_cache) != _shape(v_cache):
        raise ValueError(f"{op}: expected k_cache and v_cache of one shape, found "
                         f"{_shape(k_cache)} and {_shape(v_cache)}")
    return _shape(k_cache)[:2]


def _check_scale(op, sm_scale):
    if not isinstance(sm_scale, (int, float, np.floating)) or not (
            math.isfinite(sm_scale) and sm_scale > 0):
        raise ValueError(f"{op}: expected a positive, finite sm_scale, found {sm_scale!r}")
    return float(sm_scale)


def _check_tables(op, block_tables, context_lens, batch, num_blocks, block_size, at_least):
    """block_tables [B, max_blocks] and context_lens [B], int32; for numpy inputs also their
    values: at_least[b] <= context_lens[b] <= max_blocks * block_size and the blocks used in
    [0, num_blocks). The table's width."""
    _check_array(op, "context_lens", context_lens, shape=(batch,), dtype="int32")
    _check_array(op, "block_tables", block_tables, dtype="int32")
    if len(block_tables.shape) != 2 or block_tables.shape[0] != batch or \
            block_tables.shape[1] < 1:
        raise ValueError(f"{op}: expected block_tables of shape ({batch}, max_blocks), found "
                         f"{_shape(block_tables)}")
    max_blocks = int(block_tables.shape[1])
    ctx, bt = _host(context_lens), _host(block_tables)
    if ctx is not None:
        low = np.zeros(batch, np.int64) if at_least is None else at_least
        bad = np.nonzero((ctx < low) | (ctx > max_blocks * block_size))[0]
        if bad.size:
            b = int(bad[0])
            raise ValueError(f"{op}: context_lens[{b}] = {int(ctx[b])} is outside "
                             f"[{int(low[b])}, {max_blocks * block_size}] (new tokens, "
                             f"max_blocks * block_size)")
        if bt is not None:
            used = np.arange(max_blocks)[None, :] < (-(-ctx // block_size))[:, None]
            bad = np.argwhere(used & ((bt < 0) | (bt >= num_blocks)))
            if bad.size:
                b, j = (int(x) for x in bad[0])
                raise ValueError(f"{op}: block_tables[{b}, {j}] = {int(bt[b, j])} is not a "
                                 f"cache block (num_blocks {num_blocks})")
    return max_blocks


def _launch(stream, device):
    kw = {}
    if stream is not None:
        kw["stream"] = int(stream)
    if device is not None:
        kw["device"] = device
    return kw


def _is_cpu(arrays, device):
    return device == "cpu" or (device is None and isinstance(arrays, np.ndarray))


# ---------------------------------------------------------------- host side: ops

def rope_cache(qkv, positions, cos, sin, k_cache, v_cache, slot_mapping, n_heads, n_kv_heads,
               head_dim, stream=None, device=None):
    """RoPE in place on the q and k heads of qkv [T, (Hq+2Hkv)*D] at positions[T], and the
    rotated k and the v of row t written to cache slot slot_mapping[t] (negative: none).
    cos, sin: [P, D/2] fp32. Returns qkv."""
    op = "rope_cache"
    n_heads, n_kv_heads, head_dim = _check_heads(op, n_heads, n_kv_heads, head_dim)
    dtype = _check_qkv(op, qkv, None, n_heads, n_kv_heads, head_dim)
    T = int(qkv.shape[0])
    _check_array(op, "positions", positions, shape=(T,), dtype="int32")
    _check_array(op, "slot_mapping", slot_mapping, shape=(T,), dtype="int32")
    for name, t in (("cos", cos), ("sin", sin)):
        _check_array(op, name, t, dtype="float32")
        if len(t.shape) != 2 or t.shape[1] != head_dim // 2 or t.shape[0] < 1:
            raise ValueError(f"{op}: expected {name} of shape (P, {head_dim // 2}) "
                             f"(head_dim / 2 frequencies), found {_shape(t)}")
    if _shape(cos) != _shape(sin):
        raise ValueError(f"{op}: expected cos and sin of one shape, found {_shape(cos)} and "
                         f"{_shape(sin)}")
    num_blocks, block_size = _check_cache(op, k_cache, v_cache, n_kv_heads, head_dim, dtype)
    n_pos, n_slots = int(cos.shape[0]), num_blocks * block_size
    pos, slots = _host(positions), _host(slot_mapping)
    if pos is not None and T and (pos.min() < 0 or pos.max() >= n_pos):
        t = int(np.nonzero((pos < 0) | (pos >= n_pos))[0][0])
        raise ValueError(f"{op}: positions[{t}] = {int(pos[t])} is outside the cos/sin table "
                         f"(P = {n_pos})")
    if slots is not None and T and slots.max() >= n_slots:
        t = int(np.argmax(slots))
        raise ValueError(f"{op}: slot_mapping[{t}] = {int(slots[t])} is past the cache's "
                         f"{n_slots} slots (num_blocks * block_size)")
    if T:
        _rope_cache_kernel[(T,)](qkv, positions, cos, sin, k_cache, v_cache, slot_mapping,
                                 n_pos, n_slots, N_HEADS=n_heads, N_KV_HEADS=n_kv_heads,
                                 HEAD_DIM=head_dim, BLOCK_HQ=kiln.next_power_of_2(n_heads),
                                 BLOCK_HKV=kiln.next_power_of_2(n_kv_heads), num_warps=4,
                                 **_launch(stream, device))
    return qkv


def prefill_tile_config(head_dim, dtype, cpu=False, paged=False):
    """(BLOCK_M, BLOCK_N, num_warps, num_stages, overlap) of the prefill kernel. The GPU bf16 /
    fp16 tiles are kiln_kernels.flash_attention's H100 choices (128 x 64 on 8 warps, 3 stages
    at D <= 64; 128 x 128 with the overlap loop at D = 128), except through the block table
    at D = 128 (128 x 64: its operands pass through registers, and Kiln puts 128 x 128 ones
    on mma.sync rather than wgmma); fp32 (exact products on CUDA cores) and D = 256 take
    smaller tiles. The CPU backend: small tiles, quick to compile."""
    if cpu:
        return 32, 16, 4, 1, False
    if dtype == "float32" or head_dim > 128:
        return 64, 32, 4, 2, False
    if head_dim <= 64 or paged:
        return 128, 64, 8, 3, False
    return 128, 128, 8, 3, True


def prefill_attention(qkv, k_cache, v_cache, cu_seqlens, block_tables, context_lens, out,
                      max_seqlen, n_heads, n_kv_heads, head_dim, sm_scale, kv_from_qkv=False,
                      stream=None, device=None):
    """Causal attention of each sequence's new tokens (rows cu_seqlens[b]..cu_seqlens[b+1] of
    qkv) over its cached keys 0..context_lens[b], into out [T, Hq*D]. kv_from_qkv: every
    context is its new tokens; K and V are read from qkv. Returns out."""
    op = "prefill_attention"
    n_heads, n_kv_heads, head_dim = _check_heads(op, n_heads, n_kv_heads, head_dim)
    dtype = _check_qkv(op, qkv, None, n_heads, n_kv_heads, head_dim)
    T = int(qkv.shape[0])
    _check_array(op, "out", out, shape=(T, n_heads * head_dim), dtype=dtype)
    num_blocks, block_size = _check_cache(op, k_cache, v_cache, n_kv_heads, head_dim, dtype)
    _check_array(op, "cu_seqlens", cu_seqlens, dtype="int32")
    if len(cu_seqlens.shape) != 1 or cu_seqlens.shape[0] < 1:
        raise ValueError(f"{op}: expected cu_seqlens of shape (B + 1,), found "
                         f"{_shape(cu_seqlens)}")
    B = int(cu_seqlens.shape[0]) - 1
    if not isinstance(max_seqlen, (int, np.integer)) or max_seqlen < 0:
        raise ValueError(f"{op}: expected a non-negative int max_seqlen, found "
                         f"{max_seqlen!r}")
    sm_scale = _check_scale(op, sm_scale)
    cu = _host(cu_seqlens)
    new = None
    if cu is not None:
        new = np.diff(cu.astype(np.int64))
        if cu[0] < 0 or cu[-1] > T or (new < 0).any():
            raise ValueError(f"{op}: expected cu_seqlens non-decreasing from >= 0 to <= T "
                             f"({T}), found {cu.tolist()}")
        if B and new.max() > max_seqlen:
            b = int(np.argmax(new))
            raise ValueError(f"{op}: sequence {b} has {int(new[b])} new tokens, more than "
                             f"max_seqlen ({max_seqlen})")
    max_blocks = _check_tables(op, block_tables, context_lens, B, num_blocks, block_size, new)
    if kv_from_qkv and new is not None and _host(context_lens) is not None and \
            (context_lens != new).any():
        b = int(np.nonzero(context_lens != new)[0][0])
        raise ValueError(f"{op}: kv_from_qkv=True expects every context to be its new tokens, "
                         f"found context_lens[{b}] = {int(context_lens[b])} and {int(new[b])} "
                         f"new tokens")
    cpu = _is_cpu(qkv, device)
    bm, bn, nw, ns, overlap = prefill_tile_config(head_dim, dtype, cpu, not kv_from_qkv)
    if B == 0 or max_seqlen == 0:
        return out
    grid = (B * n_heads, kiln.cdiv(int(max_seqlen), bm))
    _prefill_kernel[grid](qkv, k_cache, v_cache, cu_seqlens, block_tables, context_lens, out,
                          sm_scale, max_blocks, int(max_seqlen), N_HEADS=n_heads,
                          N_KV_HEADS=n_kv_heads, HEAD_DIM=head_dim, BLOCK_M=bm, BLOCK_N=bn,
                          BLOCK_SIZE=block_size, PAGED=not kv_from_qkv,
                          OVERLAP=overlap, num_warps=nw, num_stages=ns,
                          **_launch(stream, device))
    return out


def decode_split_count(batch, n_kv_heads, max_context, split_min_tokens=SPLIT_MIN_TOKENS,
                       num_sms=NUM_SMS):
    """Splits per (sequence, KV head): enough programs for two per SM, no more than
    max_context has chunks of split_min_tokens keys (so short contexts take one split), at
    most MAX_SPLITS."""
    want = kiln.cdiv(2 * num_sms, max(1, batch * n_kv_heads))
    return max(1, min(want, kiln.cdiv(max(1, max_context), split_min_tokens), MAX_SPLITS))


def decode_attention_scratch(batch, n_heads, head_dim, max_context, n_kv_heads=None,
                             num_splits=None, split_min_tokens=SPLIT_MIN_TOKENS,
                             num_sms=NUM_SMS):
    """The shapes (partial_out, partial_lse) = ((batch, Hq, S, D), (batch, Hq, S)) of the fp32
    scratch of decode_attention, S = num_splits or decode_split_count(...). Allocate them once
    (e.g. kiln.empty(shape, "float32")) and pass them as scratch=(partial_out, partial_lse)."""
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    _check_heads("decode_attention_scratch", n_heads, n_kv, head_dim)
    if num_splits is None:
        num_splits = decode_split_count(batch, n_kv, max_context, split_min_tokens, num_sms)
    if not isinstance(num_splits, (int, np.integer)) or not 1 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"decode_attention_scratch: expected num_splits in [1, {MAX_SPLITS}], "
                         f"found {num_splits!r}")
    S = int(num_splits)
    return (batch, n_heads, S, head_dim), (batch, n_heads, S)


def decode_tile_config(cpu=False):
    """(BLOCK_N, num_warps) of the decode kernel: 64 keys a step on the GPU (a 16 x 64 x D
    product per step, the KV group padded to 16 rows), 16 on the CPU backend."""
    return (16, 4) if cpu else (64, 4)


def decode_attention(qkv, k_cache, v_cache, block_tables, context_lens, out, n_heads,
                     n_kv_heads, head_dim, sm_scale, scratch=None,
                     split_min_tokens=SPLIT_MIN_TOKENS, stream=None, device=None):
    """One query per sequence (row b of qkv [B, ...]) over its context_lens[b] cached keys,
    into out [B, Hq*D]; split-K over scratch's split count. Returns out."""
    op = "decode_attention"
    n_heads, n_kv_heads, head_dim = _check_heads(op, n_heads, n_kv_heads, head_dim)
    dtype = _check_qkv(op, qkv, None, n_heads, n_kv_heads, head_dim)
    B = int(qkv.shape[0])
    _check_array(op, "out", out, shape=(B, n_heads * head_dim), dtype=dtype)
    num_blocks, block_size = _check_cache(op, k_cache, v_cache, n_kv_heads, head_dim, dtype)
    max_blocks = _check_tables(op, block_tables, context_lens, B, num_blocks, block_size, None)
    sm_scale = _check_scale(op, sm_scale)
    if not isinstance(split_min_tokens, (int, np.integer)) or split_min_tokens < 1:
        raise ValueError(f"{op}: expected a positive int split_min_tokens, found "
                         f"{split_min_tokens!r}")
    num_splits, part_out, part_lse = 1, None, None
    if scratch is not None:
        if not isinstance(scratch, (tuple, list)) or len(scratch) != 2:
            raise ValueError(f"{op}: expected scratch = (partial_out, partial_lse) (shapes "
                             f"from decode_attention_scratch), found {type(scratch).__name__}")
        part_out, part_lse = scratch
        _check_array(op, "scratch's partial_lse", part_lse, dtype="float32")
        s = _shape(part_lse)
        if len(s) != 3 or s[0] < B or s[1] != n_heads or s[2] < 1:
            raise ValueError(f"{op}: expected scratch's partial_lse of shape (>= {B}, "
                             f"{n_heads}, num_splits), found {s}")
        num_splits = s[2]
        if num_splits > MAX_SPLITS:  # the combine kernel holds every split in one tile
            raise ValueError(f"{op}: expected at most {MAX_SPLITS} splits in scratch, found "
                             f"{num_splits}")
        _check_array(op, "scratch's partial_out", part_out, dtype="float32",
                     shape=(s[0], n_heads, num_splits, head_dim))
    cpu = _is_cpu(qkv, device)
    bn, nw = decode_tile_config(cpu)
    if B == 0:
        return out
    min_chunk = kiln.cdiv(int(split_min_tokens), bn) * bn
    launch = _launch(stream, device)
    _decode_kernel[(B, n_kv_heads, num_splits)](
        qkv, k_cache, v_cache, block_tables, context_lens, out,
        part_out if num_splits > 1 else None, part_lse if num_splits > 1 else None,
        sm_scale, max_blocks, min_chunk, N_HEADS=n_heads, N_KV_HEADS=n_kv_heads,
        HEAD_DIM=head_dim, GROUP_PAD=max(16, kiln.next_power_of_2(n_heads // n_kv_heads)),
        BLOCK_N=bn, BLOCK_SIZE=block_size, NUM_SPLITS=num_splits, num_warps=nw, **launch)
    if num_splits > 1:
        _decode_combine[(B * n_heads,)](part_out, part_lse, out, N_HEADS=n_heads,
                                        HEAD_DIM=head_dim, NUM_SPLITS=num_splits,
                                        BLOCK_S=kiln.next_power_of_2(num_splits), num_warps=4,
                                        **launch)
    return out
