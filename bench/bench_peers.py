"""Times the peers of Kiln's kernels on the GPU: torch's device copy, Triton's tutorial vector
add and a Triton KL-divergence kernel, torch's eager versions, and the host cost of a Triton
launch. Prints `key=value` lines for bench/report.py. Run on the GPU machine.
"""
import sys
import time

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def kl_kernel(p_ptr, q_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask, other=1.0)
    q = tl.load(q_ptr + offs, mask=mask, other=1.0)
    tl.store(out_ptr + offs, p * (tl.log(p) - tl.log(q)), mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    tl.store(out_ptr + row * out_stride + offs, num / tl.sum(num, axis=0), mask=mask)


def bench_softmax(med):
    for m, n in [(32768, 1024), (8192, 8192), (4096, 32768)]:
        x = torch.randn(m, n, device="cuda") * 3
        y = torch.empty_like(x)
        warps = 16 if n >= 4096 else 8 if n >= 2048 else 4
        run = lambda: softmax_kernel[(m,)](y, x, n, n, n, BLOCK=n, num_warps=warps)
        run()
        assert torch.allclose(y, torch.softmax(x, dim=1), rtol=1e-4, atol=1e-6)
        nbytes = 2 * 4 * m * n
        print(f"triton_softmax_{m}x{n}_gbps={nbytes / med(run) / 1e6:.4f}")
        print(f"torch_softmax_{m}x{n}_gbps={nbytes / med(lambda: torch.softmax(x, dim=1)) / 1e6:.4f}")


def main():
    n = 1 << 28
    x = torch.rand(n, device="cuda") + 0.01
    y = torch.rand(n, device="cuda") + 0.01
    out = torch.empty_like(x)
    nbytes = 4 * n
    med = lambda f: do_bench(f, warmup=50, rep=500, return_mode="median")
    grid = (triton.cdiv(n, 1024),)

    copy_ms = med(lambda: out.copy_(x))
    print(f"peer_copy_gbps={2 * nbytes / copy_ms / 1e6:.4f}")
    add_kernel[grid](x, y, out, n, BLOCK=1024)
    assert torch.equal(out, x + y)
    print(f"triton_add_gbps={3 * nbytes / med(lambda: add_kernel[grid](x, y, out, n, BLOCK=1024)) / 1e6:.4f}")
    print(f"torch_add_gbps={3 * nbytes / med(lambda: torch.add(x, y, out=out)) / 1e6:.4f}")
    kl_kernel[grid](x, y, out, n, BLOCK=1024)
    ref = x.double() * (x.double().log() - y.double().log())
    print(f"triton_kl_relerr={((out.double() - ref).norm() / ref.norm()).item():.3e}")
    print(f"triton_kl_gbps={3 * nbytes / med(lambda: kl_kernel[grid](x, y, out, n, BLOCK=1024)) / 1e6:.4f}")
    print(f"torch_kl_gbps={3 * nbytes / med(lambda: torch.mul(x, x.log() - y.log(), out=out)) / 1e6:.4f}")

    del x, y, out
    bench_softmax(med)

    # Host time per Triton launch of a tiny 4-argument kernel (as ANCHORS measured it).
    a, b, c = (torch.empty(1024, device="cuda") for _ in range(3))
    for _ in range(1000):
        add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    count = 20000
    for _ in range(count):
        add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)
    host = time.perf_counter() - t0
    torch.cuda.synchronize()
    print(f"triton_launch_host_us={host * 1e6 / count:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
