"""Triton's fp8 types without a format on sm_90 or the CPU backend: tl.float8e4b15,
tl.float8e4b8 and tl.float8e5b16.

- they exist as dtypes with Triton's attributes (name, primitive_bitwidth, fp_mantissa_width,
  exponent_bias, the is_* queries) and spellings (str_to_ty, signatures);
- any use that needs their values (a cast or bitcast to them, a tile or pointer of them, a dot
  result, a kernel parameter of their pointer type) is a CompilationError at its line naming
  the type, on the CPU backend and on the GPU.
"""
import numpy as np
import pytest

import kiln
import kiln.language as tl
from test_dot_scan import expect_error

# (dtype, name, mantissa bits, exponent bias), as Triton's dtype gives them
NO_FORMAT = [(tl.float8e4b15, "fp8e4b15", 3, 15), (tl.float8e4b8, "fp8e4b8", 3, 8),
             (tl.float8e5b16, "fp8e5b16", 2, 16)]


@pytest.mark.parametrize("d,name,mantissa,bias", NO_FORMAT, ids=lambda v: str(v))
def test_no_format_fp8_dtypes_have_tritons_attributes(d, name, mantissa, bias):
    assert d.name == name and str(d) == name
    assert d.primitive_bitwidth == 8
    assert d.fp_mantissa_width == mantissa and d.exponent_bias == bias
    assert d.is_fp8() and d.is_floating() and not d.is_standard_floating()
    assert not d.is_int() and not d.is_ptr() and d.scalar is d
    assert getattr(d, "is_" + name)()
    others = {"fp8e4b15", "fp8e4b8", "fp8e5b16", "fp8e4nv", "fp8e5"} - {name}
    assert not any(getattr(d, "is_" + o)() for o in others)
    public = "float" + name[2:]
    assert getattr(tl, public) is d and repr(d) == f"kiln.language.{public}"
    assert tl.str_to_ty(name) == d and tl.str_to_ty(public) == d
    assert tl.str_to_ty("*" + name) == tl.pointer_type(d)
    assert d != tl.float8e4nv and d != tl.uint8 and hash(d) == hash(tl.str_to_ty(name))


def test_fp8_spellings_of_torch():
    assert tl.str_to_ty("float8_e4m3fnuz") == tl.float8e4b8
    assert tl.str_to_ty("float8_e5m2fnuz") == tl.float8e5b16


def test_exponent_bias_of_every_float_is_tritons():
    assert [d.exponent_bias for d in (tl.float16, tl.bfloat16, tl.float32, tl.float64,
                                      tl.float8e4nv, tl.float8e5)] == [15, 127, 127, 1023, 7, 15]
    assert tl.float16.is_standard_floating() and not tl.float8e4nv.is_standard_floating()


@kiln.jit
def no_format_kernel(x_ptr, o_ptr, T: tl.constexpr, WHAT: tl.constexpr):
    r = tl.arange(0, 16)
    x = tl.load(x_ptr + r[:, None] * 16 + r[None, :])
    if WHAT == "cast":
        y = x.to(T)  # ERR<cast>
    elif WHAT == "bitcast":
        y = tl.cast(x.to(tl.uint8), T, bitcast=True)  # ERR<bitcast>
    elif WHAT == "full":
        y = tl.full((16, 16), 1.0, T)  # ERR<full>
    elif WHAT == "zeros":
        y = tl.zeros((16, 16), dtype=T)  # ERR<zeros>
    elif WHAT == "pointer":
        p = o_ptr.to(tl.pointer_type(T))  # ERR<pointer>
        y = x
    else:
        y = tl.dot(x.to(tl.float16), x.to(tl.float16), out_dtype=T)  # ERR<dot>
    tl.store(o_ptr + r[:, None] * 16 + r[None, :], y.to(tl.float32))


WHATS = ["cast", "bitcast", "full", "zeros", "pointer", "dot"]
WHERE = {"cast": "cast", "bitcast": "cast", "full": "full", "zeros": "zeros",
         "pointer": "cast", "dot": "dot out_dtype"}
SIG = dict(x_ptr="*fp32", o_ptr="*fp32")


@pytest.mark.parametrize("what", WHATS)
@pytest.mark.parametrize("d,name,mantissa,bias", NO_FORMAT, ids=lambda v: str(v))
def test_no_format_fp8_uses_are_errors(d, name, mantissa, bias, what):
    public = "float" + name[2:]
    expect_error(no_format_kernel, rf"{WHERE[what]}: tl\.{public} \({name}\) has no hardware "
                                   rf"format on sm_90 or the CPU backend, and Kiln does not "
                                   rf"emulate it",
                 SIG, dict(T=d, WHAT=what))


@kiln.jit
def no_format_param_kernel(x_ptr, o_ptr):
    tl.store(o_ptr, tl.load(x_ptr).to(tl.float32))


@pytest.mark.parametrize("name", ["fp8e4b15", "fp8e4b8", "fp8e5b16"])
def test_no_format_fp8_parameter_is_an_error(name):
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(no_format_param_kernel, signature=dict(x_ptr="*" + name, o_ptr="*fp32"))
    err = info.value
    assert err.kernel == "no_format_param_kernel"
    assert f"parameter 'x_ptr': tl.float{name[2:]} ({name}) has no hardware format" in \
        err.message
    assert "def no_format_param_kernel" in err.source_line


def test_no_format_fp8_cast_on_the_cpu_backend_at_launch():
    x = np.zeros(256, np.float32)
    with pytest.raises(kiln.CompilationError, match=r"tl\.float8e4b15 \(fp8e4b15\) has no "
                                                    r"hardware format"):
        no_format_kernel[(1,)](x, x.copy(), T=tl.float8e4b15, WHAT="cast", device="cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("d", [tl.float8e4b15, tl.float8e4b8, tl.float8e5b16], ids=str)
def test_no_format_fp8_cast_on_the_gpu_at_launch(d):
    from test_dot_scan import _gpu_arrays
    to_dev, _ = _gpu_arrays()
    x = to_dev(np.zeros(256, np.float32))
    with pytest.raises(kiln.CompilationError, match=rf"\({d.name}\) has no hardware format"):
        no_format_kernel[(1,)](x, to_dev(np.zeros(256, np.float32)), T=d, WHAT="cast")
