"""Fused softmax and log-softmax along the last dimension.

Rows up to MAX_FUSED_SIZE elements are kept in one tile (one read, one write), one row per
program, or several short rows per program in one [ROWS, BLOCK] tile; longer rows use
the looped kernel: pass 1 computes the running max and the rescaled sum over column tiles
(online softmax), pass 2 reads the row again and writes the result. Math in fp32; input and
output fp32, fp16 or bf16.
"""
import kiln
import kiln.language as tl

from ._utils import as_2d, num_warps_for, row_block, torch


@kiln.jit
def softmax_fwd_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols,
                       BLOCK: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    e = tl.exp(z)
    s = tl.sum(e, axis=0)
    if LOG:
        y = z - tl.log(s)
    else:
        y = e / s
    tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@kiln.jit
def softmax_fwd_rows_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols,
                            ROWS: tl.constexpr, BLOCK: tl.constexpr, LOG: tl.constexpr):
    """ROWS short rows per program as one [ROWS, BLOCK] tile: more bytes in flight per program
    and fewer programs than one row each (see `rows_per_program`)."""
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(in_ptr + rows[:, None] * in_stride + cols[None, :], mask=mask,
                other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(z)
    s = tl.sum(e, axis=1)
    if LOG:
        y = z - tl.log(s)[:, None]
    else:
        y = e / s[:, None]
    tl.store(out_ptr + rows[:, None] * out_stride + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=mask)


@kiln.jit
def softmax_fwd_loop_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols,
                            BLOCK: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    in_row = in_ptr + row * in_stride
    out_row = out_ptr + row * out_stride
    m = -float("inf")
    s = 0.0
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(s)
    inv = 1.0 / s
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=0.0).to(tl.float32)
        if LOG:
            y = x - lse
        else:
            y = tl.exp(x - m) * inv
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@kiln.jit
def softmax_bwd_kernel(dx_ptr, dy_ptr, y_ptr, dx_stride, dy_stride, y_stride, n_cols,
                       BLOCK: tl.constexpr, LOG: tl.constexpr):
    """softmax: dx = y * (dy - sum(dy * y)); log-softmax: dx = dy - exp(y) * sum(dy)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + row * y_stride + cols, mask=mask, other=0.0).to(tl.float32)
    if LOG:
        dx = dy - tl.exp(y) * tl.sum(dy, axis=0)
    else:
        dx = y * (dy - tl.sum(dy * y, axis=0))
    tl.store(dx_ptr + row * dx_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@kiln.jit
def softmax_bwd_loop_kernel(dx_ptr, dy_ptr, y_ptr, dx_stride, dy_stride, y_stride, n_cols,
                            BLOCK: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    dy_row = dy_ptr + row * dy_stride
    y_row = y_ptr + row * y_stride
    dx_row = dx_ptr + row * dx_stride
    acc = 0.0
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        if LOG:
            acc += tl.sum(dy, axis=0)
        else:
            y = tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)
            acc += tl.sum(dy * y, axis=0)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)
        if LOG:
            dx = dy - tl.exp(y) * acc
        else:
            dx = y * (dy - acc)
        tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def rows_per_program(block, itemsize):
    """Rows per program of the forward kernel: enough that a program's tile is 4 KiB.
    On the H100 one 2 KiB bf16 row per program measured 2665 GB/s at 32768x1024 and two rows
    2720 (bench/bench_softmax_rows.py; bench/results/2026-11-22-h100-session6.md)."""
    return max(1, 4096 // (block * itemsize))


def softmax_forward(x, log=False, max_fused=None):
    """Kiln softmax (or log-softmax) of x along its last dimension; returns a new tensor."""
    x2 = as_2d(x)
    n_rows, n_cols = x2.shape
    out = torch.empty_like(x2)
    block, single = row_block(n_cols, *(() if max_fused is None else (max_fused,)))
    rows = rows_per_program(block, x2.element_size()) if single else 1
    if n_rows and rows > 1:
        softmax_fwd_rows_kernel[(kiln.cdiv(n_rows, rows),)](
            out, x2, x2.stride(0), out.stride(0), n_rows, n_cols, ROWS=rows, BLOCK=block,
            LOG=log, num_warps=num_warps_for(rows * block))
    elif n_rows:
        kernel = softmax_fwd_kernel if single else softmax_fwd_loop_kernel
        kernel[(n_rows,)](out, x2, x2.stride(0), out.stride(0), n_cols,
                          BLOCK=block, LOG=log, num_warps=num_warps_for(block))
    return out.view(x.shape)


def softmax_backward(dy, y, log=False, max_fused=None):
    dy2, y2 = as_2d(dy), as_2d(y)
    n_rows, n_cols = y2.shape
    dx = torch.empty_like(y2)
    block, single = row_block(n_cols, *(() if max_fused is None else (max_fused,)))
    kernel = softmax_bwd_kernel if single else softmax_bwd_loop_kernel
    if n_rows:
        kernel[(n_rows,)](dx, dy2, y2, dx.stride(0), dy2.stride(0), y2.stride(0), n_cols,
                          BLOCK=block, LOG=log, num_warps=num_warps_for(block))
    return dx.view(y.shape)


if torch is not None:
    class KilnSoftmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, log=False):
            y = softmax_forward(x, log)
            ctx.save_for_backward(y)
            ctx.log = log
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensors
            return softmax_backward(dy, y, ctx.log), None

    def softmax(x):
        return KilnSoftmax.apply(x, False)

    def log_softmax(x):
        return KilnSoftmax.apply(x, True)
