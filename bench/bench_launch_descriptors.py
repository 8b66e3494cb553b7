"""Host time of a launch with tensor descriptors, Kiln beside Triton: one program adding two
64x64 fp16 blocks read and written through three descriptors (the TMA store path on sm_90a),
one kernel text compiled by both (only the imports differ). Cases: the descriptors built once
and passed again (the launcher encodes or reuses the three tensor maps), and built on every
call from the tensors (`TensorDescriptor.from_tensor`, as `kiln_kernels.matmul.matmul` does).
The same add through pointers shows the launch without descriptors.

Median host microseconds per launch over batches of 500 back-to-back launches (the device
drained between batches), as bench_python.py measures launches. Prints a markdown table last.

Run: PYTHONPATH=<staged kiln package> python3 bench/bench_launch_descriptors.py
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_matmul_python import load_kernel  # noqa: E402

KERNEL = '''
{imports}


@jit_lib.jit
def add_desc_kernel(a_desc, b_desc, c_desc, B: tl.constexpr):
    a = a_desc.load([0, 0])
    b = b_desc.load([0, 0])
    c_desc.store([0, 0], a + b)


@jit_lib.jit
def add_ptr_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
    tl.store(c_ptr + offs, tl.load(a_ptr + offs) + tl.load(b_ptr + offs))
'''


def host_time(launch, batches=40, per_batch=500):
    for _ in range(1000):
        launch()
    torch.cuda.synchronize()
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(per_batch):
            launch()
        samples.append((time.perf_counter() - t0) / per_batch)
        torch.cuda.synchronize()
    return statistics.median(samples) * 1e6


def main():
    import kiln
    libs = {"kiln": (kiln.TensorDescriptor, load_kernel("kiln", KERNEL, "add_desc_kernel"),
                     load_kernel("kiln", KERNEL, "add_ptr_kernel"))}
    try:
        import triton  # noqa: F401
        from triton.tools.tensor_descriptor import TensorDescriptor as TD
        libs["triton"] = (TD, load_kernel("triton", KERNEL, "add_desc_kernel"),
                          load_kernel("triton", KERNEL, "add_ptr_kernel"))
    except Exception as e:  # Triton missing: Kiln only
        print(f"triton unavailable: {e}", file=sys.stderr)
    B = 64
    a, b = (torch.randn(B, B, device="cuda", dtype=torch.float16) for _ in range(2))
    results = {}
    for lib, (TD, desc_kernel, ptr_kernel) in libs.items():
        c = torch.empty_like(a)
        once = [TD.from_tensor(t, [B, B]) for t in (a, b, c)]
        desc_kernel[(1,)](*once, B=B)
        torch.cuda.synchronize()
        assert torch.equal(c, a + b), lib
        results[(lib, "descriptors built once")] = host_time(
            lambda: desc_kernel[(1,)](*once, B=B))
        results[(lib, "descriptors built per call")] = host_time(
            lambda: desc_kernel[(1,)](*[TD.from_tensor(t, [B, B]) for t in (a, b, c)], B=B))
        results[(lib, "pointers")] = host_time(lambda: ptr_kernel[(1,)](a, b, c, B=B))
    for (lib, case), us in results.items():
        print(f"launch_{lib}_{case.replace(' ', '_')}_us={us:.2f}")
    print(f"\n### Host time per launch, 3 arguments — {torch.cuda.get_device_name()}\n")
    print("| case | Kiln us | Triton us | Triton / Kiln |\n|---|---:|---:|---:|")
    for case in ("descriptors built once", "descriptors built per call", "pointers"):
        k, t = results[("kiln", case)], results.get(("triton", case))
        print(f"| {case} | {k:.2f} | {t if t else float('nan'):.2f} | "
              f"{t / k if t else float('nan'):.2f} |")


if __name__ == "__main__":
    main()
