"""linear(x, w, out): out[M, N] = x[M, K] @ w[N, K].T, the HF nn.Linear layout (weight rows
are output features), fp32 accumulation, the result rounded to out's dtype.

Three plans: two on tensor cores sharing one tile loop (Triton's matmul tutorial structure with
w read as [BLOCK_N, BLOCK_K] tiles and `tl.dot(x_tile, w_tile.T)`: on sm_90a the transpose is
folded into the K-major B ring wgmma reads), and one on CUDA cores for a few rows:

- prefill (M > 64): tensor-core tiles, grouped program order (GROUP_M row blocks share their
  weight columns in L2); 128 x 256 x 64 on 8 warps where that still gives every SM a tile,
  128 x 128 x 64 on 4 warps below. bf16/fp16 operands whose rows meet the tensor descriptor
  rules go through `kiln.TensorDescriptor`s (TMA loads and stores on sm_90a); others through
  pointers.
- decode tiles (GEMV_MAX_M < M <= 64, or gemv=False): memory bound. A program owns BLOCK_N =
  64 weight rows (output columns) and streams a K range of them: 16-byte cp.async copies along
  K into a 4-stage shared-memory ring ahead of the tensor cores (wgmma on sm_90a), the M rows
  of x in a 64-row tile whose other rows are zero-filled, never read. When the column blocks
  alone would not give every SM work (o_proj, down, qkv: N / 64 < #SMs), K is split across
  programs (about two per SM, at least 4 steps each) that write fp32 partial sums into
  `scratch`; a second kernel adds them in one fixed order (deterministic) and rounds to out's
  dtype. Without `scratch` the K range is not split. 16-byte copies need K a multiple of 8
  (16-bit) elements: other K is correct and slow.

- gemv (M <= GEMV_MAX_M, the default for decode; `gemv=True/False` forces a plan): CUDA cores.
  A program owns R weight rows and a block of up to 4 rows of x; each thread streams 16-byte
  pieces of the R rows along K (consecutive lanes on consecutive pieces, U pieces per row per
  thread and step: R * U independent 16-byte loads, and the next step's, in flight),
  multiplies them by the x pieces of the same K (fp32, reused over the R rows) and keeps
  per-lane fp32 sums; one cross-lane sum at the end. No shared memory, no K split: N / R
  programs (512 for o_proj) fill the SMs. sm_90a SASS of the loop, per 16 bytes of bf16
  weights: 37 instructions at 1 row of x, 62 at 2, 98 at 4 (each block of 4 rows reads the
  weights again), against ~140 an H100 issues per 16 bytes at 3.35 TB/s.

fp32 operands multiply in IEEE fp32 (`input_precision="ieee"`; no TF32), so the CPU backend and
fp32 models match float64 references to ~1e-6.
"""
import functools

import os

import kiln
import kiln.language as tl

from ._common import (FLOAT_DTYPES, check_array, dtype_name, launch_device, launch_opts)

__all__ = ["linear", "linear_scratch_numel", "linear_config", "gemv_config", "uses_gemv"]

DECODE_MAX_M = 64  # rows of x up to which `linear` takes the memory-bound decode plan
#: Rows of x up to which each weight kind takes the CUDA-core plan by default (the issued
#: instructions per weight byte grow with M; see gemv_config): bf16 at 8 rows would issue
#: ~195 per 16 bytes (2 blocks of 4), int4 ~940, so batches above 4 stay on tensor cores.
#: bench/bench_models_ops.py times both plans at 1 and 16 rows.
GEMV_MAX_M = {"float": 4, "int8": 4, "int4": 4}
GEMV_BM = 4  # rows of x per program in the CUDA-core plan (more: a grid of row blocks)
_INT32_MAX = 2**31 - 1


@kiln.jit
def linear_kernel(x_ptr, w_ptr, out_ptr, part_ptr, M, N, K, K_SPLIT,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, SPLIT: tl.constexpr):
    """out = x @ w.T over the tile (pid 0 in grouped order) and the K range [pid1 * K_SPLIT,
    +K_SPLIT); with SPLIT, the fp32 partial goes to part[pid1, M, N] instead of out."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tl.swizzle2d(pid // num_n, pid % num_n, num_m, num_n, GROUP_M)
    k0 = tl.program_id(1) * K_SPLIT
    k_len = tl.minimum(K - k0, K_SPLIT)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    # Weight rows past N wrap to valid rows (read, never stored); x rows past M are masked
    # (zero-filled, not read: decode runs M of 1..16 rows in a 64-row tile). The K mask is on
    # the absolute index (K_SPLIT is a multiple of BLOCK_K, so a range ends at a step's end or
    # at K): its constancy follows K's divisibility and keeps 16-byte copies.
    x_ptrs = x_ptr + (rm % M)[:, None] * K + (k0 + rk)[None, :]
    w_ptrs = w_ptr + (rn % N)[:, None] * K + (k0 + rk)[None, :]
    row_ok = rm[:, None] < M
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(k_len, BLOCK_K)):
        kmask = (k0 + k * BLOCK_K + rk)[None, :] < K
        a = tl.load(x_ptrs, mask=row_ok & kmask, other=0.0)
        b = tl.load(w_ptrs, mask=kmask, other=0.0)
        acc = tl.dot(a, b.T, acc, input_precision="ieee")
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    if SPLIT:
        tl.store(part_ptr + tl.program_id(1) * M * N + offs, acc, mask=mask)
    else:
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@kiln.jit
def _gemv_rows(M, N, BM: tl.constexpr, R: tl.constexpr, SWIGLU: tl.constexpr = False):
    """The rows of x (BM) and of the weights (R) of this CUDA-core program. SWIGLU (weights
    [gate | up], N = 2I): R / 2 gate rows and their up rows, interleaved (gate j, up j, ...)."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    rm = (pid % num_m) * BM + tl.arange(0, BM)
    return rm, _tile_rows(pid // num_m, N, R, SWIGLU)


@kiln.jit
def _tile_rows(t, N, R: tl.constexpr, SWIGLU: tl.constexpr = False):
    """The R weight rows of row tile t: t * R .. t * R + R - 1, or with SWIGLU (weights
    [gate | up], N = 2I) R / 2 gate rows and their up rows, interleaved (gate j, up j, ...)."""
    if SWIGLU:
        j = tl.arange(0, R)
        return t * (R // 2) + j // 2 + (j % 2) * (N // 2)
    return t * R + tl.arange(0, R)


@kiln.jit
def _norm_x(x, g, ss, NORM: tl.constexpr):
    """fp32 x, times the norm weight g (NORM), and ss plus x's squares summed over the last
    axis (NORM: the row's sum of squares accumulates over the K steps)."""
    xf = x.to(tl.float32)
    if NORM:
        ss += tl.sum(xf * xf, axis=3)
        xf = xf * g.to(tl.float32)
    return xf, ss


@kiln.jit
def _g_tile(g_ptrs, off, mask, NORM: tl.constexpr):
    """NORM: the norm weight's tile of a step (at element offset `off`, masked off: zeros);
    otherwise a [1, 1, 1, 1] zero (a tensor: loops carry it)."""
    if NORM:
        if mask is None:
            return tl.load(g_ptrs + off)
        return tl.load(g_ptrs + off, mask=mask, other=0.0)
    return tl.zeros((1, 1, 1, 1), dtype=tl.float32)


@kiln.jit
def _rstd(ss, K, eps):
    """1 / sqrt(mean(x^2) + eps) per row of x from the per-lane sums ss [BM, 1, C] (the
    RMSNorm of the row; its weight is applied to x in the loop)."""
    return tl.rsqrt(tl.sum(tl.sum(ss, axis=2), axis=1) / K + eps)


@kiln.jit
def _gemv_resid(out_ptr, rm, rn, M, N, RESID: tl.constexpr):
    """RESID: the residual stream's values out[rm, rn], loaded right after gdc_wait (not on
    the epilogue's critical path); None otherwise."""
    if RESID:
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        return tl.load(out_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0.0)
    return None


@kiln.jit
def _gemv_finish(res, out_ptr, rm, rn, M, N, ss, K, eps, resid, SWIGLU: tl.constexpr,
                 NORM: tl.constexpr):
    """_gemv_store of the CUDA-core kernels' result [BM, R]; NORM: scaled by the rows' rstd
    from ss ([BM, 1, C] per-lane sums of squares of x)."""
    rstd = None
    if NORM:
        rstd = _rstd(ss, K, eps)
    _gemv_store(res, out_ptr, rm, rn, M, N, SWIGLU, rstd, resid)


@kiln.jit
def _gemv_store(res, out_ptr, rm, rn, M, N, SWIGLU: tl.constexpr = False, rstd=None,
                resid=None):
    """out[rm, rn] = res, the rows past M or N left out. SWIGLU (rows as _gemv_rows gives
    them): out[rm, j] = silu(gate_j) * up_j, out [M, N / 2], each of gate, up and silu rounded
    to out's dtype first, as silu_mul does after an unfused linear (the same bits). rstd
    [BM]: res scaled per row first (RMSNorm of x); resid (_gemv_resid): out = resid + res,
    res rounded to out's dtype first, as add_rmsnorm adds a linear's output."""
    dt = out_ptr.dtype.element_ty
    if rstd is not None:
        res = res * rstd[:, None]
    if resid is not None:
        res = resid.to(tl.float32) + res.to(dt).to(tl.float32)
    if SWIGLU:
        inter = N // 2
        g, u = tl.split(tl.reshape(res, (res.shape[0], res.shape[1] // 2, 2)))
        rg, _ = tl.split(tl.reshape(rn, (rn.shape[0] // 2, 2)))
        g = g.to(dt).to(tl.float32)
        silu = (g * tl.sigmoid(g)).to(dt).to(tl.float32)
        res = silu * u.to(dt).to(tl.float32)
        mask = (rm[:, None] < M) & (rg[None, :] < inter)
        tl.store(out_ptr + rm[:, None] * inter + rg[None, :], res.to(dt), mask=mask)
    else:
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(out_ptr + rm[:, None] * N + rn[None, :], res.to(dt), mask=mask)


@kiln.jit
def gemv_kernel(x_ptr, w_ptr, out_ptr, g_ptr, eps, M, N, K, BM: tl.constexpr, R: tl.constexpr,
                C: tl.constexpr, E: tl.constexpr, EVEN: tl.constexpr, TWO: tl.constexpr = False,
                SWIGLU: tl.constexpr = False, NORM: tl.constexpr = False,
                RESID: tl.constexpr = False):
    """out[BM rows, R rows] of x @ w.T on CUDA cores. The tile is [BM, R, C, E]: E consecutive
    K (16 bytes) per thread, C pieces along K over the lanes and warps (and U = C / threads
    repeats per thread), R weight rows and BM rows of x in every thread. x is loaded as a 4-D
    [BM, 1, C, E] tile so that it anchors that layout (its E elements in-thread, lanes along
    C); the weights [R, C, E] take its slice.

    The loads of a step are issued one step ahead (the first before the loop, the next at the
    top of each iteration; past K they are masked off): ptxas keeps loads and the FMAs that
    use them in one block interleaved, one or two 16-byte loads ahead of the math, so without
    this only ~4 of a thread's 2R + 2 loads were in flight at once. EVEN (K a multiple of
    C * E): no K mask but the step's own (a scalar, without `other`: no register zeroing).
    TWO (K exactly two steps, EVEN): both steps' weights are loaded before gdc_wait (the whole
    row in flight while the kernel before finishes), then summed in the loop's order.
    SWIGLU: w is [gate | up] and out[M, N / 2] = silu(x @ gate.T) * (x @ up.T) (_gemv_store).
    NORM: x is the residual stream and the result that of rmsnorm(x) * g (g_ptr [K], eps):
    x times g in the loop, the rows' sums of squares beside it, the result scaled by their
    rstd. RESID: out is the residual stream and gets out + x @ w.T."""
    rm, rn = _gemv_rows(M, N, BM, R, SWIGLU)
    kk = tl.arange(0, C)[:, None] * E + tl.arange(0, E)[None, :]  # [C, E]
    # Rows past M or N wrap to valid rows (read, never stored).
    w_ptrs = w_ptr + (rn % N)[:, None, None] * K + kk[None, :, :]
    x_ptrs = x_ptr + (rm % M)[:, None, None, None] * K + kk[None, None, :, :]
    g_ptrs = g_ptr + kk[None, None, :, :]
    acc = tl.zeros((BM, R, C), dtype=tl.float32)
    ss = tl.zeros((BM, 1, C), dtype=tl.float32)
    if TWO:
        w0 = tl.load(w_ptrs, eviction_policy="evict_first")
        w1 = tl.load(w_ptrs + C * E, eviction_policy="evict_first")
        g = _g_tile(g_ptrs, 0, None, NORM)
        g1 = _g_tile(g_ptrs, C * E, None, NORM)
        tl.extra.cuda.gdc_wait()  # PDL (_common.PDL_ENV): x is the kernel before's output
        tl.extra.cuda.gdc_launch_dependents()
        x0 = tl.load(x_ptrs)
        x1 = tl.load(x_ptrs + C * E)
        resid = _gemv_resid(out_ptr, rm, rn, M, N, RESID)
        xf, ss = _norm_x(x0, g, ss, NORM)
        acc += tl.sum(w0[None, :, :, :].to(tl.float32) * xf, axis=3)
        xf, ss = _norm_x(x1, g1, ss, NORM)
        acc += tl.sum(w1[None, :, :, :].to(tl.float32) * xf, axis=3)
    else:
        kmask = kk < K
        if EVEN:
            w = tl.load(w_ptrs, eviction_policy="evict_first")
        else:
            w = tl.load(w_ptrs, mask=kmask[None, :, :], other=0.0, eviction_policy="evict_first")
        # Programmatic dependent launch (see _common.PDL_ENV): the first step's weights are in
        # flight while the kernel before finishes; x is its output.
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
        if EVEN:
            x = tl.load(x_ptrs)
        else:
            x = tl.load(x_ptrs, mask=kmask[None, None, :, :], other=0.0)
        g = _g_tile(g_ptrs, 0, kmask[None, None, :, :], NORM)
        resid = _gemv_resid(out_ptr, rm, rn, M, N, RESID)
        for k0 in range(C * E, K + C * E, C * E):
            if EVEN:  # (the last step's loads are masked off and their values unused)
                w_next = tl.load(w_ptrs + k0, mask=k0 < K, eviction_policy="evict_first")
                x_next = tl.load(x_ptrs + k0, mask=k0 < K)
            else:
                kmask = (k0 + kk) < K
                w_next = tl.load(w_ptrs + k0, mask=kmask[None, :, :], other=0.0,
                                 eviction_policy="evict_first")
                x_next = tl.load(x_ptrs + k0, mask=kmask[None, None, :, :], other=0.0)
            g_next = _g_tile(g_ptrs, k0, ((k0 + kk) < K)[None, None, :, :], NORM)
            xf, ss = _norm_x(x, g, ss, NORM)
            acc += tl.sum(w[None, :, :, :].to(tl.float32) * xf, axis=3)
            w = w_next
            x = x_next
            g = g_next
    _gemv_finish(tl.sum(acc, axis=2), out_ptr, rm, rn, M, N, ss, K, eps, resid, SWIGLU, NORM)


@kiln.jit
def linear_tma_kernel(x_desc, w_desc, out_desc, M, N, K, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """out = x @ w.T through tensor descriptors (16-bit operands): x blocks [BLOCK_M, BLOCK_K],
    w blocks [BLOCK_N, BLOCK_K], out blocks [BLOCK_M, BLOCK_N]."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tl.swizzle2d(pid // num_n, pid % num_n, num_m, num_n, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = x_desc.load([off_m, k * BLOCK_K])
        b = w_desc.load([off_n, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    out_desc.store([off_m, off_n], acc.to(out_desc.dtype))


@kiln.jit
def splitk_reduce_kernel(part_ptr, out_ptr, MN, SPLITS, SPLITS_P2: tl.constexpr,
                         BLOCK: tl.constexpr):
    """out[i] = sum over s < SPLITS of part[s, i], rounded to out's dtype. The partials of a
    block are loaded as one [SPLITS_P2, BLOCK] tile (every load in flight at once, not one
    dependent load per split) and summed in a fixed order."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.arange(0, SPLITS_P2)
    mask = (s[:, None] < SPLITS) & (offs[None, :] < MN)
    parts = tl.load(part_ptr + s[:, None] * MN + offs[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.sum(parts, axis=0).to(out_ptr.dtype.element_ty),
             mask=offs < MN)


#: KILN_MODELS_GEMV_TWO=0: CUDA-core linears of exactly two K steps keep the one-step-ahead loop
#: instead of loading both steps' weights before gdc_wait.
GEMV_TWO_ENV = "KILN_MODELS_GEMV_TWO"


def two_step_prefetch():
    return os.environ.get(GEMV_TWO_ENV, "1") != "0"


@functools.lru_cache(maxsize=None)
def _sm_count(device_index):
    try:
        props = kiln.runtime.driver.active.utils.get_device_properties(device_index)
        return int(props["multiprocessor_count"])
    except Exception:  # no driver (compile-only machines): an H100's count
        return 132


def _device_index(a):
    d = getattr(a, "device", None)
    if isinstance(d, int):
        return d
    return getattr(d, "index", None) or 0


def uses_gemv(M, gemv=None, kind="float"):
    """Whether a batch of M rows takes the CUDA-core plan: `gemv` True/False forces it (up to
    DECODE_MAX_M rows), None picks it for M <= GEMV_MAX_M[kind]."""
    if gemv is None:
        return 0 < M <= GEMV_MAX_M[kind]
    return bool(gemv) and M <= DECODE_MAX_M


def linear_config(M, N, K, itemsize=2, cpu=False, sms=132, split_ok=True, gemv=None):
    """The launch plan of `linear` for these sizes: with the CUDA-core plan (`uses_gemv`),
    gemv_config's dict with kernel="gemv" and splits=1; else a dict with kernel="tiles",
    BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, splits (K ranges; 1: no
    split) and k_split (the K extent of each range)."""
    if uses_gemv(M, gemv):
        return dict(gemv_config(M, N, K, "float", itemsize, cpu, sms), kernel="gemv", splits=1)
    if cpu:  # small tiles: the host compiler's time grows fast with the tile
        bm = 16 if M <= 16 else 32
        cfg = dict(BLOCK_M=bm, BLOCK_N=16 if bm == 16 else 32, BLOCK_K=32, GROUP_M=4,
                   num_warps=4, num_stages=1)
        target = 8  # programs; enough to run the split path in CI
    elif M <= DECODE_MAX_M:
        # A 64-row tile (wgmma's M on 4 warps) of which the M real rows are read and the rest
        # zero-filled; 64 weight rows x 64 K per step (16-byte cp.async copies, 8 KiB a stage,
        # 3 stages ahead): 64 KiB of shared memory, 3 programs per SM.
        cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, num_warps=4, num_stages=4)
        target = 2 * sms
    elif M * N >= sms * 128 * 256:
        cfg = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4)
        target = 0
    else:
        cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4)
        target = 0
    bk = cfg["BLOCK_K"]
    tiles = kiln.cdiv(M, cfg["BLOCK_M"]) * kiln.cdiv(N, cfg["BLOCK_N"])
    splits = 1
    if split_ok and M <= DECODE_MAX_M and tiles < (target + 1) // 2:
        # Each range keeps at least 4 K steps (the ring's depth) of work.
        max_splits = max(1, K // (4 * bk))
        splits = min(kiln.cdiv(target, tiles), max_splits)
    k_split = kiln.cdiv(kiln.cdiv(K, splits), bk) * bk if K else bk
    splits = kiln.cdiv(K, k_split) if K else 1
    cfg.update(splits=splits, k_split=k_split, kernel="tiles")
    return cfg


def gemv_config(M, N, K, kind="float", itemsize=2, cpu=False, sms=132, invariant=False):
    """The launch plan of the CUDA-core kernels (`gemv_kernel`, quant's int8/int4 ones): a dict
    with BM (rows of x per program), R (weight rows per program), C (pieces along K per step),
    E (K per piece: 16 bytes of a float weight, or one 32-bit word of int8/int4), EVEN (K a
    multiple of a step), num_warps and programs (the 1-D grid); int4's may add WIDE, the
    (R, C) of gemv_int4_wide_kernel, and PERSIST, the (R, programs a SM, tiles ahead, words
    a piece, warps) of gemv_int4_persist_kernel, where quant's launch can take them (PERSIST
    first). invariant: no
    one-row plans of their own (int4's sum a row's K in another order than its batches' row
    blocks do), so that a row's result does not depend on the batch."""
    E = {"float": 16 // itemsize, "int8": 4, "int4": 8}[kind]
    bm = min(kiln.next_power_of_2(max(M, 1)), GEMV_BM)
    pieces = kiln.next_power_of_2(max(kiln.cdiv(K, E), 1))
    if cpu:  # small tiles: the host compiler's time grows fast with the tile
        cfg = dict(BM=bm, R=4, C=min(16, pieces), E=E, num_warps=1)
    else:
        # 4 warps (128 lanes along K); a thread reads R rows x C / 128 pieces a step, the next
        # step's in flight meanwhile. (R, C) by kind and BM from ptxas on sm_90a (registers,
        # none spilled): float (4, 128) 80, (2, 128) 72, (2, 128) 96 at BM = 1, 2, 4; int4
        # (4, 128) 64, (4, 128) 90, (2, 128) 96; int8 (4, 256) 64, (4, 256) 80, (2, 256)
        # 111. Few registers keep 5 to 8 programs per SM, so the 512 to 768 programs of the
        # narrow layers run in one wave (at 154 registers, (4, 256) for bf16 took 1.3 waves
        # for o_proj), with 2 steps of loads in flight: 64 KB per SM for bf16 (K = 2048 rows
        # whole in flight), 32 KB for int4 and int8; more pieces per thread add no bytes in
        # flight per SM, only registers. R halves (down to 2) while fewer than ~3 programs
        # per SM would run.
        r, c = {"float": {1: (4, 128), 2: (2, 128), 4: (2, 128)},
                "int4": {1: (4, 128), 2: (4, 128), 4: (2, 128)},
                "int8": {1: (4, 256), 2: (4, 256), 4: (2, 256)}}[kind][bm]
        while r > 2 and kiln.cdiv(N, r) * kiln.cdiv(M, bm) < 3 * sms:
            r //= 2
        if kind == "int4" and bm == 1 and invariant:
            pass  # the row blocks' plans: one K order for a row in any batch
        elif kind == "int4" and bm == 1 and kiln.cdiv(N, 32) >= 3 * sms:
            # Wide int4 layers (gate_up, the LM head) at one row: one warp per 8 weight rows
            # (C = 32 words along K: the K sum stays in the warp), 32 rows a program. H100,
            # L2 emptied: LM head 86 -> 70 us, gate_up 16.8 -> 13.9 us; narrower layers
            # (qkv, o, down) are slower so (bench/results/2026-11-26-h100-llama-session16.md).
            r, c = 32, 32
        elif kind == "int4" and bm == 1 and pieces >= 1024:
            # Long K (down_proj, K 8192) at one row: 4 words of each of 4 rows a thread and
            # step. In the 1B model's decode (H100, PDL, graphs) int4 1795 -> 1850 tok/s
            # against (4, 128), and with the norms fused (2, 512) 1851 -> (4, 512) 1896;
            # (1, 512), (2, 256), (2, 1024), 8 warps, two steps ahead: slower or within noise.
            r, c = 4, 512
        elif kind == "int4" and bm == 1 and kiln.cdiv(N, r) <= 4 * sms:
            # Narrow layers whose programs fit one wave (o_proj: 512 programs of 96 registers,
            # 5 a SM): all of K (up to 256 words) a step, loaded before gdc_wait: 1.03x the
            # model's int4 decode. qkv (768 programs, 1.2 waves) is slower so (0.97x).
            c = 256
        cfg = dict(BM=bm, R=r, C=min(c, pieces), E=E, num_warps=4)
        if kind == "int4" and bm == 1 and r == 32 and kiln.cdiv(N, 32) <= 8 * sms:
            # gate_up (not the LM head): quant's 16-byte-load kernel, 32 rows x 16 pieces of
            # 4 words a program where it applies (packed math, groups of whole pieces):
            # 1.025x the model's int4 decode (H100, 4 alternations); the head is slower so.
            cfg["WIDE"] = (32, 16)
        if kind == "int4" and bm == 1 and r == 32:
            # gate_up and the LM head where quant's persistent kernel applies (packed math,
            # K <= 2048): 8-row tiles of all of K; gate_up 4 programs a SM of 4 warps (127
            # registers), 4-word pieces, the tile after the current one in flight; the head 3
            # a SM of 8 warps, 8-word pieces (a warp a row), two tiles in flight. In the model
            # (H100, 2-3 rounds each, one process): gate_up 1.011x, head 1.009x the plans
            # above, and the head's 8 warps 1.009x its 4; ncu, L2 cold: head 62.1 -> 52.0 us
            # (DRAM 68% -> 81% of peak), gate_up 11.1 us either way; with the epilogue a tile
            # behind, one tile in flight beats two for gate_up (fewer registers).
            wide = kiln.cdiv(N, 32) <= 8 * sms
            cfg["PERSIST"] = (8, 4, 1, 4, 4) if wide else (8, 3, 2, 8, 8)
    cfg["programs"] = kiln.cdiv(N, cfg["R"]) * kiln.cdiv(M, bm)
    cfg["EVEN"] = K > 0 and K % (cfg["C"] * E) == 0
    return cfg


def linear_scratch_numel(M, N, K, itemsize=2, cpu=False, sms=132, gemv=None):
    """fp32 elements of `scratch` that `linear` uses for these sizes (0: none). A decode step
    can share one scratch array of the largest count among its linears (they run in order
    on one stream)."""
    cfg = linear_config(M, N, K, itemsize, cpu, sms, gemv=gemv)
    return cfg["splits"] * M * N if cfg["splits"] > 1 else 0


def _takes_descriptor(a):
    """Whether a contiguous 2-D GPU array meets the tensor descriptor rules: a 16-byte
    aligned base and rows of a multiple of 16 bytes."""
    return a.data_ptr() % 16 == 0 and (a.shape[1] * a.itemsize) % 16 == 0


def _desc(a, block):
    """The descriptor of a contiguous 2-D array of any kind (kiln.DeviceArray has no strides
    for TensorDescriptor.from_tensor to read)."""
    rows, cols = (int(d) for d in a.shape)
    return kiln.TensorDescriptor(a, [rows, cols], [cols, 1], block)


def swiglu_out_features(op, N, swiglu):
    """The columns of a linear's out: N, or N / 2 with swiglu (w = [gate | up], N even)."""
    if not swiglu:
        return N
    if N % 2:
        raise ValueError(f"{op}: expected an even number of weight rows with swiglu=True "
                         f"([gate | up]), found {N}")
    return N // 2


def check_fused_plan(op, swiglu, norm, residual, takes_gemv):
    """The fusions (swiglu, norm, residual) exist on the CUDA-core plan only."""
    for name, on, instead in (("swiglu=True", swiglu, "the linear, then silu_mul"),
                              ("norm", norm is not None, "rmsnorm, then the linear"),
                              ("residual=True", residual, "the linear, then add_rmsnorm")):
        if on and not takes_gemv:
            raise ValueError(f"{op}: {name} needs the CUDA-core plan (up to "
                             f"{GEMV_MAX_M['float']} rows of x, or gemv=True up to "
                             f"{DECODE_MAX_M}); run {instead}")


def check_fusions(op, K, norm, eps, residual, swiglu=False):
    """The norm weight [K] of a fused RMSNorm (None: none) and its eps; residual: out is read
    (a plain flag; not with swiglu)."""
    if residual and swiglu:
        raise ValueError(f"{op}: expected residual=True or swiglu=True, not both")
    if norm is not None:
        check_array(op, "norm", norm, (K,), FLOAT_DTYPES)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
            raise ValueError(f"{op}: expected a float eps >= 0, found {eps!r}")
    if not isinstance(residual, bool):
        raise TypeError(f"{op}: expected residual True or False, found {residual!r}")


def fusion_consts(norm, eps, residual, x):
    """(g_ptr, eps) arguments and NORM/RESID constexprs of the CUDA-core kernels."""
    return (x if norm is None else norm, float(eps) if norm is not None else 0.0,
            dict(NORM=norm is not None, RESID=bool(residual)))


def linear(x, w, out, scratch=None, stream=None, device=None, gemv=None, swiglu=False,
           norm=None, eps=1e-6, residual=False):
    """out[M, N] = x[M, K] @ w[N, K].T (fp32 accumulation). x and w share one dtype (fp32, bf16,
    fp16); out is any of those. `scratch`: an fp32 array of at least
    `linear_scratch_numel(M, N, K)` elements for split-K in decode (optional). `gemv`: None
    (the plan by M), True (CUDA cores, up to 64 rows) or False (tensor cores). `swiglu`
    (CUDA-core plan): w = [gate | up] and out[M, N / 2] = silu_mul(x @ w.T), the same bits as
    the two ops, in one kernel. `norm` (CUDA-core plan), a weight [K]: x is first normalized,
    rmsnorm(x, eps) * norm (as ops.rmsnorm, without rounding the normalized x), in the same
    kernel. `residual` (CUDA-core plan): out += x @ w.T (the product rounded to out's dtype,
    then the sum, as add_rmsnorm adds)."""
    M, K = check_array("linear", "x", x, (None, None), FLOAT_DTYPES)
    N, _ = check_array("linear", "w", w, (None, K), FLOAT_DTYPES)
    check_array("linear", "out", out, (M, swiglu_out_features("linear", N, swiglu)),
                FLOAT_DTYPES)
    check_fusions("linear", K, norm, eps, residual, swiglu)
    if out is x or out is w:
        raise ValueError("linear: expected 'out' to be another array than 'x' and 'w' (other "
                         "programs still read them while it is written)")
    dt = dtype_name(x)
    if dtype_name(w) != dt:
        raise TypeError(f"linear: expected 'x' and 'w' of one dtype, found {dt} and "
                        f"{dtype_name(w)}")
    if max(M * K, N * K, M * N) > _INT32_MAX:
        raise ValueError(f"linear: expected M * K, N * K and M * N below 2^31 (int32 offsets), "
                         f"found M={M}, N={N}, K={K}")
    dev = launch_device(device, x, w, out)
    cpu = dev == "cpu"
    itemsize = 4 if dt == "float32" else 2
    sms = 132 if cpu else _sm_count(_device_index(x))
    cfg = linear_config(M, N, K, itemsize, cpu, sms, split_ok=scratch is not None, gemv=gemv)
    check_fused_plan("linear", swiglu, norm, residual, cfg["kernel"] == "gemv")
    if M == 0 or N == 0:
        return out
    if cfg.pop("kernel") == "gemv":
        two = cfg["EVEN"] and K == 2 * cfg["C"] * cfg["E"] and two_step_prefetch()
        g, eps, fused = fusion_consts(norm, eps, residual, x)
        gemv_kernel[(cfg["programs"],)](x, w, out, g, eps, M, N, K, BM=cfg["BM"], R=cfg["R"],
                                        C=cfg["C"], E=cfg["E"], EVEN=cfg["EVEN"], TWO=two,
                                        SWIGLU=bool(swiglu), **fused,
                                        num_warps=cfg["num_warps"],
                                        **launch_opts(dev, stream, pdl=True))
        return out
    opts = launch_opts(dev, stream)
    splits = cfg.pop("splits")
    k_split = cfg.pop("k_split")
    if splits > 1:
        check_array("linear", "scratch", scratch, (None,), ("float32",))
        if scratch.shape[0] < splits * M * N:
            raise ValueError(f"linear: expected 'scratch' of at least {splits * M * N} fp32 "
                             f"elements ({splits} K splits of [{M}, {N}]), found "
                             f"{scratch.shape[0]}")
    tiles = kiln.cdiv(M, cfg["BLOCK_M"]) * kiln.cdiv(N, cfg["BLOCK_N"])
    if (M > DECODE_MAX_M and K > 0 and dt != "float32" and dtype_name(out) != "float32"
            and not cpu and all(_takes_descriptor(a) for a in (x, w, out))):
        bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
        linear_tma_kernel[(tiles,)](_desc(x, [bm, bk]), _desc(w, [bn, bk]), _desc(out, [bm, bn]),
                                    M, N, K, **cfg, **opts)
        return out
    split = splits > 1
    linear_kernel[(tiles, splits)](x, w, out, scratch if split else out, M, N, K, k_split,
                                   SPLIT=split, **cfg, **opts)
    if split:
        p2 = kiln.next_power_of_2(splits)
        block = max(32, 4096 // p2)  # a 16 KiB tile of partials per program
        splitk_reduce_kernel[(kiln.cdiv(M * N, block),)](scratch, out, M * N, splits,
                                                         SPLITS_P2=p2, BLOCK=block,
                                                         num_warps=4, **opts)
    return out
