"""A driver for a profiler: runs bench/cliff_sources.mm_ptr (tutorial 03's pointer matmul, B
stored K x N) under Kiln at fp16 4096^3, 128x256x64, 8 warps, 3 stages (bench_cliffs' pick),
twice, and prints the relative error. Session 23's ncu before/after
(bench/results/2026-11-27-h100-pointer-tma-session23.md):

    KILN_TMA_POINTER_TILES=0|1 ncu --clock-control none -k regex:mm_ptr -s 1 -c 1 \
        --metrics gpu__time_duration.sum,... python3 bench/ncu_pointer_matmul.py
"""
import sys, os
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cliff_sources as cs
M = N = K = 4096
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn(K, N, device="cuda", dtype=torch.float16)
c = torch.empty(M, N, device="cuda", dtype=torch.float16)
grid = ((M // 128) * (N // 256),)
for _ in range(2):
    cs.mm_ptr[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                    c.stride(0), c.stride(1), BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                    BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACTIVATION="", num_warps=8, num_stages=3)
torch.cuda.synchronize()
ref = a.float() @ b.float()
print("rel err", ((c.float() - ref).norm() / ref.norm()).item())
