"""The kernels of bench/cliff_sources_norms.py (the cliffs benchmark's backward row kernels,
issue #23) on Kiln's CPU backend with numpy arrays, against float64 numpy references
computed from the same rounded inputs (errors ||out - ref|| / ||ref||); row lengths that
are not powers of two, row counts that leave the last program short, ignored targets.

Compile-only: every kernel at every (BLOCK_SIZE, num_warps) bench/cliffs_norms.py tries,
to PTX for sm_90. With torch (skipped without it): cliffs_norms.rows, the benchmark's host
code, as a dry run on Kiln's CPU backend at tiny shapes. GPU (marker `gpu`): rows at tiny
shapes, Kiln and (when importable) Triton on the same source, every error small.
"""
import os
import sys
import types

import numpy as np
import pytest

import kiln

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))

import cliff_sources_norms as ks  # noqa: E402
import cliffs_norms  # noqa: E402

CPU = dict(device="cpu")
TOL = 1e-2  # bf16 outputs


def bf16():
    return pytest.importorskip("ml_dtypes").bfloat16


def f64(a):
    return np.asarray(a).astype(np.float64)


def relerr(out, ref):
    out, ref = f64(out), f64(ref)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def next_pow2(n):
    return 1 << (n - 1).bit_length()


def randn(rng, shape, dtype, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape).astype(np.float32) * scale + shift).astype(dtype)


# ---------------------------------------------------------------- layer norm

@pytest.mark.parametrize("n_rows,n_cols,programs", [(37, 200, 6), (16, 128, 4), (5, 96, 8)])
def test_layer_norm_bwd(n_rows, n_cols, programs):
    bt = bf16()
    rng = np.random.default_rng(1)
    x = randn(rng, (n_rows, n_cols), bt, 1.0, 0.5)
    w = randn(rng, (n_cols,), bt, 0.1, 1.0)
    dy = randn(rng, (n_rows, n_cols), bt)
    xf = f64(x)
    mu = xf.mean(1)
    mean = mu.astype(bt)  # the library keeps the statistics in the input dtype
    rstd = (1.0 / np.sqrt(((xf - mu[:, None]) ** 2).mean(1) + 1e-5)).astype(bt)
    dx = np.zeros_like(x)
    dw_part = np.full((programs, n_cols), np.nan, np.float32)
    db_part = np.full((programs, n_cols), np.nan, np.float32)
    rpp = -(-n_rows // programs)
    ks.layer_norm_bwd[(programs,)](x, w, mean, rstd, dy, dx, dw_part, db_part,
                                   n_cols, n_cols, n_cols, n_cols, n_cols,
                                   n_rows, n_cols, rpp, BLOCK_SIZE=next_pow2(n_cols),
                                   num_warps=4, **CPU)
    used = -(-n_rows // rpp)  # programs past the last row store zero partials
    assert np.all(dw_part[used:] == 0) and np.all(db_part[used:] == 0)
    dw, db = dw_part.sum(0), db_part.sum(0)
    g, wf = f64(dy), f64(w)
    r = f64(rstd)[:, None]
    xhat = (xf - f64(mean)[:, None]) * r
    wdy = g * wf
    dx_ref = (wdy - (xhat * (xhat * wdy).mean(1, keepdims=True)
                     + wdy.mean(1, keepdims=True))) * r
    assert relerr(dx, dx_ref) < TOL
    assert relerr(dw, (g * xhat).sum(0)) < 1e-5
    assert relerr(db, g.sum(0)) < 1e-5


# ---------------------------------------------------------------- RMS norm

@pytest.mark.parametrize("n_rows,n_cols,programs", [(37, 200, 6), (16, 128, 4)])
def test_rms_norm_bwd(n_rows, n_cols, programs):
    bt = bf16()
    rng = np.random.default_rng(2)
    x = randn(rng, (n_rows, n_cols), bt)
    w = randn(rng, (n_cols,), bt, 0.1, 1.0)
    dy = randn(rng, (n_rows, n_cols), bt)
    xf = f64(x)
    rstd = (1.0 / np.sqrt((xf * xf).mean(1) + 1e-6)).astype(np.float32)
    dx = np.zeros_like(x)
    dw_part = np.full((programs, n_cols), np.nan, np.float32)
    rpp = -(-n_rows // programs)
    ks.rms_norm_bwd[(programs,)](dy, x, w, rstd, dx, dw_part, n_cols, n_cols, n_cols, n_cols,
                                 n_rows, n_cols, rpp, 0.0, BLOCK_SIZE=next_pow2(n_cols),
                                 num_warps=4, **CPU)
    dw = dw_part.sum(0)
    g, wf, r = f64(dy), f64(w), f64(rstd)[:, None]
    xhat = xf * r
    gw = g * wf
    dx_ref = r * (gw - xhat * (gw * xhat).mean(1, keepdims=True))
    assert relerr(dx, dx_ref) < TOL
    assert relerr(dw, (g * xhat).sum(0)) < TOL  # x * rstd rounded to bf16 (Llama casting)


# ---------------------------------------------------------------- group norm

@pytest.mark.parametrize("batch,channels,groups,hidden,block",
                         [(3, 8, 2, 100, 32), (2, 12, 3, 64, 64), (2, 4, 4, 33, 16)])
def test_group_norm_bwd(batch, channels, groups, hidden, block):
    bt = bf16()
    rng = np.random.default_rng(3)
    x = randn(rng, (batch, channels, hidden), bt, 1.0, 0.3)
    w = randn(rng, (channels,), bt, 0.1, 1.0)
    dy = randn(rng, (batch, channels, hidden), bt)
    cpg = channels // groups
    xg = f64(x).reshape(batch, groups, cpg * hidden)
    mu = xg.mean(-1)
    mean = mu.astype(bt)
    rstd = (1.0 / np.sqrt(((xg - mu[..., None]) ** 2).mean(-1) + 1e-5)).astype(bt)
    dx = np.zeros_like(x)
    dw_part = np.full((batch, channels), np.nan, np.float32)
    db_part = np.full((batch, channels), np.nan, np.float32)
    ks.group_norm_bwd[(batch, groups)](x, w, mean, rstd, dy, dx, dw_part, db_part,
                                       channels * hidden, hidden, groups, channels,
                                       cpg, hidden, BLOCK_SIZE=block, num_warps=4, **CPU)
    dw, db = dw_part.sum(0), db_part.sum(0)
    g = f64(dy)
    r = np.repeat(f64(rstd), cpg, axis=1)[..., None]  # [batch, channels, 1]
    m = np.repeat(f64(mean), cpg, axis=1)[..., None]
    xhat = (f64(x) - m) * r
    wdy = g * f64(w)[None, :, None]
    n = cpg * hidden
    c1 = (xhat * wdy).reshape(batch, groups, n).sum(-1) / n
    c2 = wdy.reshape(batch, groups, n).sum(-1) / n
    c1 = np.repeat(c1, cpg, axis=1)[..., None]
    c2 = np.repeat(c2, cpg, axis=1)[..., None]
    dx_ref = (wdy - (xhat * c1 + c2)) * r
    assert relerr(dx, dx_ref) < TOL
    assert relerr(dw, (g * xhat).sum((0, 2))) < 1e-5
    assert relerr(db, g.sum((0, 2))) < 1e-5


# ---------------------------------------------------------------- cross-entropy

@pytest.mark.parametrize("n_rows,vocab,block", [(9, 1000, 256), (6, 513, 512), (4, 64, 128)])
def test_cross_entropy_fwd_bwd(n_rows, vocab, block):
    bt = bf16()
    rng = np.random.default_rng(4)
    x = randn(rng, (n_rows, vocab), bt, 2.0)
    target = rng.integers(0, vocab, n_rows).astype(np.int64)
    target[::4] = -100  # ignored rows
    target[1] = vocab - 1  # the last column, in the last (partial) block
    valid = target != -100
    n_valid = int(valid.sum())
    xd = f64(x)
    m = xd.max(1, keepdims=True)
    lse = m + np.log(np.exp(xd - m).sum(1, keepdims=True))
    t = np.where(valid, target, 0)
    loss_ref = (lse[:, 0] - xd[np.arange(n_rows), t]) * valid / n_valid
    onehot = np.zeros_like(xd)
    onehot[np.arange(n_rows), t] = 1.0
    grad_ref = (np.exp(xd - lse) - onehot) * valid[:, None] / n_valid
    grad = x.copy()
    loss = np.full((n_rows,), np.nan, np.float32)
    ks.cross_entropy_fwd_bwd[(n_rows,)](grad, vocab, target, loss, vocab, n_valid, -100,
                                        BLOCK_SIZE=block, num_warps=4, **CPU)
    assert np.all(f64(grad)[~valid] == 0) and np.all(loss[~valid] == 0)
    assert relerr(loss, loss_ref) < 1e-5
    assert abs(float(loss.sum()) - loss_ref.sum()) < 1e-5 * abs(loss_ref.sum())
    assert relerr(grad, grad_ref) < TOL


# ---------------------------------------------------------------- compile-only (no GPU)

D16 = "i32:16"
SIGNATURES = {
    "layer_norm_bwd": dict(
        X_ptr="*bf16:16", W_ptr="*bf16:16", Mean_ptr="*bf16:16", RSTD_ptr="*bf16:16",
        DY_ptr="*bf16:16", DX_ptr="*bf16:16", DW_ptr="*fp32:16", DB_ptr="*fp32:16",
        stride_x=D16, stride_dy=D16, stride_dx=D16, stride_dw=D16, stride_db=D16,
        n_rows=D16, n_cols=D16, rows_per_program="i32"),
    "rms_norm_bwd": dict(
        DY_ptr="*bf16:16", X_ptr="*bf16:16", W_ptr="*bf16:16", RSTD_ptr="*fp32:16",
        DX_ptr="*bf16:16", DW_ptr="*fp32:16", stride_dy=D16, stride_x=D16, stride_dx=D16,
        stride_dw=D16, n_rows=D16, n_cols=D16, rows_per_program="i32", offset="fp32"),
    "group_norm_bwd": dict(
        X_ptr="*bf16:16", W_ptr="*bf16:16", Mean_ptr="*bf16:16", RSTD_ptr="*bf16:16",
        DY_ptr="*bf16:16", DX_ptr="*bf16:16", DW_ptr="*fp32:16", DB_ptr="*fp32:16",
        stride_x_batch=D16, stride_x_channel=D16, stride_stat_batch=D16,
        stride_dw_batch=D16, channels_per_group=D16, hidden_size=D16),
    "cross_entropy": dict(
        X_ptr="*bf16:16", X_stride=D16, Y_ptr="*i64:16", Loss_ptr="*fp32:16", n_cols=D16,
        n_non_ignore="i32", ignore_index="i32"),
}
KERNEL = {"cross_entropy": ks.cross_entropy_fwd_bwd}
BENCH_CONFIGS = sorted({(case, cfg) for case in cliffs_norms.CASES
                        for shape in cliffs_norms.SHAPES[case]
                        for cfg in cliffs_norms.configs(case, shape, False)})


@pytest.mark.parametrize("case,cfg", BENCH_CONFIGS, ids=lambda v: str(v))
def test_compiles_to_ptx(case, cfg):
    fn = KERNEL.get(case) or getattr(ks, case)
    block, warps = cfg
    k = kiln.compile(fn, signature=SIGNATURES[case], constexprs=dict(BLOCK_SIZE=block),
                     target="sm_90", num_warps=warps)
    ptx = k.asm["ptx"]
    assert f".entry {fn.__name__}" in ptx
    assert "ld.global" in ptx and "st.global" in ptx


# ---------------------------------------------------------------- the benchmark's host code

def _wall_timer(fn):
    import time
    import common
    t0 = time.perf_counter()
    fn()
    return common.Timing([(time.perf_counter() - t0) * 1e3])


def test_section_rows_cpu_dry_run(monkeypatch):
    torch = pytest.importorskip("torch")
    import common
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    ctx = types.SimpleNamespace(torch=torch, kiln=kiln, triton=None, common=common, sms=6,
                                quick=True, timer=_wall_timer, device="cpu")
    rows = cliffs_norms.rows(ctx, shapes=cliffs_norms.TINY_SHAPES)
    assert [r["case"] for r in rows] == list(cliffs_norms.CASES)
    for r in rows:
        assert r["kiln_cfg"] is not None and r["kiln"] > 0, r
        assert r["kiln_err"] < 1e-2, r
        assert r["triton_cfg"] is None and r["triton_err"] is None


# ---------------------------------------------------------------- GPU: the benchmark section

@pytest.mark.gpu
def test_section_rows_gpu():
    torch = pytest.importorskip("torch")
    import common
    import cliffs_norms
    triton, _ = common.triton_or_none()
    ctx = types.SimpleNamespace(
        torch=torch, kiln=kiln, triton=triton, common=common, sms=8, quick=True,
        timer=lambda fn: common.time_calls(fn, reps=2, warmup=1))
    rows = cliffs_norms.rows(ctx, shapes=cliffs_norms.TINY_SHAPES)
    assert {r["case"] for r in rows} == set(cliffs_norms.CASES)
    for r in rows:
        assert r["kiln_cfg"] is not None, r
        assert r["kiln_err"] < 2e-2, r
        if triton is not None:
            assert r["triton_cfg"] is not None and r["triton_err"] < 2e-2, r


def test_group_norm_second_walk_is_vectorized():
    # Pass 2 walks the row pointers the channel loop of pass 1 advanced (X_ptr += stride) and
    # then stepped back: the loop's result keeps the pointer's alignment, so both passes load
    # 16 bytes at a time (a 4096-element block of bf16 on 8 warps: 2 vectors of x and of dy a
    # pass) and dx is stored 16 bytes at a time. Before: pass 2 loaded and stored one element
    # at a time (32 ld.global.b16, 16 st.global.b16 a thread).
    import re
    P = "*bf16:16"
    sig = dict(X_ptr=P, W_ptr=P, Mean_ptr="*fp32:16", RSTD_ptr="*fp32:16", DY_ptr=P, DX_ptr=P,
               DW_ptr="*fp32:16", DB_ptr="*fp32:16", stride_x_batch="i32:16",
               stride_x_channel="i32:16", stride_stat_batch="i32:16",
               stride_dw_batch="i32:16", channels_per_group="i32:16", hidden_size="i32:16")
    ptx = kiln.compile(ks.group_norm_bwd, signature=sig, constexprs=dict(BLOCK_SIZE=4096),
                       target="sm_90a", num_warps=8).asm["ptx"]
    assert len(re.findall(r"ld\.global\.v4", ptx)) == 8
    assert len(re.findall(r"st\.global\.v4", ptx)) == 2
    assert not re.findall(r"st\.global\.b16", ptx)
