"""Kiln's CPU (host) backend beside numpy, in one process: vector add (fp32,
bench/kernel_sources.py's add_kernel) and row softmax (fp32, kiln_kernels.softmax), each checked
against numpy before it is timed (host timers through bench/common.py).

    PYTHONPATH=build/python:kernels/python .venv/bin/python bench/bench_cpu.py [--markdown]

Kiln runs the grid on $KILN_CPU_THREADS threads (default: all cores); numpy runs on one. Times
are the median of --reps runs after a warm-up (compiles are not timed), Kiln's and numpy's runs
interleaved; "numpy / kiln" above 1 means Kiln is faster. The issue's target is to be within 2x of numpy (ratio >= 0.5).
"""
import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

np = None  # numpy, imported by main()


def median_ms(fns, reps, warmup=2):
    """Median milliseconds of each function, runs interleaved (common.host_ms)."""
    return [float(t) for t in common.host_ms(fns, reps, warmup)]


def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_softmax_out(x, out, m, s):
    np.max(x, axis=1, keepdims=True, out=m)
    np.subtract(x, m, out=out)
    np.exp(out, out=out)
    np.sum(out, axis=1, keepdims=True, out=s)
    np.divide(out, s, out=out)


def machine():
    model = platform.processor() or platform.machine()
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("", platform.machine()):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = line
                    break
    except OSError:
        pass
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{model}, {os.cpu_count()} logical CPUs, {isa}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--add-n", type=int, default=1 << 24)
    ap.add_argument("--add-block", type=int, default=4096)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=1024)
    args = ap.parse_args()
    global np
    import numpy as np
    import kiln
    common.setup_paths()
    from kernel_sources import add_kernel
    from kiln_kernels.softmax import softmax_fwd_kernel
    rng = np.random.default_rng(0)
    results = []

    # Vector add.
    n, block = args.add_n, args.add_block
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    out = np.empty_like(x)
    out_np = np.empty_like(x)
    grid = (kiln.cdiv(n, block),)

    def kiln_add():
        add_kernel[grid](x, y, out, n, BLOCK_SIZE=block, device="cpu")

    kiln_add()
    np.testing.assert_array_equal(out, x + y)
    t_kiln, t_np, t_np_out = median_ms([kiln_add, lambda: x + y,
                                        lambda: np.add(x, y, out=out_np)], args.reps)
    results.append((f"vector add fp32, n=2^{n.bit_length() - 1}" if n & (n - 1) == 0
                    else f"vector add fp32, n={n}", f"BLOCK={block}", t_kiln, t_np, t_np_out,
                    3 * n * 4))

    # Row softmax.
    rows, cols = args.rows, args.cols
    xs = rng.standard_normal((rows, cols), dtype=np.float32) * 3
    ys = np.empty_like(xs)
    sblock = kiln.next_power_of_2(cols)

    def kiln_softmax():
        softmax_fwd_kernel[(rows,)](ys, xs, cols, cols, cols, BLOCK=sblock, LOG=False,
                                    device="cpu")

    kiln_softmax()
    ref = np_softmax(xs.astype(np.float64))
    err = np.linalg.norm(ys - ref) / np.linalg.norm(ref)
    assert err < 1e-5, f"softmax rel err {err}"
    o, m, s = np.empty_like(xs), np.empty((rows, 1), np.float32), np.empty((rows, 1), np.float32)
    t_kiln_s, t_np_s, t_np_s_out = median_ms(
        [kiln_softmax, lambda: np_softmax(xs), lambda: np_softmax_out(xs, o, m, s)], args.reps)
    results.append((f"softmax fp32, {rows}x{cols}", f"BLOCK={sblock}", t_kiln_s, t_np_s,
                    t_np_s_out, 2 * rows * cols * 4))

    threads = os.environ.get("KILN_CPU_THREADS") or f"all ({os.cpu_count()})"
    print(f"# Kiln CPU backend vs numpy {np.__version__} — {machine()}; "
          f"KILN_CPU_THREADS={threads}; median of {args.reps} runs")
    if args.markdown:
        common.markdown_table(
            ["op", "config", "Kiln ms", "Kiln GB/s", "numpy ms", "numpy (out=) ms",
             "numpy / Kiln", "numpy (out=) / Kiln"],
            [[name, cfg, f"{tk:.3f}", f"{common.gbps(nbytes, tk):.1f}", f"{tn:.3f}",
              f"{tno:.3f}", f"{tn / tk:.2f}x", f"{tno / tk:.2f}x"]
             for name, cfg, tk, tn, tno, nbytes in results], align="ll" + "r" * 6)
    else:
        print(f"{'op':32} {'config':12} {'kiln ms':>9} {'GB/s':>6} {'numpy ms':>9} "
              f"{'np out= ms':>10} {'np/kiln':>8} {'np out=/kiln':>12}")
        for name, cfg, tk, tn, tno, nbytes in results:
            print(f"{name:32} {cfg:12} {tk:9.3f} {nbytes / tk / 1e6:6.1f} {tn:9.3f} "
                  f"{tno:10.3f} {tn / tk:7.2f}x {tno / tk:11.2f}x")


if __name__ == "__main__":
    main()
