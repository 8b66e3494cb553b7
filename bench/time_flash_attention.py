#!/usr/bin/env python3
"""Times kiln_kernels.flash_attention's forward alone, no peer: CUDA-event medians of $REPS
(default 40) launches after warm-up, at D 128 (and D 64 with $D64=1), fp16, 4 x 32 x 4096 and
1 x 32 x 16384, causal and not; one line a case (TFLOP/s, max error against SDPA). For A/B
runs of two compiler builds: run it once per build, alternating fresh processes, each with its
own KILN_CACHE_DIR (bench/results/2026-11-27-h100-attention-session22.md).

    python3 bench/time_flash_attention.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    import torch
    common.setup_paths()
    from kiln_kernels import flash_attention as fa
    reps = int(os.environ.get("REPS", "40"))
    dims = [128] + ([64] if os.environ.get("D64") else [])
    for label, causal, q, k, v, o, flop in common.flash_forward_cases(torch, dims):
        ms = common.time_calls(lambda: fa.attention_forward(q, k, v, o, causal=causal), reps,
                               warmup=5)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        err = (o.float() - ref.float()).abs().max().item()
        print(f"{label}: {common.tflops(flop, ms):7.1f} TFLOP/s  err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
