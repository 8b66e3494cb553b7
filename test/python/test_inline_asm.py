"""tl.inline_asm_elementwise (Triton 3.6): PTX over the elements of tensors.

- compiled for sm_90 without a GPU: the asm is in the PTX with its operands bound to
  registers, `pack` elements per invocation (8- and 16-bit values sharing a register),
  several results, scalars; an impure asm whose result is unused stays, a pure one goes;
- the CPU backend: a CompilationError at the call naming the construct;
- errors at the call: constraints that do not name the registers the values take, pack,
  dtypes, shapes that do not broadcast;
- marked `gpu`: the results against numpy (Triton's documented example with uint8 and fp32
  values 4 at a time, a funnel shift, packed fp16 pairs, broadcast scalars).
"""
import inspect
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import marker_line

# Triton's documented example: c = int32(a), d = max(float(a), b), 4 elements at a time; the
# four uint8 values of `a` share one register ($8).
UNPACK_MAX_ASM = tl.constexpr("""
{
    .reg .b8 tmp<4>;
    mov.b32 {tmp0, tmp1, tmp2, tmp3}, $8;
    cvt.u32.u8 $0, tmp0;
    cvt.u32.u8 $1, tmp1;
    cvt.u32.u8 $2, tmp2;
    cvt.u32.u8 $3, tmp3;
    cvt.rn.f32.s32 $4, $0;
    cvt.rn.f32.s32 $5, $1;
    cvt.rn.f32.s32 $6, $2;
    cvt.rn.f32.s32 $7, $3;
    max.f32 $4, $4, $9;
    max.f32 $5, $5, $10;
    max.f32 $6, $6, $11;
    max.f32 $7, $7, $12;
}
""")


@kiln.jit
def unpack_max_kernel(A, B, C, D, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(A + offs)
    b = tl.load(B + offs)
    (c, d) = tl.inline_asm_elementwise(
        asm=UNPACK_MAX_ASM,
        constraints="=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r",
        args=[a, b], dtype=(tl.int32, tl.float32), is_pure=True, pack=4)
    tl.store(C + offs, c)
    tl.store(D + offs, d)


UNPACK_SIG = dict(A="*u8", B="*fp32", C="*i32", D="*fp32")


@kiln.jit
def shift_kernel(X, Y, S, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    s = tl.load(S)
    # A funnel shift of x:x by s (a rotation): the scalar s broadcasts over the tile.
    y = tl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $2, $3;", "=r,r,r,r",
                                  [x, x, s], dtype=tl.uint32, is_pure=True, pack=1)
    tl.store(Y + offs, y)


@kiln.jit
def half2_kernel(X, Y, Z, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    y = tl.load(Y + offs)
    # Two fp16 values per register, one packed add per pair.
    z = tl.inline_asm_elementwise("add.rn.f16x2 $0, $1, $2;", "=r,r,r", [x, y],
                                  dtype=tl.float16, is_pure=True, pack=2)
    tl.store(Z + offs, z)


@kiln.jit
def scalar_kernel(X, Y):
    x = tl.load(X)
    y = tl.inline_asm_elementwise("mul.lo.u32 $0, $1, 3;", "=r,r", [x], dtype=tl.int32,
                                  is_pure=True, pack=1)
    tl.store(Y, y)


@kiln.jit
def impure_kernel(X, PURE: tl.constexpr):
    x = tl.load(X)
    # The result is not used: only an asm with side effects stays.
    tl.inline_asm_elementwise("mov.b32 $0, $1; // kiln-marker", "=r,r", [x], dtype=tl.int32,
                              is_pure=PURE, pack=1)


def ptx(fn, sig, **consts):
    return kiln.compile(fn, signature=sig, constexprs=consts, target="sm_90",
                        num_warps=4).asm["ptx"]


def test_asm_operands_bind_to_registers_in_ptx():
    """256 uint8/fp32 elements on 128 threads with pack = 4: one asm per thread, its $8 a
    32-bit register built from 8-bit values, its outputs stored."""
    text = ptx(unpack_max_kernel, UNPACK_SIG, BLOCK=256)
    assert text.count("// begin inline asm") == 1
    m = re.search(r"mov\.b32 \{tmp0, tmp1, tmp2, tmp3\}, (%r\d+);", text)
    assert m, text
    assert re.search(r"max\.f32 (%r\d+), \1, %r\d+;", text)
    assert "$" not in text.split("// begin inline asm")[1].split("// end inline asm")[0]
    # 512 elements: 4 per thread, still one asm each (a whole pack).
    assert ptx(unpack_max_kernel, UNPACK_SIG, BLOCK=512).count("// begin inline asm") == 1
    # 1024: two packs per thread.
    assert ptx(unpack_max_kernel, UNPACK_SIG, BLOCK=1024).count("// begin inline asm") == 2


def test_half_pairs_and_scalars_in_ptx():
    text = ptx(half2_kernel, dict(X="*fp16", Y="*fp16", Z="*fp16"), BLOCK=256)
    assert text.count("add.rn.f16x2") == 1  # 2 elements per thread, one register each
    text = ptx(scalar_kernel, dict(X="*i32", Y="*i32"))
    assert re.search(r"mul\.lo\.u32 %r\d+, %r\d+, 3;", text)
    text = ptx(shift_kernel, dict(X="*u32", Y="*u32", S="*u32"), BLOCK=128)
    assert re.search(r"shf\.l\.wrap\.b32 %r\d+, (%r\d+), \1, %r\d+;", text)


@pytest.mark.parametrize("pure", [False, True])
def test_impure_asm_stays_and_pure_asm_without_uses_goes(pure):
    text = ptx(impure_kernel, dict(X="*i32"), PURE=pure)
    assert ("kiln-marker" in text) == (not pure)


def test_cpu_backend_rejects_inline_asm():
    x = np.arange(16, dtype=np.int32)
    y = np.zeros(1, np.int32)
    with pytest.raises(kiln.CompilationError) as info:
        scalar_kernel[(1,)](x, y, device="cpu")
    err = info.value
    assert err.kernel == "scalar_kernel"
    assert err.line == marker_line(scalar_kernel, "tl.inline_asm_elementwise"), str(err)
    assert ("tl.inline_asm_elementwise is not supported by the CPU backend: its asm is PTX, "
            "which runs on the GPU only") in err.message


# ---------------------------------------------------------------- errors

@kiln.jit
def asm_err_kernel(X, WHAT: tl.constexpr):
    x = tl.load(X + tl.arange(0, 64))
    asm = tl.inline_asm_elementwise
    if WHAT == "constraints":
        y = asm("", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=4)  # ERR<constraints>
    elif WHAT == "pack":
        y = asm("", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=0)  # ERR<pack>
    elif WHAT == "no-dtype":
        y = asm("", "r", [x], dtype=(), is_pure=True, pack=1)  # ERR<no-dtype>
    else:
        z = tl.load(X + tl.arange(0, 32))
        y = asm("", "=r,r,r", [x, z], dtype=tl.int32, is_pure=True, pack=1)  # ERR<shapes>
    tl.store(X + tl.arange(0, 64), y)


@pytest.mark.parametrize("what,message", [
    ("constraints", r"expected the constraints of inline_asm_elementwise to name 4 output and 1 "
                    r"input registers with pack = 4 \(outputs: int32 x4; inputs: int8 x1; values "
                    r"under 32 bits share registers\), found 1 and 1 in \"=r,r\""),
    ("pack", r"expected pack in \[1, 64\] for inline_asm_elementwise, found 0"),
    ("no-dtype", r"expected at least one result dtype for inline_asm_elementwise"),
    ("shapes", r"cannot broadcast the arguments of inline_asm_elementwise to one shape: "
               r"int8\[64\], int8\[32\]")])
def test_errors(what, message):
    marker = f"# ERR<{what}>"
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(asm_err_kernel, signature={"X": "*i8"}, constexprs={"WHAT": what})
    err = info.value
    assert err.kernel == "asm_err_kernel"
    assert err.file == inspect.getsourcefile(asm_err_kernel.fn)
    assert err.line == marker_line(asm_err_kernel, marker), str(err)
    assert re.search(message, err.message), err.message


# ---------------------------------------------------------------- GPU

def _dev():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("block", [128, 256, 512, 1024])
def test_unpack_max_gpu(block):
    torch = _dev()
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, block).astype(np.uint8)
    b = (rng.standard_normal(block) * 100).astype(np.float32)
    c = torch.full((block,), -1, dtype=torch.int32, device="cuda")
    d = torch.full((block,), -1, dtype=torch.float32, device="cuda")
    unpack_max_kernel[(1,)](torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c, d,
                            BLOCK=block)
    np.testing.assert_array_equal(c.cpu().numpy(), a.astype(np.int32))
    np.testing.assert_array_equal(d.cpu().numpy(), np.maximum(a.astype(np.float32), b))


@pytest.mark.gpu
def test_shift_half2_and_scalar_gpu():
    torch = _dev()
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2**32, 128, dtype=np.uint64).astype(np.uint32)
    y = torch.zeros(128, dtype=torch.int32, device="cuda")
    s = torch.tensor([7], dtype=torch.int32, device="cuda")
    shift_kernel[(1,)](torch.from_numpy(x.view(np.int32)).cuda(), y, s, BLOCK=128)
    rot = ((x.astype(np.uint64) << 7) | (x.astype(np.uint64) >> 25)) & 0xFFFFFFFF
    np.testing.assert_array_equal(y.cpu().numpy().view(np.uint32), rot.astype(np.uint32))

    h1 = rng.standard_normal(256).astype(np.float16)
    h2 = rng.standard_normal(256).astype(np.float16)
    z = torch.zeros(256, dtype=torch.float16, device="cuda")
    half2_kernel[(1,)](torch.from_numpy(h1).cuda(), torch.from_numpy(h2).cuda(), z, BLOCK=256)
    np.testing.assert_array_equal(z.cpu().numpy(), h1 + h2)

    xs = torch.tensor([14], dtype=torch.int32, device="cuda")
    ys = torch.zeros(1, dtype=torch.int32, device="cuda")
    scalar_kernel[(1,)](xs, ys)
    assert int(ys.cpu()[0]) == 42
