#!/usr/bin/env python3
"""Issue #23's must-show 2 in one command: kiln_kernels.flash_attention's forward (its default
path, as a user calls attention_forward) against torch SDPA with no backend forced, and SDPA
against itself (the noise a ratio near 1 is read with), fp16, (B, H, S, D) = 4x32x4096 and
1x32x16384, causal and not. The three calls run in --rounds interleaved rounds (the order
rotated and reversed from round to round: common.interleaved_times) and each figure is the
median of its rounds; a round times --reps timings of --batch back-to-back calls.

--batch 1 times each call alone between two CUDA events after an idle device (what one call
costs, its host work included where the GPU waits for it); --batch 5 keeps the queue full, as
a model's layers launch (the kernels' own speed). Session 41 ran both
(bench/results/2026-11-29-h200-session41.md, section 5).

    python3 bench/flash_vs_sdpa.py [--rounds 12] [--reps 20] [--batch 5] [--head-dims 128,64]

Prints one line a case: TFLOP/s (4 * B * H * S^2 * D, halved for causal), Kiln/SDPA and
SDPA/SDPA as speed (above 1: the first is faster) with the range over rounds, and the largest
absolute difference from SDPA's output.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--batch", type=int, default=5)
    p.add_argument("--head-dims", default="128")
    args = p.parse_args(argv)
    import torch
    common.setup_paths()
    from kiln_kernels import flash_attention as fa
    sdpa = torch.nn.functional.scaled_dot_product_attention
    dims = [int(d) for d in args.head_dims.split(",")]
    for label, causal, q, k, v, o, flop in common.flash_forward_cases(torch, dims):
        fns = {"kiln": lambda: fa.attention_forward(q, k, v, o, causal=causal),
               "sdpa": lambda: sdpa(q, k, v, is_causal=causal),
               "sdpa2": lambda: sdpa(q, k, v, is_causal=causal)}
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        err = (o.float() - sdpa(q, k, v, is_causal=causal).float()).abs().max().item()

        def timer(f):
            return float(common.time_calls(f, args.reps, batch=args.batch, warmup=3))
        t = common.interleaved_times(fns, timer, args.rounds, rotate=True)
        med = {n: statistics.median(ts) for n, ts in t.items()}
        r = [s / x for s, x in zip(t["sdpa"], t["kiln"])]
        rn = [s / x for s, x in zip(t["sdpa"], t["sdpa2"])]
        print(f"{label} kiln {common.tflops(flop, med['kiln']):.1f} sdpa "
              f"{common.tflops(flop, med['sdpa']):.1f} TFLOP/s  kiln/sdpa "
              f"{med['sdpa'] / med['kiln']:.3f} (rounds {min(r):.3f}-{max(r):.3f})  "
              f"sdpa/sdpa {med['sdpa'] / med['sdpa2']:.3f} (rounds {min(rn):.3f}-"
              f"{max(rn):.3f})  err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
