#!/usr/bin/env python3
"""Issue #23's regression benchmark: matmul formulations the way users write them
(bench/cliff_sources.py), each run under Kiln and under Triton on the same source (Triton
through common.twin: the text unchanged, imports rebound), both autotuned over the same
configurations, beside cuBLAS (torch.matmul). Prints one markdown table with the ratios
and Triton timed against itself (the run-to-run noise a ratio near 1 must be read with).

    python3 bench/bench_cliffs.py [--shapes 4096x4096x4096,...] [--dtypes fp16,bf16]
        [--cases ptr_nt,desc_nt,desc_persistent,desc_persistent_flat,device_desc_persistent]

B is stored N x K in every case (loaded [BLOCK_N, BLOCK_K] and used as b.T, as tutorial 09
does); the result is checked against torch.matmul(a.float(), b.float().T).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import fmt, fmt_config, relerr, tflops  # noqa: E402

CASES = ("ptr_nt", "desc_nt", "desc_persistent", "desc_persistent_flat",
         "device_desc_persistent")
# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages): tutorial 09's Hopper configurations
CONFIGS = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 4),
           (128, 128, 64, 4, 4)]


def launcher(case, mod, lib, a, b, c, cfg, sms):
    """A call of `case` from module `mod` (Kiln's or Triton's) at cfg."""
    BM, BN, BK, warps, stages = cfg
    M, K = a.shape
    N = b.shape[0]
    tiles = ((M + BM - 1) // BM) * ((N + BN - 1) // BN)
    meta = dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8,
                num_warps=warps, num_stages=stages)
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192")
    p.add_argument("--dtypes", default="fp16,bf16")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--configs", default=None,
                   help="BMxBNxBKxWARPSxSTAGES,... (both libraries; default tutorial 09's)")
    args = p.parse_args(argv)
    common.setup_paths()
    torch = common._torch()
    import kiln
    import cliff_sources as ks
    triton, _ = common.triton_or_none()
    tw = common.twin(ks) if triton is not None else None
    if triton is not None:
        from triton.tools.tensor_descriptor import TensorDescriptor as TTD

        class _TritonLib:
            TensorDescriptor = TTD
        tlib = _TritonLib()
        # scratch for descriptors made in kernels (tutorial 09 sets one)
        triton.set_allocator(lambda size, align, stream:
                             torch.empty(size, dtype=torch.int8, device="cuda"))
    kiln.set_allocator(lambda size, align, stream:
                       torch.empty(size, dtype=torch.int8, device="cuda"))
    configs = common.parse_configs(args.configs) if args.configs else CONFIGS
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    timer = common.do_bench
    print(common.device_line())
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
            cublas = tflops(flop, timer(lambda: torch.matmul(a, b.T, out=cc)))
            for case in args.cases.split(","):
                row = {"case": case, "dtype": dname, "shape": f"{M}x{N}x{K}",
                       "cublas": cublas}
                c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
                t, cfg, _ = common.best_of(lambda g: launcher(case, ks, kiln, a, b, c, g, sms),
                                           configs, timer, f"kiln {case}")
                row.update(kiln=tflops(flop, t), kiln_cfg=cfg,
                           kiln_err=relerr(c, ref) if cfg else None)
                if tw is not None:
                    ct = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
                    tt, tcfg, tfn = common.best_of(
                        lambda g: launcher(case, tw, tlib, a, b, ct, g, sms), configs, timer,
                        f"triton {case}")
                    row.update(triton=tflops(flop, tt), triton_cfg=tcfg,
                               triton_err=relerr(ct, ref) if tcfg else None)
                    if tfn is not None:  # Triton against itself: the noise of one ratio
                        row["triton_again"] = tflops(flop, timer(tfn))
                for key, value in row.items():
                    if key not in ("case", "dtype", "shape"):
                        common.report(f"cliff_{case}_{dname}_{row['shape']}_{key}",
                                      fmt_config(value) if isinstance(value, tuple) else value)
                rows.append(row)
                del c
            del a, b, cc, ref
            torch.cuda.empty_cache()

    def ratio(x, y):
        return fmt(x / y if x and y and x == x and y == y else None, ".3f")
    common.markdown_table(
        ["case", "dtype", "M x N x K", "Kiln TFLOP/s", "Kiln tiles", "Triton TFLOP/s",
         "Triton tiles", "cuBLAS TFLOP/s", "Kiln/Triton", "Triton/Triton", "Kiln/cuBLAS",
         "Kiln rel. error", "Triton rel. error"],
        [[r["case"], r["dtype"], r["shape"], fmt(r["kiln"]), fmt_config(r["kiln_cfg"]),
          fmt(r.get("triton")), fmt_config(r.get("triton_cfg")), fmt(r["cublas"]),
          ratio(r["kiln"], r.get("triton")), ratio(r.get("triton_again"), r.get("triton")),
          ratio(r["kiln"], r["cublas"]), fmt(r.get("kiln_err"), ".1e"),
          fmt(r.get("triton_err"), ".1e")] for r in rows],
        align="lll",
        title=f"Matmul formulations, B stored N x K (do_bench medians) — "
              f"{common.device_name()}")


if __name__ == "__main__":
    main()
