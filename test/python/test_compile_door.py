"""The one door into the compiler (issue #21) seen from Python: options travel beside the
kernel's module, never inside its text, and change the generated code; a launched variant
keeps the module's text, not the module (whose MLIR context would stay alive with it)."""
import sys

import numpy as np
import pytest

import kiln
import kiln.language as tl


@kiln.jit
def _mm(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def _compile(**options):
    return kiln.compile(_mm, signature={"a_ptr": "*fp16:16", "b_ptr": "*fp16:16",
                                        "c_ptr": "*fp32:16", "K": "i32:16"},
                        constexprs={"BM": 64, "BN": 64, "BK": 32}, target="sm_90a", **options)


def test_options_travel_beside_the_module():
    plain, staged, capped = _compile(num_stages=3), _compile(num_stages=2), \
        _compile(num_stages=3, maxnreg=64)
    # The module's text is the front end's alone: no option is spliced into it.
    assert plain.asm["kiln"] == staged.asm["kiln"] == capped.asm["kiln"]
    for attr in ("stages", "maxnreg", "fp_fusion"):
        assert attr not in plain.asm["kiln"]
    # ... and the options still reach the compiler.
    assert plain.asm["ptx"] != staged.asm["ptx"]
    assert ".maxnreg 64" in capped.asm["ptx"] and ".maxnreg" not in plain.asm["ptx"]


@kiln.jit(device="cpu")
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
             mask=m)


def test_launched_variant_keeps_text_not_module():
    x = np.arange(100, dtype=np.float32)
    out = np.empty_like(x)
    k = _add[(1,)](x, x, out, 100, BLOCK=128)
    np.testing.assert_array_equal(out, 2 * x)
    assert not k.asm._source.is_built
    assert "kiln.load" in k.asm["kiln"]


def test_a_kernel_that_does_not_compile_points_at_the_users_line():
    line = sys._getframe().f_lineno + 4

    @kiln.jit(device="cpu")
    def bad(x_ptr):
        tl.store(x_ptr + tl.arange(0, 100), 1.0)  # not a power of two

    with pytest.raises(kiln.CompilationError) as e:
        bad[(1,)](np.zeros(128, np.float32))
    assert e.value.kernel == "bad" and e.value.line == line, str(e.value)
    assert e.value.file.endswith("test_compile_door.py") and "power of two" in e.value.message


@kiln.jit
def _axpy(x_ptr, y_ptr, a, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, a * tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def test_enable_fp_fusion_is_a_compile_option():
    sig = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "a": "fp32"}
    fused = kiln.compile(_axpy, signature=sig, constexprs={"BLOCK": 128}, target="sm_90")
    apart = kiln.compile(_axpy, signature=sig, constexprs={"BLOCK": 128}, target="sm_90",
                         enable_fp_fusion=False)
    assert "fma.rn.f32" in fused.asm["ptx"] and "mul.rn.f32" not in fused.asm["ptx"]
    assert "mul.rn.f32" in apart.asm["ptx"] and "fma.rn.f32" not in apart.asm["ptx"]
    assert apart.asm["kiln"] == fused.asm["kiln"]
    assert fused.metadata.enable_fp_fusion and not apart.metadata.enable_fp_fusion


def test_enable_fp_fusion_launch_option():
    x = np.arange(128, dtype=np.float32)
    y = np.ones(128, dtype=np.float32)

    @kiln.jit(device="cpu")
    def axpy(x_ptr, y_ptr, a, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, a * tl.load(x_ptr + offs) + tl.load(y_ptr + offs))

    k1 = axpy[(1,)](x, y, 2.0, BLOCK=128)
    k2 = axpy[(1,)](x, y, 2.0, BLOCK=128, enable_fp_fusion=False)
    np.testing.assert_array_equal(y, 1 + 2 * (2 * x))
    assert axpy.num_variants == 2  # an option of the variant, like num_warps
    assert k1.metadata.enable_fp_fusion and not k2.metadata.enable_fp_fusion
    with pytest.raises(TypeError, match="enable_fp_fusion must be a bool"):
        axpy[(1,)](x, y, 2.0, BLOCK=128, enable_fp_fusion=1)
