"""A driver for a profiler: runs bench/cliff_sources_attention.attn_fwd_desc (tutorial 06's
forward through host tensor descriptors) under Kiln at fp16 4x32x4096, D 128, not causal,
128x128 tiles, 8 warps, 3 stages (bench_cliffs' pick), twice, and prints the relative error
against torch's SDPA. Session 24's ncu before/after
(bench/results/2026-11-27-h100-attention-descriptors-session24.md):

    ncu --clock-control none -k regex:attn_fwd_desc -s 1 -c 1 \\
        --metrics gpu__time_duration.sum,... python3 bench/ncu_attention_desc.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cliffs_attention as ca  # noqa: E402
import cliff_sources_attention as src  # noqa: E402
import kiln  # noqa: E402

B, H, S, D = 4, 32, 4096, 128
q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
o = torch.empty_like(q)
m = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
fn = ca.fwd_desc_launcher(src, kiln.TensorDescriptor, q, k, v, o, m, False, (128, 128, 8, 3))
for _ in range(2):
    fn()
torch.cuda.synchronize()
ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
print("rel err", ((o.float() - ref.float()).norm() / ref.float().norm()).item())
