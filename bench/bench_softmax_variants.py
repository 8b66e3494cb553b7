"""Softmax forward variants at the two bf16 shapes where Kiln and the one-row Triton kernel
(ANCHORS.md's) are closest: warps per program and cache hints (loads `evict_first`, stores
`.cs`), each beside the one-row Triton kernel (the twin of
kiln_kernels.softmax.softmax_fwd_kernel: its source under Triton, bench/common.py) in the same
rounds of common.do_bench. Chooses the defaults of kiln_kernels/softmax.py. The variants'
kernels (bench/kernel_sources.py's softmax_hinted_kernel and softmax_persistent_kernel) are
timed for Kiln only.

Also: two rows per program at 8192 columns, and a persistent kernel (a few programs per SM
walking the rows, the next row prefetched by -kiln-pipeline-loads).

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_softmax_variants.py
     [--shapes 8192x8192,...] [--rounds 3] [--no-hints]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def cdiv(a, b):
    return (a + b - 1) // b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rep", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shapes", default="32768x1024,8192x8192,4096x32768")
    ap.add_argument("--no-hints", action="store_true", help="skip the cache-hint variants")
    args = ap.parse_args()
    import torch
    import kiln
    common.setup_paths()
    from kernel_sources import softmax_hinted_kernel, softmax_persistent_kernel
    from kiln_kernels import softmax as k_sm
    # the one-row Triton kernel: the twin of Kiln's (the same source under Triton)
    t_softmax_fwd_kernel = common.twin_kernel(k_sm.softmax_fwd_kernel)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(common.device_line(), flush=True)
    table = []
    for M, N in (tuple(int(v) for v in shape.split("x")) for shape in args.shapes.split(",")):
        dtype = torch.bfloat16
        x = torch.randn(M, N, device="cuda", dtype=dtype)
        ref = torch.softmax(x.float(), -1)
        nb = 2 * x.numel() * x.element_size()
        block = kiln.next_power_of_2(N)
        if block > 16384:
            continue
        one_row_warps = 8 if block >= 2048 else 4
        yt = torch.empty_like(x)
        variants = [("triton_one_row", lambda: t_softmax_fwd_kernel[(M,)](
            yt, x, N, N, N, BLOCK=block, LOG=False, num_warps=one_row_warps), yt)]
        for rows in (1, 2, 4):
            if rows * block > 16384:
                continue
            for warps in (4, 8, 16, 32):
                if rows * block // (32 * warps) < 2:
                    continue
                for hinted in (False,) if args.no_hints else (False, True):
                    y = torch.empty_like(x)
                    grid = (cdiv(M, rows),)
                    kern = softmax_hinted_kernel if hinted else k_sm.softmax_fwd_rows_kernel
                    extra = {} if hinted else {"LOG": False}

                    def fn(y=y, grid=grid, rows=rows, warps=warps, kern=kern, extra=extra):
                        kern[grid](y, x, N, N, M, N, ROWS=rows, BLOCK=block, num_warps=warps,
                                   **extra)
                    variants.append((f"kiln_r{rows}_w{warps}{'_hint' if hinted else ''}", fn, y))
        for warps in (8, 16):
            if block // (32 * warps) < 2:
                continue
            for per_sm in (2, 4):
                y = torch.empty_like(x)

                def fn(y=y, warps=warps, per_sm=per_sm):
                    softmax_persistent_kernel[(min(M, per_sm * sms),)](
                        y, x, N, N, M, N, BLOCK=block, num_warps=warps)
                variants.append((f"kiln_persistent_{per_sm}persm_w{warps}", fn, y))
        for name, fn, y in variants:
            fn()
            err = ((y.float() - ref).norm() / ref.norm()).item()
            assert err < 1e-2, (name, err)
        times = {name: [] for name, *_ in variants}
        for _ in range(args.rounds):
            for name, fn, _ in variants:
                times[name].append(common.do_bench(fn, warmup=10, rep=args.rep))
        base = sorted(times["triton_one_row"])[len(times["triton_one_row"]) // 2]
        for name, *_ in variants:
            ms = sorted(times[name])[len(times[name]) // 2]
            print(f"softmax_variant bf16 {M}x{N} {name} ms={ms:.4f} gbps={nb / ms / 1e6:.1f} "
                  f"vs_triton_one_row={base / ms:.3f}")
            table.append((f"{M}x{N}", name, ms, nb / ms / 1e6, base / ms))
    print("\n| shape | kernel | ms | GB/s | vs Triton one-row |\n|---|---|---:|---:|---:|")
    for shape, name, ms, gbps, r in table:
        print(f"| {shape} | {name} | {ms:.4f} | {gbps:.0f} | {r:.3f} |")


if __name__ == "__main__":
    main()
