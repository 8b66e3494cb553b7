"""RMSNorm: y = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps), fp32 math.

Forward: one row per program, rstd saved per row. Backward: each program walks a contiguous
block of rows, writes dx per row and accumulates dw in an fp32 tile, then stores its partial
row of dw; the partials are summed by torch (no atomics).
"""
import kiln
import kiln.language as tl

from ._utils import as_2d, next_power_of_2, num_warps_for, torch


@kiln.jit
def rmsnorm_fwd_kernel(y_ptr, x_ptr, w_ptr, rstd_ptr, y_stride, x_stride, n_cols, eps,
                       BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * y_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@kiln.jit
def rmsnorm_bwd_kernel(dx_ptr, dy_ptr, x_ptr, w_ptr, rstd_ptr, dw_partial_ptr,
                       dx_stride, dy_stride, x_stride, n_rows, n_cols, rows_per_program,
                       BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    for r in range(row_start, row_end):
        row = r.to(tl.int64)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        xhat = x * rstd
        g = dy * w
        c = tl.sum(g * xhat, axis=0) / n_cols
        dx = rstd * (g - xhat * c)
        tl.store(dx_ptr + row * dx_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
    tl.store(dw_partial_ptr + pid.to(tl.int64) * n_cols + cols, dw, mask=mask)


def _sm_count(device):
    return torch.cuda.get_device_properties(device).multi_processor_count


def rmsnorm_forward(x, w, eps=1e-6):
    x2 = as_2d(x)
    n_rows, n_cols = x2.shape
    y = torch.empty_like(x2)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    block = next_power_of_2(n_cols)
    if n_rows:
        rmsnorm_fwd_kernel[(n_rows,)](y, x2, w, rstd, y.stride(0), x2.stride(0), n_cols, eps,
                                      BLOCK=block, num_warps=num_warps_for(block))
    return y.view(x.shape), rstd


def rmsnorm_backward(dy, x, w, rstd):
    dy2, x2 = as_2d(dy), as_2d(x)
    n_rows, n_cols = x2.shape
    dx = torch.empty_like(x2)
    block = next_power_of_2(n_cols)
    programs = max(1, min(n_rows, _sm_count(x.device) * 2))
    rows_per_program = kiln.cdiv(n_rows, programs)
    programs = kiln.cdiv(n_rows, rows_per_program) if n_rows else 1
    partial = torch.empty(programs, n_cols, dtype=torch.float32, device=x.device)
    if n_rows:
        rmsnorm_bwd_kernel[(programs,)](dx, dy2, x2, w, rstd, partial, dx.stride(0),
                                        dy2.stride(0), x2.stride(0), n_rows, n_cols,
                                        rows_per_program, BLOCK=block,
                                        num_warps=num_warps_for(block))
    return dx.view(x.shape), partial.sum(0).to(w.dtype)


if torch is not None:
    class KilnRMSNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, eps=1e-6):
            y, rstd = rmsnorm_forward(x, w, eps)
            ctx.save_for_backward(x, w, rstd)
            return y

        @staticmethod
        def backward(ctx, dy):
            x, w, rstd = ctx.saved_tensors
            dx, dw = rmsnorm_backward(dy, x, w, rstd)
            return dx, dw, None

    def rms_norm(x, w, eps=1e-6):
        return KilnRMSNorm.apply(x, w, eps)
