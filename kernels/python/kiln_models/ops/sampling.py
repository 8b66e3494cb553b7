"""Next-token selection on the device: greedy `argmax` and `sample` (temperature, top-k, top-p).

argmax: a program walks a range of a row in column tiles keeping a running maximum per lane; the
first index of the maximum wins (torch.argmax), and a NaN wins over every number (torch returns
the first NaN's index). Without `scratch` one program takes a whole row (a 128256-word bf16 row
is 256 KB on one SM: ~15 us on an H100). With `scratch` (`argmax_scratch_numel(B, V)` fp32)
the row is split into ranges of whole tiles over a (B, splits) grid, about 2 programs per SM
in all, each writing its (maximum, first index) -- (NaN, first NaN index) where it saw one --
and a second kernel combines each row's partials in one tile: the lowest index among NaN
partials, else among the partials equal to the maximum, so the first-index and NaN rules hold
across ranges. Predicted on an H100: 1 tile of 1024 values per program at B = 1, ~2 + ~1.5 us
of launch-bound kernels.

sample: one program per row, HF's warper order (temperature, then top-k, then top-p on the
top-k set's renormalized distribution), then one draw:
  1. lmax = max(logits); e = exp((l - lmax) / T) into the fp32 scratch row (e of the largest
     logit is exactly 1; NaN logits count as -inf, never drawn);
  2. top-k: the largest threshold t on e with #{e >= t} >= k, found by bisection on e's bits
     (non-negative floats order as their bits), each step one pass counting #{e >= mid} and
     snapping the interval to actual values (the smallest e >= mid, the largest e < mid), so
     it ends on an element's value; ties with the k-th value stay in (as HF's
     `scores < topk(...)[-1]` keeps them). The passes run over candidates only: the k-th
     largest of the per-lane maxima of step 1 (found in registers) bounds the k-th largest e
     from below, and the e at or above it (at most k lanes' worth) are first compacted to the
     front of the scratch row;
  3. top-p: the same bisection for the largest t with sum{e >= t} >= top_p * sum{e >= t_k}
     (the nucleus: HF keeps the smallest set of largest probabilities reaching top_p, ties at
     its edge included here), over the top-k candidates when top-k is on;
  4. u = Philox(seed; counter (step, key, 0, 0)) as a uniform in [0, 1), key the row's entry of
     `keys` (a request's own) or the row; the token is the first
     kept one whose running sum of e (in vocabulary order, e recomputed from the logits)
     exceeds u * sum{kept e}.
Deterministic for a given (seed, step, key); `step` may be an int or an int32 device array of
shape [1] read by the kernel (so that a captured CUDA graph draws new numbers when the
counter is advanced between replays).

Cost, in passes over a row of V values on one SM per row: 3 full passes (max, e, the draw)
and 1 over the candidates without top-k/top-p; with top-k one more full pass (the compaction)
and up to ~32 short ones over the candidates (k lanes' worth); top-p alone: up to ~33 full
passes over the fp32 e (L2-resident).
"""
import numpy as np

import kiln
import kiln.language as tl

from ._common import (FLOAT_DTYPES, check_array, check_float, check_positive_int, dtype_name,
                      launch_device, launch_opts)

__all__ = ["argmax", "argmax_scratch_numel", "argmax_plan", "sample"]

_ONE_KEY = tl.constexpr(0x3F800000)  # bits of 1.0f: e of the largest logit, the largest key of a row
_INT32_MAX = tl.constexpr(2147483647)


@kiln.jit
def _offsets(start, U: tl.constexpr, BLOCK: tl.constexpr):
    """The [U, BLOCK] tile of indices start + u * BLOCK + lane: U consecutive row pieces per
    loop step, so that each thread has U 16-byte loads in flight (a step waits for its loads;
    one piece per step left row passes bound by the memory latency)."""
    return start + tl.arange(0, U)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]


@kiln.jit
def _load_logits(base, start, V, U: tl.constexpr, BLOCK: tl.constexpr):
    c = _offsets(start, U, BLOCK)
    valid = c < V
    v = tl.load(base + c, mask=valid, other=float("-inf")).to(tl.float32)
    return v, c, valid


@kiln.jit
def _argmax_range(base, lo, hi, V, U: tl.constexpr, BLOCK: tl.constexpr):
    """Over the columns [lo, min(hi, V)) of a row (lo and hi multiples of U * BLOCK, or hi >=
    V): (the maximum, the first index of it, the first NaN's index or INT32_MAX)."""
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    best_i = lo + tl.arange(0, BLOCK)
    nan_i = tl.full([BLOCK], _INT32_MAX, tl.int32)
    for start in range(lo, hi, U * BLOCK):
        v, c, valid = _load_logits(base, start, V, U, BLOCK)
        nan_i = tl.minimum(nan_i, tl.min(tl.where(valid & (v != v), c, _INT32_MAX), axis=0))
        tmax = tl.max(v, axis=0)  # NaN-ignoring
        tidx = tl.min(tl.where(v == tmax[None, :], c, _INT32_MAX), axis=0)
        upd = tmax > best  # strict: a lane keeps its first maximum
        best = tl.where(upd, tmax, best)
        best_i = tl.where(upd, tidx, best_i)
    m = tl.max(best, axis=0)
    idx = tl.min(tl.where(best == m, best_i, _INT32_MAX), axis=0)
    return m, idx, tl.min(nan_i, axis=0)


@kiln.jit
def argmax_kernel(logits_ptr, out_ptr, V, U: tl.constexpr, BLOCK: tl.constexpr):
    """out[row] = the first index of the maximum of logits[row] (a NaN counts as largest)."""
    row = tl.program_id(0)
    m, idx, first_nan = _argmax_range(logits_ptr + row.to(tl.int64) * V, 0, V, V, U, BLOCK)
    tl.store(out_ptr + row, tl.where(first_nan < _INT32_MAX, first_nan, idx))


@kiln.jit
def argmax_partial_kernel(logits_ptr, part_ptr, V, CHUNK, U: tl.constexpr,
                          BLOCK: tl.constexpr):
    """Range pid1 ([pid1 * CHUNK, +CHUNK), CHUNK a multiple of U * BLOCK) of row pid0: its
    (maximum, first index), or (NaN, first NaN index), at part[row, split] (values) and
    part[B * SPLITS + row * SPLITS + split] (indices, int32 bits)."""
    row = tl.program_id(0)
    split = tl.program_id(1)
    lo = split * CHUNK
    tl.extra.cuda.gdc_wait()  # PDL (_common.PDL_ENV)
    tl.extra.cuda.gdc_launch_dependents()
    m, idx, first_nan = _argmax_range(logits_ptr + row.to(tl.int64) * V, lo, lo + CHUNK, V,
                                      U, BLOCK)
    has_nan = first_nan < _INT32_MAX
    slot = row * tl.num_programs(1) + split
    tl.store(part_ptr + slot, tl.where(has_nan, float("nan"), m))
    tl.store(part_ptr + tl.num_programs(0) * tl.num_programs(1) + slot,
             tl.where(has_nan, first_nan, idx).to(tl.float32, bitcast=True))


@kiln.jit
def argmax_combine_kernel(part_ptr, out_ptr, B, SPLITS, SPLITS_P2: tl.constexpr):
    """out[row] from the row's SPLITS partials (one tile): the lowest index of a NaN partial,
    else the lowest index among the partials equal to the maximum."""
    row = tl.program_id(0)
    s = tl.arange(0, SPLITS_P2)
    ok = s < SPLITS
    tl.extra.cuda.gdc_wait()  # PDL (_common.PDL_ENV)
    tl.extra.cuda.gdc_launch_dependents()
    vals = tl.load(part_ptr + row * SPLITS + s, mask=ok, other=float("-inf"))
    idx = tl.load(part_ptr + B * SPLITS + row * SPLITS + s, mask=ok,
                  other=0.0).to(tl.int32, bitcast=True)
    idx = tl.where(ok, idx, _INT32_MAX)
    first_nan = tl.min(tl.where(vals != vals, idx, _INT32_MAX), axis=0)
    m = tl.max(vals, axis=0)  # NaN-ignoring
    best = tl.min(tl.where(vals == m, idx, _INT32_MAX), axis=0)
    tl.store(out_ptr + row, tl.where(first_nan < _INT32_MAX, first_nan, best))


@kiln.jit
def _scan(p_row, n, t, U: tl.constexpr, BLOCK: tl.constexpr):
    """Over e >= 0 at p_row[0:n] and the threshold key t: (#{key >= t}, sum{e : key >= t},
    the smallest key >= t, the largest key < t (or -1))."""
    cnt = tl.zeros([BLOCK], dtype=tl.int32)
    mass = tl.zeros([BLOCK], dtype=tl.float32)
    amin = tl.full([BLOCK], _INT32_MAX, tl.int32)
    bmax = tl.full([BLOCK], -1, tl.int32)
    for start in range(0, n, U * BLOCK):
        c = _offsets(start, U, BLOCK)
        valid = c < n
        e = tl.load(p_row + c, mask=valid, other=0.0)
        key = e.to(tl.int32, bitcast=True)
        ge = valid & (key >= t)
        cnt += tl.sum(ge.to(tl.int32), axis=0)
        mass += tl.sum(tl.where(ge, e, 0.0), axis=0)
        amin = tl.minimum(amin, tl.min(tl.where(ge, key, _INT32_MAX), axis=0))
        bmax = tl.maximum(bmax, tl.max(tl.where(valid & (key < t), key, -1), axis=0))
    return (tl.sum(cnt, axis=0), tl.sum(mass, axis=0), tl.min(amin, axis=0),
            tl.max(bmax, axis=0))


@kiln.jit
def _prob(v, valid, lmax, inv_t):
    """e = exp((v - lmax) / T) for the numbers of a tile, 0 for NaN, -inf and masked lanes
    (one helper so that every pass computes the same bits)."""
    finite = valid & (v == v) & (v > float("-inf"))
    return tl.where(finite, tl.exp((v - lmax) * inv_t), 0.0)


@kiln.jit
def _largest_key(keys, vals, need, BY_MASS: tl.constexpr):
    """Over a tile of non-negative keys (the bits of vals >= 0): the largest t with
    #{keys >= t} >= need (BY_MASS False) or sum{vals : keys >= t} >= need (BY_MASS True); 0
    when no t > 0 qualifies. Bisection in registers."""
    lo = 0
    hi = _ONE_KEY
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        ge = keys >= mid
        if BY_MASS:
            ok = tl.sum(tl.where(ge, vals, 0.0), axis=0) >= need
        else:
            ok = tl.sum(ge.to(tl.int32), axis=0) >= need
        if ok:
            lo = tl.min(tl.where(ge, keys, _INT32_MAX), axis=0)
        else:
            hi = tl.maximum(tl.max(tl.where(ge, -1, keys), axis=0), lo)
    return lo


@kiln.jit
def _exclusive_row_offsets(x):
    """For a [U, BLOCK] tile: the sum of the rows before each row ([U, 1]), so that
    cumsum(x, 1) + that is the running sum in row-major (vocabulary) order."""
    rs = tl.sum(x, axis=1)
    return (tl.cumsum(rs, 0) - rs)[:, None]


@kiln.jit
def sample_kernel(logits_ptr, out_ptr, p_ptr, step_ptr, keys_ptr, V, inv_t, top_k, top_p,
                  seed, step, U: tl.constexpr, BLOCK: tl.constexpr, TOP_K: tl.constexpr,
                  TOP_P: tl.constexpr, STEP_IN_MEMORY: tl.constexpr, KEYS: tl.constexpr):
    row = tl.program_id(0)
    base = logits_ptr + row.to(tl.int64) * V
    p_row = p_ptr + row.to(tl.int64) * V
    # 1. e = exp((l - max) / T) into the scratch row; each lane's largest e and their sum.
    mx = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, V, U * BLOCK):
        v, c, valid = _load_logits(base, start, V, U, BLOCK)
        mx = tl.maximum(mx, tl.max(tl.where(v != v, float("-inf"), v), axis=0))
    lmax = tl.max(mx, axis=0)
    lmax = tl.where(lmax == float("-inf"), 0.0, lmax)  # a row of no numbers: every e is 0
    lane_max = tl.zeros([BLOCK], dtype=tl.float32)
    lane_sum = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, V, U * BLOCK):
        v, c, valid = _load_logits(base, start, V, U, BLOCK)
        e = _prob(v, valid, lmax, inv_t)
        lane_max = tl.maximum(lane_max, tl.max(e, axis=0))
        lane_sum += tl.sum(e, axis=0)
        tl.store(p_row + c, e, mask=valid)
    z_all = tl.sum(lane_sum, axis=0)
    tl.debug_barrier()  # the row's e, stored by some threads, is read by others
    n = V  # the searched values: p_row[0:n]
    t = 0
    if TOP_K or TOP_P:
        # 2. Candidates. Each lane's maximum is a distinct element, so the k-th largest lane
        # maximum is at most the k-th largest e (top-k), and a lane maximum L whose lanes at
        # or above it already hold top_p of the mass is at most the nucleus threshold
        # (top-p alone). Only e >= that bound can be kept: they are compacted to the front
        # of the row, in place (an element moves to a position at or before its own, in a
        # tile every thread has read), and the bisections run over them.
        lane_keys = lane_max.to(tl.int32, bitcast=True)
        if TOP_K:
            bound = _largest_key(lane_keys, lane_max, top_k, False)
        else:
            bound = _largest_key(lane_keys, lane_max, top_p * z_all, True)
        if bound > 0:  # (0: every e stays, the row as it is)
            n = 0
            for start in range(0, V, U * BLOCK):
                c = _offsets(start, U, BLOCK)
                valid = c < V
                e = tl.load(p_row + c, mask=valid, other=0.0)
                keep = (valid & (e.to(tl.int32, bitcast=True) >= bound)).to(tl.int32)
                pos = n + tl.cumsum(keep, 1) + _exclusive_row_offsets(keep) - 1
                tl.debug_barrier()
                tl.store(p_row + pos, e, mask=keep != 0)
                n += tl.sum(tl.sum(keep, axis=1), axis=0)
            tl.debug_barrier()
        t = bound
    # 3. top-k: the largest key t with #{key >= t} >= top_k.
    if TOP_K:
        lo = t
        hi = _ONE_KEY
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            cnt, s, amin, bmax = _scan(p_row, n, mid, U, BLOCK)
            if cnt >= top_k:
                lo = amin
                if cnt == top_k:
                    hi = amin
            else:
                hi = tl.maximum(bmax, lo)
        t = lo
    # 4. top-p: the largest key t with sum{e >= t} >= top_p * sum{e >= t_k}.
    if TOP_P:
        if TOP_K:
            cnt, zk, amin, bmax = _scan(p_row, n, t, U, BLOCK)
        else:
            zk = z_all
        target = top_p * zk
        lo = t
        hi = _ONE_KEY
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            cnt, s, amin, bmax = _scan(p_row, n, mid, U, BLOCK)
            if s >= target:
                lo = amin
            else:
                hi = tl.maximum(bmax, lo)
        t = lo
    # 5. One draw from the kept set: the inverse of its cumulative sum in vocabulary order
    # (e recomputed from the logits: the scratch row may hold the compacted candidates).
    if STEP_IN_MEMORY:
        stp = tl.load(step_ptr)
    else:
        stp = step
    ctr = stp.to(tl.uint32)
    key = row
    if KEYS:  # the row's draw key (a request's own, whatever its row)
        key = tl.load(keys_ptr + row)
    r0, r1, r2, r3 = tl.philox(seed, ctr, key.to(tl.uint32), ctr * 0, ctr * 0)
    u = tl.uint_to_uniform_float(r0)
    cnt, z, amin, bmax = _scan(p_row, n, t, U, BLOCK)
    target = u * z
    run = 0.0
    res = -1
    last = 0
    for start in range(0, V, U * BLOCK):
        v, c, valid = _load_logits(base, start, V, U, BLOCK)
        e = _prob(v, valid, lmax, inv_t)
        keep = (e.to(tl.int32, bitcast=True) >= t) & (e > 0.0)
        ek = tl.where(keep, e, 0.0)
        cs = run + tl.cumsum(ek, 1) + _exclusive_row_offsets(ek)
        first = tl.min(tl.min(tl.where(keep & (cs > target), c, _INT32_MAX), axis=1), axis=0)
        res = tl.where((res < 0) & (first < _INT32_MAX), first, res)
        last = tl.maximum(last, tl.max(tl.max(tl.where(keep, c, 0), axis=1), axis=0))
        run += tl.sum(tl.sum(ek, axis=1), axis=0)
    tl.store(out_ptr + row, tl.where(res < 0, last, res))


def _numel(a):
    return int(np.prod([int(s) for s in a.shape]))


def _tiles(dev):
    """(U, BLOCK, num_warps): U pieces of BLOCK lanes per loop step."""
    return (2, 128, 4) if dev == "cpu" else (4, 4096, 16)


def argmax_plan(B, V, cpu=False, sms=132):
    """The split argmax's plan: (U, BLOCK, num_warps, splits, chunk): `splits` ranges of
    `chunk` columns (whole U x BLOCK tiles) per row, about 2 programs per SM in all."""
    if cpu:
        unroll, block, warps, target = 2, 128, 4, 8
    else:  # one 16-byte load of 16-bit logits per thread and tile
        unroll, block, warps, target = 1, 1024, 4, 2 * sms
    step = unroll * block
    tiles = kiln.cdiv(V, step)
    per_row = max(1, min(tiles, 256, kiln.cdiv(target, max(B, 1))))
    chunk = kiln.cdiv(tiles, per_row) * step
    return unroll, block, warps, kiln.cdiv(V, chunk), chunk


def argmax_scratch_numel(B, V, cpu=False, sms=132):
    """fp32 elements of the `scratch` that `argmax` splits rows with (2 per range)."""
    return 2 * B * argmax_plan(B, V, cpu, sms)[3]


def argmax(logits, out, scratch=None, stream=None, device=None):
    """out[B] (int32) = argmax of each row of logits[B, V]: the first index of the maximum, a
    NaN counting as the largest (torch.argmax). `scratch`: an fp32 array of at least
    `argmax_scratch_numel(B, V)` elements to split the rows over the SMs (optional: without
    it, one program per row)."""
    B, V = check_array("argmax", "logits", logits, (None, None), FLOAT_DTYPES)
    check_array("argmax", "out", out, (B,), ("int32",))
    if V == 0:
        raise ValueError(f"argmax: expected a vocabulary V > 0, found logits of shape [{B}, 0]")
    dev = launch_device(device, logits, out)
    opts = launch_opts(dev, stream)
    if not B:
        return out
    if scratch is None:
        unroll, block, warps = _tiles(dev)
        argmax_kernel[(B,)](logits, out, V, U=unroll, BLOCK=block, num_warps=warps, **opts)
        return out
    from .linear import _device_index, _sm_count
    cpu = dev == "cpu"
    sms = 132 if cpu else _sm_count(_device_index(logits))
    unroll, block, warps, splits, chunk = argmax_plan(B, V, cpu, sms)
    if dtype_name(scratch) != "float32" or _numel(scratch) < 2 * B * splits:
        raise ValueError(f"argmax: expected 'scratch' of dtype float32 with at least "
                         f"{2 * B * splits} elements ({splits} ranges per row), found "
                         f"{dtype_name(scratch)} of shape {list(scratch.shape)}")
    opts = launch_opts(dev, stream, pdl=True)  # both kernels wait with gdc_wait
    argmax_partial_kernel[(B, splits)](logits, scratch, V, chunk, U=unroll, BLOCK=block,
                                       num_warps=warps, **opts)
    argmax_combine_kernel[(B,)](scratch, out, B, splits,
                                SPLITS_P2=kiln.next_power_of_2(splits), num_warps=1, **opts)
    return out


def sample(logits, out, temperature, top_k, top_p, seed, step, scratch=None, stream=None,
           device=None, keys=None):
    """out[B] (int32) = one token per row of logits[B, V], drawn from softmax(logits / T)
    restricted to the top_k largest (0: off) and then to the top_p nucleus (1.0: off).
    temperature 0 is greedy (`argmax`). Deterministic for (seed, step, key), the key of row b
    keys[b] (an int32 array of B, read on the device) or b. `step`: an int, or an int32 array
    of shape [1] read on the device. `scratch`: an fp32 array of at least B * V elements (the
    probabilities; required unless temperature is 0)."""
    op = "sample"
    B, V = check_array(op, "logits", logits, (None, None), FLOAT_DTYPES)
    check_array(op, "out", out, (B,), ("int32",))
    if V == 0:
        raise ValueError(f"{op}: expected a vocabulary V > 0, found logits of shape [{B}, 0]")
    temperature = check_float(op, "temperature", temperature, lo=0.0)
    top_k = check_positive_int(op, "top_k", top_k)
    top_p = check_float(op, "top_p", top_p, lo=0.0, hi=1.0, lo_open=True)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or \
            not -2**63 <= seed < 2**63:
        raise ValueError(f"{op}: expected 'seed' to be a 64-bit int, found {seed!r}")
    step_in_memory = hasattr(step, "shape")
    if step_in_memory:
        check_array(op, "step", step, (1,), ("int32",))
    elif isinstance(step, bool) or not isinstance(step, (int, np.integer)) or \
            not 0 <= step < 2**32:
        raise ValueError(f"{op}: expected 'step' to be an int in [0, 2^32) or an int32 array of "
                         f"shape [1], found {step!r}")
    if keys is not None:
        check_array(op, "keys", keys, (B,), ("int32",))
    if temperature == 0.0:  # (the scratch of B * V holds the split argmax's 2 * B * splits)
        ok = scratch is not None and dtype_name(scratch) == "float32" and \
            _numel(scratch) >= argmax_scratch_numel(B, V, launch_device(device, logits) == "cpu")
        return argmax(logits, out, scratch=scratch if ok else None, stream=stream,
                      device=device)
    if scratch is None:
        raise ValueError(f"{op}: expected 'scratch', an fp32 array of at least B * V = {B * V} "
                         f"elements (the probabilities of the rows)")
    if dtype_name(scratch) != "float32" or _numel(scratch) < B * V:
        raise ValueError(f"{op}: expected 'scratch' of dtype float32 with at least B * V = "
                         f"{B * V} elements, found {dtype_name(scratch)} of shape "
                         f"{list(scratch.shape)}")
    dev = launch_device(device, logits, out, scratch)
    unroll, block, warps = _tiles(dev)
    if B:
        use_k = 0 < top_k < V
        use_p = top_p < 1.0
        sample_kernel[(B,)](logits, out, scratch, step if step_in_memory else out,
                            out if keys is None else keys, V, 1.0 / temperature,
                            top_k if use_k else 0, top_p, int(seed),
                            0 if step_in_memory else int(step), U=unroll, BLOCK=block,
                            TOP_K=use_k, TOP_P=use_p, STEP_IN_MEMORY=step_in_memory,
                            KEYS=keys is not None, num_warps=warps,
                            **launch_opts(dev, stream))
    return out
