"""The library matmul with a fused epilogue: `kiln_kernels.matmul.matmul(a, b, bias,
activation)` (tensor descriptors: the TMA and wgmma on sm_90a) beside a Triton twin of its
descriptor kernel (the same text with Triton's imports, the same tiles, warps and GROUP_M;
Triton at 3 stages, its best for these tiles in bench_matmul_tma.py), torch's unfused
equivalent (cuBLAS `addmm` for the bias, then the activation as its own kernel) and the plain
cuBLAS matmul without any epilogue. fp16 and bf16; the bias is of the inputs' dtype.

Timing: batches of 10 back-to-back calls between two CUDA events (the host work of each call,
Kiln's and Triton's Python launchers and torch's dispatch, overlaps the GPU's work as it does
in a model), median batch over --reps batches, per call. TFLOP/s count the matmul's 2MNK only.
Relative error against an fp64 reference of the whole expression. Prints a markdown table last.

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_matmul_epilogue.py
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels",
                                "python"))
from bench_matmul_python import load_kernel, median_ms  # noqa: E402
from kiln_kernels import matmul as mm  # noqa: E402

KERNEL = '''
{imports}


@jit_lib.jit
def matmul_epilogue_kernel(a_desc, b_desc, c_desc, bias_ptr, M, N, K, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                           HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    off_m = (first_m + ((pid % group) % size_m)) * BLOCK_M
    off_n = ((pid % group) // size_m) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    if HAS_BIAS:
        cols = off_n + tl.arange(0, BLOCK_N)
        bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc = acc + bias[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "gelu":
        acc = acc / (1.0 + tl.exp(-1.5957691216057308 * (acc + 0.044715 * acc * acc * acc)))
    elif ACTIVATION == "silu":
        acc = acc / (1.0 + tl.exp(-acc))
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
'''

CASES = [(4096, 4096, 4096, True, "relu"), (8192, 8192, 8192, True, "gelu"),
         (8192, 11008, 4096, False, "silu"), (8192, 4096, 11008, True, None),
         (4000, 4000, 4000, True, "gelu")]


def torch_epilogue(a, b, bias, activation, out):
    y = torch.addmm(bias, a, b, out=out) if bias is not None else torch.matmul(a, b, out=out)
    if activation == "relu":
        return torch.relu_(y)
    if activation == "gelu":
        return F.gelu(y, approximate="tanh")
    if activation == "silu":
        return F.silu(y, inplace=True)
    return y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--triton-stages", type=int, default=3)
    args = ap.parse_args()
    try:
        import triton
        from triton.tools.tensor_descriptor import TensorDescriptor as TritonDescriptor
        triton_kernel = load_kernel("triton", KERNEL, "matmul_epilogue_kernel")
    except Exception as e:  # Triton missing: Kiln and torch only
        print(f"triton unavailable: {e}", file=sys.stderr)
        triton_kernel = None
    print(f"device={torch.cuda.get_device_name()} torch={torch.__version__} "
          f"triton={triton.__version__ if triton_kernel else None}")
    rows = []
    torch.manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16):
        for M, N, K, has_bias, act in CASES:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            bias = torch.randn(N, device="cuda", dtype=dtype) if has_bias else None
            ref = torch_epilogue(a.double(), b.double(), None if bias is None else bias.double(),
                                 act, None)
            err = lambda c: ((c.double() - ref).norm() / ref.norm()).item()  # noqa: E731
            flop = 2.0 * M * N * K
            name = {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
            row = {"dtype": name, "shape": f"{M}x{N}x{K}",
                   "epilogue": ("bias+" if has_bias else "") + (act or "none")}
            ck = torch.empty(M, N, device="cuda", dtype=dtype)
            run_k = lambda: mm.matmul(a, b, bias=bias, activation=act, out=ck)  # noqa: E731
            run_k()
            torch.cuda.synchronize()
            row["kiln_err"] = err(ck)
            row["kiln"] = flop / median_ms(run_k, args.reps, 10) / 1e9
            if triton_kernel is not None:
                bm, bn, bk, warps, _ = mm.config_for(M, N, K)
                grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
                ct = torch.empty_like(ck)

                def run_t():
                    triton_kernel[grid](
                        TritonDescriptor.from_tensor(a, [bm, bk]),
                        TritonDescriptor.from_tensor(b, [bk, bn]),
                        TritonDescriptor.from_tensor(ct, [bm, bn]),
                        bias if bias is not None else ct, M, N, K, BLOCK_M=bm, BLOCK_N=bn,
                        BLOCK_K=bk, GROUP_M=8, HAS_BIAS=bias is not None, ACTIVATION=act or "",
                        num_warps=warps, num_stages=args.triton_stages)
                run_t()
                torch.cuda.synchronize()
                row["triton_err"] = err(ct)
                row["triton"] = flop / median_ms(run_t, args.reps, 10) / 1e9
            co = torch.empty_like(ck)
            row["torch"] = flop / median_ms(lambda: torch_epilogue(a, b, bias, act, co),
                                            args.reps, 10) / 1e9
            cm = torch.empty_like(ck)
            row["cublas"] = flop / median_ms(lambda: torch.matmul(a, b, out=cm), args.reps,
                                             10) / 1e9
            for key, value in row.items():
                print(f"epilogue_{name}_{M}x{N}x{K}_{key}={value}")
            rows.append(row)
    print(f"\n### Matmul with a fused epilogue (kiln_kernels.matmul) — "
          f"{torch.cuda.get_device_name()}\n")
    print("| dtype | M x N x K | epilogue | Kiln | Triton twin | torch (cuBLAS + op) | "
          "cuBLAS matmul alone | Kiln/Triton | Kiln/torch | Kiln/cuBLAS alone | Kiln rel. error |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        t = r.get("triton")
        print(f"| {r['dtype']} | {r['shape']} | {r['epilogue']} | {r['kiln']:.1f} | "
              f"{t or float('nan'):.1f} | {r['torch']:.1f} | {r['cublas']:.1f} | "
              f"{r['kiln'] / t if t else float('nan'):.3f} | {r['kiln'] / r['torch']:.3f} | "
              f"{r['kiln'] / r['cublas']:.3f} | {r['kiln_err']:.1e} |")


if __name__ == "__main__":
    main()
