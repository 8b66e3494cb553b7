"""Flash attention the way users write it after Triton's fused-attention tutorial (06), for
issue #23's regression benchmark (bench/cliffs_attention.py): one source, run under Kiln as
written and under Triton through bench/common.py's twin (imports rebound). Written here in
the tutorial's structure, not copied from it. Tensors are (B, H, S, D) with any strides; S a
multiple of the tiles (no bounds masks, as in the tutorial).

    attn_fwd            grid (S // BLOCK_M, B * H): the query tile loaded once, then
                        _attn_fwd_inner walks the key/value blocks with K loaded transposed by
                        pointer arithmetic (a [HEAD_DIM, BLOCK_N] tile from K's strides), an
                        online softmax in base 2 (qk_scale = sm_scale * log2(e)). STAGE 1:
                        every key block (not causal); STAGE 3: causal, in two passes: the
                        blocks left of the diagonal without a mask, then the diagonal block
                        with one. Writes O (the output's dtype) and M, the row logsumexp of
                        the scaled scores in base 2 (fp32), which the backward reads.
    attn_fwd_desc       attn_fwd through host tensor descriptors over (B * H * S, D), the
                        tutorial's path on GPUs with the TMA: q loaded once, each key block's
                        K^T as the transpose of its [BLOCK_N, D] block, O stored by the
                        descriptor; contiguous (B, H, S, D) tensors.
    attn_fwd_fa2        FlashAttention-2's Triton style, grid (S // BLOCK_M, B * H): the key
                        loop computes K's and V's pointers from start_n every iteration (none
                        carried), K read as [BLOCK_N, D] and transposed in the dot; causal:
                        the loop stops after the diagonal block and masks every block by
                        offs_m >= offs_n. Writes O only.
    attn_bwd_preprocess Delta = rowsum(O * dO) (fp32), grid (S // BLOCK_M, B * H).
    attn_bwd            grid (S // BLOCK_N1, B * H), BLOCK_N1 == BLOCK_M2: each program first
                        computes dK, dV of keys [pid * BLOCK_N1, +BLOCK_N1) looping over query
                        blocks (Q and the probabilities used transposed: the scores as
                        K Q^T), then dQ of queries [pid * BLOCK_M2, +BLOCK_M2) looping over key
                        blocks (K^T and V^T loaded by pointers). Causal: the diagonal blocks
                        are walked in slices BLK_SLICE_FACTOR times smaller, masked; the rest
                        unmasked. fp32 accumulation, the products' operands in the inputs'
                        dtype.
"""
import kiln
import kiln.language as tl


@kiln.jit
def _attn_fwd_inner(acc, l_i, m_i, q, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
                    start_m, qk_scale, N_CTX, offs_m, offs_n, offs_d,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    # Which key blocks this pass covers. STAGE 1: those left of the diagonal (causal, all
    # visible); STAGE 2: the diagonal block (causal, masked); STAGE 3: all (not causal).
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    # K^T: rows are the head dimension, columns the keys.
    kT_ptrs = K + offs_d[:, None] * stride_kd + (lo + offs_n)[None, :] * stride_kn
    v_ptrs = V + (lo + offs_n)[:, None] * stride_vn + offs_d[None, :] * stride_vd
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        kT = tl.load(kT_ptrs)
        s = tl.dot(q, kT)
        if STAGE == 2:
            visible = offs_m[:, None] >= (start_n + offs_n[None, :])
            s = tl.where(visible, s * qk_scale, -1.0e6)
            m_new = tl.maximum(m_i, tl.max(s, 1))
            s = s - m_new[:, None]
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            s = s * qk_scale - m_new[:, None]
        p = tl.math.exp2(s)
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
        kT_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@kiln.jit
def attn_fwd(Q, K, V, sm_scale, M, Out,
             stride_qz, stride_qh, stride_qm, stride_qd,
             stride_kz, stride_kh, stride_kn, stride_kd,
             stride_vz, stride_vh, stride_vn, stride_vd,
             stride_oz, stride_oh, stride_om, stride_od,
             H, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    Q += off_z * stride_qz + off_h * stride_qh
    K += off_z * stride_kz + off_h * stride_kh
    V += off_z * stride_vz + off_h * stride_vh
    Out += off_z * stride_oz + off_h * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e): the softmax in exp2
    q = tl.load(Q + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd)

    # STAGE 1: not causal (one pass over every block, stage 3 of the inner loop);
    # STAGE 3: causal (the off-band blocks, stage 1, then the diagonal, stage 2).
    if STAGE & 1:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K, V, stride_kn, stride_kd,
                                        stride_vn, stride_vd, start_m, qk_scale, N_CTX,
                                        offs_m, offs_n, offs_d, BLOCK_M, BLOCK_N, 4 - STAGE)
    if STAGE & 2:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K, V, stride_kn, stride_kd,
                                        stride_vn, stride_vd, start_m, qk_scale, N_CTX,
                                        offs_m, offs_n, offs_d, BLOCK_M, BLOCK_N, 2)

    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    o_ptrs = Out + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(Out.type.element_ty))


@kiln.jit
def _attn_fwd_inner_desc(acc, l_i, m_i, q, desc_k, desc_v, offset_y, start_m, qk_scale,
                         N_CTX, offs_m, offs_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         STAGE: tl.constexpr):
    # _attn_fwd_inner with K and V read through tensor descriptors over (B * H * S, D):
    # a key block is the rows [offset_y + start_n, + BLOCK_N), K^T its transpose.
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    row = offset_y + lo
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        kT = desc_k.load([row, 0]).T
        s = tl.dot(q, kT)
        if STAGE == 2:
            visible = offs_m[:, None] >= (start_n + offs_n[None, :])
            s = tl.where(visible, s * qk_scale, -1.0e6)
            m_new = tl.maximum(m_i, tl.max(s, 1))
            s = s - m_new[:, None]
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            s = s * qk_scale - m_new[:, None]
        p = tl.math.exp2(s)
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([row, 0])
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
        row += BLOCK_N
    return acc, l_i, m_i


@kiln.jit
def attn_fwd_desc(desc_q, desc_k, desc_v, sm_scale, M, desc_o, H, N_CTX,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  STAGE: tl.constexpr):
    """attn_fwd through host tensor descriptors (the tutorial's path where the GPU has the
    TMA): q, k, v and o contiguous, each described as a (B * H * S, D) matrix, blocks
    [BLOCK_M, D] (q, o) and [BLOCK_N, D] (k, v)."""
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    offset_y = off_hz * N_CTX
    q_row = offset_y + start_m * BLOCK_M
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([q_row, 0])
    if STAGE & 1:
        acc, l_i, m_i = _attn_fwd_inner_desc(acc, l_i, m_i, q, desc_k, desc_v, offset_y,
                                             start_m, qk_scale, N_CTX, offs_m, offs_n,
                                             BLOCK_M, BLOCK_N, 4 - STAGE)
    if STAGE & 2:
        acc, l_i, m_i = _attn_fwd_inner_desc(acc, l_i, m_i, q, desc_k, desc_v, offset_y,
                                             start_m, qk_scale, N_CTX, offs_m, offs_n,
                                             BLOCK_M, BLOCK_N, 2)
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    desc_o.store([q_row, 0], acc.to(desc_o.dtype))


@kiln.jit
def attn_bwd_preprocess(O, DO, Delta, stride_z, stride_h, stride_tok, stride_d, H, N_CTX,
                        BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    off_hz = tl.program_id(1)
    base = (off_hz // H).to(tl.int64) * stride_z + (off_hz % H).to(tl.int64) * stride_h
    offs_d = tl.arange(0, HEAD_DIM)
    rows = base + offs_m[:, None] * stride_tok + offs_d[None, :] * stride_d
    o = tl.load(O + rows).to(tl.float32)
    do = tl.load(DO + rows).to(tl.float32)
    tl.store(Delta + off_hz * N_CTX + offs_m, tl.sum(o * do, axis=1))


@kiln.jit
def _attn_bwd_dkdv(dk, dv, k, v, Q, DO, M, Delta, qk_scale, stride_tok, stride_d,
                   start_n, start_m, num_steps,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                   MASK: tl.constexpr):
    """dK, dV of the keys [start_n, start_n + BLOCK_N) over num_steps query blocks of
    BLOCK_M from start_m. Everything transposed: rows are keys, columns queries."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    qT_ptrs = Q + offs_d[:, None] * stride_d + offs_m[None, :] * stride_tok
    do_ptrs = DO + offs_m[:, None] * stride_tok + offs_d[None, :] * stride_d
    for _ in range(num_steps):
        qT = tl.load(qT_ptrs)
        m = tl.load(M + offs_m)
        sT = tl.dot(k, qT)
        pT = tl.math.exp2(sT * qk_scale - m[None, :])
        if MASK:
            pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        do = tl.load(do_ptrs)
        dv += tl.dot(pT.to(do.dtype), do)
        delta = tl.load(Delta + offs_m)
        dpT = tl.dot(v, tl.trans(do))
        dsT = pT * (dpT - delta[None, :])
        dk += tl.dot(dsT.to(qT.dtype), tl.trans(qT))
        offs_m += BLOCK_M
        qT_ptrs += BLOCK_M * stride_tok
        do_ptrs += BLOCK_M * stride_tok
    return dk, dv


@kiln.jit
def _attn_bwd_dq(dq, q, do, m, delta, K, V, qk_scale, stride_tok, stride_d,
                 start_m, start_n, num_steps,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                 MASK: tl.constexpr):
    """dQ of the queries [start_m, start_m + BLOCK_M) over num_steps key blocks of BLOCK_N
    from start_n; K^T and V^T loaded by pointers. m and delta are [BLOCK_M, 1]."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kT_ptrs = K + offs_d[:, None] * stride_d + offs_n[None, :] * stride_tok
    vT_ptrs = V + offs_d[:, None] * stride_d + offs_n[None, :] * stride_tok
    for _ in range(num_steps):
        kT = tl.load(kT_ptrs)
        vT = tl.load(vT_ptrs)
        p = tl.math.exp2(tl.dot(q, kT) * qk_scale - m)
        if MASK:
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        dp = tl.dot(do, vT)
        ds = p * (dp - delta)
        dq += tl.dot(ds.to(kT.dtype), tl.trans(kT))
        offs_n += BLOCK_N
        kT_ptrs += BLOCK_N * stride_tok
        vT_ptrs += BLOCK_N * stride_tok
    return dq


@kiln.jit
def attn_bwd(Q, K, V, sm_scale, DO, DQ, DK, DV, M, Delta,
             stride_z, stride_h, stride_tok, stride_d, H, N_CTX,
             BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, BLOCK_M2: tl.constexpr,
             BLOCK_N2: tl.constexpr, BLK_SLICE_FACTOR: tl.constexpr,
             HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
    """Q, K, V, DO, DQ, DK, DV share their strides; M and Delta are (B * H, N_CTX)."""
    qk_scale = sm_scale * 1.44269504
    pid = tl.program_id(0)
    off_hz = tl.program_id(1)
    base = (off_hz // H).to(tl.int64) * stride_z + (off_hz % H).to(tl.int64) * stride_h
    Q += base
    K += base
    V += base
    DO += base
    DQ += base
    DK += base
    DV += base
    M += off_hz * N_CTX
    Delta += off_hz * N_CTX
    offs_d = tl.arange(0, HEAD_DIM)

    # ---- dK, dV of one block of keys
    start_n = pid * BLOCK_N1
    offs_n = start_n + tl.arange(0, BLOCK_N1)
    kv_offs = offs_n[:, None] * stride_tok + offs_d[None, :] * stride_d
    k = tl.load(K + kv_offs)
    v = tl.load(V + kv_offs)
    dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    start_m = 0
    if CAUSAL:
        # the queries on the diagonal, in thin masked slices; then those below it
        start_m = start_n
        MASK_BLOCK_M1: tl.constexpr = BLOCK_M1 // BLK_SLICE_FACTOR
        dk, dv = _attn_bwd_dkdv(dk, dv, k, v, Q, DO, M, Delta, qk_scale, stride_tok,
                                stride_d, start_n, start_m, BLOCK_N1 // MASK_BLOCK_M1,
                                MASK_BLOCK_M1, BLOCK_N1, HEAD_DIM, True)
        start_m += BLOCK_N1
    dk, dv = _attn_bwd_dkdv(dk, dv, k, v, Q, DO, M, Delta, qk_scale, stride_tok, stride_d,
                            start_n, start_m, (N_CTX - start_m) // BLOCK_M1,
                            BLOCK_M1, BLOCK_N1, HEAD_DIM, False)
    tl.store(DV + kv_offs, dv.to(DV.dtype.element_ty))
    dk *= sm_scale
    tl.store(DK + kv_offs, dk.to(DK.dtype.element_ty))

    # ---- dQ of one block of queries
    start_m = pid * BLOCK_M2
    offs_m = start_m + tl.arange(0, BLOCK_M2)
    q_offs = offs_m[:, None] * stride_tok + offs_d[None, :] * stride_d
    q = tl.load(Q + q_offs)
    do = tl.load(DO + q_offs)
    m = tl.load(M + offs_m)[:, None]
    delta = tl.load(Delta + offs_m)[:, None]
    dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
    end_n = N_CTX
    if CAUSAL:
        # the keys on the diagonal, masked slices; then every key left of it
        MASK_BLOCK_N2: tl.constexpr = BLOCK_N2 // BLK_SLICE_FACTOR
        dq = _attn_bwd_dq(dq, q, do, m, delta, K, V, qk_scale, stride_tok, stride_d,
                          start_m, start_m, BLOCK_M2 // MASK_BLOCK_N2,
                          BLOCK_M2, MASK_BLOCK_N2, HEAD_DIM, True)
        end_n = start_m
    dq = _attn_bwd_dq(dq, q, do, m, delta, K, V, qk_scale, stride_tok, stride_d,
                      start_m, 0, end_n // BLOCK_N2, BLOCK_M2, BLOCK_N2, HEAD_DIM, False)
    dq *= sm_scale
    tl.store(DQ + q_offs, dq.to(DQ.dtype.element_ty))


@kiln.jit
def attn_fwd_fa2(Q, K, V, sm_scale, Out, stride_z, stride_h, stride_n, H,
                 N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CAUSAL: tl.constexpr):
    """Q, K, V and Out share their strides (batch, head, token; the head dimension
    contiguous)."""
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    base = (off_hz // H).to(tl.int64) * stride_z + (off_hz % H).to(tl.int64) * stride_h
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    end_n = (start_m + 1) * BLOCK_M if CAUSAL else N_CTX
    for start_n in range(0, end_n, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k = tl.load(K + base + cols[:, None] * stride_n + offs_d[None, :])
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        if CAUSAL:
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + base + cols[:, None] * stride_n + offs_d[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * stride_n + offs_d[None, :],
             acc.to(Out.dtype.element_ty))
