"""Softmax forward on short rows: rows per program and warps swept, Kiln beside the Triton twin
of the same [ROWS, BLOCK] kernel and beside the one-row Triton kernel (the twin of
kiln_kernels.softmax.softmax_fwd_kernel, the kernel ANCHORS.md measured), in one run; the twins
are the Kiln source under Triton (bench/common.py), timed by common.do_bench. Chooses
`rows_per_program` in kiln_kernels/softmax.py.

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_softmax_rows.py [--rep MS]
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
    args = ap.parse_args()
    import torch
    common.setup_paths()
    from kiln_kernels import softmax as k_sm
    # the Triton kernels: the twins of Kiln's (the same source under Triton, common.twin)
    t_softmax_fwd_kernel = common.twin_kernel(k_sm.softmax_fwd_kernel)
    t_softmax_fwd_rows_kernel = common.twin_kernel(k_sm.softmax_fwd_rows_kernel)
    print(common.device_line(), flush=True)
    table = []
    for dtype in (torch.bfloat16, torch.float32):
        for (M, N) in ((32768, 1024), (65536, 512), (16384, 2048)):
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            ref = torch.softmax(x.float(), -1)
            nb = 2 * x.numel() * x.element_size()
            block = 1 << (N - 1).bit_length()
            one_row_warps = 8 if block >= 2048 else 4
            yt1 = torch.empty_like(x)

            def t_one():
                t_softmax_fwd_kernel[(M,)](yt1, x, N, N, N, BLOCK=block, LOG=False,
                                           num_warps=one_row_warps)
            variants = [("triton_one_row", None, one_row_warps, t_one)]
            for rows in (1, 2, 4, 8):
                for warps in (4, 8):
                    if rows * block > 16384:
                        continue
                    grid = (cdiv(M, rows),)
                    yk, yt = torch.empty_like(x), torch.empty_like(x)

                    def kf(yk=yk, grid=grid, rows=rows, warps=warps):
                        k_sm.softmax_fwd_rows_kernel[grid](yk, x, N, N, M, N, ROWS=rows,
                                                           BLOCK=block, LOG=False,
                                                           num_warps=warps)

                    def tf(yt=yt, grid=grid, rows=rows, warps=warps):
                        t_softmax_fwd_rows_kernel[grid](yt, x, N, N, M, N, ROWS=rows,
                                                        BLOCK=block, LOG=False, num_warps=warps)
                    kf()
                    tf()
                    tol = 1e-5 if dtype == torch.float32 else 1e-2
                    for name, y in (("kiln", yk), ("triton", yt)):
                        err = ((y.float() - ref).norm() / ref.norm()).item()
                        assert err < tol, (name, rows, warps, err)
                    variants.append((f"kiln_r{rows}_w{warps}", rows, warps, kf))
                    variants.append((f"triton_r{rows}_w{warps}", rows, warps, tf))
            t_one()
            times = {name: [] for name, *_ in variants}
            for _ in range(args.rounds):
                for name, _, _, fn in variants:
                    times[name].append(common.do_bench(fn, warmup=10, rep=args.rep))
            base = sorted(times["triton_one_row"])[1 if args.rounds >= 3 else 0]
            dn = str(dtype).replace("torch.", "")
            for name, *_ in variants:
                ms = sorted(times[name])[len(times[name]) // 2]
                gbps = nb / ms / 1e6
                print(f"softmax_rows {dn} {M}x{N} {name} ms={ms:.4f} gbps={gbps:.1f} "
                      f"vs_triton_one_row={base / ms:.3f}")
                table.append((dn, f"{M}x{N}", name, ms, gbps, base / ms))
    print("\n| dtype | shape | kernel | ms | GB/s | vs Triton one-row |\n|---|---|---|---|---|---|")
    for dn, shape, name, ms, gbps, r in table:
        print(f"| {dn} | {shape} | {name} | {ms:.4f} | {gbps:.0f} | {r:.3f} |")


if __name__ == "__main__":
    main()
