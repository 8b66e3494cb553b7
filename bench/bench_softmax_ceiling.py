"""How close the one-row softmax and RMSNorm forward kernels come to a copy of the same bytes
(#5, must-shows 1 and 2).

At each shape (bf16 by default), in the same interleaved rounds of
triton.testing.do_bench(..., return_mode="median"):
  - torch_copy: `y.copy_(x)`, torch's own copy kernel;
  - triton_copy / kiln_copy: the one-row softmax kernel with the math taken out (load a row,
    store it), same grid, BLOCK and warps as the softmax beside it;
  - triton_softmax: ANCHORS.md's one-row Triton kernel (bench_llm_ops.t_softmax_fwd_kernel),
    at 4, 8 and 16 warps (and 32 at 32768 columns);
  - kiln_softmax: kiln_kernels.softmax.softmax_fwd_kernel at the same warps;
  - triton_rows / kiln_rows (rows of at most 4 KiB): several rows per program, one
    [ROWS, BLOCK] tile (bench_llm_ops.t_softmax_fwd_rows_kernel and Kiln's);
  - kiln_softmax_w<W>_maxnreg<R> (rows of 16384 columns and more): registers capped so that
    two programs fit an SM;
  - kiln_library: kiln_kernels.softmax.softmax_forward, the configuration a user gets.
With --ops rmsnorm (bf16 at --rms-shapes, ANCHORS.md's): bench_llm_ops.t_rmsnorm_fwd_kernel
and kiln_kernels.rmsnorm.rmsnorm_fwd_kernel at each warp count, the Triton reference at
bench_llm_ops.py's warps, and kiln_kernels.rmsnorm.rmsnorm_forward as kiln_library.
The timed calls of every kernel write the same output tensor, one placement for all;
"<reference>_own_out" is the reference kernel writing a tensor of its own, to show what
placement alone does. GB/s counts the tensor read once and
written once. "vs copy" is the kernel's speed over the
fastest copy, "vs Triton" its speed over the Triton one-row kernel at ANCHORS.md's warps
(4 below 2048 columns, 8 below 32768, else 16), from the medians; "ratio range" is the
smallest and largest of the per-round ratios (each round times both in turn).

Two ways to empty the L2 before each timed call (--flush):
  zero: triton.testing.do_bench's own (it writes zeros over a 256 MiB buffer, so the call
        starts with the L2 full of dirty lines that it must write back: ANCHORS.md's method);
  read: the same loop with the buffer read instead (the call starts with a clean L2).

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_softmax_ceiling.py
     [--shapes 8192x8192,...] [--rounds 5] [--dtypes bf16,fp32] [--flush zero,read] [--once]
--once runs each kernel twice without timing (for Nsight Compute).
"""
import argparse
import os
import sys

import torch
import triton
import triton.language as ttl
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels",
                                "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln  # noqa: E402
import kiln.language as tl  # noqa: E402
from kiln_kernels import softmax as k_sm  # noqa: E402
from kiln_kernels import rmsnorm as k_rms  # noqa: E402
from kiln_kernels._utils import num_warps_for  # noqa: E402
from bench_llm_ops import (t_rmsnorm_fwd_kernel, t_softmax_fwd_kernel,  # noqa: E402
                           t_softmax_fwd_rows_kernel)


@kiln.jit
def kiln_copy_row_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * out_stride + cols, x, mask=mask)


@triton.jit
def triton_copy_row_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols,
                           BLOCK: ttl.constexpr):
    row = ttl.program_id(0).to(ttl.int64)
    cols = ttl.arange(0, BLOCK)
    mask = cols < n_cols
    x = ttl.load(in_ptr + row * in_stride + cols, mask=mask, other=0.0)
    ttl.store(out_ptr + row * out_stride + cols, x, mask=mask)


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def triton_warps(block):
    """The one-row Triton kernel's warps in ANCHORS.md's runs (the tutorial's heuristic)."""
    return 16 if block >= 32768 else 8 if block >= 2048 else 4


def bench_ms(fn, flush, rep):
    """Median ms of fn, the L2 emptied before each call: do_bench itself for "zero", the same
    loop with the 256 MiB buffer read instead of written for "read"."""
    if flush == "zero":
        return do_bench(fn, warmup=10, rep=rep, return_mode="median")
    cache = torch.empty(256 << 20, dtype=torch.int8, device="cuda")

    def clear():
        torch.sum(cache.view(torch.int64), dtype=torch.int64)
    fn()
    torch.cuda.synchronize()
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0.record()
    for _ in range(5):
        clear()
        fn()
    t1.record()
    torch.cuda.synchronize()
    n = max(1, int(rep / (t0.elapsed_time(t1) / 5)))
    for _ in range(n // 10 + 1):
        fn()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(n)]
    for a, b in ev:
        clear()
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) for a, b in ev)
    return times[len(times) // 2]


def variants_for(op, M, N, dtype):
    """{name: (fn, output or None, check)}, the reference kernel's name and a torch reference
    of the op's output."""
    x = torch.randn(M, N, device="cuda", dtype=dtype)
    block = triton.next_power_of_2(N)
    warps = [w for w in (4, 8, 16, 32) if block // (32 * w) >= 2 and (w < 32 or block >= 32768)]
    out = {}

    def add(name, fn, check):
        out[name] = (fn, check)

    add("torch_copy", lambda y: y.copy_(x), "copy")
    for w in (8, 16):
        add(f"triton_copy_w{w}", lambda y, w=w: triton_copy_row_kernel[(M,)](
            y, x, N, N, N, BLOCK=block, num_warps=w), "copy")
        add(f"kiln_copy_w{w}", lambda y, w=w: kiln_copy_row_kernel[(M,)](
            y, x, N, N, N, BLOCK=block, num_warps=w), "copy")
    if op == "softmax":
        for w in warps:
            add(f"triton_softmax_w{w}", lambda y, w=w: t_softmax_fwd_kernel[(M,)](
                y, x, N, N, N, BLOCK=block, LOG=False, num_warps=w), "op")
        for w in warps:
            add(f"kiln_softmax_w{w}", lambda y, w=w: k_sm.softmax_fwd_kernel[(M,)](
                y, x, N, N, N, BLOCK=block, LOG=False, num_warps=w), "op")
        if block >= 16384:  # long rows: capped registers, two programs per SM
            for w, cap in ((16, 64), (16, 56), (32, 32)):
                add(f"kiln_softmax_w{w}_maxnreg{cap}", lambda y, w=w, cap=cap:
                    k_sm.softmax_fwd_kernel[(M,)](y, x, N, N, N, BLOCK=block, LOG=False,
                                                  num_warps=w, maxnreg=cap), "op")
        if block * x.element_size() <= 4096:  # several short rows per program
            for rows, w in ((2, 4), (2, 8), (4, 4), (4, 8), (8, 4), (8, 8)):
                add(f"triton_rows_r{rows}_w{w}", lambda y, r=rows, w=w: t_softmax_fwd_rows_kernel[(
                    triton.cdiv(M, r),)](y, x, N, N, M, N, ROWS=r, BLOCK=block, LOG=False,
                                         num_warps=w), "op")
                add(f"kiln_rows_r{rows}_w{w}", lambda y, r=rows, w=w: k_sm.softmax_fwd_rows_kernel[(
                    triton.cdiv(M, r),)](y, x, N, N, M, N, ROWS=r, BLOCK=block, LOG=False,
                                         num_warps=w), "op")
        out["kiln_library"] = (lambda y: k_sm.softmax_forward(x), "library")
        return x, out, f"triton_softmax_w{triton_warps(block)}", \
            lambda: torch.softmax(x.float(), -1)
    # rmsnorm forward: y = x * rstd * w, rstd per row (4 bytes a row more than a copy)
    w_ = torch.randn(N, device="cuda", dtype=dtype)
    rstd = torch.empty(M, device="cuda", dtype=torch.float32)
    for w in warps:
        add(f"triton_rmsnorm_w{w}", lambda y, w=w: t_rmsnorm_fwd_kernel[(M,)](
            y, x, w_, rstd, N, N, N, 1e-6, BLOCK=block, num_warps=w), "op")
    for w in warps:
        add(f"kiln_rmsnorm_w{w}", lambda y, w=w: k_rms.rmsnorm_fwd_kernel[(M,)](
            y, x, w_, rstd, N, N, N, 1e-6, BLOCK=block, num_warps=w), "op")
    out["kiln_library"] = (lambda y: k_rms.rmsnorm_forward(x, w_)[0], "library")
    # the Triton twin of bench_llm_ops.py runs at Kiln's warps (Liger's heuristic)
    return x, out, f"triton_rmsnorm_w{num_warps_for(block)}", \
        lambda: torch.nn.functional.rms_norm(x.float(), (N,), w_.float(), 1e-6)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rep", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="8192x8192,32768x1024,4096x32768")
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--ops", default="softmax", help="softmax,rmsnorm")
    ap.add_argument("--rms-shapes", default="16384x4096,8192x8192")
    ap.add_argument("--flush", default="zero")
    ap.add_argument("--only", default="", help="comma-separated kernel names to time (and the "
                    "Triton reference)")
    ap.add_argument("--once", action="store_true")
    args = ap.parse_args()
    print(f"device={torch.cuda.get_device_name()} triton={triton.__version__} "
          f"torch={torch.__version__}")
    table = []
    cases = [(op, d, shape) for op in args.ops.split(",") for d in args.dtypes.split(",")
             for shape in (args.shapes if op == "softmax" else args.rms_shapes).split(",")]
    for op, dname, shape in cases:
        dtype = DTYPES[dname]
        M, N = (int(v) for v in shape.split("x"))
        if triton.next_power_of_2(N) > 32768:
            continue
        x, variants, ref_name, reference = variants_for(op, M, N, dtype)
        if args.only:
            keep = set(args.only.split(",")) | {ref_name}
            variants = {k: v for k, v in variants.items() if k in keep}
        # the reference kernel again, writing a tensor of its own: how much the placement of
        # the output moves a time
        ref_fn = variants[ref_name][0]
        y_own = torch.empty_like(x)
        variants[ref_name + "_own_out"] = (lambda y: (ref_fn(y_own), y_own)[1], "library")
        ref = reference()
        for name, (fn, check) in variants.items():
            y = torch.empty_like(x)
            got = fn(y)
            torch.cuda.synchronize()
            if check == "copy":
                assert torch.equal(y, x), name
            else:
                y = got if check == "library" else y
                err = ((y.float() - ref).norm() / ref.norm()).item()
                assert err < 1e-2, (name, err)
        if args.once:
            for fn, _ in variants.values():
                fn(torch.empty_like(x))
            torch.cuda.synchronize()
            continue
        del ref
        nb = 2 * x.numel() * x.element_size()
        y_all = torch.empty_like(x)  # timed calls all write here: one placement for all
        for flush in args.flush.split(","):
            times = {name: [] for name in variants}
            for _ in range(args.rounds):
                for name, (fn, _) in variants.items():
                    times[name].append(bench_ms(lambda: fn(y_all), flush, args.rep))
            med = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
            copies = [v for k, v in med.items() if "copy" in k]
            copy_best = min(copies) if copies else float("nan")
            base = med[ref_name]
            for name, ms in med.items():
                per_round = [b / t for b, t in zip(times[ref_name], times[name])]
                lo, hi = min(per_round), max(per_round)
                print(f"ceiling {op} {dname} {M}x{N} flush={flush} {name} ms={ms:.4f} "
                      f"gbps={nb / ms / 1e6:.1f} vs_copy={copy_best / ms:.3f} "
                      f"vs_triton={base / ms:.3f} rounds={lo:.3f}..{hi:.3f}")
                table.append((op, dname, f"{M}x{N}", flush, name, ms, nb / ms / 1e6,
                              copy_best / ms, base / ms, lo, hi))
    if table:
        print(f"\n{args.rounds} interleaved rounds, median; ratio range: the per-round ratios "
              "to the Triton one-row kernel\n")
        print("| op | dtype | shape | flush | kernel | ms | GB/s | vs fastest copy | vs Triton | "
              "ratio range |\n|---|---|---|---|---|---:|---:|---:|---:|---|")
        for o, d, shape, fl, name, ms, gbps, rc, rt, lo, hi in table:
            print(f"| {o} | {d} | {shape} | {fl} | {name} | {ms:.4f} | {gbps:.0f} | {rc:.3f} | "
                  f"{rt:.3f} | {lo:.3f}-{hi:.3f} |")


if __name__ == "__main__":
    main()
