"""Host time of a launch with tensor descriptors, Kiln beside Triton: one program adding two
64x64 fp16 blocks read and written through three descriptors (the TMA store path on sm_90a),
bench/kernel_sources.py's add_desc_kernel under Kiln and its twin under Triton (the same text,
bench/common.py). Cases: the descriptors built once and passed again (the launcher encodes or
reuses the three tensor maps), and built on every call from the tensors
(`TensorDescriptor.from_tensor`, as `kiln_kernels.matmul.matmul` does). The same add through
pointers (add_ptr_kernel) shows the launch without descriptors.

Median host microseconds per launch over batches of 500 back-to-back launches (the device
drained between batches), common.host_us, as bench_python.py measures launches. Prints a
markdown table last.

Run: PYTHONPATH=<staged kiln package> python3 bench/bench_launch_descriptors.py
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    import torch
    import kiln
    import kernel_sources as ks
    libs = {"kiln": (kiln.TensorDescriptor, ks.add_desc_kernel, ks.add_ptr_kernel)}
    triton, why = common.triton_or_none()
    if triton is None:
        print(f"triton unavailable ({why}): Kiln only", file=sys.stderr)
    else:
        from triton.tools.tensor_descriptor import TensorDescriptor as TD
        tw = common.twin(ks)
        libs["triton"] = (TD, tw.add_desc_kernel, tw.add_ptr_kernel)
    print(common.device_line(), flush=True)
    B = 64
    a, b = (torch.randn(B, B, device="cuda", dtype=torch.float16) for _ in range(2))
    results = {}
    for lib, (TD, desc_kernel, ptr_kernel) in libs.items():
        c = torch.empty_like(a)
        once = [TD.from_tensor(t, [B, B]) for t in (a, b, c)]
        desc_kernel[(1,)](*once, B=B)
        torch.cuda.synchronize()
        assert torch.equal(c, a + b), lib
        results[(lib, "descriptors built once")] = common.host_us(
            lambda: desc_kernel[(1,)](*once, B=B))
        results[(lib, "descriptors built per call")] = common.host_us(
            lambda: desc_kernel[(1,)](*[TD.from_tensor(t, [B, B]) for t in (a, b, c)], B=B))
        results[(lib, "pointers")] = common.host_us(lambda: ptr_kernel[(1,)](a, b, c, B=B))
    for (lib, case), us in results.items():
        print(f"launch_{lib}_{case.replace(' ', '_')}_us={us:.2f}")
    rows = []
    for case in ("descriptors built once", "descriptors built per call", "pointers"):
        k, t = results[("kiln", case)], results.get(("triton", case))
        rows.append([case, f"{k:.2f}", common.fmt(t, ".2f"),
                     common.fmt(t / k if t else None, ".2f")])
    common.markdown_table(["case", "Kiln us", "Triton us", "Triton / Kiln"], rows,
                          title=f"Host time per launch, 3 arguments — {common.device_name()}")


if __name__ == "__main__":
    main()
