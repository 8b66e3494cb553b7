"""Flash attention, forward pass (FlashAttention-2 style): O = softmax(Q K^T * sm_scale) V.
(The backward: flash_attention_bwd.py; `attention` is differentiable through it.)

One program owns BLOCK_M query rows of one (batch, head) and walks the key/value blocks of that
head once, keeping the softmax online (Milakov & Gimelshein; Dao, FlashAttention-2):

    s_j   = (q k_j^T) * sm_scale * log2(e)          scores in base 2, so exp2 replaces exp
    m_new = max(m, rowmax(s_j))                      running row maximum (unmasked blocks take
                                                     rowmax(q k_j^T) * scale: sm_scale > 0)
    alpha = exp2(m - m_new)                          rescales what was summed against m
    p_j   = exp2(s_j - m_new)
    l     = l * alpha + rowsum(p_j)                  running denominator
    acc   = acc * alpha + p_j.to(v.dtype) @ v_j      fp32 accumulator, unnormalized
    O     = acc / l,  LSE = (m + log2(l)) / log2(e)  (natural-log logsumexp, per row)

K is read transposed by pointer arithmetic (a HEAD_DIM x BLOCK_N tile whose rows step through
the head dimension), so the first product is a plain tl.dot(q, kT).

With OVERLAP (the default at D >= 128 on the GPU) the whole key blocks take a rotated loop,
_attn_fwd_inner_overlap: iteration j issues q k_j^T and p_{j-1} v_{j-1} together, and the
compiler waits for each where it is first read, so the softmax of block j runs while the
tensor cores add p_{j-1} v_{j-1} (FlashAttention-3's intra-warpgroup overlap); its K and V
copies complete on mbarriers, with no CTA barrier per iteration.

Causal attention (query i sees keys j <= i) splits the walk in two loops whose bounds are
computed before they start (Kiln has no `break`): the key blocks strictly left of the query
block's first row need no mask; the blocks that overlap the query block's rows (the diagonal,
BLOCK_M / BLOCK_N of them) are masked with j <= i. The masked loop also masks keys past N_CTX,
so any sequence length works; the non-causal walk sends only its last, partial key block
through it.

On the GPU, contiguous inputs whose sequence length is a multiple of BLOCK_M take
_attn_fwd_desc instead: the same walk with q, K, V and the output read and written through
tensor descriptors over (B * H * S, D) matrices, so that on sm_90a the TMA copies the key and
value blocks into the dot rings and stores the output (every block whole, no masks). At D 128
on sm_90 its default loop is FlashAttention-3's order (_attn_fwd_inner_desc_fa3, causal
diagonal included) marked tl.range(..., warp_specialize=True): a producer warpgroup issues
the copies and the two warpgroups of the query block take turns at the tensor cores.

Inputs are (B, H, S, D) with any strides (the kernel takes them in elements; offsets inside
one (batch, head) are 32-bit, the batch and head offsets 64-bit); fp16 or bf16, head dims
16..256 that are powers of two (the host wrapper picks tiles for 64 and 128). K and V may
have fewer heads than Q (grouped-query attention, H a multiple of H_KV: query head h reads
key/value head h // (H / H_KV)).
"""
import functools
import math
import sys

import kiln
import kiln.language as tl

from ._utils import matrix_descriptor, torch

_Tensor = None if torch is None else torch.Tensor


@kiln.jit
def _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kk, stride_vn,
                    stride_vk, qk_scale, offs_m, lo, hi, N_CTX,
                    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, BOUNDS: tl.constexpr,
                    DIAGONAL: tl.constexpr):
    """Folds key/value blocks [lo, hi) into (acc, l_i, m_i). BOUNDS: keys at or past N_CTX
    are not read and get probability 0; DIAGONAL: keys after the query row get
    probability 0 (causal)."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        kT_ptrs = k_base + offs_d[:, None] * stride_kk + cols[None, :] * stride_kn
        v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vk
        if BOUNDS:
            key_ok = cols < N_CTX
            kT = tl.load(kT_ptrs, mask=key_ok[None, :], other=0.0)
            v = tl.load(v_ptrs, mask=key_ok[:, None], other=0.0)
        else:
            kT = tl.load(kT_ptrs)
            v = tl.load(v_ptrs)
        qk = tl.dot(q, kT)
        p, acc, l_i, m_i = _softmax_step(qk, acc, l_i, m_i, qk_scale, offs_m, cols,
                                         key_ok if BOUNDS else None, DIAGONAL, BOUNDS)
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_i


@kiln.jit
def _softmax_step(qk, acc, l_i, m_i, qk_scale, offs_m, cols, key_ok,
                  DIAGONAL: tl.constexpr, BOUNDS: tl.constexpr):
    """One key block's online softmax for the plain loops: the scores qk of keys `cols`
    scaled by qk_scale (DIAGONAL: keys after the query row `offs_m` get probability 0; BOUNDS:
    keys where key_ok is false too). Returns p (fp32), acc rescaled to the new row maxima, l_i
    and the maxima."""
    # Every row keeps at least one key of the first block it masks (the key at the row's
    # own position, or key start_n < N_CTX), so m_ij is finite and no exp2 sees inf - inf.
    if DIAGONAL or BOUNDS:
        qk = qk * qk_scale
        if DIAGONAL:
            keep = offs_m[:, None] >= cols[None, :]
            if BOUNDS:
                keep = keep & key_ok[None, :]
        else:
            keep = key_ok[None, :]
        qk = tl.where(keep, qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, axis=1))
        qk = qk - m_ij[:, None]
    else:
        # qk_scale > 0: the row maximum is scaled once, and scaling and centring fuse
        # into one fma per score
        m_ij = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
    p = tl.exp2(qk)
    alpha = tl.exp2(m_i - m_ij)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    return p, acc * alpha[:, None], l_i, m_ij


@kiln.jit
def _overlap_softmax(qk, acc, l_i, m_i, has_keys, qk_scale, dtype: tl.constexpr):
    """The online softmax of a rotated loop's block of scores qk (has_keys: the block exists;
    else m_i, l_i and acc are kept): acc rescaled to the new row maxima, l_i, the maxima and
    p (dtype) for the next iteration's p @ v."""
    m_ij = tl.where(has_keys, tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale), m_i)
    p_f32 = tl.exp2(qk * qk_scale - m_ij[:, None])
    # (m_i is -inf until the first block: -inf - -inf must not reach exp2)
    alpha = tl.where(has_keys, tl.exp2(m_i - m_ij), 1.0)
    l_i = l_i * alpha + tl.where(has_keys, tl.sum(p_f32, axis=1), 0.0)
    return acc * alpha[:, None], l_i, m_ij, p_f32.to(dtype)


@kiln.jit
def _attn_fwd_inner_overlap(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kk, stride_vn,
                            stride_vk, qk_scale, lo, hi, HEAD_DIM: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """_attn_fwd_inner for whole, unmasked key blocks [lo, hi), rotated so that the two dots
    of an iteration are independent: iteration j multiplies q by block j's keys and adds
    block j - 1's p @ v, so the tensor cores work on p @ v while the softmax of block j runs
    (FlashAttention-3's intra-warpgroup overlap; the compiler waits for each dot just
    before its result is read). The walk takes one more iteration than there are blocks:
    the first has no p yet (p = 0, v not read), the last no keys (kT not read, m_i and l_i
    kept)."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    p = tl.zeros([BLOCK_M, BLOCK_N], dtype=q.dtype)
    # (blocks counted with step 1: the compiler then knows the last iteration and peels the
    # first's p @ v and the last's q @ k, -kiln-peel-dot-loops)
    n_blocks = (hi - lo) // BLOCK_N
    for j in range(0, n_blocks + 1):
        start_n = lo + j * BLOCK_N
        has_keys = j < n_blocks
        cols = start_n + offs_n
        kT = tl.load(k_base + offs_d[:, None] * stride_kk + cols[None, :] * stride_kn,
                     mask=has_keys, other=0.0)
        v = tl.load(v_base + (cols - BLOCK_N)[:, None] * stride_vn + offs_d[None, :] * stride_vk,
                    mask=start_n > lo, other=0.0)
        qk = tl.dot(q, kT)
        acc = tl.dot(p, v, acc)
        acc, l_i, m_i, p = _overlap_softmax(qk, acc, l_i, m_i, has_keys, qk_scale, q.dtype)
    return acc, l_i, m_i


@kiln.jit
def _attn_fwd(Q, K, V, Out, LSE, sm_scale,
              stride_qz, stride_qh, stride_qm, stride_qk,
              stride_kz, stride_kh, stride_kn, stride_kk,
              stride_vz, stride_vh, stride_vn, stride_vk,
              stride_oz, stride_oh, stride_om, stride_ok,
              Z, H, N_CTX,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, EVEN_N: tl.constexpr = False,
              OVERLAP: tl.constexpr = False, GROUP: tl.constexpr = 1,
              LONGEST_FIRST: tl.constexpr = False):
    """Grid (cdiv(N_CTX, BLOCK_M), Z * H). Out has Q's shape; LSE (optional, fp32, contiguous
    (Z, H, N_CTX)) receives each row's natural-log logsumexp of the scaled scores. EVEN_N
    (N_CTX % BLOCK_N == 0, the host's promise) drops the key-bound masks. GROUP: query heads
    per key/value head (grouped-query attention; K and V have H / GROUP heads). LONGEST_FIRST:
    program 0 of each head takes the last query block (causal: the most keys), so that light
    blocks, not heavy ones, end the grid."""
    tl.static_assert(BLOCK_M % BLOCK_N == 0, "BLOCK_M must be a multiple of BLOCK_N")
    start_m = tl.num_programs(0) - 1 - tl.program_id(0) if LONGEST_FIRST else tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_base = Q + off_z * stride_qz + off_h * stride_qh
    k_base = K + off_z * stride_kz + (off_h // GROUP) * stride_kh
    v_base = V + off_z * stride_vz + (off_h // GROUP) * stride_vh
    o_base = Out + off_z * stride_oz + off_h * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk,
                mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)

    if CAUSAL:
        # keys [0, start_m * BLOCK_M) precede every row of this block: whole blocks, no mask;
        # the blocks of keys [start_m * BLOCK_M, (start_m + 1) * BLOCK_M) hold the diagonal
        diag_lo = start_m * BLOCK_M
        diag_hi = tl.minimum(diag_lo + BLOCK_M, N_CTX)
    else:
        # whole key blocks unmasked; a partial last block (only if not EVEN_N) masked
        diag_lo = N_CTX - N_CTX % BLOCK_N
        diag_hi = N_CTX
    if OVERLAP:
        acc, l_i, m_i = _attn_fwd_inner_overlap(acc, l_i, m_i, q, k_base, v_base, stride_kn,
                                                stride_kk, stride_vn, stride_vk, qk_scale, 0,
                                                diag_lo, HEAD_DIM, BLOCK_M, BLOCK_N)
    else:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn,
                                        stride_kk, stride_vn, stride_vk, qk_scale, offs_m, 0,
                                        diag_lo, N_CTX, HEAD_DIM, BLOCK_N, False, False)
    if CAUSAL or not EVEN_N:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn,
                                        stride_kk, stride_vn, stride_vk, qk_scale, offs_m,
                                        diag_lo, diag_hi, N_CTX, HEAD_DIM, BLOCK_N,
                                        not EVEN_N, CAUSAL)

    # Rows past N_CTX saw only zero keys (l_i > 0 still); they are not stored. A reciprocal a
    # row (see _attn_fwd_desc).
    out = acc * (1.0 / l_i)[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok,
             out.to(Out.dtype.element_ty), mask=row_ok[:, None])
    if LSE is not None:
        lse = (m_i + tl.log2(l_i)) * 0.6931471805599453  # ln(2): back to natural log
        tl.store(LSE + off_hz.to(tl.int64) * N_CTX + offs_m, lse, mask=row_ok)


@kiln.jit
def _attn_fwd_inner_desc(acc, l_i, m_i, q, desc_k, desc_v, kv_row, qk_scale, offs_m, lo, hi,
                         BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    """_attn_fwd_inner's whole key blocks [lo, hi) through descriptors: block j is rows
    [kv_row + j, + BLOCK_N) of K and V seen as (B * H_KV * S, D) matrices; K^T is the
    transpose of K's block. DIAGONAL: keys after the query row get probability 0."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        kT = desc_k.load([kv_row + start_n, 0]).T
        qk = tl.dot(q, kT)
        p, acc, l_i, m_i = _softmax_step(qk, acc, l_i, m_i, qk_scale, offs_m, start_n + offs_n,
                                         None, DIAGONAL, False)
        v = desc_v.load([kv_row + start_n, 0])
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_i


@kiln.jit
def _attn_fwd_inner_desc_overlap(acc, l_i, m_i, q, desc_k, desc_v, kv_row, qk_scale, lo, hi,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """_attn_fwd_inner_desc's loop rotated as _attn_fwd_inner_overlap's (whole key blocks
    [lo, hi), hi > lo): iteration j multiplies q by block j's keys and adds block j - 1's
    p @ v, so that the softmax of block j runs beside the tensor cores' p @ v. Descriptor loads
    take no mask: the first iteration reads block lo's values (p = 0 there), the last reads
    block hi - 1's keys again (its scores are not used), so no row outside [lo, hi) is read."""
    p = tl.zeros([BLOCK_M, BLOCK_N], dtype=q.dtype)
    n_blocks = (hi - lo) // BLOCK_N  # (step 1: see _attn_fwd_inner_overlap)
    for j in range(0, n_blocks + 1):
        start_n = lo + j * BLOCK_N
        has_keys = j < n_blocks
        kT = desc_k.load([kv_row + tl.minimum(start_n, hi - BLOCK_N), 0]).T
        v = desc_v.load([kv_row + tl.maximum(start_n - BLOCK_N, lo), 0])
        qk = tl.dot(q, kT)
        acc = tl.dot(p, v, acc)
        acc, l_i, m_i, p = _overlap_softmax(qk, acc, l_i, m_i, has_keys, qk_scale, q.dtype)
    return acc, l_i, m_i


@kiln.jit
def _attn_fwd_inner_desc_fa3(acc, l_i, m_i, q, desc_k, desc_v, kv_row, qk_scale, lo, hi, diag,
                             offs_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             CAUSAL: tl.constexpr):
    """_attn_fwd_inner_desc_overlap in FlashAttention-3's order: iteration j issues q @ k_j,
    rescales acc by the previous block's alpha, issues p_(j-1) @ v_(j-1), then runs the
    softmax of block j, which never reads acc; p is carried in fp32 and converted where it is
    multiplied. So p @ v's result is first read in the next iteration, after its q @ k: the
    compiler waits for it there (see -kiln-pipeline-dot-operands, carried last dot), and the
    softmax runs while the tensor cores add p @ v. CAUSAL: the blocks from `diag` on (the
    diagonal) mask keys after the query row, in the same loop, so that one producer
    warpgroup streams every block (warp_specialize: on sm_90a a producer warpgroup issues
    the copies and the two warpgroups of the 128 query rows take turns at the tensor
    cores)."""
    p = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    alpha = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    # Blocks counted with step 1, so that the compiler sees which iteration is the last (it
    # peels the first and the last, whose p @ v of zeros and q @ k no block reads go:
    # -kiln-peel-dot-loops); hi - lo is a multiple of BLOCK_N.
    n_blocks = (hi - lo) // BLOCK_N
    for j in tl.range(0, n_blocks + 1, warp_specialize=True):
        start_n = lo + j * BLOCK_N
        has_keys = j < n_blocks
        kT = desc_k.load([kv_row + tl.minimum(start_n, hi - BLOCK_N), 0]).T
        v = desc_v.load([kv_row + tl.maximum(start_n - BLOCK_N, lo), 0])
        qk = tl.dot(q, kT)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(q.dtype), v, acc)
        if CAUSAL:
            if start_n >= diag:
                qk = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], qk,
                              float("-inf"))
        m_ij = tl.where(has_keys, tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale), m_i)
        p = tl.exp2(qk * qk_scale - m_ij[:, None])
        # (m_i is -inf until the first block: -inf - -inf must not reach exp2)
        alpha = tl.where(has_keys, tl.exp2(m_i - m_ij), 1.0)
        l_i = l_i * alpha + tl.where(has_keys, tl.sum(p, axis=1), 0.0)
        m_i = m_ij
    return acc, l_i, m_i


@kiln.jit
def _attn_fwd_desc(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale, H, N_CTX,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr, GROUP: tl.constexpr = 1,
                   OVERLAP: tl.constexpr = False, LONGEST_FIRST: tl.constexpr = False):
    """_attn_fwd for contiguous q, k, v and out with N_CTX a multiple of BLOCK_M, through
    tensor descriptors over (B * H * S, D) (K and V: (B * H_KV * S, D)), so that on sm_90a
    the TMA copies K and V into the dot rings (no address arithmetic in the loop; q is copied
    once) and the output block goes out through a TMA store. Every block is whole: no bounds
    masks. Grid (N_CTX // BLOCK_M, Z * H). OVERLAP: whole key blocks through the rotated loop
    (_attn_fwd_inner_desc_overlap). LONGEST_FIRST: program 0 of each head takes the last query
    block (causal: the most keys), so that the light blocks, not the heavy ones, end the grid."""
    tl.static_assert(BLOCK_M % BLOCK_N == 0, "BLOCK_M must be a multiple of BLOCK_N")
    start_m = tl.num_programs(0) - 1 - tl.program_id(0) if LONGEST_FIRST else tl.program_id(0)
    off_hz = tl.program_id(1)
    q_row = off_hz * N_CTX + start_m * BLOCK_M
    kv_row = ((off_hz // H) * (H // GROUP) + (off_hz % H) // GROUP) * N_CTX
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = desc_q.load([q_row, 0])
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)
    hi = start_m * BLOCK_M if CAUSAL else N_CTX
    if OVERLAP == 2:
        # (causal: the diagonal blocks are the loop's last)
        fa3_hi = hi + BLOCK_M if CAUSAL else hi
        if fa3_hi > 0:
            acc, l_i, m_i = _attn_fwd_inner_desc_fa3(acc, l_i, m_i, q, desc_k, desc_v, kv_row,
                                                     qk_scale, 0, fa3_hi, hi, offs_m, BLOCK_M,
                                                     BLOCK_N, CAUSAL)
    elif OVERLAP:
        if hi > 0:
            acc, l_i, m_i = _attn_fwd_inner_desc_overlap(acc, l_i, m_i, q, desc_k, desc_v,
                                                         kv_row, qk_scale, 0, hi, BLOCK_M,
                                                         BLOCK_N)
    else:
        acc, l_i, m_i = _attn_fwd_inner_desc(acc, l_i, m_i, q, desc_k, desc_v, kv_row,
                                             qk_scale, offs_m, 0, hi, BLOCK_N, False)
    if CAUSAL and OVERLAP != 2:
        acc, l_i, m_i = _attn_fwd_inner_desc(acc, l_i, m_i, q, desc_k, desc_v, kv_row,
                                             qk_scale, offs_m, hi, hi + BLOCK_M, BLOCK_N, True)
    # One reciprocal a row and a multiply an element: `acc / l_i[:, None]` is a division an
    # element (div.full.f32: about four instructions each after ptxas), all of it in the
    # program's epilogue, where the tensor cores idle.
    out = acc * (1.0 / l_i)[:, None]
    desc_o.store([q_row, 0], out.to(desc_o.dtype))
    if LSE is not None:
        lse = (m_i + tl.log2(l_i)) * 0.6931471805599453  # ln(2): back to natural log
        tl.store(LSE + off_hz.to(tl.int64) * N_CTX + offs_m, lse)


# ---------------------------------------------------------------- host side

def tile_config(head_dim, cpu=False):
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for a head dimension. The CPU backend gets
    small tiles: compiling a dot for the host takes time that grows fast with its size.
    D = 128 on the H100 (bench/results/2026-11-22-h100-session7.md): 128x128 tiles on 8 warps
    ran 459-501 TFLOP/s with 2 stages, against 389-465 for 128x64 with 3-5 stages; 3 stages
    (q and three K and V slots: 224 KiB) were 0-4% faster than 2. D = 64: 128x64 tiles on 8
    warps with 3 stages, 0.956-1.011x Triton's best against 0.920-0.980x for 4 warps and 4
    stages (128x128 tiles were slower)."""
    if cpu:
        return 32, 16, 4, 1
    if head_dim <= 64:
        return 128, 64, 8, 3
    return 128, 128, 8, 3


def overlap_default(head_dim, cpu=False):
    """Whether the unmasked key blocks take the rotated loop (_attn_fwd_inner_overlap) by
    default. On the H100 (bench/results/2026-11-23-h100-session9.md) it ran 6-10% faster than
    the plain loop at D = 128 (causal: -2 to +5%) and 1-8% slower at D = 64 but for one
    case; the CPU backend keeps the plain loop (nothing runs asynchronously there)."""
    return not cpu and head_dim >= 128


def descriptor_overlap_default(head_dim, device, causal=False, seq_len=None):
    """The descriptor path's loop by default: FlashAttention-3's order ("fa3") at D = 128 on
    an sm_90 GPU, where its loop is warp-specialized (a producer warpgroup, the consumers'
    two warpgroups taking turns at the tensor cores): on the H100 (session 31, three runs of
    interleaved rounds) 554-575 / 573-604 TFLOP/s at 4x32x4096 / 1x32x16384 against 530-551 /
    548-563 for the plain loop, causal at 16k 578-590 against 536-551. Causal at S <= 4096
    the plain loop's 128x64 tiles (two programs an SM) ran ahead until the compiler peeled
    the loop's idle first p @ v and last q @ k (-kiln-peel-dot-loops; session 33, five
    interleaved rounds: 524 against 498, SDPA default 511). Else None (the plain loop; at
    D = 64 FlashAttention-3's order ran 0.84-0.92x SDPA default against 1.00-1.15x, session
    33). Non-causal, "persistent": the same order over every query block a program owns, one
    program an SM (flash_attention_persistent; session 35, H200, five interleaved rounds:
    585.5 / 605.9 TFLOP/s at 4x32x4096 / 1x32x16384 against 569.2 / 598.0 for "fa3", SDPA
    default 590.3 / 594.0); attention_forward takes "fa3" where it cannot tile the shape."""
    if head_dim != 128 or torch is None:
        return None
    if _capability_major(device) != 9:
        return None
    return "fa3" if causal or seq_len is None else "persistent"


@functools.lru_cache(maxsize=None)
def _capability_major(device):
    """The device's compute capability major, read once per device (attention_forward asks on
    every launch)."""
    return torch.cuda.get_device_capability(device)[0]


def descriptor_tile_config(head_dim, causal=False, overlap=None):
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) of the descriptor path (_attn_fwd_desc) on the
    GPU. Measured on the H100 (session 24, kiln_kernels' forward at 4x32x4096 and 1x32x16384,
    fp16, two rounds in one process): at D = 128, 128x128 tiles with 3 stages averaged 516
    TFLOP/s over the 8 timings (causal and not), 2 stages 506, 128x64 with 4 stages 499; at
    D = 64 128x128 tiles with 2 stages ran 467-516 non-causal against 422-455 for 128x64 with
    3 or 4, but causal 320-375 against 383-427 for 128x64 with 4 stages (the diagonal blocks
    of 128 keys mask half their work). Causal at D = 128, 128x64 tiles with 2 stages: 98 KiB of
    shared memory and 128 registers a thread, so two programs share an SM (a causal grid's
    programs run for unequal times) (session 30, H100, five alternating readings): 494-507
    TFLOP/s at 4k against 455-468 for 128x128 with 3 stages
    (229 KiB, one program an SM); at 16k 531-565 against 542-560, within the spread. Non-causal
    the two ran alike (4k 530-545 against 515-536, 16k 548-571 against 557-563), and 128x128
    stays. FlashAttention-3's order (overlap="fa3") at D = 128 takes 128x128 tiles with 3
    stages, causal too: its loop is warp-specialized only with empty barriers on the rings,
    which 3 stages give, and 2 x 128 x 128 registers of scores and probabilities leave one
    program an SM in any case."""
    if head_dim <= 64:
        return (128, 64, 8, 4) if causal else (128, 128, 8, 2)
    if overlap in ("fa3", "persistent"):
        return (128, 128, 8, 3)
    return (128, 64, 8, 2) if causal else (128, 128, 8, 3)


def _descriptor_path(q, k, v, out, block_m):
    """Whether _attn_fwd_desc can run: torch CUDA tensors, all four contiguous (each a
    (B * H * S, D) matrix for a descriptor), S a multiple of BLOCK_M (every block whole:
    a block past a head's end would read the next head's rows, and write them for O)."""
    return (torch is not None and all(isinstance(x, torch.Tensor) and x.is_cuda
                                      and x.is_contiguous() for x in (q, k, v, out))
            and q.shape[2] % block_m == 0)


def _persistent_path(q, block_m, block_n):
    """Whether flash_attention_persistent tiles q's shape: S a multiple of BLOCK_M (itself a
    multiple of BLOCK_N), at least two key blocks, and 32-bit element offsets."""
    S = q.shape[2]
    return (S % block_m == 0 and block_m % block_n == 0 and S >= 2 * block_n
            and math.prod(q.shape) < 2**31)


def is_dense(x):
    """Whether a torch tensor or numpy array is contiguous (row-major)."""
    return x.is_contiguous() if hasattr(x, "is_contiguous") else x.flags.c_contiguous


def check_lse(who, lse, B, H, S):
    """A ValueError unless `lse` is None or a contiguous fp32 array of shape (B, H, S) (the
    kernels write row b * H * S + h * S + s)."""
    if lse is None:
        return
    dense = is_dense(lse)
    if tuple(lse.shape) != (B, H, S) or str(lse.dtype) not in ("float32", "torch.float32") \
            or not dense:
        raise ValueError(f"{who}: expected lse of shape {(B, H, S)} (fp32, contiguous), found "
                         f"{tuple(lse.shape)} {str(lse.dtype).replace('torch.', '')}"
                         f"{'' if dense else ' not contiguous'}")


def check_shapes(who, q, k, v, *like_q):
    """(B, H, S, D) of q; k and v (B, H_KV, S, D) with H a multiple of H_KV (grouped-query
    attention; H_KV = H is the usual case); each of like_q q's shape. A ValueError else."""
    qs, ks = tuple(q.shape), tuple(k.shape)  # (read once: each read of a torch shape costs)
    if not (len(qs) == 4 and len(ks) == 4 and tuple(v.shape) == ks
            and all(tuple(x.shape) == qs for x in like_q)
            and qs[0] == ks[0] and qs[2:] == ks[2:] and ks[1] > 0 and qs[1] % ks[1] == 0):
        raise ValueError(f"{who}: expected q of shape (B, H, S, D), k and v of one shape "
                         f"(B, H_KV, S, D) with H a multiple of H_KV, and "
                         f"{'the outputs' if len(like_q) > 1 else 'out'} of q's shape, found "
                         f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}" +
                         "".join(f", {tuple(x.shape)}" for x in like_q))
    return tuple(map(int, qs))


def _strides(a):
    """Element strides of a torch tensor or a numpy array."""
    if callable(getattr(a, "stride", None)):  # torch
        return tuple(int(x) for x in a.stride())
    return tuple(int(x) // a.itemsize for x in a.strides)


def attention_forward(q, k, v, out, lse=None, causal=False, sm_scale=None, block_m=None,
                      block_n=None, num_warps=None, num_stages=None, overlap=None,
                      descriptors=None, longest_first=None, **launch):
    """Launches _attn_fwd on arrays (torch tensors, CUDA or CPU, or numpy arrays) of shape
    (B, H, S, D); writes `out` (same shape, any strides) and, when given, `lse` (fp32,
    contiguous (B, H, S)). sm_scale (default 1/sqrt(D)) must be positive. Tiles default to
    tile_config(D) (its CPU tiles with device="cpu"); overlap takes the rotated loop for whole
    key blocks (_attn_fwd_inner_overlap; default: overlap_default); `launch` goes to the launch
    (device="cpu", debug=True, ...). descriptors (default: where it can run, see
    _descriptor_path) launches _attn_fwd_desc instead, with descriptor_tile_config's tiles
    unless given; True where it cannot run is a ValueError. Its loop by default is
    descriptor_overlap_default's (FlashAttention-3's order, warp-specialized, at D = 128 on
    sm_90; else the plain one); overlap=False takes the plain one, overlap=True the rotated
    one (_attn_fwd_inner_desc_overlap: 2-4% slower at D128 and 7-30% at D64 on an H100,
    interleaved timings of session 25), overlap="fa3" FlashAttention-3's order
    (_attn_fwd_inner_desc_fa3; on the pointer path the rotated loop), overlap="persistent"
    (non-causal, contiguous arrays; the default at D = 128 on sm_90 where it tiles the shape)
    that order over all the query blocks a program owns, one program an SM
    (flash_attention_persistent). longest_first (default: causal through descriptors)
    launches the query blocks of each head last-first: the causal blocks with the most keys
    go first.

    The checks and choices depend only on the arrays' shapes, dtypes, devices and
    contiguity and on the options: for torch tensors and numpy arrays they are made once per
    such signature and the launch kept (_plan_key), so a repeated call costs little more than
    its launch."""
    options = (causal, sm_scale, block_m, block_n, num_warps, num_stages, overlap, descriptors,
               longest_first)
    key = _plan_key(q, k, v, out, lse, options, launch)
    run = _plans.get(key) if key is not None else None
    if run is None:
        run = _plan(q, k, v, out, lse, *options, launch)
        if key is not None:
            if len(_plans) >= _MAX_PLANS:
                _plans.clear()
            _plans[key] = run
    return run(q, k, v, out, lse)


_plans = {}
_MAX_PLANS = 256
_SCALARS = frozenset((type(None), bool, int, float, str))


def _plan_key(q, k, v, out, lse, options, launch):
    """What attention_forward's checks and choices read, for torch tensors or numpy arrays
    (all of one type) whose options and launch arguments are plain scalars (else None: no
    plan is kept): the shapes, the dtypes of q, k and v, whether the arrays are contiguous,
    lse's shape and dtype; for torch, q's device and whether k, v and out are CUDA tensors
    (the strides of the pointer path are read per call)."""
    t = type(q)
    if not (t is type(k) is type(v) is type(out) and (lse is None or type(lse) is t)
            and _SCALARS.issuperset(map(type, options))):
        return None
    if launch:
        if not _SCALARS.issuperset(map(type, launch.values())):
            return None
        launch = tuple(launch.items())
    else:
        launch = None
    if t is _Tensor:
        where = (q.device, k.is_cuda, v.is_cuda, out.is_cuda, q.is_contiguous(),
                 k.is_contiguous(), v.is_contiguous(), out.is_contiguous(),
                 lse is None or (lse.shape, lse.dtype, lse.is_contiguous()))
    elif t is getattr(sys.modules.get("numpy"), "ndarray", None):
        where = (q.flags.c_contiguous, k.flags.c_contiguous, v.flags.c_contiguous,
                 out.flags.c_contiguous,
                 lse is None or (lse.shape, lse.dtype, lse.flags.c_contiguous))
    else:
        return None
    return (q.shape, k.shape, v.shape, out.shape, q.dtype, k.dtype, v.dtype, where, options,
            launch)


def _plan(q, k, v, out, lse, causal, sm_scale, block_m, block_n, num_warps, num_stages,
          overlap, descriptors, longest_first, launch):
    """attention_forward's checks and choices for these arrays: its launch, a function of (q,
    k, v, out, lse) returning out, for arrays of the same signature (_plan_key)."""
    B, H, S, D = check_shapes("attention", q, k, v, out)
    if overlap not in (None, False, True, "fa3", "persistent"):
        raise ValueError(f"attention: expected overlap None, False, True, 'fa3' or "
                         f"'persistent', found {overlap!r}")
    if D not in (16, 32, 64, 128, 256):
        raise ValueError(f"attention: expected a head dimension of 16, 32, 64, 128 or 256, "
                         f"found {D}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"attention: expected q, k and v of one dtype, found {q.dtype}, "
                         f"{k.dtype} and {v.dtype}")
    cpu = launch.get("device") == "cpu"
    bm, bn, nw, ns = tile_config(D, cpu=cpu)
    tiled = None  # whether the persistent kernel tiles the shape, once asked
    if descriptors is None or descriptors:
        dbm = block_m or descriptor_tile_config(D, causal, overlap)[0]
        usable = not cpu and _descriptor_path(q, k, v, out, dbm)
        if descriptors and not usable:
            raise ValueError("attention: descriptors=True needs contiguous CUDA torch tensors "
                             f"and a sequence length that is a multiple of BLOCK_M ({dbm})")
        descriptors = usable
        if descriptors:
            if overlap is None:
                overlap = descriptor_overlap_default(D, q.device, causal, S)
                pbm, pbn = descriptor_tile_config(D, causal, overlap)[:2]
                if overlap == "persistent":
                    tiled = _persistent_path(q, block_m or pbm, block_n or pbn)
                    overlap = "persistent" if tiled else "fa3"
            bm, bn, nw, ns = descriptor_tile_config(D, causal, overlap)
    if tiled is None and overlap == "persistent":
        tiled = _persistent_path(q, block_m or bm, block_n or bn)
    if overlap == "persistent" and (causal or not tiled):
        raise ValueError("attention: overlap='persistent' needs a non-causal attention whose "
                         f"sequence length is a multiple of BLOCK_M ({block_m or bm}) and at "
                         f"least 2 * BLOCK_N ({2 * (block_n or bn)}), under 2**31 elements"
                         + (", found causal" if causal else f", found {tuple(q.shape)}"))
    bm, bn = block_m or bm, block_n or bn
    nw, ns = num_warps or nw, num_stages or ns
    if bm % bn:
        raise ValueError(f"attention: expected BLOCK_M ({bm}) to be a multiple of BLOCK_N "
                         f"({bn})")
    check_lse("attention", lse, B, H, S)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    if not (sm_scale > 0 and math.isfinite(sm_scale)):
        raise ValueError(f"attention: expected a positive, finite sm_scale, found {sm_scale}")
    if B * H == 0 or S == 0:
        return _nothing
    grid = (kiln.cdiv(S, bm), B * H)
    if longest_first is None:  # (session 25, interleaved: +0-4% through descriptors, -2.5 to
        longest_first = bool(causal) and descriptors  # +2.7% through pointers)
    meta = dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=bool(causal),
                GROUP=H // int(k.shape[1]), LONGEST_FIRST=bool(longest_first), num_warps=nw,
                num_stages=ns, **launch)
    scale = float(sm_scale)
    if overlap == "persistent":
        from . import flash_attention_persistent as fp
        if descriptors:  # (contiguous CUDA tensors; shapes, tiles and lse checked above)
            return fp.persistent_launch((B, H, S, D), int(k.shape[1]), q.device, scale, None,
                                        bm, bn, nw, ns, launch)

        def persistent(q, k, v, out, lse):
            return fp.attention_forward_persistent(q, k, v, out, lse, scale, block_m=bm,
                                                   block_n=bn, num_warps=nw, num_stages=ns,
                                                   **launch)
        return persistent
    if descriptors:
        # each array as a (rows, D) matrix (of contiguous tensors)
        qd = matrix_descriptor(B * H * S, D, bm)
        kd = matrix_descriptor(B * int(k.shape[1]) * S, D, bn)
        kernel = _attn_fwd_desc[grid]
        meta["OVERLAP"] = 2 if overlap == "fa3" else bool(overlap)

        def through_descriptors(q, k, v, out, lse):
            kernel(qd(q), kd(k), kd(v), qd(out), lse, scale, H, S, **meta)
            return out
        return through_descriptors
    kernel = _attn_fwd[grid]
    meta.update(EVEN_N=S % bn == 0,
                OVERLAP=overlap_default(D, cpu) if overlap is None else bool(overlap))

    def through_pointers(q, k, v, out, lse):
        kernel(q, k, v, out, lse, scale, *_strides(q), *_strides(k), *_strides(v),
               *_strides(out), B, H, S, **meta)
        return out
    return through_pointers


def _nothing(q, k, v, out, lse):
    """The launch of an attention of no rows: none."""
    return out


def _forward_with_lse(q, k, v, causal, sm_scale, overlap, descriptors=None):
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(q.shape[:3], device=q.device, dtype=torch.float32)
    launch = {"device": "cpu"} if q.device.type == "cpu" else {}
    attention_forward(q, k, v, out, lse, causal=causal, sm_scale=sm_scale, overlap=overlap,
                      descriptors=descriptors, **launch)
    return out, lse


if torch is not None:
    class KilnAttention(torch.autograd.Function):
        """Flash attention with its backward (flash_attention_bwd): saves q, k, v, the output
        and the logsumexp; no gradient flows through the returned logsumexp."""

        @staticmethod
        def forward(ctx, q, k, v, causal, sm_scale, overlap, descriptors):
            out, lse = _forward_with_lse(q, k, v, causal, sm_scale, overlap, descriptors)
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.causal, ctx.sm_scale = causal, sm_scale
            ctx.set_materialize_grads(False)
            ctx.mark_non_differentiable(lse)
            return out, lse

        @staticmethod
        def backward(ctx, dout, _dlse):
            from .flash_attention_bwd import attention_backward
            q, k, v, out, lse = ctx.saved_tensors
            if dout is None:
                return None, None, None, None, None, None, None
            dq, dk, dv = (torch.empty_like(x, memory_format=torch.contiguous_format)
                          for x in (q, k, v))
            launch = {"device": "cpu"} if q.device.type == "cpu" else {}
            attention_backward(q, k, v, out, dout, lse, dq, dk, dv, causal=ctx.causal,
                               sm_scale=ctx.sm_scale, **launch)
            return dq, dk, dv, None, None, None, None


def attention(q, k, v, causal=False, sm_scale=None, return_lse=False, overlap=None,
              descriptors=None):
    """Flash attention on torch tensors (B, H, S, D), fp16 or bf16 (CUDA, or CPU on the CPU
    backend): softmax(q k^T * sm_scale) v, sm_scale defaulting to 1/sqrt(D). Returns the
    output (q's dtype, contiguous) and, with return_lse, the fp32 logsumexp (B, H, S).
    Differentiable: when q, k or v requires grad (and grad mode is on), the output's backward
    runs flash_attention_bwd's kernels (the logsumexp takes no gradient). overlap and
    descriptors: attention_forward's."""
    if torch is None:
        raise RuntimeError("kiln_kernels.flash_attention.attention needs torch; "
                           "attention_forward takes numpy arrays")
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"attention: expected fp16 or bf16 inputs, found {q.dtype}")
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v)):
        out, lse = KilnAttention.apply(q, k, v, bool(causal), sm_scale, overlap, descriptors)
        return (out, lse) if return_lse else out
    if return_lse:
        return _forward_with_lse(q, k, v, causal, sm_scale, overlap, descriptors)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    launch = {"device": "cpu"} if q.device.type == "cpu" else {}
    attention_forward(q, k, v, out, None, causal=causal, sm_scale=sm_scale, overlap=overlap,
                      descriptors=descriptors, **launch)
    return out
