"""Weight-only quantized linear layers: out[M, N] = x[M, K] @ dequant(w).T, fp32 accumulation.

- int8: `quantize_int8(w)` -> (q int8 [N, K], scales fp32 [N]): symmetric per output channel,
  scale = max|w[n]| / 127, q = round(w / scale). `linear_int8(x, q, scales, out)`.
- int4: `quantize_int4(w, group=128)` -> (packed uint8 [N, K / 2], scales fp32 [N, K / group]):
  symmetric per group of `group` consecutive K, scale = max|w[n, group]| / 7,
  q = clip(round(w / scale), -8, 7) stored as q + 8, two per byte (k even in the low nibble,
  k odd in the high one). `linear_int4(x, packed, scales, out, group=128)`.

Two plans. Decode batches of up to GEMV_MAX_M (4) rows run on CUDA cores (`gemv_int8_kernel`,
`gemv_int4_kernel`; `gemv=True/False` forces a plan up to 64 rows): tensor cores do not help
at a few rows, and the weights are streamed once, as 32-bit words along K (128-byte warp
accesses), turned into floats with bit operations (no int-to-float conversions, see
`_word_fields`), multiplied by x in fp32 and scaled per word (int4: a word lies in one group)
or per row (int8). sm_90a SASS of the loop per 16 bytes of weights: int4 173 instructions at
1 row of x (per word: 10 LOP3, 8 FADD, 8 FFMA, 1 FFMA for the scale, loads and addresses),
249 at 2, 472 at 4; int8 99 at 1, 134 at 2, 246 at 4. An H100 issues ~140 per 16 bytes at 3.35 TB/s,
so int4 at 1 row is issue-bound near 2.7 TB/s (of int4 bytes: 4x the weights of bf16 per
byte), and at 4 rows near 1 TB/s. Same layout as below: the packing is the natural one.

Otherwise the tile kernels read the integer tile, convert it to x's dtype (exact: |q| <= 127),
multiply on the tensor cores (IEEE fp32 for fp32 x) and apply the scales to the fp32 products:
per column at the end (int8), per group of K after each group's dot (int4), so the only
rounding besides the accumulation is out's. Grid: (M tiles x N tiles, K splits), grouped
order; as in `linear`, batches of up to 64 rows split K when the column blocks alone would not
fill the SMs (given an fp32 `scratch` of `quant_scratch_numel(M, N, K)` elements), the fp32
partials summed by `linear`'s reduce kernel. The quantizers run in numpy on the host (model
load time, not the hot path).
"""
import os

import numpy as np

import kiln
import kiln.language as tl

from ._common import FLOAT_DTYPES, check_array, dtype_name, launch_device, launch_opts
from .int4_packed import (_first_words, _next_words, gemv_int4_packed_kernel,
                          gemv_int4_persist_kernel, gemv_int4_wide_kernel)
from .linear import (_device_index, _g_tile, _gemv_finish, _gemv_resid, _gemv_rows, _norm_x,
                     _sm_count, check_fused_plan, check_fusions, fusion_consts, gemv_config,
                     splitk_reduce_kernel, swiglu_out_features, two_step_prefetch, uses_gemv)

__all__ = ["quantize_int8", "quantize_int4", "dequantize_int8", "dequantize_int4",
           "linear_int8", "linear_int4", "quant_scratch_numel", "quant_takes_gemv",
           "int4_scale_dtype"]


@kiln.jit
def _tile_ids(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tl.swizzle2d(pid // num_n, pid % num_n, num_m, num_n, GROUP_M)
    return pid_m * BLOCK_M + tl.arange(0, BLOCK_M), pid_n * BLOCK_N + tl.arange(0, BLOCK_N)


@kiln.jit
def _store(acc, out_ptr, part_ptr, rm, rn, M, N, SPLIT: tl.constexpr):
    """The tile's fp32 result into out (rounded), or its K range's partial into part[pid1]."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    if SPLIT:
        tl.store(part_ptr + tl.program_id(1) * M * N + offs, acc, mask=mask)
    else:
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@kiln.jit
def linear_int8_kernel(x_ptr, q_ptr, s_ptr, out_ptr, part_ptr, M, N, K, K_SPLIT,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr, SPLIT: tl.constexpr):
    """K range [pid1 * K_SPLIT, +K_SPLIT) (a multiple of BLOCK_K) of the tile pid0."""
    rm, rn = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rk = tl.arange(0, BLOCK_K)
    k0 = tl.program_id(1) * K_SPLIT
    x_ptrs = x_ptr + (rm % M)[:, None] * K + (k0 + rk)[None, :]
    q_ptrs = q_ptr + (rn % N)[:, None] * K + (k0 + rk)[None, :]
    row_ok = rm[:, None] < M
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(tl.minimum(K - k0, K_SPLIT), BLOCK_K)):
        kmask = (k0 + k * BLOCK_K + rk)[None, :] < K
        a = tl.load(x_ptrs, mask=row_ok & kmask, other=0.0)
        q = tl.load(q_ptrs, mask=kmask, other=0).to(a.dtype)
        acc = tl.dot(a, q.T, acc, input_precision="ieee")
        x_ptrs += BLOCK_K
        q_ptrs += BLOCK_K
    scale = tl.load(s_ptr + rn, mask=rn < N, other=0.0)
    _store(acc * scale[None, :], out_ptr, part_ptr, rm, rn, M, N, SPLIT)


@kiln.jit
def linear_int4_kernel(x_ptr, p_ptr, s_ptr, out_ptr, part_ptr, M, N, K, K_SPLIT, K_PACKED,
                       K_SPLIT_PACKED, N_GROUPS, GROUP, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                       SPLIT: tl.constexpr):
    """K a multiple of GROUP, GROUP and K_SPLIT multiples of BLOCK_K: each K step lies in one
    group. K_PACKED = K / 2, K_SPLIT_PACKED = K_SPLIT / 2 and N_GROUPS = K / GROUP are passed
    (not divided here) so that their divisibility is known: 16-byte loads of the packed
    rows."""
    rm, rn = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rb = tl.arange(0, BLOCK_K // 2)
    k0 = tl.program_id(1) * K_SPLIT
    # The even and odd K of x (two strided [BLOCK_M, BLOCK_K / 2] tiles) meet the low and high
    # nibbles of the packed tile: two dots, no interleave of the weights in registers, and
    # the packed rows read as they lie (16-byte loads).
    x_ptrs = x_ptr + (rm % M)[:, None] * K + k0 + 2 * rb[None, :]
    p_ptrs = p_ptr + (rn % N)[:, None] * K_PACKED + tl.program_id(1) * K_SPLIT_PACKED + \
        rb[None, :]
    s_ptrs = s_ptr + (rn % N) * N_GROUPS
    row_ok = rm[:, None] < M
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.minimum(K - k0, K_SPLIT) // BLOCK_K):
        a_even = tl.load(x_ptrs, mask=row_ok, other=0.0)
        a_odd = tl.load(x_ptrs + 1, mask=row_ok, other=0.0)
        b = tl.load(p_ptrs).to(tl.int32)
        lo = ((b & 15) - 8).to(a_even.dtype)
        hi = ((b >> 4) - 8).to(a_even.dtype)
        part = tl.dot(a_even, lo.T, input_precision="ieee")
        part = tl.dot(a_odd, hi.T, part, input_precision="ieee")
        scale = tl.load(s_ptrs + (k0 + k * BLOCK_K) // GROUP).to(tl.float32)
        acc += part * scale[None, :]
        x_ptrs += BLOCK_K
        p_ptrs += BLOCK_K // 2
    _store(acc, out_ptr, part_ptr, rm, rn, M, N, SPLIT)


# ---------------------------------------------------------------- CUDA-core kernels (M <= 4)
#
# A weight word (32 bits: 4 int8 or 8 int4 of consecutive K) becomes fp32 values without an
# integer-to-float conversion (I2F, a conversion-pipe instruction issued at a fraction of the
# FMA rate; the tile kernels below use it): the bits of a field, masked in
# place, sit in the mantissa of 2^23 (exponent bits 0x4B000000), giving the float
# 2^23 + v * 2^s for a field v at bit s <= 15 (v * 2^s < 2^23, so it is exact); subtracting
# 2^23 + zero * 2^s leaves (v - zero) * 2^s exactly. x is multiplied by 2^-s instead (exact).
# The exponent is OR-ed in once per half word (`w | 0x4B000000` for the fields at bits 0..15,
# `(w >> 16) | 0x4B000000` for those at 16..31: the bits above 15 of either are then cleared
# or set to the exponent by the field's mask, 0x4B000000 | field bits), so a field is one AND
# (a LOP3 with one immediate: `(w & m) | 0x4B000000` would need two and took two LOP3s), then
# one FADD and one FMA per row of x.

@kiln.jit
def _word_fields(words, j, BITS: tl.constexpr, ZERO: tl.constexpr):
    """fp32 (field_j(words) - ZERO) * 2^s for the fields j (a tile broadcast against words) of
    BITS bits, where s = BITS * j mod 16 is the field's bit offset within its 16-bit half."""
    s = (BITS * j) % 16
    src = tl.where(BITS * j >= 16, (words >> 16) | 0x4B000000, words | 0x4B000000)
    f = (src & (0x4B000000 | (((1 << BITS) - 1) << s))).to(tl.float32, bitcast=True)
    return f - (8388608 + ZERO * (1 << s)).to(tl.float32)


@kiln.jit
def _inv_shift(j, BITS: tl.constexpr):
    """2^-s (s as in _word_fields) as fp32, built from its exponent bits."""
    return ((127 - (BITS * j) % 16) << 23).to(tl.float32, bitcast=True)


@kiln.jit
def _wait_then_x(x_ptrs, wmask, EVEN: tl.constexpr):
    """PDL (linear.py): the weights loaded before this are in flight while the kernel before
    finishes; x, its output, is loaded after gdc_wait ([BM, 1, C, E] pieces)."""
    tl.extra.cuda.gdc_wait()
    tl.extra.cuda.gdc_launch_dependents()
    if EVEN:
        x = tl.load(x_ptrs)
    else:
        x = tl.load(x_ptrs, mask=wmask[None, None, :, None], other=0.0)
    return x


@kiln.jit
def gemv_int8_kernel(x_ptr, q_ptr, s_ptr, out_ptr, g_ptr, eps, M, N, K, KW, BM: tl.constexpr,
                     R: tl.constexpr, C: tl.constexpr, EVEN: tl.constexpr,
                     SWIGLU: tl.constexpr = False, NORM: tl.constexpr = False,
                     RESID: tl.constexpr = False):
    """out[BM rows, R rows] = x @ (q * s).T on CUDA cores, KW = K / 4 words per weight row.
    Tile [BM, R, C, 4]: one word of 4 consecutive K per thread and row (lanes on consecutive
    words: 128-byte warp accesses), C words along K over the lanes, warps and repeats, R
    weight rows and BM rows of x in every thread; x loaded as [BM, 1, C, 4] (8 bytes a
    thread), which anchors that layout. Loads one step ahead and EVEN (KW a multiple of C)
    as in linear's gemv_kernel; SWIGLU, NORM (g_ptr, eps) and RESID as there."""
    rm, rn = _gemv_rows(M, N, BM, R, SWIGLU)
    rc = tl.arange(0, C)
    j = tl.arange(0, 4)[None, None, None, :]
    q_ptrs = q_ptr.to(tl.pointer_type(tl.int32)) + (rn % N)[:, None] * KW + rc[None, :]
    x_ptrs = x_ptr + (rm % M)[:, None, None, None] * K + rc[None, None, :, None] * 4 + j
    g_ptrs = g_ptr + rc[None, None, :, None] * 4 + j
    inv = _inv_shift(j, 8)
    acc = tl.zeros((BM, R, C), dtype=tl.float32)
    ss = tl.zeros((BM, 1, C), dtype=tl.float32)
    wmask = rc < KW
    if EVEN:
        words = tl.load(q_ptrs, eviction_policy="evict_first")
    else:
        words = tl.load(q_ptrs, mask=wmask[None, :], other=0, eviction_policy="evict_first")
    x = _wait_then_x(x_ptrs, wmask, EVEN)
    g = _g_tile(g_ptrs, 0, wmask[None, None, :, None], NORM)
    resid = _gemv_resid(out_ptr, rm, rn, M, N, RESID)
    for w0 in range(C, KW + C, C):
        if EVEN:
            words_next = tl.load(q_ptrs + w0, mask=w0 < KW, eviction_policy="evict_first")
            x_next = tl.load(x_ptrs + 4 * w0, mask=w0 < KW)
        else:
            wmask = (w0 + rc) < KW
            words_next = tl.load(q_ptrs + w0, mask=wmask[None, :], other=0,
                                 eviction_policy="evict_first")
            x_next = tl.load(x_ptrs + 4 * w0, mask=wmask[None, None, :, None], other=0.0)
        g_next = _g_tile(g_ptrs, 4 * w0, ((w0 + rc) < KW)[None, None, :, None], NORM)
        # int8 -> the unsigned q + 128 (zero point 128) in every byte.
        f = _word_fields((words ^ -2139062144)[None, :, :, None], j, 8, 128)  # 0x80808080
        xf, ss = _norm_x(x, g, ss, NORM)
        acc += tl.sum(f * (xf * inv), axis=3)
        words = words_next
        x = x_next
        g = g_next
    scale = tl.load(s_ptr + rn % N)
    _gemv_finish(tl.sum(acc, axis=2) * scale[None, :], out_ptr, rm, rn, M, N, ss, K, eps, resid,
                 SWIGLU, NORM)


@kiln.jit
def gemv_int4_kernel(x_ptr, p_ptr, s_ptr, out_ptr, g_ptr, eps, M, N, K, KW, N_GROUPS,
                     GROUP_WORDS: tl.constexpr, BM: tl.constexpr, R: tl.constexpr,
                     C: tl.constexpr, EVEN: tl.constexpr, SWIGLU: tl.constexpr = False,
                     NORM: tl.constexpr = False, RESID: tl.constexpr = False):
    """As gemv_int8_kernel for int4: KW = K / 8 words per packed row (8 consecutive K each,
    k even in the low nibble of its byte), x loaded as [BM, 1, C, 8] (16 bytes a thread);
    every word lies in one group (GROUP_WORDS words), whose scale multiplies the word's sum."""
    rm, rn = _gemv_rows(M, N, BM, R, SWIGLU)
    rc = tl.arange(0, C)
    j = tl.arange(0, 8)[None, None, None, :]
    p_ptrs = p_ptr.to(tl.pointer_type(tl.int32)) + (rn % N)[:, None] * KW + rc[None, :]
    s_rows = s_ptr + (rn % N)[:, None] * N_GROUPS
    x_ptrs = x_ptr + (rm % M)[:, None, None, None] * K + rc[None, None, :, None] * 8 + j
    g_ptrs = g_ptr + rc[None, None, :, None] * 8 + j
    inv = _inv_shift(j, 4)
    acc = tl.zeros((BM, R, C), dtype=tl.float32)
    ss = tl.zeros((BM, 1, C), dtype=tl.float32)
    s_ptrs = s_rows + (rc // GROUP_WORDS)[None, :]
    wmask = rc < KW
    words, scale = _first_words(p_ptrs, s_ptrs, wmask, EVEN)
    x = _wait_then_x(x_ptrs, wmask, EVEN)
    g = _g_tile(g_ptrs, 0, wmask[None, None, :, None], NORM)
    resid = _gemv_resid(out_ptr, rm, rn, M, N, RESID)
    for w0 in range(C, KW + C, C):
        words_next, scale_next = _next_words(p_ptrs, s_ptrs, s_rows, rc, w0, KW, GROUP_WORDS,
                                             EVEN)
        if EVEN:
            x_next = tl.load(x_ptrs + 8 * w0, mask=w0 < KW)
        else:
            x_next = tl.load(x_ptrs + 8 * w0, mask=((w0 + rc) < KW)[None, None, :, None],
                             other=0.0)
        g_next = _g_tile(g_ptrs, 8 * w0, ((w0 + rc) < KW)[None, None, :, None], NORM)
        f = _word_fields(words[None, :, :, None], j, 4, 8)
        xf, ss = _norm_x(x, g, ss, NORM)
        acc += tl.sum(f * (xf * inv), axis=3) * scale[None, :, :]
        words = words_next
        scale = scale_next
        x = x_next
        g = g_next
    _gemv_finish(tl.sum(acc, axis=2), out_ptr, rm, rn, M, N, ss, K, eps, resid, SWIGLU, NORM)


# ---------------------------------------------------------------- quantizers (numpy)

def _host_weights(op, w):
    w = np.asarray(w)
    if w.ndim != 2:
        raise ValueError(f"{op}: expected a 2-D weight [N, K], found shape {list(w.shape)}")
    if w.dtype.name not in FLOAT_DTYPES + ("float64",):
        raise TypeError(f"{op}: expected a float weight, found {w.dtype.name}")
    w = w.astype(np.float32)
    if not np.isfinite(w).all():
        raise ValueError(f"{op}: expected finite weights (found NaN or inf)")
    return w


def quantize_int8(w):
    """(q int8 [N, K], scales fp32 [N]) with w ~ q * scales[:, None]."""
    w = _host_weights("quantize_int8", w)
    amax = np.abs(w).max(axis=1) if w.shape[1] else np.zeros(w.shape[0], np.float32)
    scales = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales


def dequantize_int8(q, scales):
    return q.astype(np.float32) * np.asarray(scales, np.float32)[:, None]


def quantize_int4(w, group=128):
    """(packed uint8 [N, K / 2], scales fp32 [N, K / group]) with K a multiple of `group`
    (an even number)."""
    w = _host_weights("quantize_int4", w)
    N, K = w.shape
    if not isinstance(group, int) or group < 2 or group % 2 or K % group:
        raise ValueError(f"quantize_int4: expected an even group dividing K = {K}, found "
                         f"{group!r}")
    g = w.reshape(N, K // group, group)
    amax = np.abs(g).max(axis=2)
    scales = np.where(amax > 0, amax / 7.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(g / scales[:, :, None]), -8, 7).astype(np.int8).reshape(N, K) + 8
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
    return packed, scales


def dequantize_int4(packed, scales, group=128):
    packed = np.asarray(packed)
    N, half = packed.shape
    q = np.empty((N, 2 * half), np.float32)
    q[:, 0::2] = (packed & 15).astype(np.float32) - 8
    q[:, 1::2] = (packed >> 4).astype(np.float32) - 8
    return q * np.repeat(np.asarray(scales, np.float32), group, axis=1)


# ---------------------------------------------------------------- host functions

def _plan(M, N, K, cpu, sms, split_ok, k_align):
    """Tiles and K splits: as `linear`'s decode plan for up to 64 rows (every K range a
    multiple of `k_align`), 128 x 128 tiles above."""
    if cpu:
        cfg = dict(BLOCK_M=16 if M <= 16 else 32, BLOCK_N=16, BLOCK_K=32, GROUP_M=4,
                   num_warps=4)
        target = 8
    elif M <= 64:
        cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=4)
        target = 2 * sms
    else:
        # int8: K steps of 64 (of 128 the operands staged for wgmma do not fit and the dot
        # falls back to mma.sync); int4 steps stay within a group of 128.
        cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128 if k_align else 64, GROUP_M=8,
                   num_warps=8, num_stages=3)
        target = 0
    if k_align and 32 <= k_align < cfg["BLOCK_K"] and cfg["BLOCK_K"] % k_align == 0:
        # int4 groups below a step: a step per group (its two dots of K / 2 >= 16)
        cfg["BLOCK_K"] = k_align
    tiles = kiln.cdiv(M, cfg["BLOCK_M"]) * kiln.cdiv(N, cfg["BLOCK_N"])
    splits = 1
    if split_ok and M <= 64 and tiles < (target + 1) // 2:
        splits = min(kiln.cdiv(target, tiles), max(1, K // (4 * cfg["BLOCK_K"])))
    align = max(k_align or cfg["BLOCK_K"], cfg["BLOCK_K"])
    k_split = max(kiln.cdiv(kiln.cdiv(K, splits), align) * align, align)
    return cfg, tiles, kiln.cdiv(K, k_split) if K else 1, k_split


def _address(a):
    """The address of an array's first element (numpy, kiln.DeviceArray, torch), or None."""
    if isinstance(a, np.ndarray):
        return a.__array_interface__["data"][0]
    fn = getattr(a, "data_ptr", None)
    return fn() if callable(fn) else None


def _takes_gemv(M, K, group, gemv, wq=None):
    """Whether linear_int8 (group None) / linear_int4 run the CUDA-core kernel: by M (as
    `linear.uses_gemv`), when the rows are whole 32-bit words (int8: K % 4 == 0) and every
    word lies in one group (int4: group % 8 == 0), read through an int32 pointer (`wq`, the
    codes, 4-byte aligned)."""
    kind = "int8" if group is None else "int4"
    fits = K % 4 == 0 if group is None else group % 8 == 0
    if wq is not None and (_address(wq) or 0) % 4:
        fits = False
    return fits and uses_gemv(M, gemv, kind)


def _persist_plan(cfg, M, K, group):
    """(R, programs a SM, tiles ahead, words a piece, warps) of gemv_int4_persist_kernel
    where plan `cfg` (gemv_config's PERSIST, whose last three default to 1, 4 and the plan's
    num_warps) asks for it and it applies: M rows in one row block, a row of at most 256
    words (K <= 2048), a power of two, groups of whole pieces; else None."""
    words = K // 8
    persist = cfg.get("PERSIST")
    if not persist or group is None:
        return None
    persist = (tuple(persist) + (1, 4, cfg["num_warps"])[len(persist) - 2:])[:5]
    v = persist[3]
    if (M <= cfg["BM"] and v <= words <= 256 and kiln.next_power_of_2(words) == words
            and (group // 8) % v == 0):
        return persist
    return None


def int4_scale_dtype(N, K, group=128, dtype="bfloat16", sms=132):
    """The dtype a model keeps an int4 weight's scales in for activations of `dtype` (a name):
    bfloat16 where its one-row decode plan is the persistent kernel (a scale a 4-word piece:
    2-byte scales save ~3% of the bytes at no math; 1B model, H100: 1.011x the int4 decode
    step), float32 otherwise and for fp32 models (the packed kernels convert a scale per
    word: all-bf16 scales made their layers 2% slower). linear_int4 takes either."""
    if str(dtype) in ("float32", "fp32") or group % 8:
        return "float32"
    cfg = gemv_config(1, N, K, "int4", sms=sms)
    return "bfloat16" if _persist_plan(cfg, 1, K, group) else "float32"


def quant_takes_gemv(M, K, group=None, gemv=None, wq=None):
    """Whether linear_int8 (group None) / linear_int4 (its group) run M rows of x on the
    CUDA-core plan (which can fuse swiglu); `wq` the quantized weight, if at hand."""
    return _takes_gemv(M, K, group, gemv, wq)


def quant_scratch_numel(M, N, K, group=None, cpu=False, sms=132, gemv=None):
    """fp32 elements of the `scratch` `linear_int8` (group None) or `linear_int4` (its group)
    splits K into for these sizes (0: none)."""
    if _takes_gemv(M, K, group, gemv):
        return 0
    _, _, splits, _ = _plan(M, N, K, cpu, sms, True, group)
    return splits * M * N if splits > 1 else 0


def _check_x_out(op, x, out, N, swiglu=False):
    M, K = check_array(op, "x", x, (None, None), FLOAT_DTYPES)
    check_array(op, "out", out, (M, swiglu_out_features(op, N, swiglu)), FLOAT_DTYPES)
    if out is x:
        raise ValueError(f"{op}: expected 'out' to be another array than 'x' (other programs "
                         f"still read it while it is written)")
    return M, K


#: KILN_MODELS_INT4_PACKED=0: the int4 CUDA-core plan keeps fp32 fields for 16-bit x too.
INT4_PACKED_ENV = "KILN_MODELS_INT4_PACKED"


def _packed_math(x, dev):
    """Whether int4's CUDA-core plan takes gemv_int4_packed_kernel: on the GPU, for bf16 or
    fp16 x read as 32-bit words (a 4-byte aligned address)."""
    return (dev != "cpu" and dtype_name(x) in ("bfloat16", "float16")
            and (_address(x) or 0) % 4 == 0
            and os.environ.get(INT4_PACKED_ENV, "1") != "0")


def _launch(op, kernel, x, out, scratch, args, M, N, K, group, stream, device, wq, gemv,
            swiglu=False, norm=None, eps=0.0, residual=False, invariant=False):
    dev = launch_device(device, x, wq, out)
    cpu = dev == "cpu"
    takes_gemv = _takes_gemv(M, K, group, gemv, wq)
    check_fused_plan(op, swiglu, norm, residual, takes_gemv)
    if takes_gemv:
        if M == 0 or N == 0:
            return out
        kind = "int8" if group is None else "int4"
        cfg = gemv_config(M, N, K, kind, cpu=cpu, invariant=invariant,
                          sms=132 if cpu else _sm_count(_device_index(x)))
        words = K // (4 if group is None else 8)
        extra = (K // group,) if group is not None else ()
        consts = dict(GROUP_WORDS=group // 8) if group is not None else {}
        consts["SWIGLU"] = bool(swiglu)
        g, eps, fused = fusion_consts(norm, eps, residual, x)
        consts.update(fused)
        # EVEN (whole steps) also needs a step of whole groups (int4) for its scale offsets.
        even = cfg["EVEN"] and (group is None or cfg["C"] % (group // 8) == 0)
        gk = gemv_int8_kernel if group is None else gemv_int4_kernel
        if group is not None and _packed_math(x, dev):
            gk = gemv_int4_packed_kernel
            consts["F16"] = dtype_name(x) == "float16"
            consts["TWO"] = even and words == 2 * cfg["C"] and two_step_prefetch()
        if cfg.get("maxnreg"):
            consts["maxnreg"] = cfg["maxnreg"]
        persist = _persist_plan(cfg, M, K, group)
        if gk is gemv_int4_packed_kernel and persist:
            for k in ("EVEN", "TWO"):
                consts.pop(k, None)
            pr, per_sm, depth, v, warps = persist
            tiles = kiln.cdiv(N, pr)
            each = kiln.cdiv(tiles, per_sm * (132 if cpu else _sm_count(_device_index(x))))
            gemv_int4_persist_kernel[(kiln.cdiv(tiles, each),)](
                x, *args, out, g, eps, M, N, K, words, *extra, BM=cfg["BM"], R=pr,
                C=words // v, V=v, DEPTH=depth, X16=consts["F16"], num_warps=warps, **consts,
                **launch_opts(dev, stream, pdl=True))
            return out
        wide = cfg.get("WIDE")  # (R, C) of gemv_int4_wide_kernel, or True: cfg's
        wr, wc = (cfg["R"], cfg["C"]) if wide is True else (wide or (0, 1))
        if (gk is gemv_int4_packed_kernel and wide and not residual
                and words % (4 * wc) == 0 and consts["GROUP_WORDS"] % 4 == 0):
            for k in ("EVEN", "TWO", "RESID"):
                consts.pop(k, None)
            gemv_int4_wide_kernel[(kiln.cdiv(N, wr) * kiln.cdiv(M, cfg["BM"]),)](
                x, *args, out, g, eps, M, N, K, words, *extra, BM=cfg["BM"], R=wr, C=wc,
                num_warps=cfg["num_warps"], **consts, **launch_opts(dev, stream, pdl=True))
            return out
        gk[(cfg["programs"],)](x, *args, out, g, eps, M, N, K, words, *extra, BM=cfg["BM"],
                               R=cfg["R"], C=cfg["C"], EVEN=even, num_warps=cfg["num_warps"],
                               **consts, **launch_opts(dev, stream, pdl=True))
        return out
    sms = 132 if cpu else _sm_count(_device_index(x))
    cfg, tiles, splits, k_split = _plan(M, N, K, cpu, sms, scratch is not None, group)
    if group is not None and group % cfg["BLOCK_K"]:
        raise ValueError(f"{op}: expected a group that is a multiple of {cfg['BLOCK_K']}, "
                         f"found {group}")
    if M == 0 or N == 0:
        return out
    split = splits > 1
    if split:
        check_array(op, "scratch", scratch, (None,), ("float32",))
        if scratch.shape[0] < splits * M * N:
            raise ValueError(f"{op}: expected 'scratch' of at least {splits * M * N} fp32 "
                             f"elements ({splits} K splits of [{M}, {N}]), found "
                             f"{scratch.shape[0]}")
    opts = launch_opts(dev, stream)
    kernel[(tiles, splits)](x, *args, out, scratch if split else out, M, N, K, k_split,
                            *([K // 2, k_split // 2, K // group, group] if group is not None
                              else []),
                            SPLIT=split, **cfg, **opts)
    if split:
        p2 = kiln.next_power_of_2(splits)
        block = max(32, 4096 // p2)
        splitk_reduce_kernel[(kiln.cdiv(M * N, block),)](scratch, out, M * N, splits,
                                                         SPLITS_P2=p2, BLOCK=block,
                                                         num_warps=4, **opts)
    return out


def linear_int8(x, q, scales, out, scratch=None, stream=None, device=None, gemv=None,
                swiglu=False, norm=None, eps=1e-6, residual=False):
    """out[M, N] = x[M, K] @ (q[N, K] * scales[N, None]).T (q int8, scales fp32). `gemv`: None
    (the plan by M), True (CUDA cores) or False (tensor cores). `swiglu`, `norm` (and `eps`)
    and `residual` as in `linear`."""
    op = "linear_int8"
    N, K = check_array(op, "q", q, (None, None), ("int8",))
    M, _ = _check_x_out(op, x, out, N, swiglu)
    check_array(op, "x", x, (M, K), FLOAT_DTYPES)
    check_array(op, "scales", scales, (N,), ("float32",))
    check_fusions(op, K, norm, eps, residual, swiglu)
    return _launch(op, linear_int8_kernel, x, out, scratch, (q, scales), M, N, K, None,
                   stream, device, q, gemv, swiglu, norm, eps, residual)


def linear_int4(x, packed, scales, out, group=128, scratch=None, stream=None, device=None,
                gemv=None, swiglu=False, norm=None, eps=1e-6, residual=False,
                invariant=False):
    """out[M, N] = x[M, K] @ dequantize_int4(packed, scales, group).T (packed uint8 [N, K/2],
    scales fp32 or bf16 [N, K / group]: bf16 scales, as GPTQ/AWQ checkpoints keep 16-bit
    ones, are 1/32 of a byte per weight instead of 1/16, about 3% of int4's bytes; the
    kernels scale in fp32 either way). `gemv` as in linear_int8 (the CUDA-core kernel needs
    a group that is a multiple of 8), `swiglu`, `norm` (and `eps`) and `residual` as in
    `linear`. invariant=True (with gemv=True): one row takes the plan of the row blocks of
    any batch (not the faster one-row kernels, which sum K in another order), so a row's
    result does not depend on M: batch-invariant serving."""
    op = "linear_int4"
    N, half = check_array(op, "packed", packed, (None, None), ("uint8",))
    K = 2 * half
    M, _ = _check_x_out(op, x, out, N, swiglu)
    check_array(op, "x", x, (M, K), FLOAT_DTYPES)
    if isinstance(group, bool) or not isinstance(group, int) or group <= 0 or K % group:
        raise ValueError(f"{op}: expected a group that divides K = {K}, found {group!r}")
    check_array(op, "scales", scales, (N, K // group), ("float32", "bfloat16"))
    check_fusions(op, K, norm, eps, residual, swiglu)
    return _launch(op, linear_int4_kernel, x, out, scratch, (packed, scales), M, N, K, group,
                   stream, device, packed, gemv, swiglu, norm, eps, residual, bool(invariant))
