"""Kiln from Python beside Triton, in the same run, on the GPU machine. Prints key=value lines:

- Triton's tutorial vector add written with `import kiln.language as tl`
  (bench/kernel_sources.py's add_kernel) and its Triton twin (the same text under Triton:
  bench/common.py), fp32, n = 2^28: GB/s of each (medians of common.do_bench, rounds
  interleaved), the ratio, and the error of each result against a float64 reference (output
  poisoned before the run); kiln.testing.do_bench beside triton.testing.do_bench on the same
  Kiln kernel;
- host time per launch from Python of that kernel as a tiny 4-argument launch (n = 1024, one
  program), batches of back-to-back launches between synchronizations, Kiln and Triton;
- cold compile in a fresh process (empty caches): time from the end of `import` to the first
  launch completing, Kiln and Triton, and their ratio;
- a fresh process with a warm disk cache: time from the end of `import kiln` to the first
  launch completing (CUDA already initialized by torch, as in any program that has its inputs
  on the GPU), and the same in a process whose first CUDA call is Kiln's (CUDA start-up
  included, reported separately).

Run: PYTHONPATH=<staged kiln package> python3 bench/bench_python.py [--only launch ...]
(with two GPUs, the launch part also times a launch on cuda:1 tensors while device 0 is
current).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import report  # noqa: E402

# Set by main(): torch, kiln, the vector add under Kiln (kernel_sources.add_kernel) and its
# Triton twin (the same text under Triton: common.twin), Triton's testing module.
torch = kiln = kiln_add = triton_add = triton_testing = None


def bandwidth():
    n = 1 << 28
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    grid = lambda meta: (kiln.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    kiln_add[grid](x, y, out, n, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    ref = x.double() + y.double()
    report("kiln_py_add_relerr", ((out.double() - ref).norm() / ref.norm()).item(), "{:.3e}")
    out.fill_(float("nan"))
    triton_add[grid](x, y, out, n, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    report("triton_add_relerr", ((out.double() - ref).norm() / ref.norm()).item(), "{:.3e}")
    nbytes = 3 * 4 * n
    k, t = [], []
    for _ in range(3):  # interleaved rounds: both see the same clocks and neighbours
        k.append(common.do_bench(lambda: kiln_add[grid](x, y, out, n, BLOCK_SIZE=1024),
                                 warmup=50, rep=300))
        t.append(common.do_bench(lambda: triton_add[grid](x, y, out, n, BLOCK_SIZE=1024),
                                 warmup=50, rep=300))
    kg, tg = common.gbps(nbytes, statistics.median(k)), common.gbps(nbytes, statistics.median(t))
    report("kiln_py_add_gbps", kg)
    report("triton_add_gbps", tg)
    report("kiln_py_add_vs_triton", kg / tg)
    # kiln.testing.do_bench beside triton.testing.do_bench, timing the same Kiln kernel
    report("kiln_testing_do_bench_ms", kiln.testing.do_bench(
        lambda: kiln_add[grid](x, y, out, n, BLOCK_SIZE=1024), return_mode="median"))
    report("triton_testing_do_bench_ms_kiln_kernel", triton_testing.do_bench(
        lambda: kiln_add[grid](x, y, out, n, BLOCK_SIZE=1024), warmup=50, rep=300,
        return_mode="median"))
    del x, y, out, ref
    torch.cuda.empty_cache()


def launch_cost():
    a, b, c = (torch.empty(1024, device="cuda") for _ in range(3))
    report("kiln_py_launch_host_us", common.host_us(lambda: kiln_add[(1,)](a, b, c, 1024,
                                                                     BLOCK_SIZE=1024)))
    report("triton_launch_host_us", common.host_us(lambda: triton_add[(1,)](a, b, c, 1024,
                                                                      BLOCK_SIZE=1024)))
    ka, kb, kc = (kiln.empty(1024, "float32") for _ in range(3))
    report("kiln_py_launch_host_us_kiln_arrays",
           common.host_us(lambda: kiln_add[(1,)](ka, kb, kc, 1024, BLOCK_SIZE=1024)))
    if torch.cuda.device_count() > 1 and hasattr(kiln, "device_count"):
        # Tensors on cuda:1 while device 0 is current: the launch switches context and back.
        d, e, f = (torch.empty(1024, device="cuda:1") for _ in range(3))
        report("kiln_py_launch_host_us_other_device",
               common.host_us(lambda: kiln_add[(1,)](d, e, f, 1024, BLOCK_SIZE=1024),
                         sync=lambda: torch.cuda.synchronize(1)))


CHILD = textwrap.dedent('''
    import os, sys, time
    USE_TORCH = os.environ["BENCH_TORCH"] == "1"
    LIB = os.environ["BENCH_LIB"]
    if USE_TORCH:
        import torch
        n = 1 << 20
        x = torch.rand(n, device="cuda"); y = torch.rand(n, device="cuda")
        out = torch.empty_like(x)
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if LIB == "kiln":
        import kiln as lib
        import kiln.language as tl
    else:
        import triton as lib
        import triton.language as tl
    t1 = time.perf_counter()
    if not USE_TORCH:
        import numpy as np
        n = 1 << 20
        x = lib.from_numpy(np.ones(n, np.float32)); y = lib.from_numpy(np.ones(n, np.float32))
        out = lib.empty(n, "float32")

    @lib.jit
    def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(output_ptr + offsets, x + y, mask=mask)

    add_kernel[(n // 1024,)](x, y, out, n, BLOCK_SIZE=1024)
    if USE_TORCH:
        torch.cuda.synchronize()
    else:
        lib.synchronize()
    t2 = time.perf_counter()
    if USE_TORCH:
        assert torch.equal(out, x + y)
    print(f"import_ms={(t1 - t0) * 1e3:.3f} first_launch_ms={(t2 - t1) * 1e3:.3f}")
''')


def child(script, lib, cache, use_torch=True):
    env = dict(os.environ, BENCH_LIB=lib, BENCH_TORCH="1" if use_torch else "0",
               KILN_CACHE_DIR=cache, TRITON_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{lib} child failed:\n{r.stderr}")
    vals = dict(tok.split("=") for tok in r.stdout.split())
    return float(vals["import_ms"]), float(vals["first_launch_ms"])


def processes():
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        cold = {"kiln": [], "triton": []}
        imports = {"kiln": [], "triton": []}
        for rep in range(3):
            for lib in ("kiln", "triton"):
                cache = os.path.join(tmp, f"cold-{lib}-{rep}")
                imp, first = child(script, lib, cache)
                cold[lib].append(first)
                imports[lib].append(imp)
        kc, tc = statistics.median(cold["kiln"]), statistics.median(cold["triton"])
        report("kiln_py_cold_compile_first_launch_ms", kc)
        report("triton_cold_compile_first_launch_ms", tc)
        report("kiln_py_cold_vs_triton", kc / tc)
        report("kiln_import_ms", statistics.median(imports["kiln"]))
        report("triton_import_ms", statistics.median(imports["triton"]))
        warm_cache = os.path.join(tmp, "cold-kiln-0")
        warm = [child(script, "kiln", warm_cache)[1] for _ in range(5)]
        report("kiln_py_warm_first_launch_after_import_ms", statistics.median(warm))
        warm_t = [child(script, "triton", os.path.join(tmp, "cold-triton-0"))[1]
                  for _ in range(3)]
        report("triton_warm_first_launch_after_import_ms", statistics.median(warm_t))
        no_torch = [child(script, "kiln", warm_cache, use_torch=False)[1] for _ in range(3)]
        report("kiln_py_warm_first_launch_incl_cuda_init_ms", statistics.median(no_torch))


def main():
    global torch, kiln, kiln_add, triton_add, triton_testing
    parts = {"bandwidth": bandwidth, "launch": launch_cost, "processes": processes}
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=sorted(parts), action="append",
                    help="run only these parts (repeatable; default: all)")
    args = ap.parse_args()
    import torch
    import kiln
    import kernel_sources
    import triton.testing as triton_testing
    kiln_add = kernel_sources.add_kernel
    triton_add = common.twin_kernel(kiln_add)
    print(common.device_line(), flush=True)
    for name in args.only or parts:
        parts[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
