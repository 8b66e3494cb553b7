"""LayerNorm: y = (x - mean) * rstd * w + b, fp32 math; mean and rstd saved per row.

Backward: programs walk blocks of rows, write dx, and store per-program partial rows of dw and
db, summed by torch.
"""
import kiln
import kiln.language as tl

from ._utils import as_2d, next_power_of_2, num_warps_for, torch


@kiln.jit
def layernorm_fwd_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, y_stride, x_stride,
                         n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = tl.rsqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * y_stride + cols, (xc * rstd * w + b).to(y_ptr.dtype.element_ty),
             mask=mask)


@kiln.jit
def layernorm_bwd_kernel(dx_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dw_partial_ptr,
                         db_partial_ptr, dx_stride, dy_stride, x_stride, n_rows, n_cols,
                         rows_per_program, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    for r in range(row_start, row_end):
        row = r.to(tl.int64)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        g = dy * w
        c1 = tl.sum(g * xhat, axis=0) / n_cols
        c2 = tl.sum(g, axis=0) / n_cols
        dx = rstd * (g - xhat * c1 - c2)
        tl.store(dx_ptr + row * dx_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
        db += dy
    off = pid.to(tl.int64) * n_cols + cols
    tl.store(dw_partial_ptr + off, dw, mask=mask)
    tl.store(db_partial_ptr + off, db, mask=mask)


def layernorm_forward(x, w, b, eps=1e-5):
    x2 = as_2d(x)
    n_rows, n_cols = x2.shape
    y = torch.empty_like(x2)
    mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    block = next_power_of_2(n_cols)
    if n_rows:
        layernorm_fwd_kernel[(n_rows,)](y, x2, w, b, mean, rstd, y.stride(0), x2.stride(0),
                                        n_cols, eps, BLOCK=block,
                                        num_warps=num_warps_for(block))
    return y.view(x.shape), mean, rstd


def layernorm_backward(dy, x, w, mean, rstd):
    dy2, x2 = as_2d(dy), as_2d(x)
    n_rows, n_cols = x2.shape
    dx = torch.empty_like(x2)
    block = next_power_of_2(n_cols)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    programs = max(1, min(n_rows, sms * 2))
    rows_per_program = kiln.cdiv(n_rows, programs)
    programs = kiln.cdiv(n_rows, rows_per_program) if n_rows else 1
    dw_p = torch.empty(programs, n_cols, dtype=torch.float32, device=x.device)
    db_p = torch.empty(programs, n_cols, dtype=torch.float32, device=x.device)
    if n_rows:
        layernorm_bwd_kernel[(programs,)](dx, dy2, x2, w, mean, rstd, dw_p, db_p, dx.stride(0),
                                          dy2.stride(0), x2.stride(0), n_rows, n_cols,
                                          rows_per_program, BLOCK=block,
                                          num_warps=num_warps_for(block))
    return dx.view(x.shape), dw_p.sum(0).to(w.dtype), db_p.sum(0).to(w.dtype)


if torch is not None:
    class KilnLayerNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b, eps=1e-5):
            y, mean, rstd = layernorm_forward(x, w, b, eps)
            ctx.save_for_backward(x, w, mean, rstd)
            return y

        @staticmethod
        def backward(ctx, dy):
            x, w, mean, rstd = ctx.saved_tensors
            dx, dw, db = layernorm_backward(dy, x, w, mean, rstd)
            return dx, dw, db, None

    def layer_norm(x, w, b, eps=1e-5):
        return KilnLayerNorm.apply(x, w, b, eps)
