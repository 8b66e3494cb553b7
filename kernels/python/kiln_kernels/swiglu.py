"""SwiGLU: c = silu(a) * b, elementwise (fp32 math). Backward: db = dc * silu(a),
da = dc * b * sigmoid(a) * (1 + a * (1 - sigmoid(a))). Flat 1-D blocks over contiguous
tensors.
"""
import kiln
import kiln.language as tl

from ._utils import torch

SWIGLU_BLOCK = 2048


@kiln.jit
def swiglu_fwd_kernel(c_ptr, a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    c = a * tl.sigmoid(a) * b
    tl.store(c_ptr + offs, c.to(c_ptr.dtype.element_ty), mask=mask)


@kiln.jit
def swiglu_bwd_kernel(da_ptr, db_ptr, dc_ptr, a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dc = tl.load(dc_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    sig = tl.sigmoid(a)
    silu = a * sig
    db = dc * silu
    da = dc * b * (sig * (1.0 + a * (1.0 - sig)))
    tl.store(da_ptr + offs, da.to(da_ptr.dtype.element_ty), mask=mask)
    tl.store(db_ptr + offs, db.to(db_ptr.dtype.element_ty), mask=mask)


def swiglu_forward(a, b):
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty_like(a)
    n = a.numel()
    if n:
        swiglu_fwd_kernel[(kiln.cdiv(n, SWIGLU_BLOCK),)](c, a, b, n, BLOCK=SWIGLU_BLOCK,
                                                        num_warps=8)
    return c


def swiglu_backward(dc, a, b):
    dc = dc.contiguous()
    da, db = torch.empty_like(a), torch.empty_like(b)
    n = a.numel()
    if n:
        swiglu_bwd_kernel[(kiln.cdiv(n, SWIGLU_BLOCK),)](da, db, dc, a, b, n,
                                                        BLOCK=SWIGLU_BLOCK, num_warps=8)
    return da, db


if torch is not None:
    class KilnSwiGLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            a, b = a.contiguous(), b.contiguous()
            ctx.save_for_backward(a, b)
            return swiglu_forward(a, b)

        @staticmethod
        def backward(ctx, dc):
            a, b = ctx.saved_tensors
            return swiglu_backward(dc, a, b)

    def swiglu(a, b):
        return KilnSwiGLU.apply(a, b)
