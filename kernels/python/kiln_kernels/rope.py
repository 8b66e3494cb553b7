"""Rotary position embedding (HF "rotate half" convention): for x of shape [B, S, H, D] (any
strides with a contiguous last dimension) and cos/sin of shape [S, D] or [B, S, D] whose two
halves are equal (as HF builds them),
    out[..., :D/2] = x1 * cos - x2 * sin,   out[..., D/2:] = x2 * cos + x1 * sin.
One program per (batch, position) handles every head as a 2-D [H, D/2] tile. Backward is the
same rotation with sin negated. fp32 math.
"""
import kiln
import kiln.language as tl

from ._utils import next_power_of_2, torch


@kiln.jit
def rope_kernel(out_ptr, x_ptr, cos_ptr, sin_ptr, seq_len, n_heads,
                x_sb, x_ss, x_sh, o_sb, o_ss, o_sh, c_sb, c_ss,
                HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
                BACKWARD: tl.constexpr):
    pid = tl.program_id(0)
    b = (pid // seq_len).to(tl.int64)
    s = (pid % seq_len).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    h = tl.arange(0, BLOCK_H)
    dmask = d < HALF
    cs_off = b * c_sb + s * c_ss + d
    cos = tl.load(cos_ptr + cs_off, mask=dmask, other=0.0).to(tl.float32)
    sin = tl.load(sin_ptr + cs_off, mask=dmask, other=0.0).to(tl.float32)
    if BACKWARD:
        sin = -sin
    mask = (h[:, None] < n_heads) & dmask[None, :]
    x_off = b * x_sb + s * x_ss + h[:, None].to(tl.int64) * x_sh + d[None, :]
    o_off = b * o_sb + s * o_ss + h[:, None].to(tl.int64) * o_sh + d[None, :]
    x1 = tl.load(x_ptr + x_off, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + x_off + HALF, mask=mask, other=0.0).to(tl.float32)
    y1 = x1 * cos[None, :] - x2 * sin[None, :]
    y2 = x2 * cos[None, :] + x1 * sin[None, :]
    tl.store(out_ptr + o_off, y1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + o_off + HALF, y2.to(out_ptr.dtype.element_ty), mask=mask)


def _cos_strides(cos):
    if cos.dim() == 2:
        return 0, cos.stride(0)
    return cos.stride(0), cos.stride(1)


def rope_apply(x, cos, sin, backward=False):
    """x: [B, S, H, D]; cos, sin: [S, D] or [B, S, D] (or with a unit head dim:
    [B, S, 1, D] is squeezed)."""
    assert x.dim() == 4
    if x.stride(-1) != 1:
        x = x.contiguous()
    if cos.dim() == 4:
        cos, sin = cos.squeeze(2), sin.squeeze(2)
    if cos.stride(-1) != 1 or sin.stride() != cos.stride():
        cos, sin = cos.contiguous(), sin.contiguous()
    B, S, H, D = x.shape
    out = torch.empty_like(x)
    half = D // 2
    c_sb, c_ss = _cos_strides(cos)
    if B * S:
        rope_kernel[(B * S,)](out, x, cos, sin, S, H,
                              x.stride(0), x.stride(1), x.stride(2),
                              out.stride(0), out.stride(1), out.stride(2), c_sb, c_ss,
                              HALF=half, BLOCK_H=next_power_of_2(H),
                              BLOCK_D=next_power_of_2(half), BACKWARD=backward,
                              num_warps=4)
    return out


if torch is not None:
    class KilnRoPE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, cos, sin):
            ctx.save_for_backward(cos, sin)
            return rope_apply(q, cos, sin), rope_apply(k, cos, sin)

        @staticmethod
        def backward(ctx, dq, dk):
            cos, sin = ctx.saved_tensors
            return (rope_apply(dq, cos, sin, backward=True),
                    rope_apply(dk, cos, sin, backward=True), None, None)

    def rope(q, k, cos, sin):
        """q: [B, S, Hq, D], k: [B, S, Hk, D]; returns the rotated (q, k)."""
        return KilnRoPE.apply(q, k, cos, sin)
