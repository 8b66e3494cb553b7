"""Triton's tutorial matmul, one kernel text compiled twice: with `import kiln as jit_lib;
import kiln.language as tl` and with the same lines for triton (only the imports differ), beside
torch.matmul (cuBLAS), on fp16 and bf16: 4096^3, 8192^3, an unaligned 4000^3 (masked edges) and
an LLM projection (M=8192, N=11008, K=4096). Median per call of CUDA-event timings over --batch
(10) back-to-back calls (1: each call alone, launch work included); TFLOP/s, Kiln's ratio to each
peer, and the relative error ||C - ref|| / ||ref|| against an fp32 matmul of the same
inputs. Prints a markdown table last.

Run on a GPU machine with kiln importable (scripts/gpu-python.sh does):
    python3 bench/bench_matmul_python.py [--reps 25] [--stages 4]
"""
import argparse
import importlib.util
import os
import sys
import tempfile

import torch

KERNEL = '''
{imports}


@jit_lib.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
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
    c = acc.to(c_ptr.dtype.element_ty)
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn, c,
             mask=(cm[:, None] < M) & (cn[None, :] < N))
'''


def load_kernel(lib, text=KERNEL, name="matmul_kernel"):
    """The kernel `name` of `text` with `lib`'s imports, imported from a file (both JITs read
    source)."""
    imports = f"import {lib} as jit_lib\nimport {lib}.language as tl"
    path = os.path.join(tempfile.mkdtemp(), f"{name}_{lib}.py")
    with open(path, "w") as f:
        f.write(text.format(imports=imports))
    spec = importlib.util.spec_from_file_location(f"{name}_{lib}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def median_ms(fn, reps, batch=1):
    """Median time per call in ms of `reps` timings, each of `batch` back-to-back calls between
    two CUDA events: batch 1 counts the host's launch work where it leaves the GPU idle (a
    slow launcher shows), a batch of 10 lets it overlap the GPU's work (the kernel's speed)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(batch):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / batch)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--stages", type=int, default=4, help="Kiln num_stages")
    ap.add_argument("--triton-stages", type=int, default=3)
    ap.add_argument("--batch", type=int, default=10,
                    help="calls per timing (1: per call, launch work included)")
    args = ap.parse_args()
    kiln_kernel = load_kernel("kiln")
    try:
        triton_kernel = load_kernel("triton")
    except Exception as e:  # Triton missing: Kiln and torch only
        print(f"triton unavailable: {e}", file=sys.stderr)
        triton_kernel = None
    BM, BN, BK, G = 128, 256, 64, 8
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 4000, 4000), (8192, 11008, 4096)]
    rows = []
    torch.manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16):
        for M, N, K in shapes:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            ref = torch.matmul(a.float(), b.float())
            flop = 2.0 * M * N * K
            grid = ((M + BM - 1) // BM * ((N + BN - 1) // BN),)

            def launch(kernel, c, stages):
                return lambda: kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1),
                                            b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                            BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=G,
                                            num_warps=8, num_stages=stages)

            name = {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
            row = {"dtype": name, "shape": f"{M}x{N}x{K}"}
            c = torch.empty(M, N, device="cuda", dtype=dtype)
            run = launch(kiln_kernel, c, args.stages)
            run()
            torch.cuda.synchronize()
            row["kiln_err"] = ((c.float() - ref).norm() / ref.norm()).item()
            row["kiln"] = flop / median_ms(run, args.reps, args.batch) / 1e9
            if triton_kernel is not None:
                ct = torch.empty_like(c)
                run_t = launch(triton_kernel, ct, args.triton_stages)
                row["triton"] = flop / median_ms(run_t, args.reps, args.batch) / 1e9
            ctorch = torch.empty_like(c)
            row["torch"] = flop / median_ms(lambda: torch.matmul(a, b, out=ctorch), args.reps,
                                                args.batch) / 1e9
            for key, value in row.items():
                print(f"{name}_{M}x{N}x{K}_{key}={value}")
            rows.append(row)
            del a, b, c, ref
            torch.cuda.empty_cache()

    dev = torch.cuda.get_device_name()
    print(f"\n### Matmul, Triton's tutorial kernel (128x256x64, 8 warps, GROUP_M=8; batches of "
          f"{args.batch}) — {dev}\n")
    print("| dtype | M x N x K | Kiln TFLOP/s | Triton TFLOP/s | torch (cuBLAS) TFLOP/s "
          "| Kiln/Triton | Kiln/cuBLAS | Kiln rel. error |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        t = r.get("triton")
        print(f"| {r['dtype']} | {r['shape']} | {r['kiln']:.1f} | "
              f"{t:.1f} | " if t else f"| {r['dtype']} | {r['shape']} | {r['kiln']:.1f} | - | ",
              end="")
        print(f"{r['torch']:.1f} | {(r['kiln'] / t) if t else float('nan'):.3f} | "
              f"{r['kiln'] / r['torch']:.3f} | {r['kiln_err']:.1e} |")


if __name__ == "__main__":
    main()
