"""Flash attention forward (non-causal), persistent: FlashAttention-3's order over every
query block a program owns, in one warp-specialized loop.

A program of `_attn_fwd_persistent` takes the query blocks (tiles) p, p + G, p + 2G, ... of
the B * H * S / BLOCK_M (G programs, about one per SM) and walks all their key blocks in one
loop of T * n + 1 iterations (T tiles, n key blocks a tile): iteration i issues q @ k of key
block i and p @ v of block i - 1, FlashAttention-3's order of `_attn_fwd_inner_desc_fa3`
run across tile boundaries. So the producer warpgroup copies the next tile's first K and V
blocks while the consumers finish the last blocks of the current one and store its output;
no program ends and starts per tile, and the rings' set-up, the first copies' latency and the
output's store are paid once a program or hidden. The tile's statistics turn over at its
first block (m restarts at -inf, so the first rescale multiplies acc and l by zero); the
finished tile's output is written at the next tile's second iteration, after the carried
p @ v of its last block has been waited for (the compiler waits for it at the top of that
iteration), from the statistics saved at the turn.

q lives in registers (wgmma's A fragment); the next tile's is loaded at the end of a tile's
last iteration, once that iteration's q @ k has been read. p is carried in fp16 (in fp32,
as `_attn_fwd_inner_desc_fa3` carries it, the consumers spilled in the loop). The output
goes out by plain stores (a TMA store in the loop would need shared memory the rings
take). Needs n >= 2 (S >= 2 * BLOCK_N) and S a multiple of BLOCK_M.
"""
import functools
import math

import kiln
import kiln.language as tl

from ._utils import matrix_descriptor


@kiln.jit
def _load_q(Q, row, offs_r, offs_d, HEAD_DIM: tl.constexpr):
    """The query tile whose first row is `row`."""
    return tl.load(Q + (row + offs_r)[:, None] * HEAD_DIM + offs_d[None, :])


@kiln.jit
def _store_tile(Out, LSE, row, acc, l_i, m_i, offs_r, offs_d, HEAD_DIM: tl.constexpr):
    """A finished tile: acc / l into Out's rows from `row`, and its logsumexp (natural log)
    when LSE is given."""
    out = acc * (1.0 / l_i)[:, None]
    tl.store(Out + (row + offs_r)[:, None] * HEAD_DIM + offs_d[None, :],
             out.to(Out.dtype.element_ty))
    if LSE is not None:
        tl.store(LSE + row + offs_r, (m_i + tl.log2(l_i)) * 0.6931471805599453)


@kiln.jit
def _attn_fwd_persistent(Q, desc_k, desc_v, Out, LSE, sm_scale, H, N_CTX, n_tiles,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         GROUP: tl.constexpr = 1):
    """Q and Out contiguous (B * H * S, D); desc_k, desc_v over (B * H_KV * S, D) in blocks
    of BLOCK_N rows; LSE (B * H, S) fp32 or None. Grid (G,), G <= n_tiles."""
    pid = tl.program_id(0)
    progs = tl.num_programs(0)
    n_m = N_CTX // BLOCK_M
    n = N_CTX // BLOCK_N  # key blocks a tile
    my_tiles = (n_tiles - pid + progs - 1) // progs
    total = my_tiles * n
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)
    offs_r = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.zeros([BLOCK_M, HEAD_DIM], dtype=Q.dtype.element_ty)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    m_prev = tl.zeros([BLOCK_M], dtype=tl.float32)
    l_prev = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    p = tl.zeros([BLOCK_M, BLOCK_N], dtype=Q.dtype.element_ty)
    alpha = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    # i's key block within its tile, and the tile's row: counted, not divided (the consumers'
    # branches read them every iteration; the producer's copies divide)
    j = 0
    t_row = pid * BLOCK_M
    for i in tl.range(0, total + 1, warp_specialize=True):
        has_keys = i < total
        # key block i (the last iteration re-reads block total - 1 and throws it away)
        ik = tl.minimum(i, total - 1)
        tile_k = pid + (ik // n) * progs
        hz_k = tile_k // n_m
        kv_k = ((hz_k // H) * (H // GROUP) + (hz_k % H) // GROUP) * N_CTX
        kT = desc_k.load([kv_k + (ik % n) * BLOCK_N, 0]).T
        # value block i - 1 (the first iteration reads block 0 and multiplies zeros)
        iv = tl.maximum(i - 1, 0)
        tile_v = pid + (iv // n) * progs
        hz_v = tile_v // n_m
        kv_v = ((hz_v // H) * (H // GROUP) + (hz_v % H) // GROUP) * N_CTX
        v = desc_v.load([kv_v + (iv % n) * BLOCK_N, 0])
        # (the first tile's q: in the loop, whose first iteration the compiler peels; a load
        # before it would keep the loop from being warp-specialized)
        if i == 0:
            q = _load_q(Q, pid * BLOCK_M, offs_r, offs_d, HEAD_DIM)
        qk = tl.dot(q, kT)
        # the previous tile is complete once its last p @ v (issued at this tile's first
        # iteration) is in acc: written here, before the rescale zeroes it
        if j == 1:
            if i > 1:
                _store_tile(Out, LSE, t_row - progs * BLOCK_M, acc, l_prev, m_prev, offs_r,
                            offs_d, HEAD_DIM)
        acc = acc * alpha[:, None]
        acc = tl.dot(p, v, acc)
        # a new tile: its statistics restart (m at -inf makes the next alpha 0)
        if j == 0:
            m_prev = m_i
            l_prev = l_i
            m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        m_ij = tl.where(has_keys, tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale), m_i)
        p32 = tl.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.where(has_keys, tl.exp2(m_i - m_ij), 1.0)
        l_i = l_i * alpha + tl.where(has_keys, tl.sum(p32, axis=1), 0.0)
        p = p32.to(Q.dtype.element_ty)
        m_i = m_ij
        # the next tile's q, once this tile's last q @ k has been read (its registers are
        # free): the load runs under the rest of the iteration and the next one's copies
        if j == n - 1:
            if i + 1 < total:
                q = _load_q(Q, t_row + progs * BLOCK_M, offs_r, offs_d, HEAD_DIM)
        # the next iteration's place
        if j == n - 1:
            j = 0
            t_row += progs * BLOCK_M
        else:
            j += 1
    # the last tile: its last p @ v was issued by the loop's last iteration, whose turn of
    # the statistics saved them
    last = pid + (my_tiles - 1) * progs
    _store_tile(Out, LSE, last * BLOCK_M, acc, l_prev, m_prev, offs_r, offs_d, HEAD_DIM)


@functools.lru_cache(maxsize=None)
def _multiprocessors(device):
    """The device's multiprocessor count, read once per device."""
    import torch
    return torch.cuda.get_device_properties(device).multi_processor_count


def attention_forward_persistent(q, k, v, out, lse=None, sm_scale=None, programs=None,
                                 block_m=128, block_n=128, num_warps=8, num_stages=3,
                                 **launch):
    """Non-causal attention of contiguous (B, H, S, D) arrays through _attn_fwd_persistent
    on `programs` programs (default: the GPU's multiprocessor count, 132 on the CPU)."""
    from .flash_attention import check_lse, check_shapes, is_dense
    B, H, S, D = check_shapes("attention_persistent", q, k, v, out)
    for name, x in (("q", q), ("k", k), ("v", v), ("out", out)):
        if not is_dense(x):
            raise ValueError(f"attention_persistent: expected contiguous arrays, found {name} "
                             f"of shape {tuple(x.shape)} not contiguous")
    if math.prod(q.shape) >= 2**31:
        raise ValueError(f"attention_persistent: expected fewer than 2**31 elements in q "
                         f"(32-bit offsets), found shape {tuple(q.shape)}")
    if S % block_m or S < 2 * block_n or block_m % block_n:
        raise ValueError(f"attention_persistent: expected S a multiple of BLOCK_M ({block_m}) "
                         f"and at least 2 * BLOCK_N ({2 * block_n}), found {S}")
    check_lse("attention_persistent", lse, B, H, S)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    device = None if launch.get("device") == "cpu" else q.device
    return persistent_launch((B, H, S, D), int(k.shape[1]), device, sm_scale, programs,
                             block_m, block_n, num_warps, num_stages, launch)(q, k, v, out, lse)


def persistent_launch(shape, kv_heads, device, sm_scale, programs, block_m, block_n, num_warps,
                      num_stages, launch):
    """The launch of attention_forward_persistent for contiguous arrays of q's `shape` (B, H,
    S, D) and k's and v's `kv_heads`, checked by the caller (attention_forward checks them
    once for every path and keeps this function per shape): a function of (q, k, v, out, lse)
    that launches and returns out. `programs` None: `device`'s multiprocessor count (132 for
    None, the CPU backend)."""
    B, H, S, D = shape
    n_tiles = B * H * (S // block_m)
    if programs is None:
        programs = 132 if device is None else _multiprocessors(device)
    programs = max(1, min(int(programs), n_tiles))
    kd = matrix_descriptor(B * kv_heads * S, D, block_n)  # k and v as matrices
    kernel = _attn_fwd_persistent[(programs,)]
    scale = float(sm_scale)
    meta = dict(HEAD_DIM=D, BLOCK_M=block_m, BLOCK_N=block_n, GROUP=H // kv_heads,
                num_warps=num_warps, num_stages=num_stages, **launch)

    def run(q, k, v, out, lse):
        kernel(q, kd(k), kd(v), out, lse, scale, H, S, n_tiles, **meta)
        return out
    return run
