"""Row-wise copies and the SwiGLU activation of the model's hot path:

- `embedding(ids, table, out)`: out[t] = table[ids[t]];
- `gather_rows(x, rows, out)`: out[b] = x[rows[b]] (the last position of each sequence, for the
  LM head);
- `silu_mul(gate_up, out)`: out = silu(gate) * up with gate_up = [gate | up] along the last
  dimension (the model fuses gate_proj and up_proj into one [2I, H] weight). As torch in the
  activation dtype: silu rounded to that dtype, then the product rounded again.

A program per (row, BLOCK columns). An index outside the table (or x) gives a row of zeros: the
kernels never read outside their arrays, and a host check would need a device sync.
"""
import kiln
import kiln.language as tl

from ._common import (FLOAT_DTYPES, check_array, check_same_dtype, launch_device, launch_opts,
                      next_power_of_2)

__all__ = ["embedding", "gather_rows", "silu_mul"]

BLOCK_GPU = 1024
BLOCK_CPU = 128


@kiln.jit
def gather_rows_kernel(idx_ptr, src_ptr, out_ptr, n_src, H, BLOCK: tl.constexpr):
    """out[pid0, cols] = src[idx[pid0], cols], zeros where idx is outside [0, n_src)."""
    t = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    cmask = cols < H
    tl.extra.cuda.gdc_wait()  # PDL (_common.PDL_ENV): idx and src may come from before
    tl.extra.cuda.gdc_launch_dependents()
    i = tl.load(idx_ptr + t)
    ok = (i >= 0) & (i < n_src)
    src = src_ptr + tl.where(ok, i, 0).to(tl.int64) * H
    v = tl.load(src + cols, mask=cmask & ok, other=0.0)
    tl.store(out_ptr + t.to(tl.int64) * H + cols, v.to(out_ptr.dtype.element_ty), mask=cmask)


@kiln.jit
def silu_mul_kernel(gu_ptr, out_ptr, inter, BLOCK: tl.constexpr):
    """out[row, c] = silu(gu[row, c]) * gu[row, inter + c]."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    g_row = gu_ptr + row * (2 * inter)
    tl.extra.cuda.gdc_wait()  # PDL (_common.PDL_ENV)
    tl.extra.cuda.gdc_launch_dependents()
    g = tl.load(g_row + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(g_row + inter + cols, mask=mask, other=0.0).to(tl.float32)
    s = (g * tl.sigmoid(g)).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * inter + cols, (s * u).to(out_ptr.dtype.element_ty), mask=mask)


def _block(n, dev):
    return min(next_power_of_2(n), BLOCK_CPU if dev == "cpu" else BLOCK_GPU)


def _gather(op, idx_name, idx, src_name, src, out, stream, device):
    (B,) = check_array(op, idx_name, idx, (None,), ("int32",))
    n_src, H = check_array(op, src_name, src, (None, None), FLOAT_DTYPES)
    check_array(op, "out", out, (B, H), FLOAT_DTYPES)
    dev = launch_device(device, idx, src, out)
    if B and H:
        block = _block(H, dev)
        gather_rows_kernel[(B, kiln.cdiv(H, block))](idx, src, out, n_src, H, BLOCK=block,
                                                     num_warps=4,
                                                     **launch_opts(dev, stream, pdl=True))
    return out


def embedding(ids, table, out, stream=None, device=None):
    """out[T, H] = table[ids[T]] (int32 ids; an id outside [0, V) gives a zero row); the
    table's dtype is converted to out's."""
    return _gather("embedding", "ids", ids, "table", table, out, stream, device)


def gather_rows(x, rows, out, stream=None, device=None):
    """out[B, H] = x[rows[B]] (int32 rows; a row outside [0, T) gives a zero row)."""
    return _gather("gather_rows", "rows", rows, "x", x, out, stream, device)


def silu_mul(gate_up, out, stream=None, device=None):
    """out[T, I] = silu(gate_up[:, :I]) * gate_up[:, I:] for gate_up [T, 2I] (one dtype)."""
    T, two_i = check_array("silu_mul", "gate_up", gate_up, (None, None), FLOAT_DTYPES)
    if two_i % 2:
        raise ValueError(f"silu_mul: expected 'gate_up' of shape [T, 2I] (an even last "
                         f"dimension), found [{T}, {two_i}]")
    inter = two_i // 2
    check_array("silu_mul", "out", out, (T, inter), FLOAT_DTYPES)
    check_same_dtype("silu_mul", {"gate_up": gate_up, "out": out})
    dev = launch_device(device, gate_up, out)
    if T and inter:
        block = _block(inter, dev)
        silu_mul_kernel[(T, kiln.cdiv(inter, block))](gate_up, out, inter, BLOCK=block,
                                                      num_warps=4,
                                                     **launch_opts(dev, stream, pdl=True))
    return out
