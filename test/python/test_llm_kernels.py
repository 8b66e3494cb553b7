"""The LLM kernels of kernels/python/kiln_kernels (PYTHONPATH must include kernels/python).

Compile-only tests (no GPU): every kernel compiles to PTX for sm_90 through kiln.compile.
GPU tests (marker `gpu`): each op, forward and backward, against torch with fresh random
inputs, row lengths that are not powers of two included; errors are ||out - ref|| / ||ref||
against fp64 references: fp32 < 1e-5, bf16 < 1e-2.
"""
import os
import sys

import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))

from kiln_kernels import (cross_entropy, kl_div, layernorm, rmsnorm, rope,  # noqa: E402
                          softmax, swiglu)
from llm_cases import (CE_SHAPES, KL_REDUCTIONS, KL_SHAPES, NORM_SHAPES,  # noqa: E402
                       ROPE_SHAPES, SOFTMAX_SHAPES, SWIGLU_SHAPES, TOL)
from cuda_torch import torch_or_skip  # noqa: E402

# ---------------------------------------------------------------- compile-only (no GPU)

ROW = {"in_stride": "i32", "out_stride": "i32", "n_cols": "i32"}
CASES = {
    "softmax_fwd": (softmax.softmax_fwd_kernel,
                    dict(out_ptr="*bf16:16", in_ptr="*bf16:16", **ROW),
                    dict(BLOCK=1024, LOG=False)),
    "log_softmax_fwd": (softmax.softmax_fwd_kernel,
                        dict(out_ptr="*fp32:16", in_ptr="*fp32:16", **ROW),
                        dict(BLOCK=8192, LOG=True)),
    "softmax_fwd_loop": (softmax.softmax_fwd_loop_kernel,
                         dict(out_ptr="*fp32:16", in_ptr="*fp32:16", **ROW),
                         dict(BLOCK=4096, LOG=False)),
    "log_softmax_fwd_loop": (softmax.softmax_fwd_loop_kernel,
                             dict(out_ptr="*bf16:16", in_ptr="*bf16:16", **ROW),
                             dict(BLOCK=4096, LOG=True)),
    "softmax_bwd": (softmax.softmax_bwd_kernel,
                    dict(dx_ptr="*fp32:16", dy_ptr="*fp32:16", y_ptr="*fp32:16",
                         dx_stride="i32", dy_stride="i32", y_stride="i32", n_cols="i32"),
                    dict(BLOCK=2048, LOG=False)),
    "log_softmax_bwd_loop": (softmax.softmax_bwd_loop_kernel,
                             dict(dx_ptr="*bf16:16", dy_ptr="*bf16:16", y_ptr="*bf16:16",
                                  dx_stride="i32", dy_stride="i32", y_stride="i32",
                                  n_cols="i32"),
                             dict(BLOCK=2048, LOG=True)),
    "rmsnorm_fwd": (rmsnorm.rmsnorm_fwd_kernel,
                    dict(y_ptr="*bf16:16", x_ptr="*bf16:16", w_ptr="*bf16:16",
                         rstd_ptr="*fp32:16", y_stride="i32:16", x_stride="i32:16",
                         n_cols="i32:16", eps="fp32"),
                    dict(BLOCK=4096)),
    "rmsnorm_bwd": (rmsnorm.rmsnorm_bwd_kernel,
                    dict(dx_ptr="*bf16:16", dy_ptr="*bf16:16", x_ptr="*bf16:16",
                         w_ptr="*bf16:16", rstd_ptr="*fp32:16", dw_partial_ptr="*fp32:16",
                         dx_stride="i32:16", dy_stride="i32:16", x_stride="i32:16",
                         n_rows="i32", n_cols="i32:16", rows_per_program="i32"),
                    dict(BLOCK=4096)),
    "layernorm_fwd": (layernorm.layernorm_fwd_kernel,
                      dict(y_ptr="*bf16:16", x_ptr="*bf16:16", w_ptr="*bf16:16",
                           b_ptr="*bf16:16", mean_ptr="*fp32:16", rstd_ptr="*fp32:16",
                           y_stride="i32", x_stride="i32", n_cols="i32", eps="fp32"),
                      dict(BLOCK=4096)),
    "layernorm_bwd": (layernorm.layernorm_bwd_kernel,
                      dict(dx_ptr="*fp32:16", dy_ptr="*fp32:16", x_ptr="*fp32:16",
                           w_ptr="*fp32:16", mean_ptr="*fp32:16", rstd_ptr="*fp32:16",
                           dw_partial_ptr="*fp32:16", db_partial_ptr="*fp32:16",
                           dx_stride="i32", dy_stride="i32", x_stride="i32", n_rows="i32",
                           n_cols="i32", rows_per_program="i32"),
                      dict(BLOCK=1024)),
    "cross_entropy": (cross_entropy.cross_entropy_kernel,
                      dict(x_ptr="*bf16:16", target_ptr="*i64:16", loss_ptr="*fp32:16",
                           x_stride="i32:16", n_cols="i32", ignore_index="i32",
                           scale="fp32"),
                      dict(BLOCK=16384)),
    "ce_scale": (cross_entropy.scale_kernel,
                 dict(x_ptr="*bf16:16", scale_ptr="*fp32:16", n="i32"), dict(BLOCK=4096)),
    "kl_div_fwd": (kl_div.kl_div_fwd_kernel,
                   dict(input_ptr="*fp32:16", target_ptr="*fp32:16", loss_ptr="*fp32:16",
                        in_stride="i32", t_stride="i32", loss_stride="i32", n_cols="i32"),
                   dict(BLOCK=4096, LOG_TARGET=False, ELEMENTWISE=False)),
    "kl_div_fwd_none_logt": (kl_div.kl_div_fwd_kernel,
                             dict(input_ptr="*bf16:16", target_ptr="*bf16:16",
                                  loss_ptr="*bf16:16", in_stride="i32", t_stride="i32",
                                  loss_stride="i32", n_cols="i32"),
                             dict(BLOCK=4096, LOG_TARGET=True, ELEMENTWISE=True)),
    "kl_div_bwd": (kl_div.kl_div_bwd_kernel,
                   dict(grad_ptr="*fp32:16", target_ptr="*fp32:16", go_ptr="*fp32:16",
                        g_stride="i32", t_stride="i32", go_stride="i32", n_cols="i32",
                        scale="fp32"),
                   dict(BLOCK=4096, LOG_TARGET=False, ELEMENTWISE=False)),
    "swiglu_fwd": (swiglu.swiglu_fwd_kernel,
                   dict(c_ptr="*bf16:16", a_ptr="*bf16:16", b_ptr="*bf16:16", n="i32"),
                   dict(BLOCK=2048)),
    "swiglu_bwd": (swiglu.swiglu_bwd_kernel,
                   dict(da_ptr="*bf16:16", db_ptr="*bf16:16", dc_ptr="*bf16:16",
                        a_ptr="*bf16:16", b_ptr="*bf16:16", n="i32"),
                   dict(BLOCK=2048)),
    "rope": (rope.rope_kernel,
             dict(out_ptr="*bf16:16", x_ptr="*bf16:16", cos_ptr="*bf16:16", sin_ptr="*bf16:16",
                  seq_len="i32", n_heads="i32", x_sb="i32", x_ss="i32", x_sh="i32",
                  o_sb="i32", o_ss="i32", o_sh="i32", c_sb="i32", c_ss="i32"),
             dict(HALF=64, BLOCK_H=32, BLOCK_D=64, BACKWARD=False)),
    "rope_bwd_odd_heads": (rope.rope_kernel,
                           dict(out_ptr="*fp32:16", x_ptr="*fp32:16", cos_ptr="*fp32:16",
                                sin_ptr="*fp32:16", seq_len="i32", n_heads="i32", x_sb="i32",
                                x_ss="i32", x_sh="i32", o_sb="i32", o_ss="i32", o_sh="i32",
                                c_sb="i32", c_ss="i32"),
                           dict(HALF=40, BLOCK_H=8, BLOCK_D=64, BACKWARD=True)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiles_to_ptx(name):
    fn, sig, consts = CASES[name]
    warps = 16 if max([v for v in consts.values() if isinstance(v, int)] + [0]) >= 8192 else 8
    k = kiln.compile(fn, signature=sig, constexprs=consts, target="sm_90", num_warps=warps)
    ptx = k.asm["ptx"]
    assert f".entry {fn.__name__}" in ptx
    assert "ld.global" in ptx and "st.global" in ptx


# ---------------------------------------------------------------- GPU: against torch


def relerr(out, ref):
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def dt(torch, name):
    return getattr(torch, name)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape,max_fused", SOFTMAX_SHAPES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax(dtype, shape, max_fused, log):
    torch = torch_or_skip()
    x = torch.randn(shape, device="cuda", dtype=dt(torch, dtype)) * 3
    dy = torch.randn(shape, device="cuda", dtype=dt(torch, dtype))
    y = softmax.softmax_forward(x, log=log, max_fused=max_fused)
    ref_fn = torch.log_softmax if log else torch.softmax
    ref = ref_fn(x.double(), dim=-1)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert relerr(y, ref) < TOL[dtype]
    # backward from the kernel's own output, against the fp64 autograd of the op
    dx = softmax.softmax_backward(dy, y, log=log, max_fused=max_fused)
    xd = x.double().requires_grad_()
    ref_fn(xd, dim=-1).backward(dy.double())
    assert relerr(dx, xd.grad) < TOL[dtype]
    # the autograd wrapper
    xa = x.clone().requires_grad_()
    f = softmax.log_softmax if log else softmax.softmax
    f(xa).backward(dy)
    assert relerr(xa.grad, xd.grad) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", NORM_SHAPES)
def test_rmsnorm(dtype, shape):
    torch = torch_or_skip()
    t = dt(torch, dtype)
    n = shape[-1]
    x = torch.randn(shape, device="cuda", dtype=t)
    w = (1 + 0.1 * torch.randn(n, device="cuda")).to(t)
    dy = torch.randn(shape, device="cuda", dtype=t)
    eps = 1e-6
    xd = x.double().requires_grad_()
    wd = w.double().requires_grad_()
    ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * wd
    ref.backward(dy.double())
    xa, wa = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = rmsnorm.rms_norm(xa, wa, eps)
    y.backward(dy)
    assert y.dtype == t
    assert relerr(y, ref) < TOL[dtype]
    assert relerr(xa.grad, xd.grad) < TOL[dtype]
    assert relerr(wa.grad, wd.grad) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", NORM_SHAPES)
def test_layernorm(dtype, shape):
    torch = torch_or_skip()
    t = dt(torch, dtype)
    n = shape[-1]
    x = torch.randn(shape, device="cuda", dtype=t) + 0.5
    w = (1 + 0.1 * torch.randn(n, device="cuda")).to(t)
    b = (0.1 * torch.randn(n, device="cuda")).to(t)
    dy = torch.randn(shape, device="cuda", dtype=t)
    eps = 1e-5
    xd, wd, bd = (v.double().requires_grad_() for v in (x, w, b))
    ref = torch.nn.functional.layer_norm(xd, (n,), wd, bd, eps)
    ref.backward(dy.double())
    xa, wa, ba = (v.clone().requires_grad_() for v in (x, w, b))
    y = layernorm.layer_norm(xa, wa, ba, eps)
    y.backward(dy)
    assert relerr(y, ref) < TOL[dtype]
    assert relerr(xa.grad, xd.grad) < TOL[dtype]
    assert relerr(wa.grad, wd.grad) < TOL[dtype]
    assert relerr(ba.grad, bd.grad) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("rows,vocab", CE_SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy(dtype, rows, vocab, reduction):
    torch = torch_or_skip()
    t = dt(torch, dtype)
    x = torch.randn(rows, vocab, device="cuda", dtype=t) * 2
    target = torch.randint(0, vocab, (rows,), device="cuda")
    target[::5] = -100  # ignored rows
    go = torch.tensor(1.7, device="cuda")
    xd = x.double().requires_grad_()
    ref = torch.nn.functional.cross_entropy(xd, target, ignore_index=-100, reduction=reduction)
    (ref * go.double()).backward()
    xa = x.clone().requires_grad_()
    loss = cross_entropy.cross_entropy(xa * 1, target, -100, reduction)  # (xa*1): in place
    (loss * go).backward()
    assert relerr(loss, ref) < TOL[dtype]
    assert relerr(xa.grad, xd.grad) < TOL[dtype]
    # no ignored rows, grad_output 1 (the backward does nothing)
    target2 = torch.randint(0, vocab, (rows,), device="cuda")
    xa = x.clone().requires_grad_()
    cross_entropy.cross_entropy(xa * 1, target2, -100, reduction).backward()
    xd = x.double().requires_grad_()
    torch.nn.functional.cross_entropy(xd, target2, reduction=reduction).backward()
    assert relerr(xa.grad, xd.grad) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", KL_SHAPES)
@pytest.mark.parametrize("reduction", KL_REDUCTIONS)
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(dtype, shape, reduction, log_target):
    torch = torch_or_skip()
    t = dt(torch, dtype)
    log_q = torch.log_softmax(torch.randn(shape, device="cuda"), -1).to(t)
    p = torch.softmax(torch.randn(shape, device="cuda"), -1)
    p[..., ::7] = 0.0  # exact zeros: 0 * log 0 = 0 (log_target: log(1e-30))
    target = (torch.log(p.clamp_min(1e-30)) if log_target else p).to(t)
    xd = log_q.double().requires_grad_()
    ref = torch.nn.functional.kl_div(xd, target.double(), reduction=reduction,
                                     log_target=log_target)
    go = torch.randn_like(ref)
    ref.backward(go)
    xa = log_q.clone().requires_grad_()
    out = kl_div.kl_div(xa, target, reduction, log_target)
    out.backward(go.to(out.dtype))
    assert torch.isfinite(out).all()
    assert relerr(out, ref) < TOL[dtype]
    assert relerr(xa.grad, xd.grad) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SWIGLU_SHAPES)
def test_swiglu(dtype, shape):
    torch = torch_or_skip()
    t = dt(torch, dtype)
    a = torch.randn(shape, device="cuda", dtype=t)
    b = torch.randn(shape, device="cuda", dtype=t)
    dc = torch.randn(shape, device="cuda", dtype=t)
    ad, bd = a.double().requires_grad_(), b.double().requires_grad_()
    ref = torch.nn.functional.silu(ad) * bd
    ref.backward(dc.double())
    aa, ba = a.clone().requires_grad_(), b.clone().requires_grad_()
    c = swiglu.swiglu(aa, ba)
    c.backward(dc)
    assert relerr(c, ref) < TOL[dtype]
    assert relerr(aa.grad, ad.grad) < TOL[dtype]
    assert relerr(ba.grad, bd.grad) < TOL[dtype]


def rope_ref(torch, x, cos, sin):
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rot * sin


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("B,S,Hq,Hk,D", ROPE_SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_rope(dtype, B, S, Hq, Hk, D, transposed):
    torch = torch_or_skip()
    t = dt(torch, dtype)
    if transposed:  # [B, H, S, D] storage (HF's layout) seen as [B, S, H, D]
        q = torch.randn(B, Hq, S, D, device="cuda", dtype=t).transpose(1, 2)
        k = torch.randn(B, Hk, S, D, device="cuda", dtype=t).transpose(1, 2)
    else:
        q = torch.randn(B, S, Hq, D, device="cuda", dtype=t)
        k = torch.randn(B, S, Hk, D, device="cuda", dtype=t)
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2, device="cuda", dtype=torch.float64) / D))
    freqs = torch.outer(torch.arange(S, device="cuda", dtype=torch.float64), inv)
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos().to(t), emb.sin().to(t)
    dq = torch.randn_like(q)
    dk = torch.randn_like(k)
    qd, kd = q.double().requires_grad_(), k.double().requires_grad_()
    c4, s4 = cos.double()[None, :, None, :], sin.double()[None, :, None, :]
    rq, rk = rope_ref(torch, qd, c4, s4), rope_ref(torch, kd, c4, s4)
    torch.autograd.backward((rq, rk), (dq.double(), dk.double()))
    qa, ka = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    oq, ok = rope.rope(qa, ka, cos, sin)
    torch.autograd.backward((oq, ok), (dq, dk))
    assert relerr(oq, rq) < TOL[dtype] and relerr(ok, rk) < TOL[dtype]
    assert relerr(qa.grad, qd.grad) < TOL[dtype] and relerr(ka.grad, kd.grad) < TOL[dtype]
