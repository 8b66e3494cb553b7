"""The library matmul on fp8 operands: `kiln_kernels.matmul.matmul(a, b)` with a and b
float8_e4m3fn (B column-major: `b.t()` of a contiguous [N, K], the layout Hopper's tensor
cores read and torch._scaled_mm requires), fp16 out, beside torch._scaled_mm (cuBLASLt, unit
scales, fp16 out) and the library's fp16 matmul of the same shape; also with a bias and gelu
fused (torch: _scaled_mm with the bias, then the activation). Batches of 10 back-to-back
calls, median per call (bench_matmul_python.median_ms); TFLOP/s count 2MNK. Relative error
against the same fp8 values multiplied in fp32 (fp16 out).

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_matmul_library_fp8.py
     [--shapes 4096x4096x4096,...] [--reps 15]
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels",
                                "python"))
from bench_matmul_python import median_ms  # noqa: E402
from kiln_kernels import matmul as mm  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,8192x11008x4096")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    print(f"device={torch.cuda.get_device_name()} torch={torch.__version__}")
    one = torch.ones((), device="cuda")
    rows = []
    for shape in args.shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        a16 = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b16 = torch.randn(N, K, device="cuda", dtype=torch.float16).t()
        a, b = a16.to(torch.float8_e4m3fn), b16.to(torch.float8_e4m3fn)
        b16c = b16.contiguous()  # the fp16 matmul's B row-major (tensor descriptors)
        bias = torch.randn(N, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        flops = 2.0 * M * N * K
        for epi in ("none", "bias+gelu"):
            if epi == "none":
                kiln_fn = lambda: mm.matmul(a, b)  # noqa: E731
                torch_fn = lambda: torch._scaled_mm(a, b, one, one,  # noqa: E731
                                                    out_dtype=torch.float16)
                k16_fn = lambda: mm.matmul(a16, b16c)  # noqa: E731
                want = ref
            else:
                kiln_fn = lambda: mm.matmul(a, b, bias, "gelu")  # noqa: E731
                torch_fn = lambda: F.gelu(torch._scaled_mm(  # noqa: E731
                    a, b, one, one, bias=bias, out_dtype=torch.float16), approximate="tanh")
                k16_fn = None
                want = F.gelu(ref + bias.float(), approximate="tanh")
            out = kiln_fn()
            err = ((out.float() - want).norm() / want.norm()).item()
            t_k = median_ms(kiln_fn, args.reps, 10)
            t_t = median_ms(torch_fn, args.reps, 10)
            t_16 = median_ms(k16_fn, args.reps, 10) if k16_fn else float("nan")
            row = (shape, epi, flops / t_k / 1e9, flops / t_t / 1e9, flops / t_16 / 1e9,
                   t_t / t_k, err)
            print("library_fp8 shape={} epilogue={} kiln={:.1f} torch={:.1f} kiln_fp16={:.1f} "
                  "kiln_vs_torch={:.3f} relerr={:.1e}".format(*row))
            rows.append(row)
    print("\n| M x N x K | epilogue | Kiln fp8 TFLOP/s | torch._scaled_mm TFLOP/s | "
          "Kiln fp16 TFLOP/s | Kiln/torch | Kiln rel. error |\n|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.3f} | {:.1e} |".format(*r))


if __name__ == "__main__":
    main()
