"""Triton's host API as Kiln offers it (#22): triton.runtime.driver.active, testing's
perf_report/Benchmark/assert_close/do_bench_cudagraph, heuristics, tools.tensor_descriptor,
the compiled kernel's _init_handles/metadata.shared, the launch options num_ctas/launch_pdl/
extern_libs, and the compile-time isinstance and constexpr-annotated helper parameters the
tutorials use. CPU tests against numpy; GPU-marked twins."""
import os

import numpy as np
import pytest

import kiln
import kiln.language as tl
from kiln.runtime import driver

CPU = dict(device="cpu")
TRITON_PROPERTY_KEYS = {"max_shared_mem", "max_num_regs", "multiprocessor_count", "warpSize",
                        "sm_clock_rate", "mem_clock_rate", "mem_bus_width"}


@kiln.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@kiln.jit
def _row_softmax(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    row = tl.load(in_ptr + tl.program_id(0) * n + offs, mask=offs < n, other=-float("inf"))
    e = tl.exp(row - tl.max(row, axis=0))
    tl.store(out_ptr + tl.program_id(0) * n + offs, e / tl.sum(e, axis=0), mask=offs < n)


def test_driver_active_get_current_target():
    t = driver.active.get_current_target()
    assert t is kiln.runtime.driver.active.get_current_target() or t == driver.active.get_current_target()
    if kiln.has_gpu():
        assert t.backend == "cuda" and isinstance(t.arch, int) and t.warp_size == 32
    else:
        assert (t.backend, t.arch, t.warp_size) == ("cpu", "cpu", 1)


def test_driver_active_utils_get_device_properties_keys():
    props = driver.active.utils.get_device_properties(driver.active.get_current_device())
    assert set(props) == TRITON_PROPERTY_KEYS
    assert props["multiprocessor_count"] >= 1 and props["warpSize"] >= 1


@pytest.mark.gpu
def test_driver_active_on_gpu():
    props = driver.active.utils.get_device_properties(0)
    cap = kiln._C.get_arch(0)
    assert driver.active.get_current_target().arch == int("".join(c for c in cap if c.isdigit()))
    assert props["warpSize"] == 32 and props["max_num_regs"] >= 32768
    assert props["max_shared_mem"] >= 48 * 1024 and props["multiprocessor_count"] > 1


def test_perf_report_runs_every_point(tmp_path, capsys):
    calls = []

    @kiln.testing.perf_report([kiln.testing.Benchmark(
        x_names=["n", "m"], x_vals=[1, (2, 3)], line_arg="provider", line_vals=["a", "b"],
        line_names=["A", "B"], plot_name="plot-one", args={"k": 10}, ylabel="units")])
    def bench(n, m, provider, k):
        calls.append((n, m, provider, k))
        return (n + m + k, n, m) if provider == "a" else float(n * m)

    bench.run(print_data=True, save_path=str(tmp_path))
    assert calls == [(1, 1, "a", 10), (1, 1, "b", 10), (2, 3, "a", 10), (2, 3, "b", 10)]
    out = capsys.readouterr().out
    assert "plot-one:" in out and "A-min" in out and "B-min" not in out
    csv = (tmp_path / "plot-one.csv").read_text().splitlines()
    assert csv[0] == "n,m,A,A-min,A-max,B"
    assert csv[2] == "2,3,15,2,3,6.0"


def test_Benchmark_checks_line_names():
    with pytest.raises(ValueError, match="2 line_vals but 1 line_names"):
        kiln.testing.Benchmark(x_names=["n"], x_vals=[1], line_arg="p", line_vals=["a", "b"],
                               line_names=["A"], plot_name="bad", args={})


def test_assert_close():
    kiln.testing.assert_close(np.array([1.0, 2.0]), np.array([1.005, 2.0]))
    with pytest.raises(AssertionError):
        kiln.testing.assert_close(np.array([1.0, 2.0]), np.array([1.1, 2.0]))
    kiln.testing.assert_close(np.array([1.0]), np.array([1.1]), atol=0.2)


def test_tools_tensor_descriptor_is_kiln_TensorDescriptor():
    from kiln.tools.tensor_descriptor import TensorDescriptor
    assert TensorDescriptor is kiln.TensorDescriptor and hasattr(kiln.tools.tensor_descriptor,
                                                                 "TensorDescriptor")


@kiln.heuristics(values={"BLOCK": lambda args: kiln.next_power_of_2(args["n"])})
@kiln.jit
def _add_heuristic(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + tl.load(y_ptr + offs, mask=offs < n),
             mask=offs < n)


def test_heuristics_computes_meta_parameters():
    x = np.arange(37, dtype=np.float32)
    out = np.zeros_like(x)
    k = _add_heuristic[(1,)](x, x, out, 37, **CPU)
    np.testing.assert_array_equal(out, 2 * x)
    assert k.constants["BLOCK"] == 64
    # A keyword the heuristic computes may be passed: it is replaced (Triton's rule, which
    # unsloth's launches rely on); positionally it would be given twice.
    out[:] = 0
    k = _add_heuristic[(1,)](x, x, out, 37, BLOCK=16, **CPU)
    np.testing.assert_array_equal(out, 2 * x)
    assert k.constants["BLOCK"] == 64
    with pytest.raises(ValueError, match="computed by kiln.heuristics"):
        _add_heuristic[(1,)](x, x, out, 37, 64, **CPU)
    with pytest.raises(ValueError, match="not parameters of the kernel"):
        kiln.heuristics(values={"NOPE": lambda a: 1})(_add)


def test_compiled_kernel_init_handles_and_shared():
    k = kiln.compile(_row_softmax, signature={"out_ptr": "*fp32", "in_ptr": "*fp32", "n": "i32"},
                     constexprs={"BLOCK": 1024}, target="sm_90a", num_warps=8)
    k._init_handles()
    # The cross-warp reductions' scratch is static shared memory, counted as Triton counts it.
    assert k.metadata.shared > 0


def test_warmup_returns_the_compiled_kernel():
    x = np.ones(8, dtype=np.float32)
    k = _row_softmax.warmup(x, x, 8, BLOCK=8, grid=(1,), **CPU)
    k._init_handles()
    assert k.n_regs == 0 and k.n_spills == 0 and k.metadata.shared == 0


@pytest.mark.gpu
def test_warmup_on_gpu_reports_registers_and_shared():
    x = kiln.from_numpy(np.ones((4, 1000), dtype=np.float32))
    y = kiln.empty((4, 1000))
    k = _row_softmax.warmup(y, x, 1000, BLOCK=1024, num_warps=8, grid=(1,))
    k._init_handles()
    assert k.n_regs > 0 and k.metadata.shared > 0


def test_launch_options_num_ctas_and_extern_libs(tmp_path):
    x = np.arange(10, dtype=np.float32)
    out = np.zeros_like(x)
    _add[(1,)](x, x, out, 10, BLOCK=16, num_ctas=1, **CPU)
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(ValueError, match=r"num_ctas=2: Kiln launches one CTA per program"):
        _add[(1,)](x, x, out, 10, BLOCK=16, num_ctas=2, **CPU)
    lib = tmp_path / "libdevice.10.bc"
    lib.write_bytes(b"BC")
    _add[(1,)](x, x, out, 10, BLOCK=16, extern_libs={"libdevice": str(lib)}, **CPU)
    with pytest.raises(ValueError, match="no libdevice at"):
        _add[(1,)](x, x, out, 10, BLOCK=16, extern_libs={"libdevice": str(tmp_path / "x")}, **CPU)
    with pytest.raises(ValueError, match="Kiln links only libdevice"):
        _add[(1,)](x, x, out, 10, BLOCK=16, extern_libs={"ocml": str(lib)}, **CPU)


@kiln.jit
def _gdc_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.extra.cuda.gdc_wait()
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.extra.cuda.gdc_launch_dependents()
    tl.store(out_ptr + offs, x + y, mask=m)


@pytest.mark.gpu
def test_launch_pdl_on_gpu():
    a = np.random.rand(5000).astype(np.float32)
    x, out, out2 = kiln.from_numpy(a), kiln.empty(5000), kiln.empty(5000)
    _gdc_add[(5,)](x, x, out, 5000, BLOCK=1024, launch_pdl=True)
    _gdc_add[(5,)](out, x, out2, 5000, BLOCK=1024, launch_pdl=True)  # reads the first's output
    kiln.synchronize()
    np.testing.assert_allclose(out2.numpy(), 3 * a, rtol=1e-6)


@kiln.jit
def _maybe_desc(p, n, BLOCK: tl.constexpr):
    if isinstance(p, tl.tensor_descriptor):
        return p
    return tl.make_tensor_descriptor(p, shape=[n], strides=[1], block_shape=[BLOCK])


@kiln.jit
def _scaled(x, offs: tl.constexpr, SCALE: tl.constexpr):
    # offs is a tensor although annotated tl.constexpr (Triton: the argument decides)
    tl.static_assert(isinstance(SCALE, tl.constexpr))
    return x * SCALE + offs


@kiln.jit
def _isinstance_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    d = _maybe_desc(x_ptr, n, BLOCK)
    x = d.load([0])
    tl.static_assert(isinstance(offs, tl.tensor) and not isinstance(offs, tl.tensor_descriptor))
    tl.store(out_ptr + offs, _scaled(x, offs, 3), mask=offs < n)


def test_isinstance_and_constexpr_annotated_helper_parameters():
    x = np.arange(16, dtype=np.float32)
    out = np.zeros_like(x)
    _isinstance_kernel[(1,)](x, out, 16, BLOCK=16, **CPU)
    np.testing.assert_array_equal(out, 3 * x + np.arange(16))


@pytest.mark.gpu
def test_isinstance_and_constexpr_annotated_helper_parameters_gpu():
    x = kiln.from_numpy(np.arange(16, dtype=np.float32))
    out = kiln.zeros(16)
    _isinstance_kernel[(1,)](x, out, 16, BLOCK=16)
    np.testing.assert_array_equal(out.numpy(), 3 * np.arange(16) + np.arange(16))


@kiln.jit
def rows_x2_kernel(out_ptr, in_ptr, n_rows, n_cols, BLOCK: tl.constexpr,
                   num_stages: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=num_stages):
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols)
        tl.store(out_ptr + row * n_cols + cols, x * 2, mask=cols < n_cols)


def test_compiled_kernel_getitem_launches_as_triton():
    """Tutorial 02's pattern: kernel.warmup(..., BLOCK=..., num_stages=..., num_warps=...)
    returns a compiled kernel launched as compiled[grid](every argument, constexprs
    positionally), with the warmup's options."""
    x = np.arange(6 * 10, dtype=np.float32).reshape(6, 10)
    y = np.zeros_like(x)
    k = rows_x2_kernel.warmup(y, x, 6, 10, BLOCK=16, num_stages=2, num_warps=2, grid=(1,),
                              **CPU)
    assert isinstance(k, kiln.CompiledKernel)
    k[(3, 1, 1)](y, x, 6, 10, 16, 2)
    np.testing.assert_array_equal(y, 2 * x)
    y[:] = 0
    k[(2,)](y, x, 6, 10, BLOCK=16, num_stages=2)
    np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(TypeError, match="multiple values"):
        k[(1,)](y, x, 6, 10, 16, 2, BLOCK=16)
    aot = kiln.compile(rows_x2_kernel, signature={"out_ptr": "*fp32", "in_ptr": "*fp32",
                                                  "n_rows": "i32", "n_cols": "i32"},
                       constexprs={"BLOCK": 16, "num_stages": 2})
    with pytest.raises(TypeError, match="cannot be launched directly"):
        aot[(1,)]


@kiln.jit
def _descriptor_copy(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst.store([tl.program_id(0) * BM, 0], src.load([tl.program_id(0) * BM, 0]))


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_set_allocator_as_triton_code_calls_it(device):
    # Tutorial 09's device-side descriptors: Triton code sets an allocator first. Kiln keeps
    # it (a callable, checked) and needs no scratch; the kernel runs with it set, with None,
    # and a non-callable is a TypeError naming what was expected.
    calls = []

    def alloc(size, alignment, stream):
        calls.append((size, alignment))
        return None

    with pytest.raises(TypeError, match=r"kiln.set_allocator expects a callable \(size, "
                                        r"alignment, stream\) -> buffer or None, found int"):
        kiln.set_allocator(3)
    x = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    for allocator in (alloc, None):
        kiln.set_allocator(allocator)
        if device == "cpu":
            out = np.zeros_like(x)
            _descriptor_copy[(4,)](x, out, 64, 32, BM=16, BN=32, **CPU)
        else:
            dx, dout = kiln.from_numpy(x), kiln.from_numpy(np.zeros_like(x))
            _descriptor_copy[(4,)](dx, dout, 64, 32, BM=16, BN=32)
            kiln.synchronize()
            out = dout.numpy()
        np.testing.assert_array_equal(out, x)
    assert calls == []  # never needed


def test_autotune_accepts_use_cuda_graph():
    # Triton's use_cuda_graph: accepted (Kiln times its runs without graphs), the choice made.
    @kiln.autotune(configs=[kiln.Config({"BLOCK": 64}), kiln.Config({"BLOCK": 128})], key=["n"],
                   use_cuda_graph=True)
    @kiln.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
                 mask=m)

    x = np.arange(300, dtype=np.float32)
    out = np.zeros_like(x)
    add[lambda meta: (kiln.cdiv(300, meta["BLOCK"]),)](x, x, out, 300, **CPU)
    np.testing.assert_array_equal(out, 2 * x)
    assert add.use_cuda_graph is True and add.best_config.kwargs["BLOCK"] in (64, 128)
