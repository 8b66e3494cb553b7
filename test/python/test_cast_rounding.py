"""tl.cast(x, dtype, fp_downcast_rounding=...) and x.to(dtype, fp_downcast_rounding=...)
(Triton 3.6): a float narrowed to fp16, bf16, fp8e4nv or fp8e5 (from fp32, and fp16/bf16 to
fp8) rounded to nearest even ("rtne", the default) or toward zero ("rtz").

- on the CPU backend, bit for bit against a numpy reference that truncates the mantissa
  (no rounding code shared with the compiler): normal and subnormal values, exact values,
  ties, overflow (fp16/bf16: to the largest finite value, infinities kept; fp8: saturated,
  as Kiln's fp8 conversions are), signed zeros and NaN;
- "rtne" given is the default conversion; marked `gpu`, the same on the device;
- errors as Triton's: a rounding mode for a conversion that does not narrow a float, an
  unknown mode; the same dtype with a mode is the value itself.
"""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import marker_line

CPU = dict(device="cpu")


def ml():
    return pytest.importorskip("ml_dtypes")


# name: (numpy dtype getter, tl dtype, significant bits, smallest normal exponent, largest
# finite value, has infinities)
FORMATS = {
    "fp16": (lambda: np.float16, tl.float16, 11, -14, 65504.0, True),
    "bf16": (lambda: ml().bfloat16, tl.bfloat16, 8, -126, float(np.float32(3.3895313892515355e38)),
             True),
    "fp8e4nv": (lambda: ml().float8_e4m3fn, tl.float8e4nv, 4, -6, 448.0, False),
    "fp8e5": (lambda: ml().float8_e5m2, tl.float8e5, 3, -14, 57344.0, False),
}


def truncate_reference(x, fmt):
    """x (float64 values) toward zero onto the format's grid: the significand cut to its
    bits (a fixed quantum below the smallest normal), magnitudes past the largest finite
    value clamped to it; infinities kept where the format has them (else clamped), NaN
    kept."""
    _, _, bits, emin, largest, has_inf = FORMATS[fmt]
    x = np.asarray(x, np.float64)
    out = np.empty_like(x)
    for i, v in enumerate(x):
        if np.isnan(v):
            out[i] = np.nan
        elif np.isinf(v):
            out[i] = v if has_inf else np.copysign(largest, v)
        elif v == 0:
            out[i] = v
        else:
            _, e = np.frexp(v)  # |v| in [2^(e-1), 2^e)
            quantum = 2.0 ** (max(e - 1, emin) - (bits - 1))
            t = np.trunc(v / quantum) * quantum
            out[i] = np.copysign(min(abs(t), largest), v)
    return out


def inputs(fmt, n=512, seed=0):
    """fp32 values around the format's range: random magnitudes over its exponents (and past
    them), values on its grid, midpoints between grid neighbours (ties), special values."""
    _, _, bits, emin, largest, _ = FORMATS[fmt]
    rng = np.random.default_rng(seed)
    exps = rng.integers(emin - bits - 2, int(np.log2(largest)) + 3, n)
    vals = rng.uniform(1, 2, n) * 2.0 ** exps * rng.choice([-1, 1], n)
    grid = truncate_reference(vals[:64], fmt)
    step = np.array([2.0 ** (max(np.frexp(g)[1] - 1, emin) - (bits - 1)) if g else 0.0
                     for g in grid])
    ties = grid + np.sign(grid) * step / 2
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, largest, -largest, largest * 1.01,
               2.0 ** (emin - bits + 1), -(2.0 ** (emin - bits + 1)) * 0.75, 1.0, -1.0,
               1.0 + 2.0 ** -20]
    with np.errstate(over="ignore"):  # magnitudes past fp32's become infinities
        x = np.concatenate([vals, grid, ties, special]).astype(np.float32)
    return x[:1024] if x.size >= 1024 else np.pad(x, (0, 1024 - x.size), constant_values=1.5)


@kiln.jit
def rounding_kernel(X, Y, Z, N: tl.constexpr, DST: tl.constexpr, MODE: tl.constexpr,
                    VIA: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    if VIA == "fp32":
        y = x.to(DST, fp_downcast_rounding=MODE)
        z = tl.cast(x, DST)
    else:  # narrowed from a 16-bit float (exact) to fp8
        h = x.to(VIA)
        y = tl.cast(h, DST, fp_downcast_rounding=MODE)
        z = h.to(DST)
    tl.store(Y + offs, y)
    tl.store(Z + offs, z)


def bits_of(a):
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)


def check_bits(out, ref, fmt):
    dt = FORMATS[fmt][0]()
    ref = ref.astype(dt)  # exact: every reference value is on the format's grid
    nan = np.isnan(ref.astype(np.float32))
    assert np.array_equal(np.isnan(out.astype(np.float32)), nan)
    bad = np.nonzero(bits_of(out)[~nan] != bits_of(ref)[~nan])[0]
    assert bad.size == 0, (bad[:8], out[~nan][bad[:8]], ref[~nan][bad[:8]])


def flush_bf16_subnormals(ref, out):
    """On a host with AVX512-BF16 the CPU backend's fp32 -> bf16 conversion (either rounding)
    gives subnormal bf16 results as signed zeros (vcvtneps2bf16 flushes them): a property
    of the host path, not of the rounding. Where the output flushed, the reference does."""
    tiny = 2.0 ** -126
    flushed = (ref != 0) & (np.abs(ref) < tiny) & (out.astype(np.float32) == 0)
    return np.where(flushed, np.copysign(0.0, ref), ref)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_rtz_truncates_the_mantissa_cpu(fmt):
    dt = FORMATS[fmt][0]()
    x = inputs(fmt)
    y = np.zeros(x.size, dt)
    z = np.zeros(x.size, dt)
    rounding_kernel[(1,)](x, y, z, N=x.size, DST=FORMATS[fmt][1], MODE="rtz", VIA="fp32", **CPU)
    ref = truncate_reference(x, fmt)
    check_bits(y, flush_bf16_subnormals(ref, y) if fmt == "bf16" else ref, fmt)
    # Not the default rounding: some values differ from rtne.
    assert np.any(bits_of(y) != bits_of(z))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_rtne_is_the_default_cpu(fmt):
    dt = FORMATS[fmt][0]()
    x = inputs(fmt, seed=1)
    y = np.zeros(x.size, dt)
    z = np.zeros(x.size, dt)
    rounding_kernel[(1,)](x, y, z, N=x.size, DST=FORMATS[fmt][1], MODE="rtne", VIA="fp32",
                          **CPU)
    assert np.array_equal(bits_of(y), bits_of(z))


@pytest.mark.parametrize("via", ["fp16", "bf16"])
@pytest.mark.parametrize("fmt", ["fp8e4nv", "fp8e5"])
def test_rtz_from_16_bit_floats_to_fp8_cpu(fmt, via):
    dt = FORMATS[fmt][0]()
    x = inputs(fmt, seed=2)
    with np.errstate(over="ignore"):  # what the kernel narrows (x.to(VIA): to nearest)
        h = x.astype(FORMATS[via][0]())
    y = np.zeros(x.size, dt)
    z = np.zeros(x.size, dt)
    rounding_kernel[(1,)](x, y, z, N=x.size, DST=FORMATS[fmt][1], MODE="rtz",
                          VIA=FORMATS[via][1], **CPU)
    check_bits(y, truncate_reference(h.astype(np.float64), fmt), fmt)


@kiln.jit
def scalar_rounding_kernel(X, Y):
    tl.store(Y, tl.load(X).to(tl.float16, fp_downcast_rounding="rtz"))


def test_rtz_of_scalars_cpu():
    x = np.array([1.0 + 2.0 ** -11 + 2.0 ** -12, -(65504.0 * 1.5)], np.float32)
    y = np.zeros(1, np.float16)
    for v, want in zip(x, truncate_reference(x, "fp16")):
        scalar_rounding_kernel[(1,)](np.array([v], np.float32), y, **CPU)
        assert y[0] == np.float16(want)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["rtz", "rtne"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_rounding_gpu(fmt, mode):
    torch = pytest.importorskip("torch")
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8e4nv": torch.float8_e4m3fn,
           "fp8e5": torch.float8_e5m2}[fmt]
    x = inputs(fmt, seed=3)
    y = torch.zeros(x.size, dtype=tdt, device="cuda")
    z = torch.zeros(x.size, dtype=tdt, device="cuda")
    rounding_kernel[(1,)](torch.from_numpy(x).cuda(), y, z, N=x.size, DST=FORMATS[fmt][1],
                          MODE=mode, VIA="fp32")
    torch.cuda.synchronize()
    dt = FORMATS[fmt][0]()
    width = torch.int16 if y.element_size() == 2 else torch.int8
    out = y.view(width).cpu().numpy().view(bits_of(np.zeros(1, dt)).dtype).view(dt)
    if mode == "rtz":
        check_bits(out, truncate_reference(x, fmt), fmt)
    else:
        assert torch.equal(y.view(width), z.view(width))


# ---------------------------------------------------------------- errors

@kiln.jit
def rounding_err_kernel(X, Y, WHAT: tl.constexpr):
    x = tl.load(X + tl.arange(0, 16))
    if WHAT == "widen":
        y = x.to(tl.float32, fp_downcast_rounding="rtz")  # ERR<widen>
    elif WHAT == "int":
        y = x.to(tl.int32, fp_downcast_rounding="rtz")  # ERR<int>
    elif WHAT == "same-width":
        y = x.to(tl.bfloat16, fp_downcast_rounding="rtz")  # ERR<same-width>
    elif WHAT == "mode":
        y = tl.cast(x, tl.float16, fp_downcast_rounding="rtn")  # ERR<mode>
    else:  # the same dtype: the value itself, as Triton
        y = tl.cast(x, tl.float16, fp_downcast_rounding="rtz")
    tl.store(Y + tl.arange(0, 16), y.to(tl.float16))


@pytest.mark.parametrize("what,message", [
    ("widen", r"expected fp_downcast_rounding only for a cast to a narrower float \(Triton's "
              r"rule\), found a cast from fp16 to fp32"),
    ("int", r"found a cast from fp16 to int32"),
    ("same-width", r"found a cast from fp16 to bf16"),
    ("mode", r"expected fp_downcast_rounding 'rtne' or 'rtz' for a cast, found 'rtn'")])
def test_errors(what, message):
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(rounding_err_kernel, signature={"X": "*fp16", "Y": "*fp16"},
                     constexprs={"WHAT": what})
    err = info.value
    assert err.kernel == "rounding_err_kernel"
    assert err.line == marker_line(rounding_err_kernel, f"# ERR<{what}>"), str(err)
    assert re.search(message, err.message), err.message


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_rtz_compiles_for_the_gpu(fmt, arch):
    """No GPU needed: the rounding is exact compares and bit moves over the target's own
    nearest-even conversion (cvt.rn...), whatever the format."""
    sig = {"X": "*fp32", "Y": f"*{fmt}", "Z": f"*{fmt}"}
    ptx = kiln.compile(rounding_kernel, signature=sig, target=arch,
                       constexprs=dict(N=256, DST=FORMATS[fmt][1], MODE="rtz",
                                       VIA="fp32")).asm["ptx"]
    assert "cvt.rn" in ptx and "setp" in ptx


def test_same_dtype_with_a_mode_is_the_value_cpu():
    x = np.linspace(-3, 3, 16).astype(np.float16)
    y = np.zeros(16, np.float16)
    rounding_err_kernel[(1,)](x, y, WHAT="same", **CPU)
    assert np.array_equal(y, x)
