#!/usr/bin/env python3
"""Issue #23's regression benchmark: kernels written the way users write them, each run
under Kiln and under Triton on the same source (Triton through common.twin: the text
unchanged, imports rebound), both autotuned over the same configurations, with Triton's best
timed again (the run-to-run noise a ratio near 1 must be read with). Then each one's best
(and the peer, cuBLAS or SDPA default, where a row has one) is timed again in 6 rounds, the
order reversed from round to round, and the figures are those rounds' medians: an H100 slows
as it heats, so what is timed first runs faster (common.interleaved). Sections:

    matmul     bench/cliff_sources.py: pointer (B stored K x N as in tutorial 03, and
               N x K), host-descriptor, persistent (flattened or
               not) and device-descriptor matmul, B stored N x K, beside cuBLAS
               (torch.matmul); checked against torch.matmul(a.float(), b.float().T)
    grouped    bench/cliff_sources.py mm_grouped: a group of GEMMs in one launch (tutorial
               08's shape), beside cuBLAS one torch.matmul a problem
    attention  bench/cliffs_attention.py: attention forward and backward in tutorial 06's
               style (K loaded transposed by pointers), causal and not, D 64 and 128
    moe        bench/cliff_sources.py mm_moe: an MoE layer's expert GEMMs in one launch (tokens
               sorted by expert, masked rows, W by pointers or a 3-D descriptor), beside
               cuBLAS one torch.matmul an expert
    rows       bench/cliffs_norms.py: layer-norm, RMSNorm and group-norm backward with
               per-program partial weight gradients, and a fused cross-entropy, in the style
               of a popular Triton LLM-kernel library

    python3 bench/bench_cliffs.py [--sections matmul,grouped,moe,attention,rows] [--quick]
        [--shapes 4096x4096x4096,...] [--dtypes fp16,bf16] [--cases ptr_nt,...]

Prints a markdown table a section (ratios as speed: above 1 Kiln is faster) and a summary
line: the lowest Kiln/Triton ratio and the noise range.
"""
import argparse
import importlib
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import fmt, fmt_config, relerr, tflops  # noqa: E402

CASES = ("ptr", "ptr_nt", "desc_nt", "desc_persistent", "desc_persistent_flat",
         "device_desc_persistent")
# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages): tutorial 09's Hopper configurations
CONFIGS = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 4),
           (128, 128, 64, 4, 4)]


def launcher(case, mod, lib, a, b, c, cfg, sms, b_kn=None):
    """A call of `case` from module `mod` (Kiln's or Triton's) at cfg (`b_kn`: B stored
    K x N, for case ptr)."""
    BM, BN, BK, warps, stages = cfg
    M, K = a.shape
    N = b.shape[0]
    tiles = ((M + BM - 1) // BM) * ((N + BN - 1) // BN)
    meta = dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8,
                num_warps=warps, num_stages=stages)
    if case == "ptr":
        return lambda: mod.mm_ptr[(tiles,)](a, b_kn, c, M, N, K, a.stride(0), a.stride(1),
                                            b_kn.stride(0), b_kn.stride(1), c.stride(0),
                                            c.stride(1), **meta, ACTIVATION="")
    if case == "ptr_nt":
        return lambda: mod.mm_ptr_nt[(tiles,)](a, b, c, M, N, K, a.stride(0), a.stride(1),
                                               b.stride(0), b.stride(1), c.stride(0),
                                               c.stride(1), **meta)
    persistent = dict(NUM_SMS=sms, FLATTEN=case.endswith("_flat"))
    grid = (min(sms, tiles),)
    if case == "device_desc_persistent":
        persistent["FLATTEN"] = True
        return lambda: mod.mm_device_desc_persistent[grid](a, b, c, M, N, K, **meta,
                                                           **persistent)
    TD = lib.TensorDescriptor
    descs = [TD.from_tensor(a, [BM, BK]), TD.from_tensor(b, [BN, BK]),
             TD.from_tensor(c, [BM, BN])]
    if case == "desc_nt":
        return lambda: mod.mm_desc_nt[(tiles,)](*descs, M, N, K, **meta)
    return lambda: mod.mm_desc_persistent[grid](*descs, M, N, K, **meta, **persistent)


# A group of GEMMs of different sizes (M, N, K), as a MoE layer's experts or a batch of
# differently shaped projections; multiples of every tile below.
GROUPED = [(2048, 4096, 4096), (1024, 4096, 4096), (4096, 4096, 4096), (512, 4096, 4096),
           (1024, 2048, 4096), (2048, 1024, 2048), (256, 4096, 4096), (3072, 4096, 1024)]
GROUPED_CONFIGS = [(128, 128, 64, 4, 3), (128, 256, 64, 8, 3), (128, 128, 32, 4, 4),
                   (64, 128, 64, 4, 4)]


def matmul_rows(ctx, args):
    """The matmul formulations at each dtype and shape; each row: Kiln, Triton and cuBLAS
    TFLOP/s."""
    torch, common, timer, sms = ctx.torch, ctx.common, ctx.timer, ctx.sms
    configs = common.parse_configs(args.configs) if args.configs else CONFIGS
    rows = []
    for dname in args.dtypes.split(","):
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dname]
        for M, N, K in common.parse_shapes(args.shapes):
            torch.manual_seed(0)
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(N, K, device="cuda", dtype=dtype)
            ref = torch.matmul(a.float(), b.float().T)
            flop = 2.0 * M * N * K
            cc = torch.empty(M, N, device="cuda", dtype=dtype)

            def cublas_fn():
                torch.matmul(a, b.T, out=cc)
            cublas = tflops(flop, timer(cublas_fn))
            b_kn = b.T.contiguous() if "ptr" in args.cases.split(",") else None
            for case in args.cases.split(","):
                row = {"case": case, "dtype": dname, "shape": f"{M}x{N}x{K}",
                       "peer": cublas, "peer_name": "cuBLAS"}
                c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
                t, cfg, kfn = common.best_of(
                    lambda g: launcher(case, ctx.kiln_mod, ctx.kiln, a, b, c, g, sms, b_kn),
                    configs, timer, f"kiln {case}")
                row.update(kiln=tflops(flop, t), kiln_cfg=cfg,
                           kiln_err=relerr(c, ref) if cfg else None)
                tfn = None
                if ctx.triton_mod is not None:
                    ct = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
                    tt, tcfg, tfn = common.best_of(
                        lambda g: launcher(case, ctx.triton_mod, ctx.triton_lib, a, b, ct, g,
                                           sms, b_kn), configs, timer, f"triton {case}")
                    row.update(triton=tflops(flop, tt), triton_cfg=tcfg,
                               triton_err=relerr(ct, ref) if tcfg else None)
                    if tfn is not None:  # Triton against itself: the noise of one ratio
                        row["triton_again"] = tflops(flop, timer(tfn))
                common.interleaved(row, {"kiln": kfn, "triton": tfn, "peer": cublas_fn},
                                   timer, lambda ms: tflops(flop, ms))
                rows.append(row)
                del c
            del a, b, b_kn, cc, ref
            torch.cuda.empty_cache()
    return rows


def grouped_rows(ctx, args):
    """mm_grouped over GROUPED (fp16, B K x N), one launch of NUM_SM programs, against
    cuBLAS one torch.matmul a problem."""
    torch, common, timer, sms = ctx.torch, ctx.common, ctx.timer, ctx.sms
    torch.manual_seed(0)
    problems = GROUPED[:4] if ctx.quick else GROUPED
    A = [torch.randn(m, k, device="cuda", dtype=torch.float16) for m, n, k in problems]
    B = [torch.randn(k, n, device="cuda", dtype=torch.float16) for m, n, k in problems]
    refs = [torch.matmul(a.float(), b.float()) for a, b in zip(A, B)]
    flop = sum(2.0 * m * n * k for m, n, k in problems)
    cc = [torch.empty(m, n, device="cuda", dtype=torch.float16) for m, n, k in problems]

    def cublas():
        for a, b, c in zip(A, B, cc):
            torch.matmul(a, b, out=c)
    row = {"case": "grouped", "dtype": "fp16", "shape": f"{len(problems)} GEMMs",
           "peer": tflops(flop, timer(cublas)), "peer_name": "cuBLAS"}
    sizes = torch.tensor([x for p in problems for x in p], device="cuda", dtype=torch.int32)
    lds = torch.tensor([x for a, b in zip(A, B) for x in (a.stride(0), b.stride(0),
                                                            b.shape[1])],
                       device="cuda", dtype=torch.int32)

    def run(mod):
        C = [torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
             for m, n, k in problems]
        ptrs = [torch.tensor([t.data_ptr() for t in ts], device="cuda", dtype=torch.int64)
                for ts in (A, B, C)]

        def make(cfg):
            BM, BN, BK, warps, stages = cfg
            return lambda: mod.mm_grouped[(sms,)](*ptrs, sizes, lds, len(problems), NUM_SM=sms,
                                                  BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
                                                  BLOCK_SIZE_K=BK, num_warps=warps,
                                                  num_stages=stages)
        t, cfg, fn = common.best_of(make, GROUPED_CONFIGS, timer, "grouped")
        err = max(relerr(c, r) for c, r in zip(C, refs)) if cfg else None
        return t, cfg, fn, err
    t, cfg, kfn, err = run(ctx.kiln_mod)
    row.update(kiln=tflops(flop, t), kiln_cfg=cfg, kiln_err=err)
    if ctx.triton_mod is not None:
        tt, tcfg, tfn, terr = run(ctx.triton_mod)
        row.update(triton=tflops(flop, tt), triton_cfg=tcfg, triton_err=terr)
        if tfn is not None:
            row["triton_again"] = tflops(flop, timer(tfn))
        common.interleaved(row, {"kiln": kfn, "triton": tfn}, timer,
                           lambda ms: tflops(flop, ms))
    return [row]


# An MoE layer's expert GEMMs: (experts, tokens x top-k, N, K); tokens routed at random.
MOE = [(8, 4096 * 2, 2048, 4096), (8, 4096 * 2, 4096, 2048)]
MOE_CONFIGS = [(64, 128, 64, 4, 3), (128, 128, 64, 4, 3), (128, 128, 64, 8, 3),
               (128, 256, 64, 8, 3), (128, 128, 64, 4, 4)]


def moe_rows(ctx, args):
    """mm_moe over MOE (fp16), W by pointers and through a 3-D descriptor, against cuBLAS one
    torch.matmul an expert."""
    torch, common, timer, sms = ctx.torch, ctx.common, ctx.timer, ctx.sms
    rows = []
    for E, T, N, K in MOE[:1] if ctx.quick else MOE:
        torch.manual_seed(0)
        m_sizes = torch.bincount(torch.randint(0, E, (T,)), minlength=E).to(torch.int32).cuda()
        x = torch.randn(T, K, device="cuda", dtype=torch.float16)
        w = torch.randn(E, N, K, device="cuda", dtype=torch.float16) * 0.05
        bounds = [0] + torch.cumsum(m_sizes, 0).tolist()
        ref = torch.cat([x[bounds[e]:bounds[e + 1]].float() @ w[e].float().T
                         for e in range(E)])
        flop = 2.0 * T * N * K
        yc = torch.empty(T, N, device="cuda", dtype=torch.float16)

        def cublas():
            for e in range(E):
                torch.matmul(x[bounds[e]:bounds[e + 1]], w[e].T, out=yc[bounds[e]:bounds[e + 1]])
        peer = tflops(flop, timer(cublas))
        for w_desc in (False, True):
            row = {"case": "moe_desc" if w_desc else "moe_ptr", "dtype": "fp16",
                   "shape": f"{E}x{T}x{N}x{K}", "peer": peer, "peer_name": "cuBLAS"}

            def run(mod):
                y = torch.full((T, N), float("nan"), device="cuda", dtype=torch.float16)

                def make(cfg):
                    BM, BN, BK, warps, stages = cfg
                    return lambda: mod.mm_moe[(sms,)](x, w, y, m_sizes, E, N=N, K=K,
                                                      NUM_SMS=sms, BLOCK_SIZE_M=BM,
                                                      BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK,
                                                      W_DESC=w_desc, num_warps=warps,
                                                      num_stages=stages)
                t, cfg, fn = common.best_of(make, MOE_CONFIGS, timer, row["case"])
                return t, cfg, fn, relerr(y, ref) if cfg else None
            t, cfg, kfn, err = run(ctx.kiln_mod)
            row.update(kiln=tflops(flop, t), kiln_cfg=cfg, kiln_err=err)
            tfn = None
            if ctx.triton_mod is not None:
                tt, tcfg, tfn, terr = run(ctx.triton_mod)
                row.update(triton=tflops(flop, tt), triton_cfg=tcfg, triton_err=terr)
                if tfn is not None:
                    row["triton_again"] = tflops(flop, timer(tfn))
            common.interleaved(row, {"kiln": kfn, "triton": tfn, "peer": cublas}, timer,
                               lambda ms: tflops(flop, ms))
            rows.append(row)
    return rows


SECTIONS = {
    "matmul": ("Matmul formulations, B stored N x K", "TFLOP/s", matmul_rows),
    "grouped": ("Grouped GEMM (tutorial 08's shape), fp16", "TFLOP/s", grouped_rows),
    "moe": ("MoE expert GEMMs (tokens sorted by expert, W as w[e].T), fp16", "TFLOP/s",
            moe_rows),
    "attention": ("cliffs_attention", None, None),
    "rows": ("cliffs_norms", None, None),
}


def section(name):
    """(title, unit, rows(ctx, args)) of a section; the last two live in their own modules."""
    title, unit, fn = SECTIONS[name]
    if fn is not None:
        return title, unit, fn
    mod = importlib.import_module(title)
    return mod.TITLE, mod.UNIT, lambda ctx, args: mod.rows(ctx)


def print_table(title, unit, rows, common):
    def ratio(x, y):
        return fmt(x / y if x and y and x == x and y == y else None, ".3f")
    peer = next((r["peer_name"] for r in rows if r.get("peer_name")), None)
    headers = ["case", "dtype", "shape", f"Kiln {unit}", "Kiln config", f"Triton {unit}",
               "Triton config"] + ([f"{peer} {unit}"] if peer else []) + \
        ["Kiln/Triton", "Triton/Triton"] + ([f"Kiln/{peer}"] if peer else []) + \
        ["Kiln error", "Triton error"]
    table = []
    for r in rows:
        table.append([r["case"], r["dtype"], r["shape"], fmt(r.get("kiln")),
                      fmt_config(r.get("kiln_cfg")), fmt(r.get("triton")),
                      fmt_config(r.get("triton_cfg"))] +
                     ([fmt(r.get("peer"))] if peer else []) +
                     [ratio(r.get("kiln"), r.get("triton")),
                      ratio(r.get("triton_again"), r.get("triton"))] +
                     ([ratio(r.get("kiln"), r.get("peer"))] if peer else []) +
                     [fmt(r.get("kiln_err"), ".1e"), fmt(r.get("triton_err"), ".1e")])
    common.markdown_table(headers, table, align="lll",
                          title=f"{title} (do_bench medians) — {common.device_name()}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sections", default=",".join(SECTIONS))
    p.add_argument("--quick", action="store_true", help="fewer shapes")
    p.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192", help="matmul")
    p.add_argument("--dtypes", default="fp16,bf16", help="matmul")
    p.add_argument("--cases", default=",".join(CASES), help="matmul")
    p.add_argument("--configs", default=None,
                   help="matmul: BMxBNxBKxWARPSxSTAGES,... (both libraries; default "
                        "tutorial 09's)")
    args = p.parse_args(argv)
    common.setup_paths()
    torch = common._torch()
    import kiln
    import cliff_sources as ks
    triton, _ = common.triton_or_none()
    ctx = types.SimpleNamespace(torch=torch, kiln=kiln, triton=triton, common=common,
                                timer=common.do_bench, quick=args.quick, kiln_mod=ks,
                                triton_mod=None, triton_lib=None,
                                sms=torch.cuda.get_device_properties(0).multi_processor_count)
    if triton is not None:
        from triton.tools.tensor_descriptor import TensorDescriptor as TTD
        ctx.triton_mod = common.twin(ks)
        ctx.triton_lib = types.SimpleNamespace(TensorDescriptor=TTD)
        # scratch for descriptors made in kernels (tutorial 09 sets one)
        triton.set_allocator(lambda size, align, stream:
                             torch.empty(size, dtype=torch.int8, device="cuda"))
    kiln.set_allocator(lambda size, align, stream:
                       torch.empty(size, dtype=torch.int8, device="cuda"))
    if args.quick and args.shapes == p.get_default("shapes"):
        args.shapes = "4096x4096x4096"
    print(common.device_line())
    ratios, noise = [], []
    for name in args.sections.split(","):
        title, unit, fn = section(name)
        rows = fn(ctx, args)
        for r in rows:
            for key, value in r.items():
                if key not in ("case", "dtype", "shape", "peer_name"):
                    common.report(f"cliff_{r['case']}_{r['dtype']}_{r['shape']}_{key}"
                                  .replace(" ", "_"),
                                  fmt_config(value) if isinstance(value, tuple) else value)
            if r.get("kiln") and r.get("triton"):
                ratios.append((r["kiln"] / r["triton"], f"{r['case']} {r['dtype']} "
                               f"{r['shape']}"))
            if r.get("triton_again") and r.get("triton"):
                noise.append(r["triton_again"] / r["triton"])
        print_table(title, unit, rows, common)
    if ratios:
        low = min(ratios)
        print(f"\nsummary: {len(ratios)} formulations, Kiln/Triton {low[0]:.3f} ({low[1]}) to "
              f"{max(ratios)[0]:.3f}; below 0.97: {sum(r < 0.97 for r, _ in ratios)}; "
              f"Triton/Triton {min(noise, default=float('nan')):.3f}-"
              f"{max(noise, default=float('nan')):.3f}")


if __name__ == "__main__":
    main()
