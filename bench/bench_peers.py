"""Times the peers of kiln-bench's kernels (bench/kiln_bench.cpp) on the GPU: torch's device
copy, Triton's tutorial vector add (the twin of bench/kernel_sources.py's add_kernel: the Kiln
text under Triton, bench/common.py), a Triton KL-divergence kernel and the one-row Triton
softmax (bench/triton_peers.py: kiln-bench's kernels are MLIR, so these two are Triton's own),
torch's eager versions, and the host cost of a Triton launch. Timing: common.do_bench
(triton.testing.do_bench's method: the L2 zeroed before each call, the median). Prints
`key=value` lines for bench/report.py. Run on the GPU machine.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def bench_softmax(med, torch, softmax_kernel):
    for m, n in [(32768, 1024), (8192, 8192), (4096, 32768)]:
        x = torch.randn(m, n, device="cuda") * 3
        y = torch.empty_like(x)
        warps = 16 if n >= 4096 else 8 if n >= 2048 else 4
        run = lambda: softmax_kernel[(m,)](y, x, n, n, n, BLOCK=n, num_warps=warps)  # noqa
        run()
        assert torch.allclose(y, torch.softmax(x, dim=1), rtol=1e-4, atol=1e-6)
        nbytes = 2 * 4 * m * n
        print(f"triton_softmax_{m}x{n}_gbps={nbytes / med(run) / 1e6:.4f}")
        print(f"torch_softmax_{m}x{n}_gbps={nbytes / med(lambda: torch.softmax(x, dim=1)) / 1e6:.4f}")


def main():
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    import torch
    import triton_peers
    # the twin built from the file's text: Kiln's Python package need not be importable here
    # (scripts/gpu.sh check does not build it)
    add_kernel = common.twin("kernel_sources").add_kernel
    print(common.device_line(), flush=True)
    n = 1 << 28
    x = torch.rand(n, device="cuda") + 0.01
    y = torch.rand(n, device="cuda") + 0.01
    out = torch.empty_like(x)
    nbytes = 4 * n
    med = lambda f: common.do_bench(f, warmup=50, rep=500)  # noqa: E731
    grid = ((n + 1023) // 1024,)

    def add():
        add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)

    def kl():
        triton_peers.kl_kernel[grid](x, y, out, n, BLOCK=1024)

    copy_ms = med(lambda: out.copy_(x))
    print(f"peer_copy_gbps={2 * nbytes / copy_ms / 1e6:.4f}")
    add()
    assert torch.equal(out, x + y)
    print(f"triton_add_gbps={3 * nbytes / med(add) / 1e6:.4f}")
    print(f"torch_add_gbps={3 * nbytes / med(lambda: torch.add(x, y, out=out)) / 1e6:.4f}")
    kl()
    ref = x.double() * (x.double().log() - y.double().log())
    print(f"triton_kl_relerr={((out.double() - ref).norm() / ref.norm()).item():.3e}")
    print(f"triton_kl_gbps={3 * nbytes / med(kl) / 1e6:.4f}")
    print(f"torch_kl_gbps={3 * nbytes / med(lambda: torch.mul(x, x.log() - y.log(), out=out)) / 1e6:.4f}")

    del x, y, out
    bench_softmax(med, torch, triton_peers.softmax_kernel)

    # Host time per Triton launch of a tiny 4-argument kernel (as ANCHORS measured it).
    a, b, c = (torch.empty(1024, device="cuda") for _ in range(3))
    for _ in range(1000):
        add_kernel[(1,)](a, b, c, 1024, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    count = 20000
    for _ in range(count):
        add_kernel[(1,)](a, b, c, 1024, BLOCK_SIZE=1024)
    host = time.perf_counter() - t0
    torch.cuda.synchronize()
    print(f"triton_launch_host_us={host * 1e6 / count:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
