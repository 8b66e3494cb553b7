"""Flash attention backward on the GPU: Kiln (kernels/python/kiln_kernels/flash_attention_bwd.py)
beside Triton on the same source (the module's twin: its three kernels and its host code
attention_backward under Triton's imports, bench/common.py, with the same grids, tiles,
num_warps and num_stages) and torch SDPA's backward on its flash backend, in one run. (Until
bench/common.py the Triton column was a hand copy of an earlier version of the three kernels,
without the key-bound masks and grouped-query heads of the current source.)

Each case: q, k, v, dO (B, H, S, D) from randn; the forward (Kiln's) gives O and the
logsumexp; Kiln's and Triton's dq, dk, dv are checked against SDPA's (max |g - ref| / max
|ref|), then each backward is timed as the median of per-launch CUDA-event timings (the three
kernels together; SDPA: torch.autograd.grad of its output, on its flash backend and on the
backend torch picks by default, "SDPA default", the peer issue #23 measures against). TFLOP/s
counts 2.5x the forward's flops (five products against two: 10 * B * H * S^2 * D, halved for
causal). Kiln and Triton run at each of --tiles (m1xn1:m2xn2:warps:stages; dK/dV tiles, then
dQ tiles); each one's fastest is chosen, and the table names it. Then Kiln's and Triton's
fastest and SDPA default run again in --rounds interleaved rounds (common.interleaved_times,
the order rotated and reversed each round: the H100 slows as it heats, and a fixed order
favours what goes first); each figure is the median of its rounds.

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_attention_bwd.py
     [--shapes 4x32x4096,1x32x16384] [--head-dim 128] [--dtype fp16] [--causal both]
     [--rep 50] [--rounds 5] [--tiles 64x128:128x64:8:2,...]
"""
import argparse
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import report  # noqa: E402

ROWS = []
torch = F = k_fa = k_fab = t_fab = None  # set by main()
bench_ms = sdpa_flash = None


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
    # (the default backend's graph: torch picks the backward's backend with the forward's)
    o_default = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=sm_scale)

    def kiln_fn(tiles):
        g = grads["kiln"]
        return lambda: k_fab.attention_backward(q, k, v, out, do, lse, *g, causal=causal,
                                                sm_scale=sm_scale, delta=delta,
                                                tiles=tiles[:2], num_warps=tiles[2],
                                                num_stages=tiles[3])

    def triton_fn(tiles):  # the twin: the same source and host code under Triton
        g = grads["triton"]
        return lambda: t_fab.attention_backward(q, k, v, out, do, lse, *g, causal=causal,
                                                sm_scale=sm_scale, delta=delta,
                                                tiles=tiles[:2], num_warps=tiles[2],
                                                num_stages=tiles[3])

    def sdpa_fn():
        with sdpa_flash():
            torch.autograd.grad(o_sdpa, (qs, ks, vs), do, retain_graph=True)

    def sdpa_default_fn():
        return torch.autograd.grad(o_default, (qs, ks, vs), do, retain_graph=True)

    flops = 10.0 * B * H * S * S * D * (0.5 if causal else 1.0)
    best, err, finals = {}, {}, {}
    for name, make in (("kiln", kiln_fn), ("triton", triton_fn))[:2 if t_fab else 1]:
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
                    finals[name] = fn
            except Exception as ex:  # one failing configuration must not hide the others
                report(f"{key}_{name}_{spec}_ERROR", repr(ex).replace("\n", " ")[:400])
    best["sdpa"] = (bench_ms(sdpa_fn, args.rep), "flash")
    try:
        e = rel_err(sdpa_default_fn(), ref)
        if not e < args.tol:
            raise ValueError(f"SDPA default's gradients differ from its flash backend's: {e:.3e}")
        best["sdpa_default"] = (bench_ms(sdpa_default_fn, args.rep), "default")
        finals["sdpa_default"] = sdpa_default_fn
    except Exception as ex:
        report(f"{key}_sdpa_default_ERROR", repr(ex).replace("\n", " ")[:400])
    ms = {n: best.get(n, (float("nan"), "-"))[0]
          for n in ("kiln", "triton", "sdpa", "sdpa_default")}
    if args.rounds > 0 and "kiln" in finals and len(finals) > 1:
        # The figures above ran one after another on a GPU whose clock falls as it heats:
        # the finalists again in interleaved rounds, each figure the median of its rounds.
        runs = common.interleaved_times(finals, lambda fn: bench_ms(fn, args.rep), args.rounds,
                                        rotate=True)
        for name, ts in runs.items():
            ms[name] = statistics.median(ts)
            report(f"{key}_{name}_rounds_ms", " ".join(f"{x:.4f}" for x in ts))
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
    ap.add_argument("--rounds", type=int, default=5,
                    help="then Kiln's and Triton's fastest and SDPA default timed again in this "
                    "many interleaved rounds (order rotated), medians reported; 0: each timed "
                    "once, one after another")
    ap.add_argument("--tiles", default="64x128:128x64:8:2,64x128:128x64:8:3,"
                                       "32x128:128x32:8:3,64x64:64x64:4:3")
    args = ap.parse_args()
    global torch, F, k_fa, k_fab, t_fab, bench_ms, sdpa_flash
    import torch
    import torch.nn.functional as F
    common.setup_paths()
    from kiln_kernels import flash_attention as k_fa
    from kiln_kernels import flash_attention_bwd as k_fab
    from bench_attention import bench_ms, sdpa_flash
    triton, why = common.triton_or_none()
    if triton is None:
        print(f"triton unavailable ({why}): Kiln and SDPA only", file=sys.stderr)
    else:
        t_fab = common.twin(k_fab)
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    print(common.device_line(), flush=True)
    causals = {"false": [False], "true": [True], "both": [False, True]}[args.causal]
    for shape in args.shapes.split(","):
        B, H, S = (int(x) for x in shape.split("x"))
        for causal in causals:
            try:
                bench_case(B, H, S, args.head_dim, dtype, causal, args)
            except Exception as e:  # keep going: one failing case must not hide the others
                report(f"attn_bwd_b{B}_h{H}_s{S}_causal{int(causal)}_ERROR",
                       repr(e).replace("\n", " ")[:500])
            torch.cuda.empty_cache()
    print("\n| case | Kiln ms | Triton ms | SDPA flash ms | SDPA default ms | Kiln TFLOP/s "
          "| Triton TFLOP/s | SDPA flash TFLOP/s | SDPA default TFLOP/s | Kiln/Triton "
          "| Kiln/SDPA flash | Kiln/SDPA default | Kiln rel. err | Triton rel. err | Kiln tiles "
          "| Triton tiles |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for key, flops, ms, ek, et, tk, tt in ROWS:
        tf = {n: flops / t / 1e9 for n, t in ms.items()}
        print(f"| {key} | {ms['kiln']:.3f} | {ms['triton']:.3f} | {ms['sdpa']:.3f} | "
              f"{ms['sdpa_default']:.3f} | {tf['kiln']:.1f} | {tf['triton']:.1f} | "
              f"{tf['sdpa']:.1f} | {tf['sdpa_default']:.1f} | {ms['triton'] / ms['kiln']:.3f} | "
              f"{ms['sdpa'] / ms['kiln']:.3f} | {ms['sdpa_default'] / ms['kiln']:.3f} | "
              f"{ek:.1e} | {et:.1e} | {tk} | {tt} |")
    print("\nratios are speed (time of the peer / time of Kiln): >= 1 means Kiln is faster")


if __name__ == "__main__":
    main()
