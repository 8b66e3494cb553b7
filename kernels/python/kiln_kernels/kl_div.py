"""KL divergence as torch.nn.functional.kl_div(input=log q, target, log_target): elementwise
loss = p * (log p - log q) (0 where p == 0; with log_target p = exp(target)), one program per
row looping over column tiles. reduction: "none" (elementwise), "sum", "mean" (over all
elements), "batchmean" (divided by the size of the first dimension, as torch). Backward: d loss / d input = -p, times grad_output and the
reduction's scale.
"""
import kiln
import kiln.language as tl

from ._utils import as_2d, next_power_of_2, num_warps_for, torch

KL_BLOCK = 4096


@kiln.jit
def kl_div_fwd_kernel(input_ptr, target_ptr, loss_ptr, in_stride, t_stride, loss_stride, n_cols,
                      BLOCK: tl.constexpr, LOG_TARGET: tl.constexpr, ELEMENTWISE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    in_row = input_ptr + row * in_stride
    t_row = target_ptr + row * t_stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        q = tl.load(in_row + cols, mask=mask, other=0.0).to(tl.float32)
        t = tl.load(t_row + cols, mask=mask, other=0.0).to(tl.float32)
        if LOG_TARGET:
            loss = tl.exp(t) * (t - q)
        else:
            loss = tl.where(t > 0.0, t * (tl.log(t) - q), 0.0)
        if ELEMENTWISE:
            tl.store(loss_ptr + row * loss_stride + cols,
                     loss.to(loss_ptr.dtype.element_ty), mask=mask)
        else:
            acc += loss
    if not ELEMENTWISE:
        tl.store(loss_ptr + row, tl.sum(acc, axis=0))


@kiln.jit
def kl_div_bwd_kernel(grad_ptr, target_ptr, go_ptr, g_stride, t_stride, go_stride, n_cols,
                      scale, BLOCK: tl.constexpr, LOG_TARGET: tl.constexpr,
                      ELEMENTWISE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    t = tl.load(target_ptr + row * t_stride + cols, mask=mask, other=0.0).to(tl.float32)
    if LOG_TARGET:
        p = tl.exp(t)
    else:
        p = t
    if ELEMENTWISE:
        go = tl.load(go_ptr + row * go_stride + cols, mask=mask, other=0.0).to(tl.float32)
    else:
        go = tl.load(go_ptr).to(tl.float32)
    g = -p * go * scale
    tl.store(grad_ptr + row * g_stride + cols, g.to(grad_ptr.dtype.element_ty), mask=mask)


def _scale(reduction, shape, n_rows, n_cols):
    """batchmean divides by the size of the first dimension (as torch), mean by numel."""
    batch = shape[0] if len(shape) else 1
    return {"batchmean": 1.0 / max(batch, 1), "mean": 1.0 / max(n_rows * n_cols, 1),
            "sum": 1.0, "none": 1.0}[reduction]


def kl_div_forward(log_q, target, reduction="batchmean", log_target=False):
    q2, t2 = as_2d(log_q), as_2d(target)
    n_rows, n_cols = q2.shape
    elementwise = reduction == "none"
    if elementwise:
        loss = torch.empty_like(q2)
    else:
        loss = torch.empty(n_rows, dtype=torch.float32, device=q2.device)
    block = min(next_power_of_2(n_cols), KL_BLOCK)
    if n_rows:
        kl_div_fwd_kernel[(n_rows,)](q2, t2, loss, q2.stride(0), t2.stride(0),
                                     loss.stride(0) if elementwise else 0, n_cols,
                                     BLOCK=block, LOG_TARGET=log_target,
                                     ELEMENTWISE=elementwise, num_warps=num_warps_for(block))
    if elementwise:
        return loss.view(log_q.shape)
    return (loss.sum() * _scale(reduction, log_q.shape, n_rows, n_cols)).to(log_q.dtype)


def kl_div_backward(grad_output, target, in_shape, in_dtype, reduction="batchmean",
                    log_target=False):
    t2 = as_2d(target)
    n_rows, n_cols = t2.shape
    grad = torch.empty(n_rows, n_cols, dtype=in_dtype, device=t2.device)
    elementwise = reduction == "none"
    go = as_2d(grad_output) if elementwise else grad_output.reshape(1).contiguous()
    block = min(next_power_of_2(n_cols), KL_BLOCK)
    if n_rows:
        kl_div_bwd_kernel[(n_rows, kiln.cdiv(n_cols, block))](
            grad, t2, go, grad.stride(0), t2.stride(0), go.stride(0) if elementwise else 0,
            n_cols, _scale(reduction, in_shape, n_rows, n_cols), BLOCK=block, LOG_TARGET=log_target,
            ELEMENTWISE=elementwise, num_warps=num_warps_for(block))
    return grad.view(in_shape)


if torch is not None:
    class KilnKLDiv(torch.autograd.Function):
        @staticmethod
        def forward(ctx, log_q, target, reduction="batchmean", log_target=False):
            ctx.save_for_backward(target)
            ctx.meta = (log_q.shape, log_q.dtype, reduction, log_target)
            return kl_div_forward(log_q, target, reduction, log_target)

        @staticmethod
        def backward(ctx, grad_output):
            (target,) = ctx.saved_tensors
            shape, dtype, reduction, log_target = ctx.meta
            grad = kl_div_backward(grad_output, target, shape, dtype, reduction, log_target)
            return grad, None, None, None

    def kl_div(log_q, target, reduction="batchmean", log_target=False):
        return KilnKLDiv.apply(log_q, target, reduction, log_target)
