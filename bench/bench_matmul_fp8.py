"""fp8 matmul (e4m3 and e5m2 inputs, fp32 accumulation, fp16 out): Triton's tutorial kernel, one
text for Kiln and Triton (only the imports differ), beside torch._scaled_mm (cuBLASLt; unit
scales; e4m3 only: cuBLAS has no e5m2 x e5m2), at 4096^3, 8192^3 and an LLM projection (M=8192,
N=11008, K=4096), with B column-major (the transpose of an N x K array: contiguous along K, how
Hopper's tensor cores read 8-bit operands, and what torch._scaled_mm requires) and row-major.
Each library runs each of --configs and keeps its fastest; median per call over batches of
--batch calls; TFLOP/s, Kiln's ratio to each peer, relative errors against an fp32 matmul of the
same fp8 values. Prints a markdown table last.

Run on a GPU machine with kiln importable (scripts/gpu-python.sh does):
    python3 bench/bench_matmul_fp8.py [--reps 25] [--configs 128x256x128x8x3,...]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_matmul_int8 import best, parse_configs  # noqa: E402
from bench_matmul_python import load_kernel, median_ms  # noqa: E402

KERNEL = '''
{imports}


@jit_lib.jit
def matmul_fp8_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
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
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn, acc.to(tl.float16),
             mask=(cm[:, None] < M) & (cn[None, :] < N))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--configs", default="128x256x128x8x3,128x128x128x8x4,128x256x64x8x4")
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,8192x11008x4096")
    ap.add_argument("--dtypes", default="float8_e4m3fn,float8_e5m2")
    ap.add_argument("--orders", default="col,row")
    args = ap.parse_args()
    configs = parse_configs(args.configs)
    kiln_kernel = load_kernel("kiln", KERNEL, "matmul_fp8_kernel")
    try:
        triton_kernel = load_kernel("triton", KERNEL, "matmul_fp8_kernel")
    except Exception as e:
        print(f"triton unavailable: {e}", file=sys.stderr)
        triton_kernel = None
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(0)
    one = torch.ones((), device="cuda")
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for shape in args.shapes.split(","):
            M, N, K = (int(x) for x in shape.split("x"))
            a = torch.randn(M, K, device="cuda", generator=gen).to(dtype)
            bt = torch.randn(N, K, device="cuda", generator=gen).to(dtype)
            for order in args.orders.split(","):
                b = bt.t() if order == "col" else bt.t().contiguous()
                ref = a.float() @ b.float()
                err = lambda c: ((c.float() - ref).norm() / ref.norm()).item()  # noqa: E731
                row = {"dtype": dtype_name.replace("float8_", ""), "shape": shape, "b": order}
                c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
                row["kiln"], row["kiln_cfg"] = best(kiln_kernel, a, b, c, M, N, K, configs,
                                                    args.reps, args.batch)
                row["kiln_err"] = err(c)
                if triton_kernel is not None:
                    ct = torch.zeros_like(c)
                    row["triton"], row["triton_cfg"] = best(triton_kernel, a, b, ct, M, N, K,
                                                            configs, args.reps, args.batch)
                    row["triton_err"] = err(ct) if row["triton_cfg"] else float("nan")
                row["torch"] = float("nan")
                if dtype == torch.float8_e4m3fn and order == "col":
                    def scaled():
                        return torch._scaled_mm(a, b, one, one, out_dtype=torch.float16)
                    row["torch"] = 2.0 * M * N * K / median_ms(scaled, args.reps,
                                                               args.batch) / 1e9
                    row["torch_err"] = err(scaled())
                print(row, flush=True)
                rows.append(row)
            del a, bt
            torch.cuda.empty_cache()

    cfg = lambda t: "x".join(map(str, t)) if t else "-"  # noqa: E731
    print(f"\n### fp8 matmul, fp32 accumulation, fp16 out: Triton's tutorial kernel (batches of "
          f"{args.batch}; each library at its fastest of {args.configs}) — "
          f"{torch.cuda.get_device_name()}\n")
    print("| fp8 | M x N x K | B | Kiln TFLOP/s | Triton TFLOP/s | torch._scaled_mm TFLOP/s | "
          "Kiln/Triton | Kiln/torch | Kiln tiles | Triton tiles | rel. error Kiln / Triton |")
    print("|---|---|---|---:|---:|---:|---:|---:|---|---|---|")
    for r in rows:
        t = r.get("triton", float("nan"))
        print(f"| {r['dtype']} | {r['shape']} | {r['b']} | {r['kiln']:.1f} | {t:.1f} | "
              f"{r['torch']:.1f} | {r['kiln'] / t:.3f} | {r['kiln'] / r['torch']:.3f} | "
              f"{cfg(r['kiln_cfg'])} | {cfg(r.get('triton_cfg'))} | "
              f"{r['kiln_err']:.1e} / {r.get('triton_err', float('nan')):.1e} |")


if __name__ == "__main__":
    main()
