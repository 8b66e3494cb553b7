"""Compile time of large tiles on Kiln's CPU (host) backend: a vector add, a row softmax and a
2-D elementwise kernel at tiles of 1K to 1M elements (issue 25: the fuzzer's hangs were
constexpr tiles of up to 2^20 elements whose host compile ran past 60 s).

    PYTHONPATH=build/python .venv/bin/python bench/bench_cpu_compile.py [--sizes 1024,16384]
        [--timeout 120] [--kernels add,softmax,ew2d] [--markdown]

Each case runs in a subprocess of its own with an empty KILN_CACHE_DIR (nothing cached): it
times `kernel.warmup(...)` (the front end, the MLIR pipeline, LLVM at O3 and the object's
load), then launches the kernel once on a small problem and checks it against numpy. A case
past --timeout seconds is reported as such. The 2-D kernel's tile is 64 x (size / 64).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r'''
import json, sys, time
import numpy as np
import kiln
import kiln.language as tl

@kiln.jit(device="cpu")
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)

@kiln.jit(device="cpu")
def softmax(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)

@kiln.jit(device="cpu")
def ew2d(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    mask = (rows < M) & (cols < N)
    x = tl.load(x_ptr + rows * N + cols, mask=mask, other=0.0)
    y = tl.where(x > 0, x * 2.0 + 1.0, -x)
    tl.store(out_ptr + rows * N + cols, y, mask=mask)

which, size = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
if which == "add":
    n = size + size // 2
    x = rng.standard_normal(n, dtype=np.float32); y = rng.standard_normal(n, dtype=np.float32)
    out = np.zeros_like(x)
    args, meta, grid = (x, y, out, n), dict(BLOCK=size), (2,)
    ref = lambda: x + y
elif which == "softmax":
    rows, cols = 3, size - 3
    x = rng.standard_normal((rows, cols), dtype=np.float32); out = np.zeros_like(x)
    args, meta, grid = (x, out, cols, cols), dict(BLOCK=size), (rows,)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    ref = lambda: e / e.sum(axis=1, keepdims=True)
else:
    bm, bn = 64, size // 64
    M, N = 2 * bm - 5, bn - 1
    x = rng.standard_normal((M, N), dtype=np.float32); out = np.zeros_like(x)
    args, meta, grid = (x, out, M, N), dict(BM=bm, BN=bn), (2,)
    ref = lambda: np.where(x > 0, x * 2 + 1, -x)
kernel = {"add": add, "softmax": softmax, "ew2d": ew2d}[which]
t0 = time.perf_counter()
kernel.warmup(*args, grid=grid, **meta)
compile_s = time.perf_counter() - t0
t0 = time.perf_counter()
kernel[grid](*args, **meta)
run_s = time.perf_counter() - t0
ok = bool(np.allclose(out, ref(), rtol=1e-5, atol=1e-6))
print(json.dumps({"compile_s": compile_s, "run_s": run_s, "ok": ok}))
'''


def run_case(kernel, size, timeout):
    with tempfile.TemporaryDirectory() as cache:
        script = os.path.join(cache, "case.py")  # @kiln.jit reads the kernels' source file
        with open(script, "w", encoding="utf-8") as f:
            f.write(CHILD)
        env = dict(os.environ, KILN_CACHE_DIR=os.path.join(cache, "kiln"), KILN_CPU_THREADS="1")
        start = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, script, kernel, str(size)], env=env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"status": f"> {timeout} s (timeout)"}
        wall = time.perf_counter() - start
        if p.returncode != 0:
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["?"]
            return {"status": f"failed (rc {p.returncode}): {tail[0][:200]}"}
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["status"] = "ok" if r["ok"] else "WRONG RESULT"
        r["wall_s"] = wall
        return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,16384,65536,262144,1048576")
    ap.add_argument("--kernels", default="add,softmax,ew2d")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for kernel in args.kernels.split(","):
        for size in sizes:
            r = run_case(kernel, size, args.timeout)
            cell = (f"{r['compile_s']:.2f} s" if "compile_s" in r else r["status"])
            if "compile_s" in r and r["status"] != "ok":
                cell += f" ({r['status']})"
            rows.append((kernel, size, cell))
            print(f"{kernel:8s} {size:8d}  compile {cell}"
                  + (f"  (first launch {r['run_s']:.3f} s)" if "run_s" in r else ""), flush=True)
    if args.markdown:
        kernels = args.kernels.split(",")
        print("\n| kernel | " + " | ".join(f"{s:,}" for s in sizes) + " |")
        print("|---|" + "---:|" * len(sizes))
        for k in kernels:
            print(f"| {k} | " + " | ".join(c for kk, s, c in rows if kk == k) + " |")


if __name__ == "__main__":
    main()
