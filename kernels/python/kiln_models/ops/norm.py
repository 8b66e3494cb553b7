"""RMSNorm and fused residual-add + RMSNorm with HuggingFace LlamaRMSNorm numerics:

    variance = mean(h.float()^2);  y = w * (h.float() * rsqrt(variance + eps)).to(act_dtype)

(the normalized value rounded to the activation dtype, then multiplied by w, rounded again).
`add_rmsnorm` first updates the residual stream in place as HF's `residual + hidden` does in
the activation dtype: residual = (residual + x).to(act_dtype), then normalizes it.

One program per row. A row of up to MAX_TILE elements is one tile held in registers; longer rows
take two passes over column tiles (sum of squares, then the scaled store).
"""
import kiln
import kiln.language as tl

from ._common import (FLOAT_DTYPES, check_array, check_float, check_same_dtype, launch_device,
                      launch_opts, next_power_of_2)

__all__ = ["rmsnorm", "add_rmsnorm"]

MAX_TILE = 8192  # GPU: longest row in one tile
MAX_TILE_CPU = 256  # CPU backend: host compile time grows fast with the tile


@kiln.jit
def _load_h(x_row, r_row, cols, mask, ADD: tl.constexpr):
    """The row's fp32 values: x, or (residual + x) rounded to the activation dtype and stored
    back into the residual."""
    h = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
    if ADD:
        r = tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
        s = (h + r).to(r_row.dtype.element_ty)
        tl.store(r_row + cols, s, mask=mask)
        h = s.to(tl.float32)
    return h


@kiln.jit
def rmsnorm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, H, eps, ADD: tl.constexpr,
                   BLOCK: tl.constexpr, ONE_TILE: tl.constexpr):
    """out[row] = rmsnorm(h) * w with h = x[row] (ADD False) or residual[row] += x[row]."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * H
    r_row = res_ptr + row * H
    o_row = out_ptr + row * H
    cols = tl.arange(0, BLOCK)
    if ONE_TILE:
        mask = cols < H
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.extra.cuda.gdc_wait()  # PDL (_common.PDL_ENV): x and the residual come from before
        tl.extra.cuda.gdc_launch_dependents()
        h = _load_h(x_row, r_row, cols, mask, ADD)
        rstd = tl.rsqrt(tl.sum(h * h, axis=0) / H + eps)
        y = (h * rstd).to(res_ptr.dtype.element_ty).to(tl.float32) * w
        tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, H, BLOCK):
            c = start + cols
            h = _load_h(x_row, r_row, c, c < H, ADD)
            acc += h * h
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / H + eps)
        # Second pass: the (updated) residual, or x itself.
        src = r_row if ADD else x_row
        for start in range(0, H, BLOCK):
            c = start + cols
            mask = c < H
            h = tl.load(src + c, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
            y = (h * rstd).to(res_ptr.dtype.element_ty).to(tl.float32) * w
            tl.store(o_row + c, y.to(out_ptr.dtype.element_ty), mask=mask)


def _config(H, dev):
    cap = 256 if dev == "cpu" else MAX_TILE
    block = min(next_power_of_2(H), cap)
    warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, block >= H, warps


def _launch(op, x, residual, w, out, eps, stream, device):
    T, H = check_array(op, "x", x, (None, None), FLOAT_DTYPES)
    arrays = {"x": x, "out": out}
    if residual is not None:
        check_array(op, "residual", residual, (T, H), FLOAT_DTYPES)
        arrays["residual"] = residual
    check_array(op, "w", w, (H,), FLOAT_DTYPES)
    check_array(op, "out", out, (T, H), FLOAT_DTYPES)
    check_same_dtype(op, arrays)
    eps = check_float(op, "eps", eps, lo=0.0)
    if H == 0:
        raise ValueError(f"{op}: expected a hidden size H > 0, found x of shape [{T}, 0]")
    dev = launch_device(device, x, w, out)
    block, one_tile, warps = _config(H, dev)
    if T:
        add = residual is not None
        rmsnorm_kernel[(T,)](x, residual if add else x, w, out, H, eps, ADD=add, BLOCK=block,
                             ONE_TILE=one_tile, num_warps=warps,
                             **launch_opts(dev, stream, pdl=True))
    return out


def rmsnorm(x, w, out, eps, stream=None, device=None):
    """out[T, H] = RMSNorm(x[T, H]) * w[H] (HF LlamaRMSNorm numerics); x, out one activation
    dtype (fp32, bf16, fp16), w any of those. `out` may be `x`."""
    return _launch("rmsnorm", x, None, w, out, eps, stream, device)


def add_rmsnorm(x, residual, w, out, eps, stream=None, device=None):
    """residual[T, H] += x (in place, rounded to the activation dtype as HF's residual add),
    then out = RMSNorm(residual) * w. `out` may be `x` (not `residual`)."""
    if out is residual:
        raise ValueError("add_rmsnorm: expected 'out' to be another array than 'residual' "
                         "(the residual stream keeps the sum)")
    return _launch("add_rmsnorm", x, residual, w, out, eps, stream, device)
