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
  n_kv_heads, head_dim, sm_scale, scratch=None, ..., num_splits=None, positions=None,
  cos=None, sin=None, slot_mapping=None)`: one query per sequence (row b of qkv) over its
  context_lens[b] cached keys (the new one included). Flash-decoding: a program per
  (split, KV head, sequence) holds the Hq/Hkv query heads of that KV group (padded to 16)
  and computes their scores transposed, k [BLOCK_N, D] x q^T [D, GROUP] (K and V read once
  per group, K as loaded as the row-major operand); its key loop gathers the next block's K
  and V rows (16-byte loads) and the table entries of the block after before the current
  block's math. The launch takes S = decode_split_count(B, Hkv, table width) splits (at
  most scratch's; `num_splits` forces one); each sequence cuts its own context into S
  chunks of at least `split_min_tokens` keys (a context of at most `single_split_tokens`,
  default twice that, into one), so a short context runs in fewer splits and the others
  exit at once. The splits' normalized partial outputs and log-sum-exps go to
  `scratch`; with scratch's third array (counters) the last split of a (sequence, KV head)
  to finish combines them in the same kernel (a ticket from an atomic counter it then
  resets to 0, so CUDA-graph replays stay correct), and a context of one chunk is written
  directly; with two arrays a second kernel combines. Without scratch: one split. A context
  of 0 keys gives a zero output row (padding rows). With positions, cos, sin and
  slot_mapping (rope_cache's arguments for these rows) the kernel also does rope_cache's
  work for the decode step: q and the new key are rotated in registers (qkv is only read),
  key context_lens[b] - 1 is taken from qkv rather than the cache, and the split that owns
  it writes the new k and v to slot slot_mapping[b] (negative: not written); one launch
  instead of two.
- `decode_attention_scratch(batch, n_heads, head_dim, max_context, n_kv_heads=None, ...,
  counters=False)`: the shapes `(partial_out, partial_lse[, counters])` =
  `((batch, Hq, S, D), (batch, Hq, S)[, (batch, Hkv)])` of decode_attention's scratch (fp32,
  fp32, int32 allocated as zeros), S what a batch of 1 launches: enough splits that
  Hkv * S programs fill the GPU (two per SM) without giving a split fewer than
  `split_min_tokens` of max_context's keys. Scratch for a larger batch serves smaller ones.

Bad shapes, dtypes, layouts and (for numpy inputs, where reading them costs nothing) bad
index values raise ValueError naming the op and the argument. Device-resident index arrays
are not read by the host; debug mode (KILN_DEBUG=1) checks them with device asserts.
"""
import numpy as np

import kiln
import kiln.language as tl
from kiln_kernels.flash_attention import _softmax_step  # the library's online-softmax step

from ._attention_checks import (MAX_SPLITS, _check_array, _check_cache,
                                _check_heads, _check_qkv, _check_rope, _check_scale,
                                _check_scratch, _check_tables, _host, _is_cpu, _shape)
from ._common import launch_opts

__all__ = ["rope_cache", "prefill_attention", "decode_attention", "decode_attention_scratch"]

NUM_SMS = 132              # H100 SXM: what the split heuristic fills by default
SPLIT_MIN_TOKENS = 64      # fewest keys a decode split is given (when the context has them)


# ---------------------------------------------------------------- kernels: RoPE + cache write

@kiln.jit
def _rope_cache_kernel(qkv, positions, cos, sin, k_cache, v_cache, slot_mapping, n_pos,
                       n_slots, N_HEADS: tl.constexpr, N_KV_HEADS: tl.constexpr,
                       HEAD_DIM: tl.constexpr, BLOCK_HQ: tl.constexpr,
                       BLOCK_HKV: tl.constexpr):
    """Grid (T,): row t of qkv rotated in place, its k and v copied to slot slot_mapping[t].
    Every load comes before the first store (a load cannot move above a store to qkv), so a
    program waits for memory twice: the position and row, then cos/sin."""
    HALF: tl.constexpr = HEAD_DIM // 2
    ROW: tl.constexpr = (N_HEADS + 2 * N_KV_HEADS) * HEAD_DIM
    KV_ROW: tl.constexpr = N_KV_HEADS * HEAD_DIM
    t = tl.program_id(0)
    pos = tl.load(positions + t)
    slot = tl.load(slot_mapping + t)
    row = qkv + t.to(tl.int64) * ROW
    d = tl.arange(0, HALF)
    dv = tl.arange(0, HEAD_DIM)
    hq = tl.arange(0, BLOCK_HQ)
    hk = tl.arange(0, BLOCK_HKV)
    q_off = hq[:, None] * HEAD_DIM + d[None, :]
    q_ok = hq[:, None] < N_HEADS
    kv_ok = hk[:, None] < N_KV_HEADS
    k_off = N_HEADS * HEAD_DIM + hk[:, None] * HEAD_DIM + d[None, :]
    v_off = (N_HEADS + N_KV_HEADS) * HEAD_DIM + hk[:, None] * HEAD_DIM + dv[None, :]
    q1 = tl.load(row + q_off, mask=q_ok, other=0.0).to(tl.float32)
    q2 = tl.load(row + q_off + HALF, mask=q_ok, other=0.0).to(tl.float32)
    k1 = tl.load(row + k_off, mask=kv_ok, other=0.0).to(tl.float32)
    k2 = tl.load(row + k_off + HALF, mask=kv_ok, other=0.0).to(tl.float32)
    v = tl.load(row + v_off, mask=kv_ok, other=0.0)
    tl.device_assert((pos >= 0) & (pos < n_pos), "rope_cache: position outside the cos table")
    tl.device_assert(slot < n_slots, "rope_cache: slot past the end of the cache")
    c = tl.load(cos + pos.to(tl.int64) * HALF + d)[None, :]
    s = tl.load(sin + pos.to(tl.int64) * HALF + d)[None, :]

    tl.store(row + q_off, (q1 * c - q2 * s).to(qkv.dtype.element_ty), mask=q_ok)
    tl.store(row + q_off + HALF, (q2 * c + q1 * s).to(qkv.dtype.element_ty), mask=q_ok)
    r1 = (k1 * c - k2 * s).to(qkv.dtype.element_ty)
    r2 = (k2 * c + k1 * s).to(qkv.dtype.element_ty)
    tl.store(row + k_off, r1, mask=kv_ok)
    tl.store(row + k_off + HALF, r2, mask=kv_ok)
    cache_ok = kv_ok & (slot >= 0)
    c_off = slot.to(tl.int64) * KV_ROW + hk[:, None] * HEAD_DIM
    tl.store(k_cache + c_off + d[None, :], r1.to(k_cache.dtype.element_ty), mask=cache_ok)
    tl.store(k_cache + c_off + HALF + d[None, :], r2.to(k_cache.dtype.element_ty),
             mask=cache_ok)
    tl.store(v_cache + c_off + dv[None, :], v.to(v_cache.dtype.element_ty), mask=cache_ok)


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
        # MASKED: every row sees key lo (lo <= the block's first position), so the first
        # masked block gives each row a finite maximum. Keys at or past hi (not read: zeros)
        # lie after every stored row's position (hi is at least the last row's position + 1
        # or the context's end), so the causal mask (keys after qpos) hides them.
        p, acc, l_i, m_i = _softmax_step(qk, acc, l_i, m_i, qk_scale, qpos, cols, None,
                                         MASKED, False)
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision="ieee")
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
    # (step 1, so that the compiler knows the last iteration and peels the idle dots of the
    # first and the last: kiln_kernels.flash_attention's _attn_fwd_inner_overlap)
    n_blocks = (hi - lo) // BLOCK_N
    for j in range(0, n_blocks + 1):
        start_n = lo + j * BLOCK_N
        has_keys = j < n_blocks
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

    # (rows past n, l_i 0 in empty blocks, are not stored; one reciprocal a row, not a
    # division an element)
    o = acc * (1.0 / l_i)[:, None]
    tl.store(out + seq_start.to(tl.int64) * OUT_ROW + h * HEAD_DIM + offs_m[:, None] * OUT_ROW
             + offs_d[None, :], o.to(out.dtype.element_ty), mask=row_ok[:, None])


# ---------------------------------------------------------------- kernels: decode

@kiln.jit
def _decode_kernel(qkv, k_cache, v_cache, block_tables, context_lens, out, part_out,
                   part_lse, counters, positions, cos, sin, slot_mapping, sm_scale,
                   max_blocks, min_chunk, one_split, n_pos, n_slots,
                   N_HEADS: tl.constexpr, N_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
                   GROUP_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                   NUM_SPLITS: tl.constexpr, PART_STRIDE: tl.constexpr,
                   COMBINE: tl.constexpr, COMBINE_G: tl.constexpr, BLOCK_C: tl.constexpr,
                   ROPE: tl.constexpr, PREFETCH: tl.constexpr):
    """Grid (NUM_SPLITS, Hkv, B). The GROUP query heads of KV head hk are the rows of q
    (padded to GROUP_PAD >= 16 for tl.dot). Sequence b's keys are cut into chunks of a whole
    number of BLOCK_N, at least min_chunk keys, at most NUM_SPLITS of them (a context of at
    most one_split keys: one chunk); split s takes chunk s (nothing when the context is
    shorter), so n_act = cdiv(ctx, chunk) splits work.

    COMBINE 0 (one split): the split writes out. COMBINE 1: every split writes its
    normalized partial output and base-2 log-sum-exp (-inf: no keys) for _decode_combine.
    COMBINE 2: a context of one chunk is written out by split 0 alone; otherwise the active
    splits write their partials, and the last of them to finish (a ticket from counters[b,
    hk], which it resets to 0 for the next launch) weighs them into out.

    ROPE: qkv holds the step's unrotated q and k; q is rotated in registers at
    positions[b], key ctx - 1 (the new one) is taken from qkv's row b (rotated, rounded to
    the cache's dtype) instead of the cache, and the split that owns it writes it and v to
    cache slot slot_mapping[b] (negative: not written): rope_cache's work for this row, with
    no program reading that slot."""
    GROUP: tl.constexpr = N_HEADS // N_KV_HEADS
    HALF: tl.constexpr = HEAD_DIM // 2
    ROW: tl.constexpr = (N_HEADS + 2 * N_KV_HEADS) * HEAD_DIM
    KV_ROW: tl.constexpr = N_KV_HEADS * HEAD_DIM
    split = tl.program_id(0)
    hk = tl.program_id(1)
    b = tl.program_id(2)
    ctx = tl.load(context_lens + b)
    if ROPE:
        pos = tl.load(positions + b)
        slot = tl.load(slot_mapping + b)  # (used by the last stores: loaded early)
        tl.device_assert((pos >= 0) & (pos < n_pos),
                         "decode_attention: position outside the cos table")
        tl.device_assert(slot < n_slots, "decode_attention: slot past the end of the cache")
    tl.device_assert((ctx >= 0) & (ctx <= max_blocks * BLOCK_SIZE),
                     "decode_attention: context_lens outside [0, table size]")
    if NUM_SPLITS == 1:
        lo = 0
        hi = ctx
        n_act = tl.minimum(ctx, 1)
    else:
        chunk = ((ctx + NUM_SPLITS - 1) // NUM_SPLITS + BLOCK_N - 1) // BLOCK_N * BLOCK_N
        chunk = tl.maximum(chunk, min_chunk)
        chunk = tl.where(ctx <= one_split, tl.maximum(ctx, 1), chunk)
        n_act = (ctx + chunk - 1) // chunk
        lo = split * chunk
        hi = tl.minimum(lo + chunk, ctx)

    g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    g_ok = g < GROUP
    heads = hk * GROUP + g
    row = qkv + b.to(tl.int64) * ROW
    new = ctx - 1  # ROPE: the new key, taken from qkv, not the cache
    hi_cache = hi
    if ROPE:
        hi_cache = tl.minimum(hi, new)
    bt = block_tables + b.to(tl.int64) * max_blocks
    k_base = k_cache + hk * HEAD_DIM
    v_base = v_cache + hk * HEAD_DIM
    qk_scale = sm_scale * 1.4426950408889634

    # PREFETCH, a software pipeline: the K and V rows of the next block and the table entries
    # of the one after are loaded before the current block's math, so a block's gathered
    # loads overlap the previous block's products instead of following them (two K/V tiles
    # live in registers). (RoPE's cache stores come last: no load could move above them.)
    if PREFETCH:
        cols = lo + offs_n
        ok = cols < hi_cache
        blk = tl.load(bt + cols // BLOCK_SIZE, mask=ok, other=0)
        rows = (blk.to(tl.int64) * BLOCK_SIZE + cols % BLOCK_SIZE) * KV_ROW
        k = tl.load(k_base + rows[:, None] + offs_d[None, :], mask=ok[:, None], other=0.0)
        v = tl.load(v_base + rows[:, None] + offs_d[None, :], mask=ok[:, None], other=0.0)
        cols = cols + BLOCK_N
        blk = tl.load(bt + cols // BLOCK_SIZE, mask=cols < hi_cache, other=0)

    if ROPE:
        partner = (offs_d + HALF) % HEAD_DIM
        cs_row = pos.to(tl.int64) * HALF
        # q's cos and sin are loaded in q^T's own [D, GROUP_PAD] shape: a [D] tile broadcast
        # into q^T with [:, None] made Kiln load K and V in the loop with 2-byte accesses
        # (the tables depend on the position only: loaded before gdc_wait, off the critical
        # path that starts when the kernel before finishes)
        cs_off = cs_row + (offs_d % HALF)[:, None] + 0 * g[None, :]
        q_cos = tl.load(cos + cs_off)
        q_sin = tl.load(sin + cs_off)
        k_cos = tl.load(cos + cs_row + offs_d % HALF)
        k_sin = tl.load(sin + cs_row + offs_d % HALF)

    # Programmatic dependent launch (_common.PDL_ENV): the step's inputs (context lengths,
    # positions, block tables) come from the host and the cache from earlier steps, so the
    # first block is in flight while the kernel before finishes; qkv is its output.
    tl.extra.cuda.gdc_wait()
    tl.extra.cuda.gdc_launch_dependents()
    # q^T [D, GROUP_PAD]: the scores come out transposed, s^T = k q^T [BLOCK_N, GROUP_PAD],
    # so that k (rows of D contiguous elements) is the row-major A operand as it is loaded and
    # only p^T, GROUP_PAD / D the size of k, is transposed for p v.
    q_ptrs = row + heads[None, :] * HEAD_DIM
    qT = tl.load(q_ptrs + offs_d[:, None], mask=g_ok[None, :], other=0.0)
    if ROPE:  # RoPE's loads of qkv, issued with the first block's (the math after them)
        qp = tl.load(q_ptrs + partner[:, None], mask=g_ok[None, :], other=0.0)
        k_row = row + (N_HEADS + hk) * HEAD_DIM
        k_new = tl.load(k_row + offs_d)
        kp = tl.load(k_row + partner)
        v_new = tl.load(row + (N_HEADS + N_KV_HEADS + hk) * HEAD_DIM + offs_d)

    if ROPE:
        # rotate_half: element d pairs with d + D/2, x*c - x'*s in the first half, x*c + x'*s
        # in the second (c, s: frequency d % (D/2))
        sign = tl.where(offs_d < HALF, -1.0, 1.0)
        qT = (qT.to(tl.float32) * q_cos + qp.to(tl.float32) * (q_sin * sign[:, None])).to(
            qkv.dtype.element_ty)
        k_new = (k_new.to(tl.float32) * k_cos + kp.to(tl.float32) * (k_sin * sign)).to(
            k_cache.dtype.element_ty)
        owner = (lo <= new) & (new < hi)

    m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
    for start_n in range(lo, hi_cache, BLOCK_N):
        key_ok = (start_n + offs_n) < hi_cache
        if PREFETCH:
            nxt = start_n + BLOCK_N + offs_n
            nxt_ok = nxt < hi_cache
            rows = (blk.to(tl.int64) * BLOCK_SIZE + nxt % BLOCK_SIZE) * KV_ROW
            k_nxt = tl.load(k_base + rows[:, None] + offs_d[None, :], mask=nxt_ok[:, None],
                            other=0.0)
            v_nxt = tl.load(v_base + rows[:, None] + offs_d[None, :], mask=nxt_ok[:, None],
                            other=0.0)
            after = nxt + BLOCK_N
            blk = tl.load(bt + after // BLOCK_SIZE, mask=after < hi_cache, other=0)
        else:  # this block's table entries, then its rows: two round trips a block
            cols = start_n + offs_n
            blk = tl.load(bt + cols // BLOCK_SIZE, mask=key_ok, other=0)
            rows = (blk.to(tl.int64) * BLOCK_SIZE + cols % BLOCK_SIZE) * KV_ROW
            k = tl.load(k_base + rows[:, None] + offs_d[None, :], mask=key_ok[:, None],
                        other=0.0)
            v = tl.load(v_base + rows[:, None] + offs_d[None, :], mask=key_ok[:, None],
                        other=0.0)

        sT = tl.dot(k, qT, input_precision="ieee")
        # key start_n < hi_cache is in every block, so m_ij is finite
        sT = tl.where(key_ok[:, None], sT * qk_scale, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(sT, axis=0))
        pT = tl.exp2(sT - m_ij[None, :])
        alpha = tl.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(pT, axis=0)
        acc = acc * alpha[:, None]
        acc = tl.dot(tl.trans(pT.to(v.dtype)), v, acc, input_precision="ieee")
        m_i = m_ij
        if PREFETCH:
            k = k_nxt
            v = v_nxt

    if ROPE:  # the new key, from registers, folded in by its owner
        s_new = tl.sum(qT.to(tl.float32) * k_new.to(tl.float32)[:, None], axis=0) * qk_scale
        m_new = tl.where(owner, tl.maximum(m_i, s_new), m_i)
        p_new = tl.where(owner, tl.exp2(s_new - m_new), 0.0)
        alpha = tl.where(owner, tl.exp2(m_i - m_new), 1.0)  # m_i is -inf without cached keys
        l_i = l_i * alpha + p_new
        acc = acc * alpha[:, None] + p_new[:, None] * v_new.to(tl.float32)[None, :]
        m_i = m_new
        # the new key and value to their slot (no program of this launch reads it)
        c_off = slot.to(tl.int64) * KV_ROW + hk * HEAD_DIM + offs_d
        write = owner & (slot >= 0)
        tl.store(k_cache + c_off, k_new, mask=write)
        tl.store(v_cache + c_off, v_new.to(v_cache.dtype.element_ty), mask=write)

    has_keys = l_i > 0
    o = acc / tl.where(has_keys, l_i, 1.0)[:, None]  # no keys: zeros
    out_ptrs = out + b.to(tl.int64) * (N_HEADS * HEAD_DIM) + heads[:, None] * HEAD_DIM \
        + offs_d[None, :]
    part = (b.to(tl.int64) * N_HEADS + heads) * PART_STRIDE + split
    lse = tl.where(has_keys, m_i + tl.log2(tl.where(has_keys, l_i, 1.0)), float("-inf"))
    if COMBINE == 0:
        tl.store(out_ptrs, o.to(out.dtype.element_ty), mask=g_ok[:, None])
    elif COMBINE == 1:
        tl.store(part_out + part[:, None] * HEAD_DIM + offs_d[None, :], o, mask=g_ok[:, None])
        tl.store(part_lse + part, lse, mask=g_ok)
    else:
        if n_act <= 1:  # one chunk (or no key): split 0 holds the whole answer
            tl.store(out_ptrs, o.to(out.dtype.element_ty), mask=g_ok[:, None] & (split == 0))
        elif split < n_act:
            tl.store(part_out + part[:, None] * HEAD_DIM + offs_d[None, :], o,
                     mask=g_ok[:, None])
            tl.store(part_lse + part, lse, mask=g_ok)
            # every thread's partials are stored before one thread releases them with its
            # ticket (bar.sync, then atom.acq_rel.gpu); the last reads them after acquiring
            tl.debug_barrier()
            cnt = counters + b * N_KV_HEADS + hk
            ticket = tl.atomic_add(cnt, 1, sem="acq_rel", scope="gpu")
            if ticket == n_act - 1:
                _combine_group(part_out, part_lse, out, b, hk, n_act, N_HEADS, HEAD_DIM,
                               GROUP, PART_STRIDE, COMBINE_G, BLOCK_C)
                tl.store(cnt, 0)  # ready for the next launch (a CUDA graph's replay)


@kiln.jit
def _combine_group(part_out, part_lse, out, b, hk, n_act, N_HEADS: tl.constexpr,
                   HEAD_DIM: tl.constexpr, GROUP: tl.constexpr, PART_STRIDE: tl.constexpr,
                   COMBINE_G: tl.constexpr, BLOCK_C: tl.constexpr):
    """out rows of the GROUP heads of KV head hk = sum_s w_s o_s / sum_s w_s over the n_act
    (>= 2, every one with keys) splits, w_s = 2^(lse_s - max lse), BLOCK_C splits a step
    with a running maximum (one step, one round trip, when n_act <= BLOCK_C: the
    log-sum-exps and the partial outputs are loaded together). The partials are read from
    L2 (.cg), where the other programs stored them."""
    g = tl.arange(0, COMBINE_G)
    g_ok = g < GROUP
    offs_d = tl.arange(0, HEAD_DIM)
    sc = tl.arange(0, BLOCK_C)
    base = (b.to(tl.int64) * N_HEADS + hk * GROUP + g) * PART_STRIDE
    m = tl.full([COMBINE_G], float("-inf"), dtype=tl.float32)
    total = tl.zeros([COMBINE_G], dtype=tl.float32)
    acc = tl.zeros([COMBINE_G, HEAD_DIM], dtype=tl.float32)
    for s0 in range(0, n_act, BLOCK_C):
        s = s0 + sc
        ok = g_ok[:, None] & (s < n_act)[None, :]
        lse = tl.load(part_lse + base[:, None] + s[None, :], mask=ok, other=float("-inf"),
                      cache_modifier=".cg")
        o = tl.load(part_out + (base[:, None, None] + s[None, :, None]) * HEAD_DIM
                    + offs_d[None, None, :], mask=ok[:, :, None], other=0.0,
                    cache_modifier=".cg")
        # every step has a split with keys for the real rows; padded rows stay at 0
        m_new = tl.where(g_ok, tl.maximum(m, tl.max(lse, axis=1)), 0.0)
        scale = tl.exp2(m - m_new)  # m is -inf at the first step: 0
        w = tl.exp2(lse - m_new[:, None])
        total = total * scale + tl.sum(w, axis=1)
        acc = acc * scale[:, None] + tl.sum(o * w[:, :, None], axis=1)
        m = m_new
    res = acc / tl.where(g_ok, total, 1.0)[:, None]
    tl.store(out + b.to(tl.int64) * (N_HEADS * HEAD_DIM) + (hk * GROUP + g)[:, None] * HEAD_DIM
             + offs_d[None, :], res.to(out.dtype.element_ty), mask=g_ok[:, None])


@kiln.jit
def _decode_combine(part_out, part_lse, out, N_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
                    NUM_SPLITS: tl.constexpr, PART_STRIDE: tl.constexpr,
                    BLOCK_S: tl.constexpr):
    """Grid (B * Hq): out = sum_s w_s o_s / sum_s w_s with w_s = 2^(lse_s - max lse); splits
    without keys (lse -inf) weigh 0, and a row without any keys is 0. (COMBINE 1: scratch
    without counters.)"""
    bh = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    s_ok = s < NUM_SPLITS
    tl.extra.cuda.gdc_wait()  # PDL (_common.PDL_ENV)
    tl.extra.cuda.gdc_launch_dependents()
    lse = tl.load(part_lse + bh * PART_STRIDE + s, mask=s_ok, other=float("-inf"))
    top = tl.max(lse, axis=0)
    top = tl.where(top == float("-inf"), 0.0, top)
    w = tl.exp2(lse - top)
    used = s_ok & (lse > float("-inf"))
    o = tl.load(part_out + (bh * PART_STRIDE + s[:, None]) * HEAD_DIM + offs_d[None, :],
                mask=used[:, None], other=0.0)
    total = tl.sum(w, axis=0)
    res = tl.sum(o * w[:, None], axis=0) / tl.where(total > 0, total, 1.0)
    tl.store(out + bh * HEAD_DIM + offs_d, res.to(out.dtype.element_ty))


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
    num_blocks, block_size = _check_cache(op, k_cache, v_cache, n_kv_heads, head_dim, dtype)
    n_pos, n_slots = _check_rope(op, T, positions, cos, sin, slot_mapping, head_dim,
                                 num_blocks * block_size)
    if T:
        _rope_cache_kernel[(T,)](qkv, positions, cos, sin, k_cache, v_cache, slot_mapping,
                                 n_pos, n_slots, N_HEADS=n_heads, N_KV_HEADS=n_kv_heads,
                                 HEAD_DIM=head_dim, BLOCK_HQ=kiln.next_power_of_2(n_heads),
                                 BLOCK_HKV=kiln.next_power_of_2(n_kv_heads), num_warps=4,
                                 **launch_opts(device, stream))
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
                          **launch_opts(device, stream))
    return out


def decode_split_count(batch, n_kv_heads, max_context, split_min_tokens=SPLIT_MIN_TOKENS,
                       num_sms=NUM_SMS):
    """Splits per (sequence, KV head): as many as fit two programs per SM in one wave (at
    least one), no more than max_context has chunks of split_min_tokens keys (so short
    contexts take one split), at most MAX_SPLITS. Batch 1 takes the most."""
    want = (2 * num_sms) // max(1, batch * n_kv_heads)
    return max(1, min(want, kiln.cdiv(max(1, max_context), split_min_tokens), MAX_SPLITS))


def decode_attention_scratch(batch, n_heads, head_dim, max_context, n_kv_heads=None,
                             num_splits=None, split_min_tokens=SPLIT_MIN_TOKENS,
                             num_sms=NUM_SMS, counters=False):
    """The shapes (partial_out, partial_lse) = ((batch, Hq, S, D), (batch, Hq, S)) of the fp32
    scratch of decode_attention, S = num_splits or decode_split_count(1, ...) (the most any
    batch up to `batch` launches), and with counters=True a third, (batch, Hkv), of int32
    counters that must be zero when allocated (the kernel leaves them zero). Allocate them
    once (kiln.empty(shape, "float32"), kiln.zeros(shape, "int32")) and pass them as
    scratch=(partial_out, partial_lse[, counters]): with counters the splits are combined
    inside the attention kernel, without them by a second launch."""
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    _check_heads("decode_attention_scratch", n_heads, n_kv, head_dim)
    if num_splits is None:
        num_splits = decode_split_count(1, n_kv, max_context, split_min_tokens, num_sms)
    if not isinstance(num_splits, (int, np.integer)) or not 1 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"decode_attention_scratch: expected num_splits in [1, {MAX_SPLITS}], "
                         f"found {num_splits!r}")
    S = int(num_splits)
    shapes = (batch, n_heads, S, head_dim), (batch, n_heads, S)
    return shapes + ((batch, n_kv),) if counters else shapes


def decode_tile_config(cpu=False, head_dim=64, dtype="bfloat16"):
    """(BLOCK_N, num_warps) of the decode kernel: on the GPU 64 keys a step on 4 warps at
    head_dim <= 64 (a 64 x 16 x D product per step on wgmma, the KV group padded to 16
    columns), fewer keys or more warps for wider heads and fp32, so that the current and the
    prefetched K and V tiles stay in registers (sm_90a, no spills: 16-bit D 128 on 64 x 8
    warps, 207 registers; D 256 on 32 x 8, 204; fp32 D 64 / 128 / 256 on 64 / 32 / 16 keys
    x 8 warps); 16 keys on the CPU backend."""
    if cpu:
        return 16, 4
    if dtype == "float32":
        return {16: (64, 4), 32: (64, 4), 64: (64, 8), 128: (32, 8)}.get(head_dim, (16, 8))
    return {128: (64, 8), 256: (32, 8)}.get(head_dim, (64, 4))


def decode_launch_config(batch, n_heads, n_kv_heads, head_dim, splits, cpu=False, tile=None,
                         dtype="bfloat16"):
    """The constexprs and num_warps of a decode launch of `splits` splits (without the
    shapes' own N_HEADS, ...): GROUP_PAD, BLOCK_N, COMBINE_G (the group padded to a power of
    two), BLOCK_C (splits per step of the in-kernel combine: a [COMBINE_G, BLOCK_C, D] tile
    of at most 4,096 fp32), and BLOCK_S (the splits padded: _decode_combine's, not the
    attention kernel's). tile: (BLOCK_N, num_warps) in place of decode_tile_config's."""
    bn, nw = decode_tile_config(cpu, head_dim, dtype) if tile is None else tile
    group = n_heads // n_kv_heads
    cg = kiln.next_power_of_2(group)
    bs = kiln.next_power_of_2(splits)
    return dict(GROUP_PAD=max(16, cg), BLOCK_N=bn, COMBINE_G=cg, BLOCK_S=bs,
                BLOCK_C=max(1, min(bs, 4096 // (cg * head_dim)))), nw


def decode_attention(qkv, k_cache, v_cache, block_tables, context_lens, out, n_heads,
                     n_kv_heads, head_dim, sm_scale, scratch=None,
                     split_min_tokens=SPLIT_MIN_TOKENS, stream=None, device=None,
                     num_splits=None, num_sms=NUM_SMS, positions=None, cos=None, sin=None,
                     slot_mapping=None, tile=None, single_split_tokens=None, prefetch=True):
    """One query per sequence (row b of qkv [B, ...]) over its context_lens[b] cached keys,
    into out [B, Hq*D]; split-K over up to scratch's split count (num_splits: exactly that
    many, at most scratch's). With positions, cos, sin and slot_mapping (rope_cache's
    arguments for these B rows), rope_cache's work is done here: q and the new key are
    rotated in registers (qkv is not written) and the new k and v go to their slot; key
    context_lens[b] - 1 must be the new token (its slot slot_mapping[b]). tile: (BLOCK_N,
    num_warps) in place of decode_tile_config's (BLOCK_N a power of two >= 16).
    single_split_tokens: contexts of at most this many keys run in one split (a program that
    walks two blocks beats two that combine); default twice split_min_tokens (rounded up to
    the key tile). prefetch=False: no software pipelining of the key loop (each block's
    table entries and rows loaded at its turn; fewer registers). Returns out."""
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
    rope_args = (positions, cos, sin, slot_mapping)
    rope = any(a is not None for a in rope_args)
    n_pos = n_slots = 0
    if rope:
        n_pos, n_slots = _check_rope(op, B, positions, cos, sin, slot_mapping, head_dim,
                                     num_blocks * block_size)
        ctx, slots, bt = _host(context_lens), _host(slot_mapping), _host(block_tables)
        if ctx is not None and slots is not None and bt is not None:
            for b in np.nonzero((ctx > 0) & (slots >= 0))[0]:
                j = int(ctx[b]) - 1
                want = int(bt[b, j // block_size]) * block_size + j % block_size
                if int(slots[b]) != want:
                    raise ValueError(f"{op}: slot_mapping[{b}] = {int(slots[b])} is not the "
                                     f"slot of key context_lens[{b}] - 1 = {j} ({want}): "
                                     f"the new token must be the context's last key")
    part_out = part_lse = counters = None
    capacity = 1
    if scratch is not None:
        part_out, part_lse, counters, capacity = _check_scratch(op, scratch, B, n_heads,
                                                                n_kv_heads, head_dim)
    if num_splits is None:
        splits = min(capacity, decode_split_count(B, n_kv_heads, max_blocks * block_size,
                                                  split_min_tokens, num_sms))
    elif isinstance(num_splits, (int, np.integer)) and 1 <= num_splits <= capacity:
        splits = int(num_splits)
    else:
        raise ValueError(f"{op}: expected num_splits in [1, {capacity}] (the splits scratch "
                         f"holds), found {num_splits!r}")
    if single_split_tokens is not None and (
            not isinstance(single_split_tokens, (int, np.integer)) or single_split_tokens < 0):
        raise ValueError(f"{op}: expected a non-negative int single_split_tokens, found "
                         f"{single_split_tokens!r}")
    if tile is not None and not (
            isinstance(tile, (tuple, list)) and len(tile) == 2
            and all(isinstance(x, (int, np.integer)) and x > 0 and not x & (x - 1)
                    for x in tile) and tile[0] >= 16 and tile[1] <= 16):
        raise ValueError(f"{op}: expected tile = (BLOCK_N, num_warps), powers of two with "
                         f"BLOCK_N >= 16 and num_warps <= 16, found {tile!r}")
    cpu = _is_cpu(qkv, device)
    if B == 0:
        return out
    cfg, nw = decode_launch_config(B, n_heads, n_kv_heads, head_dim, splits, cpu, tile, dtype)
    combine = 0 if splits == 1 else (2 if counters is not None else 1)
    min_chunk = kiln.cdiv(int(split_min_tokens), cfg["BLOCK_N"]) * cfg["BLOCK_N"]
    one_split = 2 * min_chunk if single_split_tokens is None else int(single_split_tokens)
    launch = launch_opts(device, stream, pdl=not cpu)  # its kernels wait with gdc_wait
    _decode_kernel[(splits, n_kv_heads, B)](
        qkv, k_cache, v_cache, block_tables, context_lens, out, part_out, part_lse, counters,
        *rope_args, sm_scale, max_blocks, min_chunk, one_split, n_pos, n_slots,
        N_HEADS=n_heads,
        N_KV_HEADS=n_kv_heads, HEAD_DIM=head_dim, BLOCK_SIZE=block_size, NUM_SPLITS=splits,
        PART_STRIDE=capacity, COMBINE=combine, ROPE=rope, PREFETCH=bool(prefetch),
        num_warps=nw,
        **{k: v for k, v in cfg.items() if k != "BLOCK_S"}, **launch)
    if combine == 1:
        _decode_combine[(B * n_heads,)](part_out, part_lse, out, N_HEADS=n_heads,
                                        HEAD_DIM=head_dim, NUM_SPLITS=splits,
                                        PART_STRIDE=capacity, BLOCK_S=cfg["BLOCK_S"],
                                        num_warps=4, **launch)
    return out
