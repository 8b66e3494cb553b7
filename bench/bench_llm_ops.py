"""LLM ops on the GPU: Kiln (kernels/python/kiln_kernels) beside Triton on the same source
(each kiln_kernels module's twin: its text run under Triton's imports, bench/common.py;
launched with the same grid, tile sizes and num_warps by the same host code below) and torch
eager, in one run.

Each case: correctness of Kiln and Triton against a torch fp64 (or fp32 for the biggest
shapes) reference, then common.do_bench of each (triton.testing.do_bench's method: the L2
zeroed before each timed call, the median).
Prints key=value lines (ms, GB/s counting each tensor read or written once, and Kiln's ratio
to Triton, to torch and to the better of the two, as speed: >1 is faster) and a markdown
table last.

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_llm_ops.py
     [--rep MS] [--rounds N] [--only softmax,rmsnorm,...]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import relerr, report  # noqa: E402

# Set by setup() (torch, Kiln and the kernels are imported once the arguments are read):
# torch, the kiln_kernels modules, and the kernels each library runs by role, KILN (the
# kiln_kernels kernels) and TRITON (their twins: the same modules under Triton, common.twin).
torch = k_ce = k_kl = k_ln = k_rms = k_rope = k_sm = k_sw = None
next_power_of_2 = num_warps_for = row_block = None
KILN = TRITON = None
ROLES = dict(sm_fwd=("softmax", "softmax_fwd_kernel"),
             sm_fwd_loop=("softmax", "softmax_fwd_loop_kernel"),
             sm_fwd_rows=("softmax", "softmax_fwd_rows_kernel"),
             sm_bwd=("softmax", "softmax_bwd_kernel"),
             sm_bwd_loop=("softmax", "softmax_bwd_loop_kernel"),
             rms_fwd=("rmsnorm", "rmsnorm_fwd_kernel"), rms_bwd=("rmsnorm", "rmsnorm_bwd_kernel"),
             ln_fwd=("layernorm", "layernorm_fwd_kernel"),
             ln_bwd=("layernorm", "layernorm_bwd_kernel"),
             ce=("cross_entropy", "cross_entropy_kernel"),
             kl_fwd=("kl_div", "kl_div_fwd_kernel"), kl_bwd=("kl_div", "kl_div_bwd_kernel"),
             sw_fwd=("swiglu", "swiglu_fwd_kernel"), sw_bwd=("swiglu", "swiglu_bwd_kernel"),
             rope=("rope", "rope_kernel"))


def setup():
    global torch, k_ce, k_kl, k_ln, k_rms, k_rope, k_sm, k_sw
    global next_power_of_2, num_warps_for, row_block, KILN, TRITON
    import torch
    common.setup_paths()
    import kiln_kernels
    from kiln_kernels import (cross_entropy as k_ce, kl_div as k_kl, layernorm as k_ln,
                              rmsnorm as k_rms, rope as k_rope, softmax as k_sm, swiglu as k_sw)
    from kiln_kernels._utils import next_power_of_2, num_warps_for, row_block
    KILN = {role: getattr(getattr(kiln_kernels, m), k) for role, (m, k) in ROLES.items()}
    TRITON = {role: getattr(common.twin(getattr(kiln_kernels, m)), k)
              for role, (m, k) in ROLES.items()}


def cdiv(a, b):
    return (a + b - 1) // b


# ====================================================================== shared host code
# The same launches for both: K is KILN or TRITON.


def softmax_fwd(K, x, out, log=False, max_fused=32768, one_row=False):
    # one_row: one row per program even for short rows (the kernel ANCHORS.md measured)
    n_rows, n_cols = x.shape
    block, single = row_block(n_cols, max_fused)
    rows = 1 if one_row or not single else k_sm.rows_per_program(block, x.element_size())
    if rows > 1:
        K["sm_fwd_rows"][(cdiv(n_rows, rows),)](
            out, x, x.stride(0), out.stride(0), n_rows, n_cols, ROWS=rows, BLOCK=block,
            LOG=log, num_warps=num_warps_for(rows * block))
        return out
    K["sm_fwd" if single else "sm_fwd_loop"][(n_rows,)](
        out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block, LOG=log,
        num_warps=num_warps_for(block))
    return out


def softmax_bwd(K, dy, y, dx, log=False, max_fused=32768):
    n_rows, n_cols = y.shape
    block, single = row_block(n_cols, max_fused)
    K["sm_bwd" if single else "sm_bwd_loop"][(n_rows,)](
        dx, dy, y, dx.stride(0), dy.stride(0), y.stride(0), n_cols, BLOCK=block, LOG=log,
        num_warps=num_warps_for(block))
    return dx


def rows_split(n_rows):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    programs = max(1, min(n_rows, sms * 2))
    rpp = cdiv(n_rows, programs)
    return cdiv(n_rows, rpp), rpp


def rms_fwd(K, x, w, y, rstd, eps=1e-6):
    n_rows, n_cols = x.shape
    block = next_power_of_2(n_cols)
    K["rms_fwd"][(n_rows,)](y, x, w, rstd, y.stride(0), x.stride(0), n_cols, eps, BLOCK=block,
                            num_warps=num_warps_for(block))
    return y


def rms_bwd(K, dy, x, w, rstd, dx):
    n_rows, n_cols = x.shape
    block = next_power_of_2(n_cols)
    programs, rpp = rows_split(n_rows)
    partial = torch.empty(programs, n_cols, dtype=torch.float32, device=x.device)
    K["rms_bwd"][(programs,)](dx, dy, x, w, rstd, partial, dx.stride(0), dy.stride(0),
                              x.stride(0), n_rows, n_cols, rpp, BLOCK=block,
                              num_warps=num_warps_for(block))
    return dx, partial.sum(0).to(w.dtype)


def ln_fwd(K, x, w, b, y, mean, rstd, eps=1e-5):
    n_rows, n_cols = x.shape
    block = next_power_of_2(n_cols)
    K["ln_fwd"][(n_rows,)](y, x, w, b, mean, rstd, y.stride(0), x.stride(0), n_cols, eps,
                           BLOCK=block, num_warps=num_warps_for(block))
    return y


def ln_bwd(K, dy, x, w, mean, rstd, dx):
    n_rows, n_cols = x.shape
    block = next_power_of_2(n_cols)
    programs, rpp = rows_split(n_rows)
    dw = torch.empty(programs, n_cols, dtype=torch.float32, device=x.device)
    db = torch.empty(programs, n_cols, dtype=torch.float32, device=x.device)
    K["ln_bwd"][(programs,)](dx, dy, x, w, mean, rstd, dw, db, dx.stride(0), dy.stride(0),
                             x.stride(0), n_rows, n_cols, rpp, BLOCK=block,
                             num_warps=num_warps_for(block))
    return dx, dw.sum(0).to(w.dtype), db.sum(0).to(w.dtype)


def ce_fwd(K, x, target, loss_rows, scale, ignore_index=-100):
    n_rows, n_cols = x.shape
    block = min(next_power_of_2(n_cols), k_ce.CE_BLOCK)
    K["ce"][(n_rows,)](x, target, loss_rows, x.stride(0), n_cols, ignore_index, scale,
                       BLOCK=block, num_warps=k_ce.ce_num_warps(block, n_cols, x.element_size()))
    return loss_rows.sum()


def kl_fwd(K, q, t, loss_rows):
    n_rows, n_cols = q.shape
    block = min(next_power_of_2(n_cols), k_kl.KL_BLOCK)
    K["kl_fwd"][(n_rows,)](q, t, loss_rows, q.stride(0), t.stride(0), 0, n_cols, BLOCK=block,
                           LOG_TARGET=False, ELEMENTWISE=False, num_warps=num_warps_for(block))
    return loss_rows.sum() / n_rows


def kl_bwd(K, go, t, grad):
    n_rows, n_cols = t.shape
    block = min(next_power_of_2(n_cols), k_kl.KL_BLOCK)
    K["kl_bwd"][(n_rows, cdiv(n_cols, block))](
        grad, t, go, grad.stride(0), t.stride(0), 0, n_cols, 1.0 / n_rows, BLOCK=block,
        LOG_TARGET=False, ELEMENTWISE=False, num_warps=num_warps_for(block))
    return grad


def sw_fwd(K, a, b, c):
    n = a.numel()
    K["sw_fwd"][(cdiv(n, k_sw.SWIGLU_BLOCK),)](c, a, b, n, BLOCK=k_sw.SWIGLU_BLOCK,
                                                      num_warps=8)
    return c


def sw_bwd(K, dc, a, b, da, db):
    n = a.numel()
    K["sw_bwd"][(cdiv(n, k_sw.SWIGLU_BLOCK),)](da, db, dc, a, b, n,
                                                      BLOCK=k_sw.SWIGLU_BLOCK, num_warps=8)
    return da, db


def rope_one(K, x, cos, sin, out, backward):
    B, S, H, D = x.shape
    K["rope"][(B * S,)](out, x, cos, sin, S, H, x.stride(0), x.stride(1), x.stride(2),
                        out.stride(0), out.stride(1), out.stride(2), 0, cos.stride(0),
                        HALF=D // 2, BLOCK_H=next_power_of_2(H),
                        BLOCK_D=next_power_of_2(D // 2), BACKWARD=backward, num_warps=4)
    return out


def rope_both(K, q, k, cos, sin, oq, ok, backward=False):
    return rope_one(K, q, cos, sin, oq, backward), rope_one(K, k, cos, sin, ok, backward)


# ====================================================================== measuring

ROWS = []
REP = 100
ROUNDS = 1


def check(key, impl, outs, refs, tol):
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    refs = refs if isinstance(refs, (tuple, list)) else (refs,)
    torch.cuda.synchronize()
    err = max(relerr(o, r) for o, r in zip(outs, refs))
    report(f"{key}_{impl}_relerr", err, "{:.3e}")
    if not err < tol:
        report(f"{key}_{impl}_CHECK", "FAIL")
    return err


def time3(key, nbytes, kiln_fn, triton_fn, torch_fn):
    # ROUNDS > 1: the three are timed in turn, round after round, and each reports its median
    # round; the spread of Kiln/Triton over the rounds is printed too.
    runs = {"kiln": [], "triton": [], "torch": []}
    for _ in range(ROUNDS):
        for name, fn in (("kiln", kiln_fn), ("triton", triton_fn), ("torch", torch_fn)):
            runs[name].append(common.do_bench(fn, warmup=10, rep=REP))
    ms = {name: sorted(t)[len(t) // 2] for name, t in runs.items()}
    if ROUNDS > 1:
        ratios = [t / k for t, k in zip(runs["triton"], runs["kiln"])]
        report(f"{key}_kiln_vs_triton_rounds", " ".join(f"{r:.3f}" for r in ratios))
    for name, t in ms.items():
        report(f"{key}_{name}_ms", t)
        if nbytes:
            report(f"{key}_{name}_gbps", nbytes / t / 1e6, "{:.1f}")
    best = min(ms["triton"], ms["torch"])
    r_t, r_th, r_b = ms["triton"] / ms["kiln"], ms["torch"] / ms["kiln"], best / ms["kiln"]
    report(f"{key}_kiln_vs_triton", r_t)
    report(f"{key}_kiln_vs_torch", r_th)
    report(f"{key}_kiln_vs_best", r_b)
    ROWS.append((key, nbytes, ms, r_t, r_th, r_b))


def tol(dtype):
    return 1e-5 if dtype == torch.float32 else 1e-2


# ====================================================================== cases

def bench_softmax():
    for dtype in (torch.float32, torch.bfloat16):
        dn = "fp32" if dtype == torch.float32 else "bf16"
        for (M, N) in ((32768, 1024), (8192, 8192), (4096, 32768)):
            key = f"softmax_{dn}_{M}x{N}"
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            dy = torch.randn(M, N, device="cuda", dtype=dtype)
            ref = torch.softmax(x.float(), -1)
            yk, yt = torch.empty_like(x), torch.empty_like(x)
            softmax_fwd(KILN, x, yk)
            softmax_fwd(TRITON, x, yt)
            check(key + "_fwd", "kiln", yk, ref, tol(dtype))
            check(key + "_fwd", "triton", yt, ref, tol(dtype))
            nb = 2 * x.numel() * x.element_size()
            time3(key + "_fwd", nb, lambda: softmax_fwd(KILN, x, yk),
                  lambda: softmax_fwd(TRITON, x, yt), lambda: torch.softmax(x, -1))
            if k_sm.rows_per_program(next_power_of_2(N), x.element_size()) > 1:
                # Kiln's kernel (several rows per program) against the one-row Triton kernel
                softmax_fwd(TRITON, x, yt, one_row=True)
                check(key + "_fwd_one_row", "triton", yt, ref, tol(dtype))
                time3(key + "_fwd_vs_triton_one_row", nb, lambda: softmax_fwd(KILN, x, yk),
                      lambda: softmax_fwd(TRITON, x, yt, one_row=True),
                      lambda: torch.softmax(x, -1))
            y = yk
            dref = torch._softmax_backward_data(dy.float(), ref, -1, torch.float32)
            dk, dt_ = torch.empty_like(x), torch.empty_like(x)
            softmax_bwd(KILN, dy, y, dk)
            softmax_bwd(TRITON, dy, y, dt_)
            check(key + "_bwd", "kiln", dk, dref, 10 * tol(dtype))
            check(key + "_bwd", "triton", dt_, dref, 10 * tol(dtype))
            time3(key + "_bwd", 3 * x.numel() * x.element_size(),
                  lambda: softmax_bwd(KILN, dy, y, dk), lambda: softmax_bwd(TRITON, dy, y, dt_),
                  lambda: torch._softmax_backward_data(dy, y, -1, dtype))
            if N == 32768:  # the looped kernel on the longest rows, for reference
                softmax_fwd(KILN, x, yk, max_fused=8192)
                check(key + "_fwd_loop", "kiln", yk, ref, tol(dtype))
                time3(key + "_fwd_loop", nb, lambda: softmax_fwd(KILN, x, yk, max_fused=8192),
                      lambda: softmax_fwd(TRITON, x, yt, max_fused=8192),
                      lambda: torch.softmax(x, -1))
            # log-softmax at the middle shape
            if N == 8192:
                lref = torch.log_softmax(x.float(), -1)
                softmax_fwd(KILN, x, yk, log=True)
                check(f"log_softmax_{dn}_{M}x{N}_fwd", "kiln", yk, lref, tol(dtype))
                time3(f"log_softmax_{dn}_{M}x{N}_fwd", nb,
                      lambda: softmax_fwd(KILN, x, yk, log=True),
                      lambda: softmax_fwd(TRITON, x, yt, log=True),
                      lambda: torch.log_softmax(x, -1))
            del x, dy, ref, yk, yt, dk, dt_, dref
            torch.cuda.empty_cache()


def bench_rmsnorm():
    for (M, N) in ((16384, 4096), (8192, 8192)):
        key = f"rmsnorm_bf16_{M}x{N}"
        dt = torch.bfloat16
        x = torch.randn(M, N, device="cuda", dtype=dt)
        w = (1 + 0.1 * torch.randn(N, device="cuda")).to(dt)
        dy = torch.randn(M, N, device="cuda", dtype=dt)
        xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
        ref = xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr
        ref.backward(dy.float())
        yk, yt = torch.empty_like(x), torch.empty_like(x)
        rk = torch.empty(M, device="cuda")
        rt = torch.empty(M, device="cuda")
        rms_fwd(KILN, x, w, yk, rk)
        rms_fwd(TRITON, x, w, yt, rt)
        check(key + "_fwd", "kiln", yk, ref, 1e-2)
        check(key + "_fwd", "triton", yt, ref, 1e-2)
        torch_rms = torch.nn.functional.rms_norm
        time3(key + "_fwd", 2 * x.numel() * 2, lambda: rms_fwd(KILN, x, w, yk, rk),
              lambda: rms_fwd(TRITON, x, w, yt, rt), lambda: torch_rms(x, (N,), w, 1e-6))
        dxk, dxt = torch.empty_like(x), torch.empty_like(x)
        check(key + "_bwd", "kiln", rms_bwd(KILN, dy, x, w, rk, dxk), (xr.grad, wr.grad), 1e-2)
        check(key + "_bwd", "triton", rms_bwd(TRITON, dy, x, w, rt, dxt), (xr.grad, wr.grad),
              1e-2)
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        yg = torch_rms(xg, (N,), wg, 1e-6)
        time3(key + "_bwd", 3 * x.numel() * 2, lambda: rms_bwd(KILN, dy, x, w, rk, dxk),
              lambda: rms_bwd(TRITON, dy, x, w, rt, dxt),
              lambda: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True))
        del x, dy, xr, wr, ref, yk, yt, dxk, dxt, xg, yg
        torch.cuda.empty_cache()


def bench_layernorm():
    M, N = 16384, 4096
    key = f"layernorm_bf16_{M}x{N}"
    dt = torch.bfloat16
    x = torch.randn(M, N, device="cuda", dtype=dt)
    w = (1 + 0.1 * torch.randn(N, device="cuda")).to(dt)
    b = (0.1 * torch.randn(N, device="cuda")).to(dt)
    dy = torch.randn(M, N, device="cuda", dtype=dt)
    xr, wr, br = (v.float().requires_grad_() for v in (x, w, b))
    ref = torch.nn.functional.layer_norm(xr, (N,), wr, br, 1e-5)
    ref.backward(dy.float())
    yk, yt = torch.empty_like(x), torch.empty_like(x)
    mk, rk, mt, rt = (torch.empty(M, device="cuda") for _ in range(4))
    ln_fwd(KILN, x, w, b, yk, mk, rk)
    ln_fwd(TRITON, x, w, b, yt, mt, rt)
    check(key + "_fwd", "kiln", yk, ref, 1e-2)
    check(key + "_fwd", "triton", yt, ref, 1e-2)
    F = torch.nn.functional
    time3(key + "_fwd", 2 * x.numel() * 2, lambda: ln_fwd(KILN, x, w, b, yk, mk, rk),
          lambda: ln_fwd(TRITON, x, w, b, yt, mt, rt), lambda: F.layer_norm(x, (N,), w, b, 1e-5))
    dxk, dxt = torch.empty_like(x), torch.empty_like(x)
    grads = (xr.grad, wr.grad, br.grad)
    check(key + "_bwd", "kiln", ln_bwd(KILN, dy, x, w, mk, rk, dxk), grads, 1e-2)
    check(key + "_bwd", "triton", ln_bwd(TRITON, dy, x, w, mt, rt, dxt), grads, 1e-2)
    xg, wg, bg = (v.clone().requires_grad_() for v in (x, w, b))
    yg = F.layer_norm(xg, (N,), wg, bg, 1e-5)
    time3(key + "_bwd", 3 * x.numel() * 2, lambda: ln_bwd(KILN, dy, x, w, mk, rk, dxk),
          lambda: ln_bwd(TRITON, dy, x, w, mt, rt, dxt),
          lambda: torch.autograd.grad(yg, (xg, wg, bg), dy, retain_graph=True))
    del x, dy, xr, ref, yk, yt, dxk, dxt, xg, yg
    torch.cuda.empty_cache()


def bench_cross_entropy():
    for dtype in (torch.float32, torch.bfloat16):
        dn = "fp32" if dtype == torch.float32 else "bf16"
        M, V = 8192, 32000
        key = f"cross_entropy_{dn}_{M}x{V}"
        x = torch.randn(M, V, device="cuda", dtype=dtype)
        target = torch.randint(0, V, (M,), device="cuda")
        target[::13] = -100
        n_valid = int((target != -100).sum())
        xr = x.float().requires_grad_()
        ref = torch.nn.functional.cross_entropy(xr, target, ignore_index=-100)
        ref.backward()
        lk, lt = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
        xk, xt = x.clone(), x.clone()
        outk = ce_fwd(KILN, xk, target, lk, 1.0 / n_valid)
        outt = ce_fwd(TRITON, xt, target, lt, 1.0 / n_valid)
        check(key + "_fwdbwd", "kiln", (outk, xk), (ref, xr.grad), tol(dtype))
        check(key + "_fwdbwd", "triton", (outt, xt), (ref, xr.grad), tol(dtype))
        del xr, ref
        xg = x.clone().requires_grad_()

        def torch_fwdbwd():  # autograd.grad: no accumulation into xg.grad
            loss = torch.nn.functional.cross_entropy(xg, target, ignore_index=-100)
            return torch.autograd.grad(loss, xg)
        # Kiln/Triton: loss and gradient in one kernel (the gradient overwrites the logits;
        # re-running on the overwritten buffer reads finite values, the same work)
        nb = 2 * x.numel() * x.element_size()
        time3(key + "_fwdbwd", nb, lambda: ce_fwd(KILN, xk, target, lk, 1.0 / n_valid),
              lambda: ce_fwd(TRITON, xt, target, lt, 1.0 / n_valid), torch_fwdbwd)
        del x, xk, xt, xg
        torch.cuda.empty_cache()


def bench_kl_div():
    M, N = 4096, 32000
    key = f"kl_div_fp32_{M}x{N}_batchmean"
    q = torch.log_softmax(torch.randn(M, N, device="cuda"), -1)
    p = torch.softmax(torch.randn(M, N, device="cuda"), -1)
    F = torch.nn.functional
    ref = F.kl_div(q.double(), p.double(), reduction="batchmean")
    lk, lt = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
    check(key + "_fwd", "kiln", kl_fwd(KILN, q, p, lk), ref, 1e-5)
    check(key + "_fwd", "triton", kl_fwd(TRITON, q, p, lt), ref, 1e-5)
    time3(key + "_fwd", 2 * q.numel() * 4, lambda: kl_fwd(KILN, q, p, lk),
          lambda: kl_fwd(TRITON, q, p, lt), lambda: F.kl_div(q, p, reduction="batchmean"))
    go = torch.tensor(1.0, device="cuda")
    gk, gt = torch.empty_like(q), torch.empty_like(q)
    gref = -p / M
    check(key + "_bwd", "kiln", kl_bwd(KILN, go, p, gk), gref, 1e-5)
    check(key + "_bwd", "triton", kl_bwd(TRITON, go, p, gt), gref, 1e-5)
    qg = q.clone().requires_grad_()
    lg = F.kl_div(qg, p, reduction="batchmean")
    time3(key + "_bwd", 2 * q.numel() * 4, lambda: kl_bwd(KILN, go, p, gk),
          lambda: kl_bwd(TRITON, go, p, gt),
          lambda: torch.autograd.grad(lg, qg, go, retain_graph=True))
    del q, p, gk, gt, gref, qg, lg
    torch.cuda.empty_cache()


def bench_swiglu():
    M, N = 4096, 14336
    key = f"swiglu_bf16_{M}x{N}"
    dt = torch.bfloat16
    a, b, dc = (torch.randn(M, N, device="cuda", dtype=dt) for _ in range(3))
    F = torch.nn.functional
    ar, br = a.float().requires_grad_(), b.float().requires_grad_()
    ref = F.silu(ar) * br
    ref.backward(dc.float())
    ck, ct = torch.empty_like(a), torch.empty_like(a)
    check(key + "_fwd", "kiln", sw_fwd(KILN, a, b, ck), ref, 1e-2)
    check(key + "_fwd", "triton", sw_fwd(TRITON, a, b, ct), ref, 1e-2)
    time3(key + "_fwd", 3 * a.numel() * 2, lambda: sw_fwd(KILN, a, b, ck),
          lambda: sw_fwd(TRITON, a, b, ct), lambda: F.silu(a) * b)
    dak, dbk, dat, dbt = (torch.empty_like(a) for _ in range(4))
    check(key + "_bwd", "kiln", sw_bwd(KILN, dc, a, b, dak, dbk), (ar.grad, br.grad), 1e-2)
    check(key + "_bwd", "triton", sw_bwd(TRITON, dc, a, b, dat, dbt), (ar.grad, br.grad), 1e-2)
    del ar, br, ref
    ag, bg = a.clone().requires_grad_(), b.clone().requires_grad_()
    cg = F.silu(ag) * bg
    time3(key + "_bwd", 5 * a.numel() * 2, lambda: sw_bwd(KILN, dc, a, b, dak, dbk),
          lambda: sw_bwd(TRITON, dc, a, b, dat, dbt),
          lambda: torch.autograd.grad(cg, (ag, bg), dc, retain_graph=True))
    del a, b, dc, ck, ct, dak, dbk, dat, dbt, ag, bg, cg
    torch.cuda.empty_cache()


def bench_rope():
    B, S, Hq, Hk, D = 4, 4096, 32, 8, 128
    key = f"rope_bf16_b{B}_s{S}_hq{Hq}_hk{Hk}_d{D}"
    dt = torch.bfloat16
    q = torch.randn(B, S, Hq, D, device="cuda", dtype=dt)
    k = torch.randn(B, S, Hk, D, device="cuda", dtype=dt)
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2, device="cuda", dtype=torch.float32) / D))
    freqs = torch.outer(torch.arange(S, device="cuda", dtype=torch.float32), inv)
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos().to(dt), emb.sin().to(dt)
    c4, s4 = cos[None, :, None, :], sin[None, :, None, :]

    def rot(x):
        return torch.cat((-x[..., D // 2:], x[..., :D // 2]), -1)

    def torch_rope(q, k):
        return q * c4 + rot(q) * s4, k * c4 + rot(k) * s4

    ref = tuple(t.float() * c4.float() + rot(t.float()) * s4.float() for t in (q, k))
    oqk, okk, oqt, okt = (torch.empty_like(t) for t in (q, k, q, k))
    check(key + "_fwd", "kiln", rope_both(KILN, q, k, cos, sin, oqk, okk), ref, 1e-2)
    check(key + "_fwd", "triton", rope_both(TRITON, q, k, cos, sin, oqt, okt), ref, 1e-2)
    nb = 2 * (q.numel() + k.numel()) * 2
    time3(key + "_fwd", nb, lambda: rope_both(KILN, q, k, cos, sin, oqk, okk),
          lambda: rope_both(TRITON, q, k, cos, sin, oqt, okt), lambda: torch_rope(q, k))
    qf, kf = q.float().requires_grad_(), k.float().requires_grad_()
    rf = tuple(t * c4.float() + rot(t) * s4.float() for t in (qf, kf))
    gq, gk = torch.autograd.grad(rf, (qf, kf), (q.float(), k.float()))
    del qf, kf, rf
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
    rq, rk = torch_rope(qg, kg)
    check(key + "_bwd", "kiln", rope_both(KILN, q, k, cos, sin, oqk, okk, True), (gq, gk), 1e-2)
    check(key + "_bwd", "triton", rope_both(TRITON, q, k, cos, sin, oqt, okt, True), (gq, gk),
          1e-2)
    time3(key + "_bwd", nb, lambda: rope_both(KILN, q, k, cos, sin, oqk, okk, True),
          lambda: rope_both(TRITON, q, k, cos, sin, oqt, okt, True),
          lambda: torch.autograd.grad((rq, rk), (qg, kg), (q, k), retain_graph=True))


CASES = dict(softmax=bench_softmax, rmsnorm=bench_rmsnorm, layernorm=bench_layernorm,
             cross_entropy=bench_cross_entropy, kl_div=bench_kl_div, swiglu=bench_swiglu,
             rope=bench_rope)


def main():
    global REP, ROUNDS
    ap = argparse.ArgumentParser()
    ap.add_argument("--rep", type=int, default=100, help="do_bench rep (ms)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time Kiln, Triton and torch in turn this many times; report medians")
    ap.add_argument("--only", default="", help="comma-separated subset of " + ",".join(CASES))
    args = ap.parse_args()
    REP, ROUNDS = args.rep, args.rounds
    setup()
    torch.manual_seed(0)
    print(common.device_line(), flush=True)
    for name, fn in CASES.items():
        if args.only and name not in args.only.split(","):
            continue
        try:
            fn()
        except Exception as e:  # keep going: one failing case must not hide the others
            report(f"{name}_ERROR", repr(e).replace("\n", " ")[:500])
        torch.cuda.empty_cache()
    print()
    print("| case | Kiln ms | Triton ms | torch ms | Kiln GB/s | Kiln/Triton | Kiln/torch |"
          " Kiln/best |")
    print("|---|---|---|---|---|---|---|---|")
    for key, nb, ms, r_t, r_th, r_b in ROWS:
        gb = f"{nb / ms['kiln'] / 1e6:.0f}" if nb else "-"
        print(f"| {key} | {ms['kiln']:.4f} | {ms['triton']:.4f} | {ms['torch']:.4f} | {gb} |"
              f" {r_t:.3f} | {r_th:.3f} | {r_b:.3f} |")
    print("\nratios are speed (time of the peer / time of Kiln): >= 1 means Kiln is as fast or"
          " faster")


if __name__ == "__main__":
    main()
