"""Matmul formulations the way users write them, for bench_cliffs.py (issue #23): one
source, run under Kiln as written and under Triton through bench/common.py's twin (imports
rebound). Written here in the style of Triton's tutorials 03 and 09, not copied from them.

    mm_ptr               pointers, B stored K x N (tutorial 03's own layout), an optional
                         leaky_relu epilogue (ACTIVATION)
    mm_ptr_nt            pointers, B stored N x K: b loaded [BLOCK_N, BLOCK_K], tl.dot(a, b.T)
    mm_desc_nt           host tensor descriptors, one tile per program, B N x K and b.T
    mm_desc_persistent   host tensor descriptors, one program per SM walking the tiles with
                         tl.range(..., flatten=FLATTEN) (tutorial 09's shape), B N x K and b.T
    mm_device_desc_persistent
                         the same with the descriptors made in the kernel
                         (tl.make_tensor_descriptor; needs kiln/triton.set_allocator)
    mm_grouped           a group of GEMMs of different sizes in one launch (tutorial 08's
                         shape): NUM_SM programs walk the tiles of every problem; each
                         problem's A, B, C addresses are int64 values loaded from tables and
                         cast to pointers (tl.pointer_type), its sizes and leading dimensions
                         loaded from int32 tables; B stored K x N
    mm_moe               an MoE layer's expert GEMMs in one launch, as LLM libraries write
                         them: tokens sorted by expert (X: T x K, expert e's m_sizes[e] rows
                         contiguous), W: E x N x K used as w[e].T, one program per SM walking
                         every expert's tiles (a `while` inside the expert loop), rows past
                         an expert's count masked; W by pointers or (W_DESC) through a 3-D
                         tensor descriptor made in the kernel, blocks [1, BLOCK_N, BLOCK_K]
    mm_moe_desc_all      mm_moe with every operand through a descriptor made in the kernel, as
                         unsloth's grouped GEMM forward runs with its TMA loads and store: X
                         over NUM_TOKENS * TOPK rows (an int32 argument times a constant), W
                         as mm_moe's W_DESC, Y over the rows up to the expert's last (a
                         tile's rows past them are not written); an expert's X tile may read
                         the next expert's rows, whose products are never stored
"""
import kiln
import kiln.language as tl


@kiln.jit
def _tile_of(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@kiln.jit
def mm_ptr(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
           stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
           BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m, pid_n = _tile_of(pid, GROUP_SIZE_M * num_pid_n, num_pid_m, GROUP_SIZE_M)
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        accumulator = tl.where(accumulator >= 0, accumulator, 0.01 * accumulator)
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@kiln.jit
def mm_ptr_nt(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk,
              stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
              BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m, pid_n = _tile_of(pid, GROUP_SIZE_M * num_pid_n, num_pid_m, GROUP_SIZE_M)
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_bn[:, None] * stride_bn + offs_k[None, :] * stride_bk
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b.T, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@kiln.jit
def mm_desc_nt(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr,
               BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
               GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m, pid_n = _tile_of(pid, GROUP_SIZE_M * num_pid_n, num_pid_m, GROUP_SIZE_M)
    offs_am = pid_m * BLOCK_SIZE_M
    offs_bn = pid_n * BLOCK_SIZE_N
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_SIZE_K)):
        offs_k = k * BLOCK_SIZE_K
        a = a_desc.load([offs_am, offs_k])
        b = b_desc.load([offs_bn, offs_k])
        accumulator = tl.dot(a, b.T, accumulator)
    c_desc.store([offs_am, offs_bn], accumulator.to(c_desc.dtype))


@kiln.jit
def _persistent_tiles(a_desc, b_desc, c_desc, M, N, K, dtype: tl.constexpr,
                      BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                      BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                      NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr):
    """Tutorial 09's persistent loop over the output tiles, through three descriptors."""
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    tile_id_c = start_pid - NUM_SMS
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=FLATTEN):
        pid_m, pid_n = _tile_of(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M)
        offs_am = pid_m * BLOCK_SIZE_M
        offs_bn = pid_n * BLOCK_SIZE_N
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_bn, offs_k])
            accumulator = tl.dot(a, b.T, accumulator)
        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile_of(tile_id_c, num_pid_in_group, num_pid_m, GROUP_SIZE_M)
        c_desc.store([pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N], accumulator.to(dtype))


@kiln.jit
def mm_desc_persistent(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                       BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                       GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
                       FLATTEN: tl.constexpr):
    dtype = c_desc.dtype
    _persistent_tiles(a_desc, b_desc, c_desc, M, N, K, dtype, BLOCK_SIZE_M, BLOCK_SIZE_N,
                      BLOCK_SIZE_K, GROUP_SIZE_M, NUM_SMS, FLATTEN)


@kiln.jit
def mm_device_desc_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                              BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                              GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
                              FLATTEN: tl.constexpr):
    dtype = c_ptr.dtype.element_ty
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    _persistent_tiles(a_desc, b_desc, c_desc, M, N, K, dtype, BLOCK_SIZE_M, BLOCK_SIZE_N,
                      BLOCK_SIZE_K, GROUP_SIZE_M, NUM_SMS, FLATTEN)


@kiln.jit
def mm_grouped(group_a_ptrs, group_b_ptrs, group_c_ptrs, group_gemm_sizes, g_lds, group_size,
               NUM_SM: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
               BLOCK_SIZE_K: tl.constexpr):
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_m_tiles = tl.cdiv(gm, BLOCK_SIZE_M)
        num_n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        num_tiles = num_m_tiles * num_n_tiles
        # this program's tiles of problem g, if any
        while tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
            k = gk
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float16))
            tile_in_problem = tile_idx - last_problem_end
            tile_m = tile_in_problem // num_n_tiles
            tile_n = tile_in_problem % num_n_tiles
            offs_am = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_bn = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):
                # the problems' sizes are multiples of the tiles (as in the tutorial)
                tl.multiple_of(a_ptrs, [16, 16])
                tl.multiple_of(b_ptrs, [16, 16])
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
                accumulator += tl.dot(a, b)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            c = accumulator.to(tl.float16)
            offs_cm = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_cn = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + ldc * offs_cm[:, None] + offs_cn[None, :]
            tl.store(c_ptrs, c)
            tile_idx += NUM_SM
        last_problem_end = last_problem_end + num_tiles


@kiln.jit
def mm_moe(x_ptr, w_ptr, y_ptr, m_sizes_ptr, E, N: tl.constexpr, K: tl.constexpr,
           NUM_SMS: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
           BLOCK_SIZE_K: tl.constexpr, W_DESC: tl.constexpr):
    pid = tl.program_id(0)
    if W_DESC:
        w_desc = tl.make_tensor_descriptor(w_ptr, shape=[E, N, K], strides=[N * K, K, 1],
                                           block_shape=[1, BLOCK_SIZE_N, BLOCK_SIZE_K])
    row_end = 0
    tiles_before = 0
    for e in range(E):
        row_start = row_end
        m = tl.load(m_sizes_ptr + e)
        row_end = row_start + m
        m_tiles = tl.cdiv(m, BLOCK_SIZE_M)
        tiles = m_tiles * (N // BLOCK_SIZE_N)
        # this program's tiles of expert e, if any
        while pid >= tiles_before and pid < tiles_before + tiles:
            t = pid - tiles_before
            tile_m = t % m_tiles
            tile_n = t // m_tiles
            rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            ks = tl.arange(0, BLOCK_SIZE_K)
            row_ok = rows < m
            x_ptrs = x_ptr + (row_start + rows)[:, None] * K + ks[None, :]
            w_ptrs = w_ptr + e * (N * K) + cols[:, None] * K + ks[None, :]
            acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for k in range(0, K, BLOCK_SIZE_K):
                x = tl.load(x_ptrs, mask=row_ok[:, None], other=0.0)
                if W_DESC:
                    w = w_desc.load([e, tile_n * BLOCK_SIZE_N, k])
                    w = tl.reshape(w, (BLOCK_SIZE_N, BLOCK_SIZE_K))
                else:
                    w = tl.load(w_ptrs)
                acc += tl.dot(x, w.T)
                x_ptrs += BLOCK_SIZE_K
                w_ptrs += BLOCK_SIZE_K
            y = acc.to(y_ptr.dtype.element_ty)
            tl.store(y_ptr + (row_start + rows)[:, None] * N + cols[None, :], y,
                     mask=row_ok[:, None])
            pid += NUM_SMS
        tiles_before += tiles


@kiln.jit
def mm_moe_desc_all(x_ptr, w_ptr, y_ptr, m_sizes_ptr, E, NUM_TOKENS, TOPK: tl.constexpr,
                    N: tl.constexpr, K: tl.constexpr, NUM_SMS: tl.constexpr,
                    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                    BLOCK_SIZE_K: tl.constexpr):
    pid = tl.program_id(0)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[NUM_TOKENS * TOPK, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[E, N, K], strides=[N * K, K, 1],
                                       block_shape=[1, BLOCK_SIZE_N, BLOCK_SIZE_K])
    row_end = 0
    tiles_before = 0
    for e in range(E):
        row_start = row_end
        m = tl.load(m_sizes_ptr + e)
        row_end = row_start + m
        m_tiles = tl.cdiv(m, BLOCK_SIZE_M)
        tiles = m_tiles * (N // BLOCK_SIZE_N)
        if m > 0:
            y_desc = tl.make_tensor_descriptor(y_ptr, shape=[row_end, N], strides=[N, 1],
                                               block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
            # this program's tiles of expert e, if any
            while pid >= tiles_before and pid < tiles_before + tiles:
                t = pid - tiles_before
                tile_m = t % m_tiles
                tile_n = t // m_tiles
                row = row_start + tile_m * BLOCK_SIZE_M
                acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
                for k in range(0, K, BLOCK_SIZE_K):
                    x = x_desc.load([row, k])
                    w = tl.reshape(w_desc.load([e, tile_n * BLOCK_SIZE_N, k]),
                                   (BLOCK_SIZE_N, BLOCK_SIZE_K))
                    acc += tl.dot(x, w.T)
                y_desc.store([row, tile_n * BLOCK_SIZE_N], acc.to(y_ptr.dtype.element_ty))
                pid += NUM_SMS
        tiles_before += tiles
