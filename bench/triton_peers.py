"""Triton kernels written differently from Kiln's on purpose: peers in Triton's own
formulation, kept beside the twins that bench/common.py builds from the Kiln source (the
same text under Triton). Everything else the benchmarks time under Triton is a twin.

  Flash attention forward (bench_attention.py, `triton_tutorial`): the FlashAttention-2
  forward in the structure of Triton's fused-attention tutorial: the causal walk split by a
  STAGE argument into the blocks left of the diagonal and the diagonal block, K and V
  pointers advanced each iteration, an additive -1e6 causal mask, no key-bound masks (S must
  be a multiple of BLOCK_M). Kiln's kernel (kiln_kernels.flash_attention) has key-bound
  masks, grouped-query heads and a rotated loop; its twin is timed beside this.

  KL divergence and one-row softmax (bench_peers.py): the Triton side of kiln-bench's
  kernels, which are MLIR (kernels/*.mlir), not Python, so there is no Kiln Python source to
  take a twin of; the softmax is the one-row formulation of ANCHORS.md's runs (fp32, no
  int64 row offset, no log variant).

Imported once Triton is known to be there.
"""
import triton
import triton.language as tl


# ====================================================================== KL divergence, softmax


@triton.jit
def kl_kernel(p_ptr, q_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask, other=1.0)
    q = tl.load(q_ptr + offs, mask=mask, other=1.0)
    tl.store(out_ptr + offs, p * (tl.log(p) - tl.log(q)), mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    tl.store(out_ptr + row * out_stride + offs, num / tl.sum(num, axis=0), mask=mask)


# ====================================================================== flash attention forward



@triton.jit
def t_attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kk, stride_vn,
                     stride_vk, qk_scale, start_m, offs_m, N_CTX,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     STAGE: tl.constexpr):
    # STAGE 1: the key blocks left of the query block (causal, no mask); 2: the blocks on the
    # diagonal (causal mask); 3: every key block (non-causal, no mask).
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kT_ptrs = k_base + offs_d[:, None] * stride_kk + (lo + offs_n)[None, :] * stride_kn
    v_ptrs = v_base + (lo + offs_n)[:, None] * stride_vn + offs_d[None, :] * stride_vk
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        kT = tl.load(kT_ptrs)
        qk = tl.dot(q, kT)
        if STAGE == 2:
            causal = offs_m[:, None] >= (start_n + offs_n)[None, :]
            qk = qk * qk_scale + tl.where(causal, 0.0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
        kT_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit
def t_attn_fwd(Q, K, V, Out, sm_scale,
               stride_qz, stride_qh, stride_qm, stride_qk,
               stride_kz, stride_kh, stride_kn, stride_kk,
               stride_vz, stride_vh, stride_vn, stride_vk,
               stride_oz, stride_oh, stride_om, stride_ok,
               Z, H, N_CTX,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_base = Q + off_z * stride_qz + off_h * stride_qh
    k_base = K + off_z * stride_kz + off_h * stride_kh
    v_base = V + off_z * stride_vz + off_h * stride_vh
    o_base = Out + off_z * stride_oz + off_h * stride_oh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0  # alpha = 0 on the first block
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e)
    if CAUSAL:
        acc, l_i, m_i = t_attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn,
                                         stride_kk, stride_vn, stride_vk, qk_scale, start_m,
                                         offs_m, N_CTX, HEAD_DIM, BLOCK_M, BLOCK_N, 1)
        acc, l_i, m_i = t_attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn,
                                         stride_kk, stride_vn, stride_vk, qk_scale, start_m,
                                         offs_m, N_CTX, HEAD_DIM, BLOCK_M, BLOCK_N, 2)
    else:
        acc, l_i, m_i = t_attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn,
                                         stride_kk, stride_vn, stride_vk, qk_scale, start_m,
                                         offs_m, N_CTX, HEAD_DIM, BLOCK_M, BLOCK_N, 3)
    acc = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok,
             acc.to(Out.dtype.element_ty))


def triton_attention(q, k, v, out, causal, sm_scale, bm, bn, nw, ns):
    B, H, S, D = q.shape
    if S % bm:
        raise ValueError(f"the tutorial peer needs S ({S}) to be a multiple of BLOCK_M ({bm})")
    t_attn_fwd[(triton.cdiv(S, bm), B * H)](
        q, k, v, out, sm_scale, *q.stride(), *k.stride(), *v.stride(), *out.stride(), B, H, S,
        HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, num_warps=nw, num_stages=ns)
    return out
