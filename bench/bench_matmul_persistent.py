"""Triton's persistent matmul (tutorial 09's pointer kernel: NUM_SMS programs walk the output
tiles with `tl.range(start, num_tiles, NUM_SMS, flatten=True)`, clamped indices restored with
tl.multiple_of / tl.max_contiguous hints), one text for Kiln and Triton (only the imports
differ), beside torch.matmul (cuBLAS), fp16 and bf16 at 4096^3 and 8192^3, 128x256x64 tiles on
8 warps. Kiln flattens the two loops (-kiln-flatten-loops: the rings stream the next tile in
while this one ends); the same text with flatten=False (each tile's K loop fills and drains
its rings) and Kiln's one-tile-per-program tutorial kernel (bench_matmul_python.py) are timed
beside. Median per call over batches of --batch calls; TFLOP/s, Kiln's ratio to each peer.
Prints a markdown table last.

Run on a GPU machine with kiln importable (scripts/gpu-python.sh does):
    python3 bench/bench_matmul_persistent.py [--reps 25]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_matmul_python import KERNEL as TILE_KERNEL  # noqa: E402
from bench_matmul_python import load_kernel, median_ms  # noqa: E402

KERNEL = '''
{imports}


@jit_lib.jit
def matmul_persistent(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                      stride_bn, stride_cm, stride_cn, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      NUM_SMS: tl.constexpr):
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_am = tl.where(offs_am < M, offs_am, 0)
        offs_bn = tl.where(offs_bn < N, offs_bn, 0)
        offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
        offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak,
                        mask=offs_k[None, :] < K, other=0.0)
            b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                        mask=offs_k[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        tl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn,
                 acc.to(c_ptr.dtype.element_ty),
                 mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--stages", type=int, default=4, help="Kiln num_stages")
    ap.add_argument("--triton-stages", type=int, default=3)
    args = ap.parse_args()
    kiln_kernel = load_kernel("kiln", KERNEL, "matmul_persistent")
    kiln_plain = load_kernel("kiln", KERNEL.replace("flatten=True", "flatten=False"),
                             "matmul_persistent")
    kiln_tile = load_kernel("kiln", TILE_KERNEL, "matmul_kernel")
    triton_kernel = load_kernel("triton", KERNEL, "matmul_persistent")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    BM, BN, BK, G = 128, 256, 64, 8
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        for M, N, K in [(4096, 4096, 4096), (8192, 8192, 8192)]:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            ref = a.float() @ b.float()
            flop = 2.0 * M * N * K
            grid = (min(sms, ((M + BM - 1) // BM) * ((N + BN - 1) // BN)),)

            def launch(kernel, c, stages):
                return lambda: kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1),
                                            b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                            BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=G,
                                            NUM_SMS=sms, num_warps=8, num_stages=stages)

            name = {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
            row = {"dtype": name, "shape": f"{M}x{N}x{K}"}
            c = torch.empty(M, N, device="cuda", dtype=dtype)
            run = launch(kiln_kernel, c, args.stages)
            run()
            torch.cuda.synchronize()
            row["err"] = ((c.float() - ref).norm() / ref.norm()).item()
            row["kiln"] = flop / median_ms(run, args.reps, args.batch) / 1e9
            ct = torch.empty_like(c)
            row["kiln_plain"] = flop / median_ms(launch(kiln_plain, ct, args.stages),
                                                 args.reps, args.batch) / 1e9
            tile_grid = (((M + BM - 1) // BM) * ((N + BN - 1) // BN),)
            row["kiln_tile"] = flop / median_ms(
                lambda: kiln_tile[tile_grid](a, b, ct, M, N, K, a.stride(0), a.stride(1),
                                             b.stride(0), b.stride(1), ct.stride(0),
                                             ct.stride(1), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
                                             GROUP_M=G, num_warps=8, num_stages=args.stages),
                args.reps, args.batch) / 1e9
            row["triton"] = flop / median_ms(launch(triton_kernel, ct, args.triton_stages),
                                             args.reps, args.batch) / 1e9
            row["torch"] = flop / median_ms(lambda: torch.matmul(a, b, out=ct), args.reps,
                                            args.batch) / 1e9
            print(row, flush=True)
            rows.append(row)
    print(f"\n### Persistent matmul (Triton's tutorial 09 pointer kernel, {BM}x{BN}x{BK}, 8 "
          f"warps, {sms} programs; batches of {args.batch}) — {torch.cuda.get_device_name()}\n")
    print("| dtype | M x N x K | Kiln flattened TFLOP/s | Kiln flatten=False | Kiln one tile "
          "per program | Triton TFLOP/s | torch TFLOP/s | Kiln/Triton | Kiln/torch | "
          "flattened/not | Kiln rel. error |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['dtype']} | {r['shape']} | {r['kiln']:.1f} | {r['kiln_plain']:.1f} | "
              f"{r['kiln_tile']:.1f} | {r['triton']:.1f} | {r['torch']:.1f} | "
              f"{r['kiln'] / r['triton']:.3f} | {r['kiln'] / r['torch']:.3f} | "
              f"{r['kiln'] / r['kiln_plain']:.3f} | {r['err']:.1e} |")


if __name__ == "__main__":
    main()
