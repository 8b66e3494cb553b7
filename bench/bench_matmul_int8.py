"""int8 x int8 -> int32 matmul: Triton's tutorial kernel with an int32 accumulator, one text for
Kiln and Triton (only the imports differ), beside torch._int_mm (cuBLASLt), at 4096^3, 8192^3
and an LLM projection (M=8192, N=11008, K=4096), with B row-major (K x N contiguous) and
column-major (the transpose of an N x K array: contiguous along K, the layout Hopper's
tensor cores read 8-bit operands in). Each library runs each of --configs and keeps its fastest;
median per call over batches of --batch back-to-back calls; TOPS, Kiln's ratio to each peer.
Results are checked exactly against torch._int_mm. Prints a markdown table last.

Run on a GPU machine with kiln importable (scripts/gpu-python.sh does):
    python3 bench/bench_matmul_int8.py [--reps 25] [--configs 128x256x128x8x3,...]
"""
import argparse
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_matmul_python import load_kernel, median_ms  # noqa: E402

KERNEL = '''
{imports}


@jit_lib.jit
def matmul_int8_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                       stride_bn, stride_cm, stride_cn, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)  # Triton asks for it with an int32 acc
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn, acc,
             mask=(cm[:, None] < M) & (cn[None, :] < N))
'''


def parse_configs(text):
    """'BMxBNxBKxWARPSxSTAGES,...' -> [(BM, BN, BK, warps, stages)]."""
    return [tuple(int(x) for x in c.split("x")) for c in text.split(",") if c]


def best(kernel, a, b, c, M, N, K, configs, reps, batch):
    """(TOPS, config) of the fastest config that runs; c holds its result."""
    results = []
    for BM, BN, BK, warps, stages in configs:
        grid = ((M + BM - 1) // BM * ((N + BN - 1) // BN),)

        def run():
            kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
                         GROUP_M=8, num_warps=warps, num_stages=stages)
        try:
            ms = median_ms(run, reps, batch)
        except Exception as e:  # a config one library cannot compile
            cause = e.__cause__ or e
            where = traceback.extract_tb(cause.__traceback__)[-1]
            print(f"  {BM}x{BN}x{BK}x{warps}x{stages}: {type(cause).__name__} "
                  f"{str(cause).strip()[-300:]!r} at {where.filename}:{where.lineno}: "
                  f"{where.line}", file=sys.stderr)
            continue
        results.append((2.0 * M * N * K / ms / 1e9, (BM, BN, BK, warps, stages)))
    if not results:
        return float("nan"), ()
    top = max(results)
    BM, BN, BK, warps, stages = top[1]
    grid = ((M + BM - 1) // BM * ((N + BN - 1) // BN),)
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                 c.stride(0), c.stride(1), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8,
                 num_warps=warps, num_stages=stages)
    torch.cuda.synchronize()
    return top


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--configs", default="128x256x128x8x3,128x128x128x8x4,128x256x64x8x4")
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,8192x11008x4096")
    args = ap.parse_args()
    configs = parse_configs(args.configs)
    kiln_kernel = load_kernel("kiln", KERNEL, "matmul_int8_kernel")
    try:
        triton_kernel = load_kernel("triton", KERNEL, "matmul_int8_kernel")
    except Exception as e:
        print(f"triton unavailable: {e}", file=sys.stderr)
        triton_kernel = None
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(0)
    for shape in args.shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8, generator=gen)
        bt = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8, generator=gen)
        for order in ("col", "row"):
            b = bt.t() if order == "col" else bt.t().contiguous()
            ref = torch._int_mm(a, b)
            row = {"shape": f"{M}x{N}x{K}", "b": order}
            c = torch.zeros(M, N, device="cuda", dtype=torch.int32)
            row["kiln"], row["kiln_cfg"] = best(kiln_kernel, a, b, c, M, N, K, configs,
                                                args.reps, args.batch)
            row["exact"] = bool(torch.equal(c, ref))
            if triton_kernel is not None:
                ct = torch.zeros_like(c)
                row["triton"], row["triton_cfg"] = best(triton_kernel, a, b, ct, M, N, K,
                                                        configs, args.reps, args.batch)
                row["triton_exact"] = bool(row["triton_cfg"]) and bool(torch.equal(ct, ref))
            row["torch"] = 2.0 * M * N * K / median_ms(lambda: torch._int_mm(a, b), args.reps,
                                                       args.batch) / 1e9
            print(row, flush=True)
            rows.append(row)
        del a, bt
        torch.cuda.empty_cache()

    cfg = lambda t: "x".join(map(str, t))  # noqa: E731
    print(f"\n### int8 matmul -> int32, Triton's tutorial kernel (batches of {args.batch}; each "
          f"library at its fastest of {args.configs}) — {torch.cuda.get_device_name()}\n")
    print("| M x N x K | B | Kiln TOPS | Triton TOPS | torch._int_mm TOPS | Kiln/Triton | "
          "Kiln/torch | Kiln tiles | Triton tiles | exact (Kiln, Triton) |")
    print("|---|---|---:|---:|---:|---:|---:|---|---|---|")
    for r in rows:
        t = r.get("triton", float("nan"))
        print(f"| {r['shape']} | {r['b']} | {r['kiln']:.1f} | {t:.1f} | {r['torch']:.1f} | "
              f"{r['kiln'] / t:.3f} | {r['kiln'] / r['torch']:.3f} | {cfg(r['kiln_cfg'])} | "
              f"{cfg(r.get('triton_cfg', ()))} | {r['exact']}, {r.get('triton_exact')} |")


if __name__ == "__main__":
    main()
