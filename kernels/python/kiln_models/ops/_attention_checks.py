"""The argument checks of attention.py's ops: shapes, dtypes, layouts and (for numpy inputs,
where reading them costs nothing) index values, each a ValueError naming the op and the
argument."""
import math

import numpy as np

MAX_SPLITS = 64            # the combine reads the log-sum-exps of a row's splits as one tile
HEAD_DIMS = (16, 32, 64, 128, 256)


def _dtype(a):
    """The numpy-style name of an array's dtype: numpy (ml_dtypes' bfloat16 too),
    kiln.DeviceArray, torch."""
    dt = getattr(a, "dtype", None)
    name = dt if isinstance(dt, str) else getattr(dt, "name", None)
    if name is None:
        name = str(dt)
    return str(name).replace("torch.", "")


def _shape(a):
    return tuple(int(x) for x in a.shape)


def _contiguous(a):
    flags = getattr(a, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    if callable(getattr(a, "is_contiguous", None)):
        return bool(a.is_contiguous())
    return True  # kiln.DeviceArray: always contiguous


def _host(a):
    """a as a numpy array when it is one (its values are free to read), else None."""
    return a if isinstance(a, np.ndarray) else None


ACT_DTYPES = ("float32", "bfloat16", "float16")


def _check_array(op, name, a, shape=None, dtype=None):
    if a is None or not hasattr(a, "shape"):
        raise ValueError(f"{op}: expected an array for {name}, found {type(a).__name__}")
    if shape is not None and _shape(a) != tuple(shape):
        raise ValueError(f"{op}: expected {name} of shape {tuple(shape)}, found {_shape(a)}")
    if dtype is not None and _dtype(a) not in ((dtype,) if isinstance(dtype, str) else dtype):
        raise ValueError(f"{op}: expected {name} of dtype {dtype}, found {_dtype(a)}")
    if not _contiguous(a):
        raise ValueError(f"{op}: expected {name} to be contiguous (row-major)")


def _check_heads(op, n_heads, n_kv_heads, head_dim):
    for name, v in (("n_heads", n_heads), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{op}: expected a positive int {name}, found {v!r}")
    if n_heads % n_kv_heads:
        raise ValueError(f"{op}: expected n_heads ({n_heads}) to be a multiple of n_kv_heads "
                         f"({n_kv_heads})")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"{op}: expected head_dim of 16, 32, 64, 128 or 256, found "
                         f"{head_dim}")
    return int(n_heads), int(n_kv_heads), int(head_dim)


def _check_qkv(op, qkv, rows, n_heads, n_kv_heads, head_dim):
    """qkv [rows, (Hq + 2 Hkv) D] of an activation dtype; rows None: any. Its dtype."""
    width = (n_heads + 2 * n_kv_heads) * head_dim
    _check_array(op, "qkv", qkv, dtype=ACT_DTYPES)
    if len(qkv.shape) != 2 or qkv.shape[1] != width or (rows is not None
                                                        and qkv.shape[0] != rows):
        want = f"({'T' if rows is None else rows}, {width})"
        raise ValueError(f"{op}: expected qkv of shape {want} ((n_heads + 2 * n_kv_heads) * "
                         f"head_dim columns), found {_shape(qkv)}")
    return _dtype(qkv)


def _check_cache(op, k_cache, v_cache, n_kv_heads, head_dim, dtype):
    """k_cache, v_cache [num_blocks, block_size, Hkv, D] of qkv's dtype; (num_blocks,
    block_size)."""
    for name, c in (("k_cache", k_cache), ("v_cache", v_cache)):
        _check_array(op, name, c, dtype=dtype)
        s = _shape(c)
        if len(s) != 4 or s[2:] != (n_kv_heads, head_dim) or s[0] < 1:
            raise ValueError(f"{op}: expected {name} of shape (num_blocks, block_size, "
                             f"{n_kv_heads}, {head_dim}), found {s}")
        if s[1] < 1 or s[1] & (s[1] - 1):
            raise ValueError(f"{op}: expected a power-of-two block_size (dimension 1 of "
                             f"{name}), found {s[1]}")
    if _shape(k_cache) != _shape(v_cache):
        raise ValueError(f"{op}: expected k_cache and v_cache of one shape, found "
                         f"{_shape(k_cache)} and {_shape(v_cache)}")
    return _shape(k_cache)[:2]


def _check_scale(op, sm_scale):
    if not isinstance(sm_scale, (int, float, np.floating)) or not (
            math.isfinite(sm_scale) and sm_scale > 0):
        raise ValueError(f"{op}: expected a positive, finite sm_scale, found {sm_scale!r}")
    return float(sm_scale)


def _check_tables(op, block_tables, context_lens, batch, num_blocks, block_size, at_least):
    """block_tables [B, max_blocks] and context_lens [B], int32; for numpy inputs also their
    values: at_least[b] <= context_lens[b] <= max_blocks * block_size and the blocks used in
    [0, num_blocks). The table's width."""
    _check_array(op, "context_lens", context_lens, shape=(batch,), dtype="int32")
    _check_array(op, "block_tables", block_tables, dtype="int32")
    if len(block_tables.shape) != 2 or block_tables.shape[0] != batch or \
            block_tables.shape[1] < 1:
        raise ValueError(f"{op}: expected block_tables of shape ({batch}, max_blocks), found "
                         f"{_shape(block_tables)}")
    max_blocks = int(block_tables.shape[1])
    ctx, bt = _host(context_lens), _host(block_tables)
    if ctx is not None:
        low = np.zeros(batch, np.int64) if at_least is None else at_least
        bad = np.nonzero((ctx < low) | (ctx > max_blocks * block_size))[0]
        if bad.size:
            b = int(bad[0])
            raise ValueError(f"{op}: context_lens[{b}] = {int(ctx[b])} is outside "
                             f"[{int(low[b])}, {max_blocks * block_size}] (new tokens, "
                             f"max_blocks * block_size)")
        if bt is not None:
            used = np.arange(max_blocks)[None, :] < (-(-ctx // block_size))[:, None]
            bad = np.argwhere(used & ((bt < 0) | (bt >= num_blocks)))
            if bad.size:
                b, j = (int(x) for x in bad[0])
                raise ValueError(f"{op}: block_tables[{b}, {j}] = {int(bt[b, j])} is not a "
                                 f"cache block (num_blocks {num_blocks})")
    return max_blocks


def _check_rope(op, T, positions, cos, sin, slot_mapping, head_dim, n_slots):
    """positions and slot_mapping [T] int32, cos and sin [P, D/2] fp32; for numpy inputs the
    positions index the table and the slots lie below n_slots. (P, n_slots)."""
    _check_array(op, "positions", positions, shape=(T,), dtype="int32")
    _check_array(op, "slot_mapping", slot_mapping, shape=(T,), dtype="int32")
    for name, t in (("cos", cos), ("sin", sin)):
        _check_array(op, name, t, dtype="float32")
        if len(t.shape) != 2 or t.shape[1] != head_dim // 2 or t.shape[0] < 1:
            raise ValueError(f"{op}: expected {name} of shape (P, {head_dim // 2}) "
                             f"(head_dim / 2 frequencies), found {_shape(t)}")
    if _shape(cos) != _shape(sin):
        raise ValueError(f"{op}: expected cos and sin of one shape, found {_shape(cos)} and "
                         f"{_shape(sin)}")
    n_pos = int(cos.shape[0])
    pos, slots = _host(positions), _host(slot_mapping)
    if pos is not None and T and (pos.min() < 0 or pos.max() >= n_pos):
        t = int(np.nonzero((pos < 0) | (pos >= n_pos))[0][0])
        raise ValueError(f"{op}: positions[{t}] = {int(pos[t])} is outside the cos/sin table "
                         f"(P = {n_pos})")
    if slots is not None and T and slots.max() >= n_slots:
        t = int(np.argmax(slots))
        raise ValueError(f"{op}: slot_mapping[{t}] = {int(slots[t])} is past the cache's "
                         f"{n_slots} slots (num_blocks * block_size)")
    return n_pos, n_slots


def _is_cpu(arrays, device):
    return device == "cpu" or (device is None and isinstance(arrays, np.ndarray))


def _check_scratch(op, scratch, B, n_heads, n_kv_heads, head_dim):
    """(partial_out, partial_lse, counters or None, splits they hold)."""
    if not isinstance(scratch, (tuple, list)) or len(scratch) not in (2, 3):
        raise ValueError(f"{op}: expected scratch = (partial_out, partial_lse[, counters]) "
                         f"(shapes from decode_attention_scratch), found "
                         f"{type(scratch).__name__}")
    part_out, part_lse = scratch[:2]
    counters = scratch[2] if len(scratch) == 3 else None
    _check_array(op, "scratch's partial_lse", part_lse, dtype="float32")
    s = _shape(part_lse)
    if len(s) != 3 or s[0] < B or s[1] != n_heads or s[2] < 1:
        raise ValueError(f"{op}: expected scratch's partial_lse of shape (>= {B}, "
                         f"{n_heads}, num_splits), found {s}")
    if s[2] > MAX_SPLITS:  # the combine holds every split's log-sum-exp in one tile
        raise ValueError(f"{op}: expected at most {MAX_SPLITS} splits in scratch, found "
                         f"{s[2]}")
    _check_array(op, "scratch's partial_out", part_out, dtype="float32",
                 shape=(s[0], n_heads, s[2], head_dim))
    if counters is not None:
        _check_array(op, "scratch's counters", counters, dtype="int32",
                     shape=(s[0], n_kv_heads))
    return part_out, part_lse, counters, s[2]
