"""GPU tests (marker `gpu`; skipped without a GPU): kernels written with kiln.language run and
match numpy (kiln device arrays) or torch. Outputs are poisoned before each run; errors are
||out - ref|| / ||ref|| against float64 references."""
import time

import numpy as np
import pytest

import kiln
import kiln.language as tl
from cuda_torch import torch_or_skip  # noqa: E402

pytestmark = pytest.mark.gpu

NAN_BITS = 0x7FC00000  # poison: a quiet NaN in every fp32 word


def relerr(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


# Triton's tutorial 01 kernel, imports changed.
@kiln.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(output_ptr + offsets, output, mask=mask)


@pytest.mark.parametrize("n", [1, 15, 1024, 98432, (1 << 20) + 3])
def test_vector_add_kiln_arrays(n):
    rng = np.random.default_rng(n)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    dx, dy = kiln.from_numpy(x), kiln.from_numpy(y)
    out = kiln.empty(n, kiln.language.float32)
    out.fill32(NAN_BITS)
    grid = lambda meta: (kiln.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](dx, dy, out, n, BLOCK_SIZE=1024)
    kiln.synchronize()
    np.testing.assert_array_equal(out.numpy(), x + y)


def test_compiled_kernel_reports_registers():
    # The launch returns the CompiledKernel; n_regs/n_spills come from the driver, which
    # assembled the kernel's PTX as a whole program.
    n = 4096
    x = kiln.from_numpy(np.ones(n, np.float32))
    out = kiln.empty(n, kiln.language.float32)
    c = add_kernel[(kiln.cdiv(n, 1024),)](x, x, out, n, BLOCK_SIZE=1024)
    kiln.synchronize()
    np.testing.assert_array_equal(out.numpy(), np.full(n, 2, np.float32))
    assert 0 < c.n_regs <= 255
    assert c.n_spills == 0


@kiln.jit
def row_softmax_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * BLOCK + tl.arange(0, BLOCK))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * BLOCK + tl.arange(0, BLOCK), e / tl.sum(e, axis=0))


def test_maxnreg_caps_registers():
    # A 4096-wide row on one warp keeps 128 values per thread across the reductions; maxnreg
    # caps what the driver's assembler may use (the rest spills) and the answer is the same.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 4096)).astype(np.float32)
    ref = np.exp(x - x.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    dx = kiln.from_numpy(x)
    got = {}
    for cap in (None, 64):
        out = kiln.empty(x.size, kiln.language.float32)
        c = row_softmax_kernel[(4,)](dx, out, BLOCK=4096, num_warps=1, maxnreg=cap)
        kiln.synchronize()
        np.testing.assert_allclose(out.numpy().reshape(x.shape), ref, rtol=1e-5, atol=1e-7)
        got[cap] = c
    assert got[64].metadata.maxnreg == 64 and got[None].metadata.maxnreg is None
    assert got[64].n_regs <= 64 < got[None].n_regs, (got[64].n_regs, got[None].n_regs)
    assert got[64].n_spills > got[None].n_spills


def test_vector_add_torch():
    torch = torch_or_skip()
    n = 98432
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    add_kernel[(triton_cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


def triton_cdiv(a, b):
    return (a + b - 1) // b


def test_vector_add_fp16_and_views():
    torch = torch_or_skip()
    n = 5000
    x = torch.randn(n, device="cuda", dtype=torch.float16)
    y = torch.randn(n + 1, device="cuda", dtype=torch.float16)[1:]  # 2-byte offset: unaligned
    out = torch.empty(n, device="cuda", dtype=torch.float16)
    c = add_kernel[(triton_cdiv(n, 512),)](x, y, out, n, BLOCK_SIZE=512)
    torch.cuda.synchronize()
    assert c.signature["y_ptr"] == "*fp16"
    assert torch.equal(out, x + y)


def test_cuda_array_interface_and_dlpack_inputs():
    torch = torch_or_skip()
    n = 4096
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    out = torch.empty_like(x)

    class CAI:
        def __init__(self, t):
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    class DL:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

    add_kernel[(4,)](CAI(x), DL(y), out, n, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


@kiln.jit
def axpy_loop(x_ptr, out_ptr, n, reps, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(reps):
        acc += x * alpha + i
    k = 0
    while k < 3:
        acc = acc * 0.5
        k += 1
    if reps > 4:
        acc = -acc
    tl.store(out_ptr + offs, acc, mask=mask)


@pytest.mark.parametrize("reps", [0, 3, 7])
def test_runtime_control_flow(reps):
    n = 3000
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    out = kiln.empty(n, "float32")
    out.fill32(NAN_BITS)
    axpy_loop[(kiln.cdiv(n, 256),)](kiln.from_numpy(x), out, n, reps, 1.5, BLOCK=256)
    ref = np.zeros(n, np.float64)
    for i in range(reps):
        ref += x.astype(np.float64) * 1.5 + i
    ref *= 0.125
    if reps > 4:
        ref = -ref
    got = out.numpy()
    assert relerr(got, ref) < 1e-6 if reps else np.all(got == 0)


@kiln.jit
def copy_2d(in_ptr, out_ptr, stride_in, stride_out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(in_ptr + rm[:, None] * stride_in + rn[None, :], mask=mask)
    tl.store(out_ptr + rm[:, None] * stride_out + rn[None, :], x * 2.0, mask=mask)


def test_2d_copy_strided():
    M, N = 100, 300
    a = np.random.default_rng(1).random((M, 320), dtype=np.float32)
    out = kiln.empty((M, N), "float32")
    out.fill32(NAN_BITS)
    copy_2d[(kiln.cdiv(M, 32), kiln.cdiv(N, 64))](kiln.from_numpy(a), out, 320, N, M, N,
                                                  BM=32, BN=64)
    np.testing.assert_array_equal(out.numpy(), a[:, :N] * 2)


# Triton's tutorial 02 (fused softmax), one row per program, imports changed.
@kiln.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    input_ptrs = row_start_ptr + col_offsets
    mask = col_offsets < n_cols
    row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    output_ptrs = output_row_start_ptr + col_offsets
    tl.store(output_ptrs, softmax_output, mask=mask)


@pytest.mark.parametrize("shape", [(1823, 781), (64, 1024), (4, 17)])
def test_fused_softmax(shape):
    torch = torch_or_skip()
    M, N = shape
    x = torch.randn(M, N, device="cuda")
    y = torch.full_like(x, float("nan"))
    block = kiln.next_power_of_2(N)
    softmax_kernel[(M,)](y, x, x.stride(0), y.stride(0), N, BLOCK_SIZE=block,
                         num_warps=4 if block <= 1024 else 8)
    torch.cuda.synchronize()
    ref = torch.softmax(x.double(), dim=1)
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-5


def test_persistent_softmax_tutorial_kernel():
    """The tutorial's final form: programs stride over rows with tl.range."""
    torch = torch_or_skip()
    from test_compile import softmax_kernel as persistent
    M, N = 1000, 700
    x = torch.randn(M, N, device="cuda")
    y = torch.full_like(x, float("nan"))
    persistent[(132,)](y, x, x.stride(0), y.stride(0), M, N, BLOCK_SIZE=1024, num_stages=2)
    torch.cuda.synchronize()
    ref = torch.softmax(x.double(), dim=1)
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-5


def test_reductions_against_numpy():
    from test_compile import row_stats
    x = np.random.default_rng(3).standard_normal(256).astype(np.float32)
    out = kiln.empty(1, "float32")
    idx = kiln.empty(1, "int32")
    row_stats[(1,)](kiln.from_numpy(x), out, idx, N=256)
    ref = x.astype(np.float64).sum() * 2 + x.max() * 2
    assert abs(float(out.numpy()[0]) - ref) < 1e-3
    assert int(idx.numpy()[0]) == int(np.argmax(x)) + int(np.argmin(x))


def test_do_bench_and_stream_argument():
    torch = torch_or_skip()
    n = 1 << 22
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    ms = kiln.testing.do_bench(lambda: add_kernel[(n // 1024,)](x, y, out, n, BLOCK_SIZE=1024))
    assert 0 < ms < 100
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out.zero_()
        add_kernel[(n // 1024,)](x, y, out, n, BLOCK_SIZE=1024)  # torch's current stream
    s.synchronize()
    assert torch.equal(out, x + y)
    out.zero_()
    torch.cuda.synchronize()
    add_kernel[(n // 1024,)](x, y, out, n, BLOCK_SIZE=1024, stream=s.cuda_stream)
    s.synchronize()
    assert torch.equal(out, x + y)


def test_cpu_tensor_is_rejected():
    torch = torch_or_skip()
    x = torch.rand(16)
    with pytest.raises(TypeError, match="CPU tensor"):
        add_kernel[(1,)](x, x, x, 16, BLOCK_SIZE=16)


def test_launch_host_time_is_small():
    """Host time per launch of a tiny 4-argument kernel on the cache-hit path (the bench
    script reports it beside Triton's); generous bound here, tight numbers in bench/."""
    a, b, c = (kiln.empty(1024, "float32") for _ in range(3))
    add_kernel[(1,)](a, b, c, 1024, BLOCK_SIZE=1024)
    kiln.synchronize()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(500):
            add_kernel[(1,)](a, b, c, 1024, BLOCK_SIZE=1024)
        best = min(best, (time.perf_counter() - t0) / 500)
        kiln.synchronize()
    assert best < 50e-6, f"{best * 1e6:.1f} us per launch"
