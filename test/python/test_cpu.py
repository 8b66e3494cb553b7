"""The CPU (host) backend from Python: @kiln.jit kernels launched with device="cpu" on numpy
arrays, checked against numpy fp64 references (fp32 rel err < 1e-5, bf16 through ml_dtypes
< 1e-2).

- every LLM kernel of kernels/python/kiln_kernels, forward and backward, on shapes from
  llm_cases.py (the GPU tests' where tiles stay small enough to compile quickly for the host;
  row lengths that are not powers of two, and rows longer than a tile, included); the numpy
  host code here mirrors the kernels' torch host functions (grid, BLOCK, strides);
- the kernels of kernels/*.mlir through the host JIT of kiln._C;
- argument checks: GPU memory to a CPU kernel and host arrays to a GPU kernel name the
  parameter; specialization (alignment, divisibility, dtypes) as for GPU arguments;
- debug mode: an unmasked out-of-bounds access names the kernel, the load's source line and
  the program id; tl.device_assert fails a launch only in debug mode;
- tl.device_print output; a machine without a GPU runs kernels on the CPU by itself.

torch is not needed (nor used).
"""
import inspect
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
import kiln.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))

from kiln_kernels import (cross_entropy, kl_div, layernorm, rmsnorm, rope,  # noqa: E402
                          softmax, swiglu)
from kiln_kernels._utils import next_power_of_2, num_warps_for, row_block  # noqa: E402
from llm_cases import (CPU_CE_BLOCK, CPU_CE_SHAPES, CPU_KL_SHAPES,  # noqa: E402
                       CPU_NORM_SHAPES, CPU_SOFTMAX_SHAPES, KL_REDUCTIONS, ROPE_SHAPES,
                       SWIGLU_SHAPES, TOL)

KERNELS_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "kernels")
CPU = dict(device="cpu")
DTYPES = ["float32", "bfloat16"]


# ---------------------------------------------------------------- helpers

def np_dtype(name):
    if name == "bfloat16":
        return pytest.importorskip("ml_dtypes").bfloat16
    return np.dtype(name)


def randn(rng, shape, dtype, scale=1.0, shift=0.0):
    """fp32 normal samples rounded to `dtype` (the reference reads the rounded values)."""
    return (rng.standard_normal(shape, dtype=np.float32) * scale + shift).astype(np_dtype(dtype))


def f64(a):
    return np.asarray(a).astype(np.float64)


def relerr(out, ref):
    out, ref = f64(out), f64(ref)
    return float(np.linalg.norm((out - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-300))


def rows2d(x):
    """The [rows, cols] view of a contiguous array (the kernels' as_2d)."""
    return np.ascontiguousarray(x).reshape(-1, x.shape[-1])


def st(a, d=0):
    """Stride of dimension d in elements (numpy's are in bytes)."""
    return a.strides[d] // a.itemsize


# ---------------------------------------------------------------- LLM kernels: host code
# Each mirrors the torch host function of the same name in kiln_kernels, on numpy arrays.

def softmax_forward(x, log=False, max_fused=None):
    x2 = rows2d(x)
    n_rows, n_cols = x2.shape
    out = np.empty_like(x2)
    block, single = row_block(n_cols, *(() if max_fused is None else (max_fused,)))
    rows = softmax.rows_per_program(block, x2.itemsize) if single else 1
    if rows > 1:
        softmax.softmax_fwd_rows_kernel[(kiln.cdiv(n_rows, rows),)](
            out, x2, st(x2), st(out), n_rows, n_cols, ROWS=rows, BLOCK=block, LOG=log,
            num_warps=num_warps_for(rows * block), **CPU)
        return out.reshape(x.shape)
    kernel = softmax.softmax_fwd_kernel if single else softmax.softmax_fwd_loop_kernel
    kernel[(n_rows,)](out, x2, st(x2), st(out), n_cols, BLOCK=block, LOG=log,
                      num_warps=num_warps_for(block), **CPU)
    return out.reshape(x.shape)


def softmax_backward(dy, y, log=False, max_fused=None):
    dy2, y2 = rows2d(dy), rows2d(y)
    n_rows, n_cols = y2.shape
    dx = np.empty_like(y2)
    block, single = row_block(n_cols, *(() if max_fused is None else (max_fused,)))
    kernel = softmax.softmax_bwd_kernel if single else softmax.softmax_bwd_loop_kernel
    kernel[(n_rows,)](dx, dy2, y2, st(dx), st(dy2), st(y2), n_cols, BLOCK=block, LOG=log,
                      num_warps=num_warps_for(block), **CPU)
    return dx.reshape(y.shape)


def partial_programs(n_rows, cap=6):
    """(programs, rows_per_program) of the norm backwards (the GPU uses 2 x #SMs)."""
    programs = max(1, min(n_rows, cap))
    rows_per_program = kiln.cdiv(n_rows, programs)
    return kiln.cdiv(n_rows, rows_per_program), rows_per_program


def rmsnorm_forward(x, w, eps):
    x2 = rows2d(x)
    n_rows, n_cols = x2.shape
    y = np.empty_like(x2)
    rstd = np.empty(n_rows, np.float32)
    block = next_power_of_2(n_cols)
    rmsnorm.rmsnorm_fwd_kernel[(n_rows,)](y, x2, w, rstd, st(y), st(x2), n_cols, eps,
                                          BLOCK=block, num_warps=num_warps_for(block), **CPU)
    return y.reshape(x.shape), rstd


def rmsnorm_backward(dy, x, w, rstd):
    dy2, x2 = rows2d(dy), rows2d(x)
    n_rows, n_cols = x2.shape
    dx = np.empty_like(x2)
    block = next_power_of_2(n_cols)
    programs, per = partial_programs(n_rows)
    partial = np.empty((programs, n_cols), np.float32)
    rmsnorm.rmsnorm_bwd_kernel[(programs,)](dx, dy2, x2, w, rstd, partial, st(dx), st(dy2),
                                            st(x2), n_rows, n_cols, per, BLOCK=block,
                                            num_warps=num_warps_for(block), **CPU)
    return dx.reshape(x.shape), partial.sum(0, dtype=np.float64)


def layernorm_forward(x, w, b, eps):
    x2 = rows2d(x)
    n_rows, n_cols = x2.shape
    y = np.empty_like(x2)
    mean = np.empty(n_rows, np.float32)
    rstd = np.empty(n_rows, np.float32)
    block = next_power_of_2(n_cols)
    layernorm.layernorm_fwd_kernel[(n_rows,)](y, x2, w, b, mean, rstd, st(y), st(x2), n_cols,
                                              eps, BLOCK=block, num_warps=num_warps_for(block),
                                              **CPU)
    return y.reshape(x.shape), mean, rstd


def layernorm_backward(dy, x, w, mean, rstd):
    dy2, x2 = rows2d(dy), rows2d(x)
    n_rows, n_cols = x2.shape
    dx = np.empty_like(x2)
    block = next_power_of_2(n_cols)
    programs, per = partial_programs(n_rows)
    dw_p = np.empty((programs, n_cols), np.float32)
    db_p = np.empty((programs, n_cols), np.float32)
    layernorm.layernorm_bwd_kernel[(programs,)](dx, dy2, x2, w, mean, rstd, dw_p, db_p, st(dx),
                                                st(dy2), st(x2), n_rows, n_cols, per,
                                                BLOCK=block, num_warps=num_warps_for(block),
                                                **CPU)
    return dx.reshape(x.shape), dw_p.sum(0, dtype=np.float64), db_p.sum(0, dtype=np.float64)


def cross_entropy_forward(x, target, ignore_index, reduction):
    """(loss, grad): the gradient overwrites x, as in the torch host code."""
    n_rows, n_cols = x.shape
    scale = 1.0 / max(int((target != ignore_index).sum()), 1) if reduction == "mean" else 1.0
    loss_rows = np.empty(n_rows, np.float32)
    block = min(next_power_of_2(n_cols), CPU_CE_BLOCK)  # the GPU's cap: CE_BLOCK
    cross_entropy.cross_entropy_kernel[(n_rows,)](x, target, loss_rows, st(x), n_cols,
                                                  ignore_index, scale, BLOCK=block,
                                                  num_warps=num_warps_for(block), **CPU)
    return loss_rows.sum(dtype=np.float64), x


def kl_div_forward(log_q, target, reduction, log_target):
    q2, t2 = rows2d(log_q), rows2d(target)
    n_rows, n_cols = q2.shape
    elementwise = reduction == "none"
    loss = np.empty_like(q2) if elementwise else np.empty(n_rows, np.float32)
    block = min(next_power_of_2(n_cols), kl_div.KL_BLOCK)
    kl_div.kl_div_fwd_kernel[(n_rows,)](q2, t2, loss, st(q2), st(t2),
                                        st(loss) if elementwise else 0, n_cols, BLOCK=block,
                                        LOG_TARGET=log_target, ELEMENTWISE=elementwise,
                                        num_warps=num_warps_for(block), **CPU)
    if elementwise:
        return loss.reshape(log_q.shape)
    return loss.sum(dtype=np.float64) * kl_div._scale(reduction, log_q.shape, n_rows, n_cols)


def kl_div_backward(go, target, in_dtype, reduction, log_target):
    t2 = rows2d(target)
    n_rows, n_cols = t2.shape
    grad = np.empty((n_rows, n_cols), in_dtype)
    elementwise = reduction == "none"
    go2 = rows2d(go) if elementwise else np.asarray(go, np.float32).reshape(1)
    block = min(next_power_of_2(n_cols), kl_div.KL_BLOCK)
    kl_div.kl_div_bwd_kernel[(n_rows, kiln.cdiv(n_cols, block))](
        grad, t2, go2, st(grad), st(t2), st(go2) if elementwise else 0, n_cols,
        kl_div._scale(reduction, target.shape, n_rows, n_cols), BLOCK=block,
        LOG_TARGET=log_target, ELEMENTWISE=elementwise, num_warps=num_warps_for(block), **CPU)
    return grad.reshape(target.shape)


def rope_apply(x, cos, sin, backward=False):
    """x: [B, S, H, D] with a contiguous last dimension (any other strides); cos, sin: [S, D]."""
    B, S, H, D = x.shape
    out = np.empty_like(x)  # same layout as x, as torch.empty_like
    half = D // 2
    rope.rope_kernel[(B * S,)](out, x, cos, sin, S, H, st(x, 0), st(x, 1), st(x, 2),
                               st(out, 0), st(out, 1), st(out, 2), 0, st(cos, 0),
                               HALF=half, BLOCK_H=next_power_of_2(H),
                               BLOCK_D=next_power_of_2(half), BACKWARD=backward, num_warps=4,
                               **CPU)
    return out


# ---------------------------------------------------------------- LLM kernels: tests

def softmax_ref(x, log):
    x = f64(x)
    z = x - x.max(-1, keepdims=True)
    lse = np.log(np.exp(z).sum(-1, keepdims=True))
    return z - lse if log else np.exp(z - lse)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,max_fused", CPU_SOFTMAX_SHAPES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax(dtype, shape, max_fused, log):
    rng = np.random.default_rng(1)
    x = randn(rng, shape, dtype, 3.0)
    dy = randn(rng, shape, dtype)
    y = softmax_forward(x, log, max_fused)
    ref = softmax_ref(x, log)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert relerr(y, ref) < TOL[dtype]
    # backward from the kernel's own output, against the fp64 gradient at x
    dx = softmax_backward(dy, y, log, max_fused)
    g = f64(dy)
    if log:
        dref = g - np.exp(ref) * g.sum(-1, keepdims=True)
    else:
        dref = ref * (g - (g * ref).sum(-1, keepdims=True))
    assert relerr(dx, dref) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", CPU_NORM_SHAPES)
def test_rmsnorm(dtype, shape):
    rng = np.random.default_rng(2)
    n = shape[-1]
    x = randn(rng, shape, dtype)
    w = randn(rng, (n,), dtype, 0.1, 1.0)
    dy = randn(rng, shape, dtype)
    eps = 1e-6
    y, rstd = rmsnorm_forward(x, w, eps)
    xd, wd, g = f64(x), f64(w), f64(dy)
    r = 1.0 / np.sqrt((xd * xd).mean(-1, keepdims=True) + eps)
    assert y.dtype == x.dtype
    assert relerr(y, xd * r * wd) < TOL[dtype]
    assert relerr(rstd, r.ravel()) < 1e-5
    dx, dw = rmsnorm_backward(dy, x, w, rstd)
    xhat, gw = xd * r, g * wd
    dx_ref = r * (gw - xhat * (gw * xhat).mean(-1, keepdims=True))
    dw_ref = (g * xhat).reshape(-1, n).sum(0)
    assert relerr(dx, dx_ref) < TOL[dtype]
    assert relerr(dw, dw_ref) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", CPU_NORM_SHAPES)
def test_layernorm(dtype, shape):
    rng = np.random.default_rng(3)
    n = shape[-1]
    x = randn(rng, shape, dtype, 1.0, 0.5)
    w = randn(rng, (n,), dtype, 0.1, 1.0)
    b = randn(rng, (n,), dtype, 0.1)
    dy = randn(rng, shape, dtype)
    eps = 1e-5
    y, mean, rstd = layernorm_forward(x, w, b, eps)
    xd, wd, bd, g = f64(x), f64(w), f64(b), f64(dy)
    mu = xd.mean(-1, keepdims=True)
    r = 1.0 / np.sqrt(((xd - mu) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (xd - mu) * r
    assert relerr(y, xhat * wd + bd) < TOL[dtype]
    dx, dw, db = layernorm_backward(dy, x, w, mean, rstd)
    gw = g * wd
    dx_ref = r * (gw - xhat * (gw * xhat).mean(-1, keepdims=True) - gw.mean(-1, keepdims=True))
    assert relerr(dx, dx_ref) < TOL[dtype]
    assert relerr(dw, (g * xhat).reshape(-1, n).sum(0)) < TOL[dtype]
    assert relerr(db, g.reshape(-1, n).sum(0)) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,vocab", CPU_CE_SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy(dtype, rows, vocab, reduction):
    rng = np.random.default_rng(4)
    x = randn(rng, (rows, vocab), dtype, 2.0)
    target = rng.integers(0, vocab, rows).astype(np.int64)
    target[::5] = -100  # ignored rows
    valid = target != -100
    xd = f64(x)
    m = xd.max(-1, keepdims=True)
    lse = m + np.log(np.exp(xd - m).sum(-1, keepdims=True))
    scale = 1.0 / valid.sum() if reduction == "mean" else 1.0
    t = np.where(valid, target, 0)
    loss_ref = ((lse[:, 0] - xd[np.arange(rows), t]) * valid).sum() * scale
    onehot = np.zeros_like(xd)
    onehot[np.arange(rows), t] = 1.0
    grad_ref = (np.exp(xd - lse) - onehot) * scale * valid[:, None]
    loss, grad = cross_entropy_forward(x.copy(), target, -100, reduction)
    assert relerr(loss, loss_ref) < TOL[dtype]
    assert relerr(grad, grad_ref) < TOL[dtype]
    # the backward with grad_output != 1 scales the stored gradient in place
    go = np.array([1.7], np.float32)
    n = grad.size
    cross_entropy.scale_kernel[(kiln.cdiv(n, 4096),)](grad, go, n, BLOCK=4096, num_warps=8, **CPU)
    assert relerr(grad, grad_ref * 1.7) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", CPU_KL_SHAPES)
@pytest.mark.parametrize("reduction", KL_REDUCTIONS)
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(dtype, shape, reduction, log_target):
    rng = np.random.default_rng(5)
    log_q = softmax_ref(rng.standard_normal(shape), log=True).astype(np_dtype(dtype))
    p = softmax_ref(rng.standard_normal(shape), log=False)
    p[..., ::7] = 0.0  # exact zeros: 0 * log 0 = 0 (log_target: log(1e-30))
    target = (np.log(np.maximum(p, 1e-30)) if log_target else p).astype(np_dtype(dtype))
    q, t = f64(log_q), f64(target)
    if log_target:
        elem = np.exp(t) * (t - q)
    else:
        elem = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1.0)) - q), 0.0)
    scale = {"batchmean": 1.0 / shape[0], "mean": 1.0 / elem.size, "sum": 1.0, "none": 1.0}
    ref = elem if reduction == "none" else elem.sum() * scale[reduction]
    out = kl_div_forward(log_q, target, reduction, log_target)
    assert np.all(np.isfinite(f64(out)))
    assert relerr(out, ref) < TOL[dtype]
    go = (rng.standard_normal(shape).astype(np.float32).astype(np_dtype(dtype))
          if reduction == "none" else np.float32(0.7))
    grad = kl_div_backward(go, target, log_q.dtype, reduction, log_target)
    pd = np.exp(t) if log_target else t
    gref = -pd * f64(go) * scale[reduction]
    assert relerr(grad, gref) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SWIGLU_SHAPES)
def test_swiglu(dtype, shape):
    rng = np.random.default_rng(6)
    a, b, dc = (randn(rng, shape, dtype) for _ in range(3))
    n = a.size
    c = np.empty_like(a)
    grid = (kiln.cdiv(n, swiglu.SWIGLU_BLOCK),)
    swiglu.swiglu_fwd_kernel[grid](c, a, b, n, BLOCK=swiglu.SWIGLU_BLOCK, num_warps=8, **CPU)
    da, db = np.empty_like(a), np.empty_like(b)
    swiglu.swiglu_bwd_kernel[grid](da, db, dc, a, b, n, BLOCK=swiglu.SWIGLU_BLOCK, num_warps=8,
                                   **CPU)
    ad, bd, g = f64(a), f64(b), f64(dc)
    sig = 1.0 / (1.0 + np.exp(-ad))
    assert relerr(c, ad * sig * bd) < TOL[dtype]
    assert relerr(db, g * ad * sig) < TOL[dtype]
    assert relerr(da, g * bd * sig * (1.0 + ad * (1.0 - sig))) < TOL[dtype]


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate((-x[..., half:], x[..., :half]), -1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,S,Hq,Hk,D", ROPE_SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_rope(dtype, B, S, Hq, Hk, D, transposed):
    rng = np.random.default_rng(7)
    if transposed:  # [B, H, S, D] storage (HF's layout) seen as [B, S, H, D]
        q = randn(rng, (B, Hq, S, D), dtype).swapaxes(1, 2)
        k = randn(rng, (B, Hk, S, D), dtype).swapaxes(1, 2)
    else:
        q = randn(rng, (B, S, Hq, D), dtype)
        k = randn(rng, (B, S, Hk, D), dtype)
    inv = 1.0 / (10000 ** (np.arange(0, D, 2, dtype=np.float64) / D))
    emb = np.concatenate([np.outer(np.arange(S, dtype=np.float64), inv)] * 2, -1)
    cos, sin = np.cos(emb).astype(np_dtype(dtype)), np.sin(emb).astype(np_dtype(dtype))
    c4, s4 = f64(cos)[None, :, None, :], f64(sin)[None, :, None, :]
    for x in (q, k):
        out = rope_apply(x, cos, sin)
        assert relerr(out, f64(x) * c4 + rotate_half(f64(x)) * s4) < TOL[dtype]
        # backward: the transpose of the rotation, (g * sin) rotated back
        g = randn(rng, x.shape, dtype)
        gs = f64(g) * s4
        half = D // 2
        gref = f64(g) * c4 + np.concatenate((gs[..., half:], -gs[..., :half]), -1)
        assert relerr(rope_apply(g, cos, sin, backward=True), gref) < TOL[dtype]


# ---------------------------------------------------------------- kernels/*.mlir

def mlir_kernel(name, debug=False):
    with open(os.path.join(KERNELS_DIR, name + ".mlir")) as f:
        return kiln._C.jit_load(kiln._C.KernelSource(f.read()), num_warps=4, debug=debug,
                                host=True)


def addr(a):
    return a.__array_interface__["data"][0]


def test_mlir_vector_add():
    k = mlir_kernel("vector_add")
    assert k.is_host
    n = 5000 - 8  # divisible by 16 is promised by the kernel: 4992
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    out = np.full(n + 16, 7.0, np.float32)
    k.launch_host([kiln.cdiv(n, 1024)], [addr(x), addr(y), addr(out), n])
    np.testing.assert_array_equal(out[:n], x + y)
    assert np.all(out[n:] == 7.0)  # masked: nothing written past n


def test_mlir_softmax():
    k = mlir_kernel("softmax")
    rows, n = 7, 1000 - 8  # n_cols divisible by 16: 992
    x = np.random.default_rng(9).standard_normal((rows, 1008), dtype=np.float32)
    out = np.zeros_like(x)
    k.launch_host([rows], [addr(out), addr(x), 1008, 1008, n])
    np.testing.assert_allclose(out[:, :n], softmax_ref(x[:, :n], False), rtol=1e-5, atol=1e-7)
    assert np.all(out[:, n:] == 0)


def test_mlir_copy_2d_sum_2d_kl_div():
    M, N = 70, 96
    src = np.random.default_rng(10).standard_normal((M, 112), dtype=np.float32)
    dst = np.zeros((M, 128), np.float32)
    mlir_kernel("copy_2d").launch_host([kiln.cdiv(M, 32), kiln.cdiv(N, 64)],
                                       [addr(src), addr(dst), M, N, 112, 128])
    np.testing.assert_array_equal(dst[:, :N], src[:, :N])
    assert np.all(dst[:, N:] == 0)

    x = np.random.default_rng(11).standard_normal((64, 128), dtype=np.float32)
    rs, cs = np.zeros(64, np.float32), np.zeros(128, np.float32)
    mlir_kernel("sum_2d").launch_host([1], [addr(x), addr(rs), addr(cs)])
    np.testing.assert_allclose(rs, x.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cs, x.sum(0, dtype=np.float64), rtol=1e-5, atol=1e-5)

    n = 2048 + 16
    rng = np.random.default_rng(12)
    p = rng.uniform(0.1, 1.0, n).astype(np.float32)
    q = rng.uniform(0.1, 1.0, n).astype(np.float32)
    out = np.zeros(n, np.float32)
    mlir_kernel("kl_div").launch_host([kiln.cdiv(n, 1024)], [addr(p), addr(q), addr(out), n])
    ref = f64(p) * (np.log(f64(p)) - np.log(f64(q)))
    assert relerr(out, ref) < 1e-5


def test_mlir_histogram_and_empty():
    n = 1000
    x = np.random.default_rng(13).integers(0, 1 << 20, n).astype(np.int32)
    bins = np.zeros(64, np.int32)
    count = np.zeros(1, np.int32)
    mlir_kernel("histogram").launch_host([kiln.cdiv(n, 256)], [addr(x), addr(bins), addr(count), n])
    np.testing.assert_array_equal(bins, np.bincount(x & 63, minlength=64))
    assert count[0] == kiln.cdiv(n, 256)
    mlir_kernel("empty").launch_host([3], [])


# ---------------------------------------------------------------- arguments

@kiln.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@kiln.jit(device="cpu")
def scale_cpu(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


def test_decorator_device_and_dtypes():
    for dtype in ("float32", "float64", "int32", "int64", "bfloat16"):
        x = (np.arange(1000) % 97 - 40).astype(np_dtype(dtype))
        out = np.zeros_like(x)
        c = scale_cpu[(kiln.cdiv(1000, 256),)](x, out, 1000, 3, BLOCK=256)
        assert c.metadata.arch == "cpu"
        np.testing.assert_array_equal(f64(out), f64(x) * 3)


def test_launch_option_device_and_strided_views():
    n = 3000
    base = np.arange(2 * n, dtype=np.float32)
    x = base[::2]  # a strided view: the kernel sees the address; elements are 8 bytes apart
    xc = np.ascontiguousarray(x)
    y = np.ones(n, np.float32)
    out = np.empty(n, np.float32)
    c = add_kernel[(kiln.cdiv(n, 1024),)](xc, y, out, n, BLOCK=1024, device="cpu")
    np.testing.assert_array_equal(out, xc + 1)
    assert c.metadata.arch == "cpu"
    # a view's address: base[10:] starts 40 bytes in
    out2 = np.empty(n - 10, np.float32)
    add_kernel[(kiln.cdiv(n, 1024),)](base[10:], y, out2, n - 10, BLOCK=1024, device="cpu")
    np.testing.assert_array_equal(out2, base[10:n] + 1)


def test_specialization_on_host_arrays():
    buf = np.zeros(1040, np.float32)
    aligned = buf[:1024] if addr(buf) % 16 == 0 else buf[1:1025]
    assert addr(aligned) % 16 == 0
    unaligned = buf[1:1025] if addr(buf) % 16 == 0 else buf[2:1026]
    add_kernel._clear_variants()
    a = add_kernel[(1,)](aligned, aligned, aligned, 1024, BLOCK=1024, device="cpu")
    assert a.signature == {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "out_ptr": "*fp32:16",
                           "n": "i32:16"}
    b = add_kernel[(1,)](unaligned, aligned, aligned, 1000, BLOCK=1024, device="cpu")
    assert b.signature["x_ptr"] == "*fp32" and b.signature["n"] == "i32"
    assert add_kernel.num_variants == 2
    add_kernel[(1,)](aligned, aligned, aligned, 1024, BLOCK=1024, device="cpu")
    assert add_kernel.num_variants == 2  # a hit


class CudaArray:
    """GPU memory as other libraries expose it (never dereferenced here)."""

    def __init__(self, p=1 << 40, typestr="<f4"):
        self.__cuda_array_interface__ = {"data": (p, False), "typestr": typestr,
                                         "shape": (1024,), "version": 3}


def test_gpu_memory_to_a_cpu_kernel_names_the_parameter():
    x = np.zeros(1024, np.float32)
    with pytest.raises(TypeError, match=r"kernel 'add_kernel': argument 'y_ptr' is in GPU "
                                        r"memory .*CPU backend takes host memory"):
        add_kernel[(1,)](x, CudaArray(), x, 1024, BLOCK=1024, device="cpu")


def test_host_array_to_a_gpu_kernel_names_the_parameter():
    x = np.zeros(1024, np.float32)
    with pytest.raises(TypeError, match=r"kernel 'add_kernel': argument 'out_ptr' is a host "
                                        r"array \(numpy.ndarray\).*device='cpu'"):
        add_kernel.warmup(CudaArray(), CudaArray(), x, 1024, BLOCK=1024, device="gpu")


def test_bad_device_values():
    with pytest.raises(ValueError, match=r"device='tpu': expected 'cpu'"):
        add_kernel[(1,)](np.zeros(4), np.zeros(4), np.zeros(4), 4, BLOCK=4, device="tpu")
    with pytest.raises(ValueError, match=r"device='fpga'"):
        kiln.jit(device="fpga")(scale_cpu.fn)
    with pytest.raises(TypeError, match=r"argument 'x_ptr': expected an array"):
        add_kernel[(1,)]([1.0], np.zeros(4), np.zeros(4), 4, BLOCK=4, device="cpu")


def test_dlpack_host_tensor():
    """Objects with only __dlpack__ (CPU): the address and dtype come from the DLTensor."""
    x = np.arange(1024, dtype=np.float32)

    class OnlyDLPack:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    out = np.zeros(1024, np.float32)
    add_kernel[(1,)](OnlyDLPack(x), x, OnlyDLPack(out), 1024, BLOCK=1024, device="cpu")
    np.testing.assert_array_equal(out, 2 * x)


# ---------------------------------------------------------------- debug mode

@kiln.jit(debug=True, device="cpu")
def oob_read(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # OOB-READ: unmasked
    tl.store(out_ptr + offs, x, mask=offs < n)


@kiln.jit(debug=True, device="cpu")
def oob_write(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x)  # OOB-WRITE: unmasked


def line_of(fn, marker):
    lines, begin = inspect.getsourcelines(fn.fn)
    return begin + next(i for i, l in enumerate(lines) if marker in l)


def test_debug_out_of_bounds_read_names_kernel_line_and_program():
    x, out = np.ones(100, np.float32), np.zeros(100, np.float32)
    # programs 0 and 1 stay inside (elements 0..63 of 100 and, masked stores); program 1
    # reads elements 64..127 of 100 without a mask
    with pytest.raises(kiln.KilnError) as e:
        oob_read[(2,)](x, out, 100, BLOCK=64)
    msg = str(e.value)
    assert "kernel 'oob_read'" in msg and "out-of-bounds load" in msg, msg
    assert f"test_cpu.py:{line_of(oob_read, 'OOB-READ')}:" in msg, msg
    assert "program (1, 0, 0)" in msg, msg
    # in bounds: no error (masked accesses are not checked)
    oob_read[(1,)](x, out, 64, BLOCK=64)
    np.testing.assert_array_equal(out[:64], 1.0)


def test_debug_out_of_bounds_write():
    x, out = np.ones(40, np.float32), np.zeros(40, np.float32)
    with pytest.raises(kiln.KilnError) as e:
        oob_write[(3,)](x, out, 40, BLOCK=16)
    msg = str(e.value)
    assert "kernel 'oob_write'" in msg and "out-of-bounds store" in msg, msg
    assert f"test_cpu.py:{line_of(oob_write, 'OOB-WRITE')}:" in msg, msg
    assert "program (2, 0, 0)" in msg, msg  # elements 32..47 of 40: program 2 only


def test_debug_from_the_environment(tmp_path):
    """KILN_DEBUG=1 turns on the checks of kernels without debug=."""
    script = tmp_path / "kdebug.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import kiln
        import kiln.language as tl

        @kiln.jit(device="cpu")
        def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))

        x, out = np.ones(8, np.float32), np.zeros(8, np.float32)
        k[(1,)](x, out, BLOCK=8)  # in bounds
        try:
            k[(1,)](x, out, BLOCK=16)
        except kiln.KilnError as e:
            print("ERROR", e)
        print("debug", k[(1,)](x, out, BLOCK=8).metadata.debug)
    """))
    r = run_script(script, KILN_DEBUG="1")
    assert "ERROR" in r.stdout and "kdebug.py:9:" in r.stdout, r.stdout + r.stderr
    assert "debug True" in r.stdout


@kiln.jit(device="cpu")
def asserts(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1.0)
    tl.device_assert(x > 0, "x must be positive")  # ASSERT


@kiln.jit(device="cpu")
def asserts_stmt(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1.0)
    assert tl.sum(x, axis=0) < 100.0, "sum too large"  # ASSERT-STMT


def test_device_assert_acts_only_in_debug_mode():
    good, bad = np.ones(16, np.float32), np.ones(16, np.float32)
    bad[5] = -2.0
    asserts[(1,)](good, 16, BLOCK=16, debug=True)
    # without debug the assertion compiles to nothing (as in Triton)
    c = asserts[(1,)](bad, 16, BLOCK=16)
    assert "kiln.assert" not in c.asm["kiln"]
    with pytest.raises(kiln.KilnError) as e:
        asserts[(1,)](bad, 16, BLOCK=16, debug=True)
    msg = str(e.value)
    assert "x must be positive" in msg and "asserts" in msg, msg
    assert f"test_cpu.py:{line_of(asserts, '# ASSERT')}" in msg, msg
    c = asserts[(1,)](good, 16, BLOCK=16, debug=True)
    assert "kiln.assert" in c.asm["kiln"] and c.metadata.debug


def test_assert_statement_is_device_assert():
    x = np.full(16, 10.0, np.float32)
    asserts_stmt[(1,)](x, 8, BLOCK=16, debug=True)  # 80 < 100
    with pytest.raises(kiln.KilnError, match="sum too large"):
        asserts_stmt[(1,)](x, 16, BLOCK=16, debug=True)  # 160


@kiln.jit
def checked_add(a, b):
    wide = a.to(tl.int64) + b.to(tl.int64)
    tl.device_assert((wide >= -2**31) & (wide < 2**31), "int32 sum overflows")  # COMBINE
    return a + b


@kiln.jit(device="cpu")
def checked_sum(x_ptr, out_ptr, BLOCK: tl.constexpr, SCAN: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if SCAN:
        tl.store(out_ptr + offs, tl.associative_scan(x, 0, checked_add))
    else:
        tl.store(out_ptr, tl.reduce(x, 0, checked_add))


@pytest.mark.parametrize("scan", [False, True])
def test_device_assert_in_a_combine_function(scan):
    # Triton's test_side_effectful_reduction/_scan: a combine function checking for int32
    # overflow (the host path took only arith and math ops in a combine region)
    x = np.arange(64, dtype=np.int32)
    out = np.zeros(64, np.int32)
    checked_sum[(1,)](x, out, BLOCK=64, SCAN=scan, debug=True)
    want = np.cumsum(x) if scan else x.sum()
    np.testing.assert_array_equal(out if scan else out[0], want)
    x[7] = 2**31 - 10
    with pytest.raises(kiln.KilnError) as e:
        checked_sum[(1,)](x, out, BLOCK=64, SCAN=scan, debug=True)
    msg = str(e.value)
    assert "int32 sum overflows" in msg, msg
    assert f"test_cpu.py:{line_of(checked_add, '# COMBINE')}" in msg, msg


def kiln_ir(fn, specs, values, debug):
    """The kernel's kiln-dialect MLIR for parameter specs (no compile, no launch)."""
    from kiln.compiler import CodeGenerator
    return CodeGenerator(fn.info, debug=debug).generate(specs, values)[0].text


@kiln.jit
def prints(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.device_print("x", x, hex=True)
    tl.device_print("two: ", x, n)
    tl.device_print("plain")
    print("n=", n)
    tl.device_assert(x == x, "nan", mask=offs < n)


def test_print_and_assert_ir():
    specs, values = ["*i32:16", "i32", "constexpr"], [None, None, 16]
    ir = kiln_ir(prints, specs, values, debug=False)
    # Triton's prefix rule: " prefix: " before values
    assert 'kiln.print " x: " hex' in ir and 'kiln.print " two: "' in ir, ir
    assert 'kiln.print " plain"' in ir and 'kiln.print " n=: "' in ir, ir
    assert "kiln.assert" not in ir  # debug off: nothing
    ir = kiln_ir(prints, specs, values, debug=True)
    assert ir.count("kiln.assert") == 1 and '"nan"' in ir, ir


def run_script(path, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("KILN_ARCH", "KILN_BACKEND",
                                                          "KILN_DEBUG")}
    e.update(PYTHONPATH=os.pathsep.join(sys.path), KILN_CPU_THREADS="1", **env)
    r = subprocess.run([sys.executable, str(path)], env=e, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_device_print(tmp_path):
    script = tmp_path / "kprint.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import kiln
        import kiln.language as tl

        @kiln.jit(device="cpu")
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0)
            tl.device_print("vals", x)
            tl.device_print("hex", x, hex=True)
            print("pid", tl.program_id(0))

        k[(2,)](np.array([11, 22, 33, 255], np.int32), 4, BLOCK=4)
    """))
    out = run_script(script).stdout
    lines = out.splitlines()
    vals = [l for l in lines if "vals: " in l]
    assert len(vals) == 8, out  # 2 programs x 4 elements
    for v in (11, 22, 33, 255):
        assert sum(l.rstrip().endswith(f" {v}") for l in vals) == 2, out
    assert any(l.rstrip().endswith("0xff") or l.rstrip().endswith("ff") for l in lines
               if "hex: " in l), out
    pids = [l for l in lines if "pid: " in l]
    assert len(pids) == 2 and pids[0].rstrip().endswith("0") and pids[1].rstrip().endswith("1"), out


def test_device_print_prefix_must_be_a_string():
    @kiln.jit(device="cpu")
    def bad_print(x_ptr):
        tl.device_print(tl.load(x_ptr))  # not a string prefix

    with pytest.raises(kiln.CompilationError, match="expected a constexpr string as the "
                                                    "device_print prefix"):
        bad_print[(1,)](np.zeros(1, np.float32))


# ---------------------------------------------------------------- no GPU: CPU by itself

@pytest.mark.skipif(kiln.has_gpu(), reason="this machine has a GPU")
def test_no_gpu_runs_kernels_on_the_cpu(tmp_path):
    script = tmp_path / "knogpu.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import kiln
        import kiln.language as tl

        @kiln.jit
        def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)

        n = 10000
        x, y = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
        out = np.empty_like(x)
        c = add[(kiln.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        assert np.array_equal(out, x + y)
        print("ran on", c.metadata.arch)
    """))
    assert "ran on cpu" in run_script(script).stdout
    # KILN_BACKEND=gpu without a GPU: the launch fails with a runtime error, not a crash
    script2 = tmp_path / "kforcegpu.py"
    script2.write_text(script.read_text().replace('print("ran on", c.metadata.arch)', "")
                       .replace("c = add", "try:\n    c = add").replace(
        "assert np.array_equal(out, x + y)",
        "except (kiln.KilnError, TypeError) as e:\n    print('refused:', e)"))
    r = run_script(script2, KILN_BACKEND="gpu")
    assert "refused:" in r.stdout, r.stdout
