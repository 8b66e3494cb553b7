"""How close the one-row softmax and RMSNorm forward kernels come to a copy of the same bytes
(#5, must-shows 1 and 2).

At each shape (bf16 by default), in the same interleaved rounds of common.do_bench
(bench/common.py: triton.testing.do_bench's method, the median). Every Triton kernel is the
twin of the Kiln kernel beside it (the same source under Triton: common.twin):
  - torch_copy: `y.copy_(x)`, torch's own copy kernel;
  - triton_copy / kiln_copy: the one-row softmax kernel with the math taken out (load a row,
    store it: kernel_sources.copy_row_kernel), same grid, BLOCK and warps as the softmax
    beside it;
  - triton_softmax: ANCHORS.md's one-row Triton kernel, the twin of
    kiln_kernels.softmax.softmax_fwd_kernel, at 4, 8 and 16 warps (and 32 at 32768 columns);
  - kiln_softmax: kiln_kernels.softmax.softmax_fwd_kernel at the same warps;
  - triton_rows / kiln_rows (rows of at most 4 KiB): several rows per program, one
    [ROWS, BLOCK] tile (kiln_kernels.softmax.softmax_fwd_rows_kernel and its twin);
  - kiln_softmax_w<W>_maxnreg<R> (rows of 16384 columns and more): registers capped so that
    two programs fit an SM;
  - kiln_library: kiln_kernels.softmax.softmax_forward, the configuration a user gets.
With --ops rmsnorm (bf16 at --rms-shapes, ANCHORS.md's): kiln_kernels.rmsnorm.rmsnorm_fwd_kernel
and its twin at each warp count, the Triton reference at bench_llm_ops.py's warps, and
kiln_kernels.rmsnorm.rmsnorm_forward as kiln_library.
The timed calls of every kernel write the same output tensor, one placement for all;
"<reference>_own_out" is the reference kernel writing a tensor of its own, to show what
placement alone does. GB/s counts the tensor read once and
written once. "vs copy" is the kernel's speed over the
fastest copy, "vs Triton" its speed over the Triton one-row kernel at ANCHORS.md's warps
(4 below 2048 columns, 8 below 32768, else 16), from the medians; "ratio range" is the
smallest and largest of the per-round ratios (each round times both in turn).

Two ways to empty the L2 before each timed call (--flush):
  zero: triton.testing.do_bench's way (zeros written over a 256 MiB buffer, so the call
        starts with the L2 full of dirty lines that it must write back: ANCHORS.md's method);
  read: the same loop with the buffer read instead (the call starts with a clean L2).

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_softmax_ceiling.py
     [--shapes 8192x8192,...] [--rounds 5] [--dtypes bf16,fp32] [--flush zero,read] [--once]
--once runs each kernel twice without timing (for Nsight Compute).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# Set by setup(): torch, the Kiln modules, and the Triton twins (common.twin: the same
# source under Triton) of the kernels timed here.
torch = k_sm = k_rms = num_warps_for = kernel_sources = None
t_softmax_fwd_kernel = t_softmax_fwd_rows_kernel = t_rmsnorm_fwd_kernel = None
t_copy_row_kernel = None


def setup():
    global torch, k_sm, k_rms, num_warps_for, kernel_sources
    global t_softmax_fwd_kernel, t_softmax_fwd_rows_kernel, t_rmsnorm_fwd_kernel
    global t_copy_row_kernel
    import torch
    common.setup_paths()
    import kernel_sources
    from kiln_kernels import rmsnorm as k_rms, softmax as k_sm
    from kiln_kernels._utils import num_warps_for
    t_softmax_fwd_kernel = common.twin_kernel(k_sm.softmax_fwd_kernel)
    t_softmax_fwd_rows_kernel = common.twin_kernel(k_sm.softmax_fwd_rows_kernel)
    t_rmsnorm_fwd_kernel = common.twin_kernel(k_rms.rmsnorm_fwd_kernel)
    t_copy_row_kernel = common.twin_kernel(kernel_sources.copy_row_kernel)


def next_power_of_2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def cdiv(a, b):
    return (a + b - 1) // b


DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def triton_warps(block):
    """The one-row Triton kernel's warps in ANCHORS.md's runs (the tutorial's heuristic)."""
    return 16 if block >= 32768 else 8 if block >= 2048 else 4


def bench_ms(fn, flush, rep):
    """Median ms of fn, the L2 emptied before each call (common.do_bench: "zero" writes
    zeros over a 256 MiB buffer, as triton.testing.do_bench does; "read" reads it)."""
    return common.do_bench(fn, warmup=10, rep=rep, flush=flush)


def variants_for(op, M, N, dtype):
    """{name: (fn, output or None, check)}, the reference kernel's name and a torch reference
    of the op's output."""
    x = torch.randn(M, N, device="cuda", dtype=dtype)
    block = next_power_of_2(N)
    warps = [w for w in (4, 8, 16, 32) if block // (32 * w) >= 2 and (w < 32 or block >= 32768)]
    out = {}

    def add(name, fn, check):
        out[name] = (fn, check)

    add("torch_copy", lambda y: y.copy_(x), "copy")
    for w in (8, 16):
        add(f"triton_copy_w{w}", lambda y, w=w: t_copy_row_kernel[(M,)](
            y, x, N, N, N, BLOCK=block, num_warps=w), "copy")
        add(f"kiln_copy_w{w}", lambda y, w=w: kernel_sources.copy_row_kernel[(M,)](
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
                for who, kern in (("triton", t_softmax_fwd_rows_kernel),
                                  ("kiln", k_sm.softmax_fwd_rows_kernel)):
                    add(f"{who}_rows_r{rows}_w{w}", lambda y, r=rows, w=w, kern=kern: kern[(
                        cdiv(M, r),)](y, x, N, N, M, N, ROWS=r, BLOCK=block, LOG=False,
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
    # the Triton reference runs at Kiln's warps, as in bench_llm_ops.py (Liger's heuristic)
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
    setup()
    print(common.device_line(), flush=True)
    table = []
    cases = [(op, d, shape) for op in args.ops.split(",") for d in args.dtypes.split(",")
             for shape in (args.shapes if op == "softmax" else args.rms_shapes).split(",")]
    for op, dname, shape in cases:
        dtype = getattr(torch, DTYPES[dname])
        M, N = (int(v) for v in shape.split("x"))
        if next_power_of_2(N) > 32768:
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
