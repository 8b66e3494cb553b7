"""Flash attention backward on the GPU: Kiln (kernels/python/kiln_kernels/flash_attention_bwd.py)
beside a Triton kernel of the same algorithm (the same three kernels, written below with
`import triton.language as tl`, launched with the same grids, tiles, num_warps and
num_stages) and torch SDPA's backward on its flash backend, in one run.

Each case: q, k, v, dO (B, H, S, D) from randn; the forward (Kiln's) gives O and the
logsumexp; Kiln's and Triton's dq, dk, dv are checked against SDPA's (max |g - ref| / max
|ref|), then each backward is timed as the median of per-launch CUDA-event timings (the three
kernels together; SDPA: torch.autograd.grad of its output). TFLOP/s counts 2.5x the forward's
flops (five products against two: 10 * B * H * S^2 * D, halved for causal). Kiln and Triton
run at each of --tiles (m1xn1:m2xn2:warps:stages; dK/dV tiles, then dQ tiles); each one's
fastest is its figure, and the table names it.

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_attention_bwd.py
     [--shapes 4x32x4096,1x32x16384] [--head-dim 128] [--dtype fp16] [--causal both]
     [--rep 50] [--tiles 64x128:128x64:8:2,...]
"""
import argparse
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels",
                                "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln  # noqa: E402,F401
from kiln_kernels import flash_attention as k_fa  # noqa: E402
from kiln_kernels import flash_attention_bwd as k_fab  # noqa: E402
from bench_attention import bench_ms, sdpa_flash  # noqa: E402

# ====================================================================== Triton twin


@triton.jit
def t_bwd_delta(O, DO, Delta, stride_oz, stride_oh, stride_om, stride_ok,
                stride_dz, stride_dh, stride_dm, stride_dk, H, N_CTX,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    o = tl.load(O + off_z * stride_oz + off_h * stride_oh + offs_m[:, None] * stride_om
                + offs_d[None, :] * stride_ok, mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + off_z * stride_dz + off_h * stride_dh + offs_m[:, None] * stride_dm
                 + offs_d[None, :] * stride_dk, mask=row_ok[:, None], other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(Delta + off_hz.to(tl.int64) * N_CTX + offs_m, delta, mask=row_ok)


@triton.jit
def t_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_qk,
                     stride_dm, stride_dk, qk_scale, offs_n, lo, hi,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, DIAGONAL: tl.constexpr):
    offs_d = tl.arange(0, HEAD_DIM)
    offs_r = tl.arange(0, BLOCK_M)
    for start_m in range(lo, hi, BLOCK_M):
        rows = start_m + offs_r
        qT = tl.load(q_base + offs_d[:, None] * stride_qk + rows[None, :] * stride_qm)
        q = tl.load(q_base + rows[:, None] * stride_qm + offs_d[None, :] * stride_qk)
        do = tl.load(do_base + rows[:, None] * stride_dm + offs_d[None, :] * stride_dk)
        doT = tl.load(do_base + offs_d[:, None] * stride_dk + rows[None, :] * stride_dm)
        lse = tl.load(lse_base + rows)
        delta = tl.load(delta_base + rows)
        pT = tl.exp2(tl.dot(k, qT) * qk_scale - (lse * 1.4426950408889634)[None, :])
        if DIAGONAL:
            pT = tl.where(rows[None, :] >= offs_n[:, None], pT, 0.0)
        dv = tl.dot(pT.to(do.dtype), do, dv)
        dpT = tl.dot(v, doT)
        dsT = pT * (dpT - delta[None, :])
        dk = tl.dot(dsT.to(q.dtype), q, dk)
    return dk, dv


@triton.jit
def t_bwd_dkdv(Q, K, V, DO, DK, DV, LSE, Delta, sm_scale,
               stride_qz, stride_qh, stride_qm, stride_qk,
               stride_kz, stride_kh, stride_kn, stride_kk,
               stride_vz, stride_vh, stride_vn, stride_vk,
               stride_dz, stride_dh, stride_dm, stride_dk,
               H, N_CTX,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr):
    start_n = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_base = Q + off_z * stride_qz + off_h * stride_qh
    do_base = DO + off_z * stride_dz + off_h * stride_dh
    lse_base = LSE + off_hz.to(tl.int64) * N_CTX
    delta_base = Delta + off_hz.to(tl.int64) * N_CTX
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_off = offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kk
    k = tl.load(K + off_z * stride_kz + off_h * stride_kh + kv_off)
    v = tl.load(V + off_z * stride_vz + off_h * stride_vh + offs_n[:, None] * stride_vn
                + offs_d[None, :] * stride_vk)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        lo = start_n * BLOCK_N
        mid = lo + BLOCK_N
        dk, dv = t_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                                  stride_qm, stride_qk, stride_dm, stride_dk, qk_scale, offs_n,
                                  lo, mid, HEAD_DIM, BLOCK_M, True)
    else:
        mid = 0
    dk, dv = t_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm,
                              stride_qk, stride_dm, stride_dk, qk_scale, offs_n, mid, N_CTX,
                              HEAD_DIM, BLOCK_M, False)
    tl.store(DV + off_z * stride_kz + off_h * stride_kh + kv_off, dv.to(DV.dtype.element_ty))
    tl.store(DK + off_z * stride_kz + off_h * stride_kh + kv_off,
             (dk * sm_scale).to(DK.dtype.element_ty))


@triton.jit
def t_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_kk, stride_vn,
                   stride_vk, qk_scale, offs_m, lo, hi,
                   HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    offs_d = tl.arange(0, HEAD_DIM)
    offs_c = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_c
        kT = tl.load(k_base + offs_d[:, None] * stride_kk + cols[None, :] * stride_kn)
        k = tl.load(k_base + cols[:, None] * stride_kn + offs_d[None, :] * stride_kk)
        vT = tl.load(v_base + offs_d[:, None] * stride_vk + cols[None, :] * stride_vn)
        p = tl.exp2(tl.dot(q, kT) * qk_scale - lse2[:, None])
        if DIAGONAL:
            p = tl.where(offs_m[:, None] >= cols[None, :], p, 0.0)
        dp = tl.dot(do, vT)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq


@triton.jit
def t_bwd_dq(Q, K, V, DO, DQ, LSE, Delta, sm_scale,
             stride_qz, stride_qh, stride_qm, stride_qk,
             stride_kz, stride_kh, stride_kn, stride_kk,
             stride_vz, stride_vh, stride_vn, stride_vk,
             stride_dz, stride_dh, stride_dm, stride_dk,
             H, N_CTX,
             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    k_base = K + off_z * stride_kz + off_h * stride_kh
    v_base = V + off_z * stride_vz + off_h * stride_vh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_off = offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk
    q = tl.load(Q + off_z * stride_qz + off_h * stride_qh + q_off)
    do = tl.load(DO + off_z * stride_dz + off_h * stride_dh + offs_m[:, None] * stride_dm
                 + offs_d[None, :] * stride_dk)
    lse2 = tl.load(LSE + off_hz.to(tl.int64) * N_CTX + offs_m) * 1.4426950408889634
    delta = tl.load(Delta + off_hz.to(tl.int64) * N_CTX + offs_m)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        mid = start_m * BLOCK_M
        dq = t_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_kk,
                            stride_vn, stride_vk, qk_scale, offs_m, 0, mid, HEAD_DIM, BLOCK_N,
                            False)
        dq = t_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_kk,
                            stride_vn, stride_vk, qk_scale, offs_m, mid, mid + BLOCK_M,
                            HEAD_DIM, BLOCK_N, True)
    else:
        dq = t_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_kk,
                            stride_vn, stride_vk, qk_scale, offs_m, 0, N_CTX, HEAD_DIM, BLOCK_N,
                            False)
    tl.store(DQ + off_z * stride_qz + off_h * stride_qh + q_off,
             (dq * sm_scale).to(DQ.dtype.element_ty))


def triton_backward(q, k, v, out, do, lse, dq, dk, dv, delta, causal, sm_scale, tiles):
    """The twin's host side: contiguous tensors of one layout, S a multiple of the tiles."""
    (m1, n1), (m2, n2), nw, ns = tiles
    B, H, S, D = q.shape
    t_bwd_delta[(triton.cdiv(S, m2), B * H)](out, do, delta, *out.stride(), *do.stride(), H, S,
                                             HEAD_DIM=D, BLOCK_M=m2, num_warps=nw)
    common = (*q.stride(), *k.stride(), *v.stride(), *do.stride(), H, S)
    t_bwd_dkdv[(triton.cdiv(S, n1), B * H)](q, k, v, do, dk, dv, lse, delta, sm_scale, *common,
                                            HEAD_DIM=D, BLOCK_M=m1, BLOCK_N=n1, CAUSAL=causal,
                                            num_warps=nw, num_stages=ns)
    t_bwd_dq[(triton.cdiv(S, m2), B * H)](q, k, v, do, dq, lse, delta, sm_scale, *common,
                                          HEAD_DIM=D, BLOCK_M=m2, BLOCK_N=n2, CAUSAL=causal,
                                          num_warps=nw, num_stages=ns)


# ====================================================================== timing and checks

ROWS = []


def report(key, value, fmt="{:.4f}"):
    print(f"{key}={fmt.format(value) if isinstance(value, float) else value}", flush=True)


def parse_tiles(spec):
    a, b, w, s = spec.split(":")
    return (tuple(int(x) for x in a.split("x")), tuple(int(x) for x in b.split("x")), int(w),
            int(s))


def rel_err(got, want):
    return max(((g.double() - w.double()).abs().max() / w.double().abs().max()).item()
               for g, w in zip(got, want))


def bench_case(B, H, S, D, dtype, causal, args):
    key = f"attn_bwd_{'fp16' if dtype == torch.float16 else 'bf16'}_b{B}_h{H}_s{S}_d{D}" + \
          ("_causal" if causal else "")
    sm_scale = 1.0 / math.sqrt(D)
    q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(4))
    out, lse = k_fa.attention(q, k, v, causal=causal, return_lse=True)
    grads = {name: tuple(torch.empty_like(q) for _ in range(3)) for name in ("kiln", "triton")}
    delta = torch.empty(B, H, S, device="cuda", dtype=torch.float32)

    qs, ks, vs = (x.clone().requires_grad_() for x in (q, k, v))
    with sdpa_flash():
        o_sdpa = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=sm_scale)
    ref = torch.autograd.grad(o_sdpa, (qs, ks, vs), do, retain_graph=True)

    def kiln_fn(tiles):
        g = grads["kiln"]
        return lambda: k_fab.attention_backward(q, k, v, out, do, lse, *g, causal=causal,
                                                sm_scale=sm_scale, delta=delta,
                                                tiles=tiles[:2], num_warps=tiles[2],
                                                num_stages=tiles[3])

    def triton_fn(tiles):
        return lambda: triton_backward(q, k, v, out, do, lse, *grads["triton"], delta, causal,
                                       sm_scale, tiles)

    def sdpa_fn():
        with sdpa_flash():
            torch.autograd.grad(o_sdpa, (qs, ks, vs), do, retain_graph=True)

    flops = 10.0 * B * H * S * S * D * (0.5 if causal else 1.0)
    best, err = {}, {}
    for name, make in (("kiln", kiln_fn), ("triton", triton_fn)):
        for spec in args.tiles.split(","):
            tiles = parse_tiles(spec)
            try:
                fn = make(tiles)
                fn()
                torch.cuda.synchronize()
                e = rel_err(grads[name], ref)
                if not e < args.tol:
                    report(f"{key}_{name}_{spec}_CHECK", f"FAIL {e:.3e}")
                    continue
                t = bench_ms(fn, args.rep)
                report(f"{key}_{name}_{spec}_ms", t)
                if name not in best or t < best[name][0]:
                    best[name] = (t, spec)
                    err[name] = e
            except Exception as ex:  # one failing configuration must not hide the others
                report(f"{key}_{name}_{spec}_ERROR", repr(ex).replace("\n", " ")[:400])
    best["sdpa"] = (bench_ms(sdpa_fn, args.rep), "flash")
    ms = {n: best.get(n, (float("nan"), "-"))[0] for n in ("kiln", "triton", "sdpa")}
    for name, t in ms.items():
        report(f"{key}_{name}_ms", t)
        report(f"{key}_{name}_tflops", flops / t / 1e9, "{:.1f}")
    ROWS.append((key, flops, ms, err.get("kiln", float("nan")), err.get("triton", float("nan")),
                 best.get("kiln", (0, "-"))[1], best.get("triton", (0, "-"))[1]))
    del q, k, v, do, out, lse, grads, qs, ks, vs, o_sdpa, ref
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4x32x4096,1x32x16384")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--causal", default="both", choices=["false", "true", "both"])
    ap.add_argument("--rep", type=int, default=50)
    ap.add_argument("--tol", type=float, default=2e-2)
    ap.add_argument("--tiles", default="64x128:128x64:8:2,64x128:128x64:8:3,"
                                       "32x128:128x32:8:3,64x64:64x64:4:3")
    args = ap.parse_args()
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    print(f"device={torch.cuda.get_device_name()} triton={triton.__version__} "
          f"torch={torch.__version__}")
    causals = {"false": [False], "true": [True], "both": [False, True]}[args.causal]
    for shape in args.shapes.split(","):
        B, H, S = (int(x) for x in shape.split("x"))
        for causal in causals:
            bench_case(B, H, S, args.head_dim, dtype, causal, args)
    print("\n| case | Kiln ms | Triton ms | SDPA ms | Kiln TFLOP/s | Triton TFLOP/s | SDPA TFLOP/s "
          "| Kiln/Triton | Kiln/SDPA | Kiln rel. err | Triton rel. err | Kiln tiles | Triton tiles |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for key, flops, ms, ek, et, tk, tt in ROWS:
        tf = {n: flops / t / 1e9 for n, t in ms.items()}
        print(f"| {key} | {ms['kiln']:.3f} | {ms['triton']:.3f} | {ms['sdpa']:.3f} | "
              f"{tf['kiln']:.1f} | {tf['triton']:.1f} | {tf['sdpa']:.1f} | "
              f"{ms['triton'] / ms['kiln']:.3f} | {ms['sdpa'] / ms['kiln']:.3f} | {ek:.1e} | "
              f"{et:.1e} | {tk} | {tt} |")
    print("\nratios are speed (time of the peer / time of Kiln): >= 1 means Kiln is faster")


if __name__ == "__main__":
    main()
