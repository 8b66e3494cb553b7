"""Flash attention, backward pass (FlashAttention-2 style).

With P = softmax(S), S = Q K^T * sm_scale, O = P V and dO given, the gradients are

    dV = P^T dO
    dP = dO V^T
    dS = P * (dP - Delta),    Delta_i = sum_j P_ij dP_ij = rowsum(dO * O)_i
    dQ = dS K * sm_scale,     dK = dS^T Q * sm_scale

P is never stored: each kernel recomputes its block of P from Q, K and the forward's
logsumexp L (P_ij = exp(S_ij - L_i), in base 2: exp2(S_ij * log2(e) - L_i * log2(e))).
Three kernels (Dao, FlashAttention-2, section 3.2):

  _attn_bwd_delta  Delta = rowsum(dO * O), fp32, one program per BLOCK_M rows;
  _attn_bwd_dkdv   one program per BLOCK_N keys of one (batch, head): k and v stay in
                   registers, the query blocks stream past, dK and dV accumulate in fp32;
  _attn_bwd_dq     one program per BLOCK_M queries: q, dO, L and Delta stay, the key blocks
                   stream past, dQ accumulates in fp32.

No atomics: each gradient block is owned by one program. Every product is a plain tl.dot of
two tiles; the transposed operands (Q^T and dO^T in _attn_bwd_dkdv, K^T and V^T in
_attn_bwd_dq) are loaded transposed by pointer arithmetic, as the forward loads K^T.

Causal attention (query i sees keys j <= i): _attn_bwd_dkdv walks the query blocks from its
own key block on (earlier queries see none of its keys), the first BLOCK_N / BLOCK_M of them
masked with i >= j; _attn_bwd_dq walks the key blocks up to its own query block, the last
BLOCK_M / BLOCK_N masked. Rows and keys past N_CTX are loaded as zeros, which adds nothing
to any gradient (a zero key or query row multiplies every term it is in), and are not stored.

Inputs are (B, H, S, D) with any strides; fp16 or bf16; D in 16..256, a power of two. K and
V (and dK, dV) may have fewer heads than Q (grouped-query attention): a dK/dV program then
sums over the query heads of its key/value head, one after the other (no atomics still).
"""
import math

import kiln
import kiln.language as tl

from ._utils import torch
from .flash_attention import _strides, check_shapes


@kiln.jit
def _attn_bwd_delta(O, DO, Delta, stride_oz, stride_oh, stride_om, stride_ok,
                    stride_dz, stride_dh, stride_dm, stride_dk, H, N_CTX,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Grid (cdiv(N_CTX, BLOCK_M), Z * H): Delta (fp32, contiguous (Z, H, N_CTX)) =
    rowsum(dO * O)."""
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    o = tl.load(O + off_z * stride_oz + off_h * stride_oh + offs_m[:, None] * stride_om
                + offs_d[None, :] * stride_ok, mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + off_z * stride_dz + off_h * stride_dh + offs_m[:, None] * stride_dm
                 + offs_d[None, :] * stride_dk, mask=row_ok[:, None], other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(Delta + off_hz.to(tl.int64) * N_CTX + offs_m, delta, mask=row_ok)


@kiln.jit
def _bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_qk,
                    stride_dm, stride_dk, qk_scale, offs_n, lo, hi, N_CTX,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BOUNDS: tl.constexpr,
                    DIAGONAL: tl.constexpr):
    """Folds the query blocks [lo, hi) into (dk, dv) of the keys offs_n. BOUNDS: queries at
    or past N_CTX are loaded as zeros; DIAGONAL: queries before a key get P = 0."""
    offs_d = tl.arange(0, HEAD_DIM)
    offs_r = tl.arange(0, BLOCK_M)
    for start_m in range(lo, hi, BLOCK_M):
        rows = start_m + offs_r
        qT_ptrs = q_base + offs_d[:, None] * stride_qk + rows[None, :] * stride_qm
        q_ptrs = q_base + rows[:, None] * stride_qm + offs_d[None, :] * stride_qk
        do_ptrs = do_base + rows[:, None] * stride_dm + offs_d[None, :] * stride_dk
        doT_ptrs = do_base + offs_d[:, None] * stride_dk + rows[None, :] * stride_dm
        if BOUNDS:
            row_ok = rows < N_CTX
            qT = tl.load(qT_ptrs, mask=row_ok[None, :], other=0.0)
            q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
            do = tl.load(do_ptrs, mask=row_ok[:, None], other=0.0)
            doT = tl.load(doT_ptrs, mask=row_ok[None, :], other=0.0)
            lse = tl.load(lse_base + rows, mask=row_ok, other=0.0)
            delta = tl.load(delta_base + rows, mask=row_ok, other=0.0)
        else:
            qT = tl.load(qT_ptrs)
            q = tl.load(q_ptrs)
            do = tl.load(do_ptrs)
            doT = tl.load(doT_ptrs)
            lse = tl.load(lse_base + rows)
            delta = tl.load(delta_base + rows)
        # P^T of this block: keys down, queries across
        pT = tl.exp2(tl.dot(k, qT) * qk_scale - (lse * 1.4426950408889634)[None, :])
        if DIAGONAL:
            pT = tl.where(rows[None, :] >= offs_n[:, None], pT, 0.0)
        dv = tl.dot(pT.to(do.dtype), do, dv)
        dpT = tl.dot(v, doT)
        dsT = pT * (dpT - delta[None, :])
        dk = tl.dot(dsT.to(q.dtype), q, dk)
    return dk, dv


@kiln.jit
def _bwd_dkdv_head(dk, dv, k, v, Q, DO, LSE, Delta, off_z, off_hq, H,
                   stride_qz, stride_qh, stride_qm, stride_qk,
                   stride_dz, stride_dh, stride_dm, stride_dk, qk_scale, offs_n, start_n, N_CTX,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr, BOUNDS: tl.constexpr):
    """Folds the query blocks of query head off_hq that see keys offs_n into (dk, dv)."""
    q_base = Q + off_z * stride_qz + off_hq * stride_qh
    do_base = DO + off_z * stride_dz + off_hq * stride_dh
    row = (off_z * H + off_hq) * N_CTX
    lse_base = LSE + row
    delta_base = Delta + row
    end = tl.cdiv(N_CTX, BLOCK_M) * BLOCK_M
    if CAUSAL:
        # queries [n0, n0 + BLOCK_N) hold the diagonal; earlier ones see none of these keys
        lo = start_n * BLOCK_N
        mid = tl.minimum(lo + BLOCK_N, end)
        dk, dv = _bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                                 stride_qm, stride_qk, stride_dm, stride_dk, qk_scale, offs_n,
                                 lo, mid, N_CTX, HEAD_DIM, BLOCK_M, BOUNDS, True)
    else:
        mid = 0
    dk, dv = _bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm,
                             stride_qk, stride_dm, stride_dk, qk_scale, offs_n, mid, end, N_CTX,
                             HEAD_DIM, BLOCK_M, BOUNDS, False)
    return dk, dv


@kiln.jit
def _attn_bwd_dkdv(Q, K, V, DO, DK, DV, LSE, Delta, sm_scale,
                   stride_qz, stride_qh, stride_qm, stride_qk,
                   stride_kz, stride_kh, stride_kn, stride_kk,
                   stride_vz, stride_vh, stride_vn, stride_vk,
                   stride_dz, stride_dh, stride_dm, stride_dk,
                   stride_gz, stride_gh, stride_gn, stride_gk,
                   stride_uz, stride_uh, stride_un, stride_uk,
                   H, N_CTX,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr, BOUNDS: tl.constexpr, GROUP: tl.constexpr = 1):
    """Grid (cdiv(N_CTX, BLOCK_N), Z * H / GROUP): a program per key block of one key/value
    head, summing over the GROUP query heads that read it (grouped-query attention; 1: one).
    DK (strides stride_g*) and DV (stride_u*) have K's shape; LSE and Delta are fp32,
    contiguous (Z, H, N_CTX). BOUNDS: N_CTX is not a multiple of the tiles (the host's
    choice)."""
    tl.static_assert(BLOCK_N % BLOCK_M == 0, "BLOCK_N must be a multiple of BLOCK_M")
    start_n = tl.program_id(0)
    off_hz = tl.program_id(1)
    H_KV = H // GROUP
    off_z = (off_hz // H_KV).to(tl.int64)
    off_h = (off_hz % H_KV).to(tl.int64)

    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    key_ok = offs_n < N_CTX
    k = tl.load(K + off_z * stride_kz + off_h * stride_kh + offs_n[:, None] * stride_kn
                + offs_d[None, :] * stride_kk, mask=key_ok[:, None], other=0.0)
    v = tl.load(V + off_z * stride_vz + off_h * stride_vh + offs_n[:, None] * stride_vn
                + offs_d[None, :] * stride_vk, mask=key_ok[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if GROUP == 1:
        dk, dv = _bwd_dkdv_head(dk, dv, k, v, Q, DO, LSE, Delta, off_z, off_h, H, stride_qz,
                                stride_qh, stride_qm, stride_qk, stride_dz, stride_dh,
                                stride_dm, stride_dk, qk_scale, offs_n, start_n, N_CTX,
                                HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, BOUNDS)
    else:
        for g in range(GROUP):
            dk, dv = _bwd_dkdv_head(dk, dv, k, v, Q, DO, LSE, Delta, off_z, off_h * GROUP + g,
                                    H, stride_qz, stride_qh, stride_qm, stride_qk, stride_dz,
                                    stride_dh, stride_dm, stride_dk, qk_scale, offs_n, start_n,
                                    N_CTX, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, BOUNDS)
    tl.store(DV + off_z * stride_uz + off_h * stride_uh + offs_n[:, None] * stride_un
             + offs_d[None, :] * stride_uk, dv.to(DV.dtype.element_ty), mask=key_ok[:, None])
    tl.store(DK + off_z * stride_gz + off_h * stride_gh + offs_n[:, None] * stride_gn
             + offs_d[None, :] * stride_gk, (dk * sm_scale).to(DK.dtype.element_ty),
             mask=key_ok[:, None])


@kiln.jit
def _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_kk, stride_vn,
                  stride_vk, qk_scale, offs_m, lo, hi, N_CTX,
                  HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, BOUNDS: tl.constexpr,
                  DIAGONAL: tl.constexpr):
    """Folds the key blocks [lo, hi) into dq of the queries offs_m (lse2: the logsumexp in
    base 2). BOUNDS: keys at or past N_CTX are loaded as zeros; DIAGONAL: keys after a
    query get P = 0."""
    offs_d = tl.arange(0, HEAD_DIM)
    offs_c = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_c
        kT_ptrs = k_base + offs_d[:, None] * stride_kk + cols[None, :] * stride_kn
        k_ptrs = k_base + cols[:, None] * stride_kn + offs_d[None, :] * stride_kk
        vT_ptrs = v_base + offs_d[:, None] * stride_vk + cols[None, :] * stride_vn
        if BOUNDS:
            key_ok = cols < N_CTX
            kT = tl.load(kT_ptrs, mask=key_ok[None, :], other=0.0)
            k = tl.load(k_ptrs, mask=key_ok[:, None], other=0.0)
            vT = tl.load(vT_ptrs, mask=key_ok[None, :], other=0.0)
        else:
            kT = tl.load(kT_ptrs)
            k = tl.load(k_ptrs)
            vT = tl.load(vT_ptrs)
        p = tl.exp2(tl.dot(q, kT) * qk_scale - lse2[:, None])
        if DIAGONAL:
            p = tl.where(offs_m[:, None] >= cols[None, :], p, 0.0)
        dp = tl.dot(do, vT)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq


@kiln.jit
def _attn_bwd_dq(Q, K, V, DO, DQ, LSE, Delta, sm_scale,
                 stride_qz, stride_qh, stride_qm, stride_qk,
                 stride_kz, stride_kh, stride_kn, stride_kk,
                 stride_vz, stride_vh, stride_vn, stride_vk,
                 stride_dz, stride_dh, stride_dm, stride_dk,
                 stride_gz, stride_gh, stride_gm, stride_gk,
                 H, N_CTX,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CAUSAL: tl.constexpr, BOUNDS: tl.constexpr, GROUP: tl.constexpr = 1):
    """Grid (cdiv(N_CTX, BLOCK_M), Z * H). DQ has Q's shape, strides stride_g*; K and V have
    H / GROUP heads."""
    tl.static_assert(BLOCK_M % BLOCK_N == 0, "BLOCK_M must be a multiple of BLOCK_N")
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    k_base = K + off_z * stride_kz + (off_h // GROUP) * stride_kh
    v_base = V + off_z * stride_vz + (off_h // GROUP) * stride_vh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    q = tl.load(Q + off_z * stride_qz + off_h * stride_qh + offs_m[:, None] * stride_qm
                + offs_d[None, :] * stride_qk, mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + off_z * stride_dz + off_h * stride_dh + offs_m[:, None] * stride_dm
                 + offs_d[None, :] * stride_dk, mask=row_ok[:, None], other=0.0)
    lse2 = tl.load(LSE + off_hz.to(tl.int64) * N_CTX + offs_m, mask=row_ok, other=0.0) \
        * 1.4426950408889634
    delta = tl.load(Delta + off_hz.to(tl.int64) * N_CTX + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    end = tl.cdiv(N_CTX, BLOCK_N) * BLOCK_N
    if CAUSAL:
        # keys [0, m0) precede every query of the block; [m0, m0 + BLOCK_M) hold the diagonal
        mid = start_m * BLOCK_M
        dq = _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_kk,
                           stride_vn, stride_vk, qk_scale, offs_m, 0, mid, N_CTX, HEAD_DIM,
                           BLOCK_N, False, False)
        dq = _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_kk,
                           stride_vn, stride_vk, qk_scale, offs_m, mid,
                           tl.minimum(mid + BLOCK_M, end), N_CTX, HEAD_DIM, BLOCK_N, BOUNDS,
                           True)
    else:
        dq = _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_kk,
                           stride_vn, stride_vk, qk_scale, offs_m, 0, end, N_CTX, HEAD_DIM,
                           BLOCK_N, BOUNDS, False)
    tl.store(DQ + off_z * stride_gz + off_h * stride_gh + offs_m[:, None] * stride_gm
             + offs_d[None, :] * stride_gk, (dq * sm_scale).to(DQ.dtype.element_ty),
             mask=row_ok[:, None])


# ---------------------------------------------------------------- host side

def bwd_tile_config(head_dim, cpu=False):
    """((BLOCK_M, BLOCK_N) of _attn_bwd_dkdv, (BLOCK_M, BLOCK_N) of _attn_bwd_dq, num_warps,
    num_stages). The CPU backend gets small tiles (its dot compiles grow fast with size).
    On the H100 (bench/results/2026-11-23-h100-session11.md, fp16, B4 H32 S4096 and B1 H32
    S16384): 64 queries by 128 keys for dK/dV and 128 by 64 for dQ on 8 warps were the
    fastest of four configurations in 5 of 6 cases; 2 stages at D = 128 (7.57 ms against
    7.71 with 3), 3 at D = 64 (4.35 against 4.54)."""
    if cpu:
        return (16, 32), (32, 16), 4, 1
    if head_dim <= 64:
        return (64, 128), (128, 64), 8, 3
    if head_dim <= 128:
        return (64, 128), (128, 64), 8, 2
    # D = 256: dK and dV of 64 keys alone fill 256 registers a thread; the smallest tiles
    # (ptxas: dK/dV 2 KiB of spills, dQ none; not tuned on the GPU)
    return (32, 64), (64, 32), 4, 2


def attention_backward(q, k, v, out, do, lse, dq, dk, dv, causal=False, sm_scale=None,
                       delta=None, tiles=None, num_warps=None, num_stages=None, **launch):
    """Gradients of flash attention: writes dq (q's shape), dk and dv (k's shape; any
    strides) from the forward's inputs, output `out`, its logsumexp `lse` (fp32, contiguous
    (B, H, S), as attention_forward writes it) and the output's gradient `do`. Arrays are torch tensors
    (CUDA or CPU) or numpy arrays; `delta` is an fp32 (B, H, S) scratch array (allocated
    when None, torch only); `launch` goes to each launch (device="cpu", debug=True, ...)."""
    B, H, S, D = check_shapes("attention_backward", q, k, v, out, do, dq)
    if not tuple(dk.shape) == tuple(dv.shape) == tuple(k.shape):
        raise ValueError(f"attention_backward: expected dk and dv of k's shape {tuple(k.shape)}"
                         f", found {tuple(dk.shape)} and {tuple(dv.shape)}")
    group = H // int(k.shape[1])
    if D not in (16, 32, 64, 128, 256):
        raise ValueError(f"attention_backward: expected a head dimension of 16, 32, 64, 128 "
                         f"or 256, found {D}")
    if tuple(lse.shape) != (B, H, S):
        raise ValueError(f"attention_backward: expected lse of shape {(B, H, S)} (fp32, "
                         f"contiguous), found {tuple(lse.shape)}")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    if not (sm_scale > 0 and math.isfinite(sm_scale)):
        raise ValueError(f"attention_backward: expected a positive, finite sm_scale, found "
                         f"{sm_scale}")
    cpu = launch.get("device") == "cpu"
    (m1, n1), (m2, n2), nw, ns = bwd_tile_config(D, cpu=cpu)
    if tiles is not None:
        (m1, n1), (m2, n2) = tiles
    nw, ns = num_warps or nw, num_stages or ns
    if n1 % m1 or m2 % n2:
        raise ValueError(f"attention_backward: expected dkdv tiles with BLOCK_N a multiple "
                         f"of BLOCK_M and dq tiles with BLOCK_M a multiple of BLOCK_N, found "
                         f"{(m1, n1)} and {(m2, n2)}")
    if B * H == 0 or S == 0:
        return dq, dk, dv
    if delta is None:
        if torch is None or not isinstance(q, torch.Tensor):
            raise ValueError("attention_backward: pass `delta` (fp32 (B, H, S)) for numpy "
                             "arrays")
        delta = torch.empty((B, H, S), device=q.device, dtype=torch.float32)
    bounds = bool(S % n1 or S % m2)
    _attn_bwd_delta[(kiln.cdiv(S, m2), B * H)](out, do, delta, *_strides(out), *_strides(do),
                                               H, S, HEAD_DIM=D, BLOCK_M=m2, num_warps=nw,
                                               **launch)
    common = (*_strides(q), *_strides(k), *_strides(v), *_strides(do))
    _attn_bwd_dkdv[(kiln.cdiv(S, n1), B * H // group)](
        q, k, v, do, dk, dv, lse, delta, float(sm_scale), *common, *_strides(dk),
        *_strides(dv), H, S,
        HEAD_DIM=D, BLOCK_M=m1, BLOCK_N=n1, CAUSAL=bool(causal), BOUNDS=bounds, GROUP=group,
        num_warps=nw, num_stages=ns, **launch)
    _attn_bwd_dq[(kiln.cdiv(S, m2), B * H)](
        q, k, v, do, dq, lse, delta, float(sm_scale), *common, *_strides(dq), H, S,
        HEAD_DIM=D, BLOCK_M=m2, BLOCK_N=n2, CAUSAL=bool(causal), BOUNDS=bounds, GROUP=group,
        num_warps=nw, num_stages=ns, **launch)
    return dq, dk, dv
