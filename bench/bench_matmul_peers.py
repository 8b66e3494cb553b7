"""Matmul peers for kiln-bench --only=matmul: torch (cuBLAS) and Triton's tutorial matmul
kernel (grouped ordering; the tutorial's best H100 fp16 config: 128x256x64, 8 warps, 3 stages),
fp16 inputs at M = N = K = 4096 and 8192, timed with CUDA events (median), printed as key=value.
The Triton kernel and the timing are bench_matmul_python.py's."""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_matmul_python import load_kernel, median_ms  # noqa: E402


def main():
    matmul_kernel = load_kernel("triton")
    for n in (4096, 8192):
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        flop = 2.0 * n * n * n
        ms = median_ms(lambda: torch.matmul(a, b, out=c), 11)
        print(f"torch_matmul_{n}_tflops={flop / ms / 1e9:.2f}")
        grid = (triton.cdiv(n, 128) * triton.cdiv(n, 256),)
        run = lambda: matmul_kernel[grid](a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0),
                                          b.stride(1), c.stride(0), c.stride(1), BLOCK_M=128,
                                          BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_stages=3,
                                          num_warps=8)
        print(f"triton_matmul_{n}_tflops={flop / median_ms(run, 11) / 1e9:.2f}")


if __name__ == "__main__":
    main()
