"""tl.fma, tl.umulhi, tl.div_rn, tl.sqrt_rn, tl.clamp (propagate_nan), tl.debug_barrier,
tl.assume, tl.static_assert and tl.static_print (semantics from Triton 3.6's documentation):
numerics on the CPU backend against numpy references, the PTX they compile to (compile-only,
no GPU needed), their errors, and the same numerics on the GPU (marker `gpu`)."""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import expect_error

CPU = dict(device="cpu")
N = 256


@kiln.jit
def fma_kernel(x_ptr, y_ptr, z_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x, y, z = tl.load(x_ptr + o), tl.load(y_ptr + o), tl.load(z_ptr + o)
    tl.store(out_ptr + o, tl.fma(x, y, z))


@kiln.jit
def fma_math_kernel(x_ptr, z_ptr, out_ptr, BLOCK: tl.constexpr):
    # tl.math.fma, a literal operand promoted and a scalar broadcast.
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(out_ptr + o, tl.math.fma(x, 2.0, tl.load(z_ptr)))


@kiln.jit
def umulhi_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.umulhi(tl.load(x_ptr + o), tl.load(y_ptr + o)))


@kiln.jit
def div_rn_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.div_rn(tl.load(x_ptr + o), tl.load(y_ptr + o)))


@kiln.jit
def sqrt_rn_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.sqrt_rn(tl.load(x_ptr + o)))


@kiln.jit
def clamp_kernel(x_ptr, lo_ptr, hi_ptr, out_ptr, BLOCK: tl.constexpr, ALL: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x, lo, hi = tl.load(x_ptr + o), tl.load(lo_ptr + o), tl.load(hi_ptr + o)
    if ALL:
        r = tl.clamp(x, lo, hi, propagate_nan=tl.PropagateNan.ALL)
    else:
        r = tl.clamp(x, lo, hi)
    tl.store(out_ptr + o, r)


@kiln.jit
def barrier_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # Each thread stores, the barrier, then each reads what another stored.
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.load(x_ptr + o) * 2)
    tl.debug_barrier()
    tl.store(x_ptr + o, tl.load(out_ptr + (BLOCK - 1 - o)))


@kiln.jit
def assume_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.assume(n > 0)
    tl.assume(BLOCK > 0)
    o = tl.arange(0, BLOCK)
    tl.assume(o >= 0)
    m = o < n
    tl.store(out_ptr + o, tl.load(x_ptr + o, mask=m) + 1, mask=m)


def rng_f32(seed, n=N, scale=10.0):
    return (np.random.default_rng(seed).standard_normal(n) * scale).astype(np.float32)


# --- fma -----------------------------------------------------------------------------------

def fma_exact_cases(dt):
    """Inputs where x * y + z rounded once differs from (x * y rounded) + z."""
    e = 2.0 ** (-12 if dt == np.float32 else -30)
    x = np.full(N, 1 + e, dt)
    z = np.full(N, -(1 + 2 * e), dt)
    return x, x.copy(), z, np.full(N, e * e, dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fma_single_rounding_cpu(dt):
    x, y, z, want = fma_exact_cases(dt)
    assert (x * y + z)[0] != want[0]  # the unfused answer is another number
    out = np.zeros(N, dt)
    fma_kernel[(1,)](x, y, z, out, BLOCK=N, **CPU)
    np.testing.assert_array_equal(out, want)


def test_fma_random_fp32_cpu():
    x, y, z = rng_f32(1), rng_f32(2), rng_f32(3)
    out = np.zeros(N, np.float32)
    fma_kernel[(1,)](x, y, z, out, BLOCK=N, **CPU)
    # fp64 holds the product exactly: one rounding of the sum to fp32 is within half an ulp.
    ref = x.astype(np.float64) * y + z
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_fma_fp16_cpu():
    x, y, z = (rng_f32(s, scale=2.0).astype(np.float16) for s in (4, 5, 6))
    out = np.zeros(N, np.float16)
    fma_kernel[(1,)](x, y, z, out, BLOCK=N, **CPU)
    ref = (x.astype(np.float64) * y + z).astype(np.float16)
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=1e-3,
                               atol=1e-3)


def test_math_fma_literal_and_scalar_cpu():
    x, z = rng_f32(7), np.array([0.5], np.float32)
    out = np.zeros(N, np.float32)
    fma_math_kernel[(1,)](x, z, out, BLOCK=N, **CPU)
    np.testing.assert_array_equal(out, x * np.float32(2) + np.float32(0.5))


# --- umulhi --------------------------------------------------------------------------------

def umulhi_ref(x, y, bits):
    mask = (1 << bits) - 1
    return [((int(a) & mask) * (int(b) & mask)) >> bits for a, b in zip(x, y)]


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.uint64])
def test_umulhi_cpu(dt):
    info = np.iinfo(dt)
    rng = np.random.default_rng(11)
    x = rng.integers(info.min, info.max, N, dtype=dt, endpoint=True)
    y = rng.integers(info.min, info.max, N, dtype=dt, endpoint=True)
    x[:4] = [info.max, info.min, -1 if info.min < 0 else info.max, 0]
    y[:4] = [info.max, info.min, -1 if info.min < 0 else 3, 5]
    out = np.zeros(N, dt)
    umulhi_kernel[(1,)](x, y, out, BLOCK=N, **CPU)
    bits = info.bits
    want = np.array(umulhi_ref(x, y, bits), dtype=np.uint64 if bits == 64 else np.uint32)
    np.testing.assert_array_equal(out.view(want.dtype), want)


# --- div_rn, sqrt_rn -----------------------------------------------------------------------

def test_div_rn_cpu_matches_ieee():
    x, y = rng_f32(21), rng_f32(22)
    y[:3] = [0.0, -0.0, 3.0]
    x[:3] = [1.0, 1.0, 1.0]
    out = np.zeros(N, np.float32)
    div_rn_kernel[(1,)](x, y, out, BLOCK=N, **CPU)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(out, x / y)  # numpy's fp32 division is IEEE


def test_sqrt_rn_cpu_matches_ieee():
    x = np.abs(rng_f32(23, scale=1e3))
    x[:4] = [0.0, 2.0, 1e-40, np.inf]
    out = np.zeros(N, np.float32)
    sqrt_rn_kernel[(1,)](x, out, BLOCK=N, **CPU)
    np.testing.assert_array_equal(out, np.sqrt(x))


# --- clamp ---------------------------------------------------------------------------------

@pytest.mark.parametrize("all_nan", [False, True])
def test_clamp_propagate_nan_cpu(all_nan):
    x = rng_f32(31)
    lo, hi = np.full(N, -3.0, np.float32), np.full(N, 4.0, np.float32)
    x[:3] = [np.nan, -100.0, 100.0]
    out = np.zeros(N, np.float32)
    clamp_kernel[(1,)](x, lo, hi, out, BLOCK=N, ALL=all_nan, **CPU)
    ref = np.minimum(np.maximum(x, lo), hi)  # numpy's propagate NaNs
    if not all_nan:
        ref = np.fmin(np.fmax(x, lo), hi)  # the number wins
        assert not np.isnan(out[0])
    else:
        assert np.isnan(out[0])
    np.testing.assert_array_equal(out, ref)


# --- debug_barrier, assume -----------------------------------------------------------------

def test_debug_barrier_cpu():
    x = rng_f32(41)
    orig = x.copy()
    out = np.zeros(N, np.float32)
    barrier_kernel[(1,)](x, out, BLOCK=N, **CPU)
    np.testing.assert_array_equal(out, orig * 2)
    np.testing.assert_array_equal(x, (orig * 2)[::-1])


def test_assume_is_accepted_cpu():
    x = rng_f32(42)
    out = np.zeros(N, np.float32)
    assume_kernel[(1,)](x, out, 100, BLOCK=N, **CPU)
    np.testing.assert_array_equal(out[:100], x[:100] + 1)
    np.testing.assert_array_equal(out[100:], 0)


# --- the PTX (compile-only) ----------------------------------------------------------------

F32 = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32"}


def ptx_of(fn, signature):
    return kiln.compile(fn, signature=signature, constexprs={"BLOCK": N}).asm["ptx"]


def test_ptx_fma_div_rn_sqrt_rn_umulhi_barrier():
    assert "fma.rn.f32" in ptx_of(fma_kernel, dict(F32, z_ptr="*fp32"))
    assert "fma.rn.f64" in ptx_of(fma_kernel, {k: "*fp64" for k in
                                               ("x_ptr", "y_ptr", "z_ptr", "out_ptr")})
    div = ptx_of(div_rn_kernel, F32)
    assert "div.rn.f32" in div and "div.full.f32" not in div
    assert "sqrt.rn.f32" in ptx_of(sqrt_rn_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"})
    assert "mul.hi.u32" in ptx_of(umulhi_kernel, {k: "*i32" for k in ("x_ptr", "y_ptr",
                                                                      "out_ptr")})
    assert "mul.hi.u64" in ptx_of(umulhi_kernel, {k: "*u64" for k in ("x_ptr", "y_ptr",
                                                                      "out_ptr")})
    ptx = ptx_of(barrier_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"})
    assert re.search(r"\bbar\.sync\s+0;|\bbarrier\.sync\s+0;", ptx)


# --- errors --------------------------------------------------------------------------------

@kiln.jit
def fma_int_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, tl.fma(x, x, x))  # ERR


@kiln.jit
def umulhi_i16_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, tl.umulhi(x, x))  # ERR


@kiln.jit
def umulhi_float_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, tl.umulhi(x, x))  # ERR


@kiln.jit
def div_rn_fp16_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, tl.div_rn(x, x))  # ERR


@kiln.jit
def sqrt_rn_fp64_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, tl.sqrt_rn(x))  # ERR


def test_dtype_errors():
    expect_error(fma_int_kernel, {"x_ptr": "*i32"},
                 r"expected floating-point operands \(fp16, bf16, fp32, fp64\) for fma, "
                 r"found int32")
    expect_error(umulhi_i16_kernel, {"x_ptr": "*i16"},
                 r"expected 32- or 64-bit integer operands .* for umulhi, found int16")
    expect_error(umulhi_float_kernel, {"x_ptr": "*fp32"}, r"for umulhi, found fp32")
    expect_error(div_rn_fp16_kernel, {"x_ptr": "*fp16"},
                 r"expected fp32 operands for div_rn, found fp16 and fp16")
    expect_error(sqrt_rn_fp64_kernel, {"x_ptr": "*fp64"},
                 r"expected an fp32 argument for sqrt_rn, found .*fp64")


# --- static_assert, static_print -----------------------------------------------------------

@kiln.jit
def static_assert_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 16)
    tl.static_assert(BLOCK % 16 == 0, msg="BLOCK is a multiple of 16")
    tl.static_assert(BLOCK <= 256, "BLOCK fits")  # ERR
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)


@kiln.jit
def static_assert_tensor_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.static_assert(x > 0)  # ERR


@kiln.jit
def static_print_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.static_print("BLOCK is", BLOCK)
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)


def test_static_assert():
    kiln.compile(static_assert_kernel, signature={"x_ptr": "*fp32"}, constexprs={"BLOCK": 64})
    expect_error(static_assert_kernel, {"x_ptr": "*fp32"}, r"static assertion failed: BLOCK fits",
                 constexprs={"BLOCK": 512})


def test_static_assert_keyword_message():
    with pytest.raises(kiln.CompilationError, match="BLOCK is a multiple of 16"):
        kiln.compile(static_assert_kernel, signature={"x_ptr": "*fp32"},
                     constexprs={"BLOCK": 24})


def test_static_assert_needs_constexpr():
    expect_error(static_assert_tensor_kernel, {"x_ptr": "*fp32"},
                 r"static_assert needs a compile-time condition")


def test_static_print(capsys, monkeypatch, tmp_path):
    # static_print prints while the kernel is built, as Triton's does while it compiles: a
    # fresh cache, so that an earlier run's cached IR does not skip the build.
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    out = np.zeros(32, np.float32)
    static_print_kernel[(1,)](out, BLOCK=32, **CPU)
    assert "BLOCK is 32" in capsys.readouterr().out
    np.testing.assert_array_equal(out, 1.0)


# --- the same on the GPU -------------------------------------------------------------------

def gpu_run(kernel, arrays, out_index, **meta):
    dev = [kiln.from_numpy(a) for a in arrays]
    kernel[(1,)](*dev, **meta)
    kiln.synchronize()
    return [d.numpy() for d in dev]


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fma_single_rounding_gpu(dt):
    x, y, z, want = fma_exact_cases(dt)
    res = gpu_run(fma_kernel, [x, y, z, np.zeros(N, dt)], 3, BLOCK=N)
    np.testing.assert_array_equal(res[3], want)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.uint64])
def test_umulhi_gpu(dt):
    info = np.iinfo(dt)
    rng = np.random.default_rng(12)
    x = rng.integers(info.min, info.max, N, dtype=dt, endpoint=True)
    y = rng.integers(info.min, info.max, N, dtype=dt, endpoint=True)
    res = gpu_run(umulhi_kernel, [x, y, np.zeros(N, dt)], 2, BLOCK=N)
    want = np.array(umulhi_ref(x, y, info.bits),
                    dtype=np.uint64 if info.bits == 64 else np.uint32)
    np.testing.assert_array_equal(res[2].view(want.dtype), want)


@pytest.mark.gpu
def test_div_rn_sqrt_rn_gpu():
    x, y = rng_f32(24), rng_f32(25)
    res = gpu_run(div_rn_kernel, [x, y, np.zeros(N, np.float32)], 2, BLOCK=N)
    np.testing.assert_array_equal(res[2], x / y)
    a = np.abs(x)
    res = gpu_run(sqrt_rn_kernel, [a, np.zeros(N, np.float32)], 1, BLOCK=N)
    np.testing.assert_array_equal(res[1], np.sqrt(a))


@pytest.mark.gpu
@pytest.mark.parametrize("all_nan", [False, True])
def test_clamp_propagate_nan_gpu(all_nan):
    x = rng_f32(32)
    x[:3] = [np.nan, -100.0, 100.0]
    lo, hi = np.full(N, -3.0, np.float32), np.full(N, 4.0, np.float32)
    res = gpu_run(clamp_kernel, [x, lo, hi, np.zeros(N, np.float32)], 3, BLOCK=N,
                  ALL=all_nan)
    ref = (np.minimum(np.maximum(x, lo), hi) if all_nan else np.fmin(np.fmax(x, lo), hi))
    np.testing.assert_array_equal(res[3], ref)


@pytest.mark.gpu
def test_debug_barrier_gpu():
    x = rng_f32(43)
    res = gpu_run(barrier_kernel, [x, np.zeros(N, np.float32)], 1, BLOCK=N, num_warps=4)
    np.testing.assert_array_equal(res[1], x * 2)
    np.testing.assert_array_equal(res[0], (x * 2)[::-1])
