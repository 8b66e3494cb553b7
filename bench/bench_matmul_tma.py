"""Matmul through tensor descriptors (TMA on sm_90): Triton's tutorial matmul with grouped
ordering, its A/B loads and C store written as `desc.load` / `desc.store` on host
TensorDescriptors. One kernel text compiled twice (kiln and triton, only the imports differ),
beside Kiln's pointer version of the same kernel (cp.async rings, bench_matmul_python.py) and
torch.matmul (cuBLAS): fp16 and bf16 at 4096^3, 8192^3, 4000^3 (edges outside the tensor) and
M=8192, N=11008, K=4096. Median per call of CUDA-event timings over --batch (10) back-to-back
calls (1: each call alone, launch work included); TFLOP/s, Kiln's ratio to each peer,
relative error against an fp32 matmul. `--dump DIR` writes the Kiln TMA kernel's PTX there
(scripts run ptxas and cuobjdump on it). Prints a markdown table last.

Run on a GPU machine with kiln importable (scripts/gpu-python.sh does):
    python3 bench/bench_matmul_tma.py [--reps 25] [--stages 4] [--triton-stages 3]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_matmul_python import load_kernel as load_pointer_kernel, median_ms  # noqa: E402

KERNEL = '''
{imports}


@jit_lib.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
'''


def load_kernel(lib):
    return load_pointer_kernel(lib, KERNEL, "matmul_tma_kernel")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--stages", type=int, default=4, help="Kiln num_stages")
    ap.add_argument("--triton-stages", type=int, default=3)
    ap.add_argument("--batch", type=int, default=10,
                    help="calls per timing (1: per call, launch work included)")
    ap.add_argument("--dump", default=None)
    ap.add_argument("--only", choices=["all", "kiln", "triton"], default="all",
                    help="time one kernel (for a profiler), else all four")
    ap.add_argument("--shapes", default="4096,4096,4096;8192,8192,8192;4000,4000,4000;"
                                         "8192,11008,4096")
    args = ap.parse_args()
    import kiln
    kiln_kernel = load_kernel("kiln")
    kiln_pointer = load_pointer_kernel("kiln")
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor as TritonDescriptor
        triton_kernel = load_kernel("triton")
    except Exception as e:  # Triton missing: Kiln and torch only
        print(f"triton unavailable: {e}", file=sys.stderr)
        triton_kernel = None
    BM, BN, BK, G = 128, 256, 64, 8
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes.split(";")]
    rows = []
    torch.manual_seed(0)
    dumped = False
    for dtype in (torch.float16, torch.bfloat16):
        for M, N, K in shapes:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            ref = torch.matmul(a.float(), b.float())
            flop = 2.0 * M * N * K
            grid = ((M + BM - 1) // BM * ((N + BN - 1) // BN),)
            name = {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
            row = {"dtype": name, "shape": f"{M}x{N}x{K}"}

            c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
            if args.only == "triton":
                ct = torch.empty_like(c)
                td = [TritonDescriptor.from_tensor(a, [BM, BK]),
                      TritonDescriptor.from_tensor(b, [BK, BN]),
                      TritonDescriptor.from_tensor(ct, [BM, BN])]
                for _ in range(args.reps):
                    triton_kernel[grid](*td, M, N, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
                                        GROUP_M=G, num_warps=8, num_stages=args.triton_stages)
                torch.cuda.synchronize()
                continue
            kd = [kiln.TensorDescriptor.from_tensor(a, [BM, BK]),
                  kiln.TensorDescriptor.from_tensor(b, [BK, BN]),
                  kiln.TensorDescriptor.from_tensor(c, [BM, BN])]

            def run():
                return kiln_kernel[grid](*kd, M, N, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
                                         GROUP_M=G, num_warps=8, num_stages=args.stages)
            compiled = run()
            torch.cuda.synchronize()
            if args.dump and not dumped:
                os.makedirs(args.dump, exist_ok=True)
                with open(os.path.join(args.dump, "kiln_matmul_tma.ptx"), "w") as f:
                    f.write(compiled.asm["ptx"])
                dumped = True
            row["kiln_err"] = ((c.float() - ref).norm() / ref.norm()).item()
            row["kiln"] = flop / median_ms(run, args.reps, args.batch) / 1e9
            if args.only == "kiln":
                continue

            cp = torch.empty_like(c)
            run_p = lambda: kiln_pointer[grid](  # noqa: E731
                a, b, cp, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                cp.stride(0), cp.stride(1), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=G,
                num_warps=8, num_stages=args.stages)
            row["kiln_cp_async"] = flop / median_ms(run_p, args.reps, args.batch) / 1e9

            if triton_kernel is not None:
                ct = torch.empty_like(c)
                td = [TritonDescriptor.from_tensor(a, [BM, BK]),
                      TritonDescriptor.from_tensor(b, [BK, BN]),
                      TritonDescriptor.from_tensor(ct, [BM, BN])]
                run_t = lambda: triton_kernel[grid](  # noqa: E731
                    *td, M, N, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=G, num_warps=8,
                    num_stages=args.triton_stages)
                run_t()
                torch.cuda.synchronize()
                row["triton_err"] = ((ct.float() - ref).norm() / ref.norm()).item()
                row["triton"] = flop / median_ms(run_t, args.reps, args.batch) / 1e9
            ctorch = torch.empty_like(c)
            row["torch"] = flop / median_ms(lambda: torch.matmul(a, b, out=ctorch),
                                            args.reps, args.batch) / 1e9
            for key, value in row.items():
                print(f"tma_{name}_{M}x{N}x{K}_{key}={value}")
            rows.append(row)
            del a, b, c, cp, ref
            torch.cuda.empty_cache()

    if args.only != "all":
        return
    dev = torch.cuda.get_device_name()
    print(f"\n### Matmul through tensor descriptors (TMA; 128x256x64, 8 warps, GROUP_M=8, Kiln "
          f"{args.stages} stages, Triton {args.triton_stages}; batches of {args.batch}) "
          f"— {dev}\n")
    print("| dtype | M x N x K | Kiln TMA | Kiln cp.async | Triton TMA | cuBLAS | Kiln/Triton "
          "| Kiln/cuBLAS | TMA/cp.async | Kiln rel. error |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        t = r.get("triton", float("nan"))
        print(f"| {r['dtype']} | {r['shape']} | {r['kiln']:.1f} | {r['kiln_cp_async']:.1f} | "
              f"{t:.1f} | {r['torch']:.1f} | {r['kiln'] / t:.3f} | {r['kiln'] / r['torch']:.3f} "
              f"| {r['kiln'] / r['kiln_cp_async']:.3f} | {r['kiln_err']:.1e} |")


if __name__ == "__main__":
    main()
