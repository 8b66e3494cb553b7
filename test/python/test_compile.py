"""Compile-only tests (no GPU): kiln.compile, the language constructs, and the PTX."""
import re

import pytest

import kiln
import kiln.language as tl

ALIGNED = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "out_ptr": "*fp32:16", "n": "i32:16"}
UNALIGNED = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


@kiln.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def test_vector_add_aligned_uses_128_bit_loads():
    k = kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 1024},
                     target="sm_90", num_warps=4)
    ptx = k.asm["ptx"]
    assert "ld.global.v4.b32" in ptx
    assert "st.global.v4.b32" in ptx
    assert ".entry add_kernel" in ptx
    assert "kiln.divisibility = 16" in k.asm["kiln"]
    assert "define" in k.asm["llvm"]


def test_vector_add_unaligned_uses_scalar_loads():
    k = kiln.compile(add_kernel, signature=UNALIGNED, constexprs={"BLOCK": 1024})
    ptx = k.asm["ptx"]
    assert "ld.global.v4" not in ptx
    assert re.search(r"ld\.global\.b32", ptx)


def test_asm_keys_and_metadata():
    k = kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 256}, num_warps=2)
    assert {"kiln", "llvm", "ptx"} <= set(k.asm)
    if "cubin" in k.asm:
        assert isinstance(k.asm["cubin"], bytes) and len(k.asm["cubin"]) > 0
    assert k.metadata.num_warps == 2
    # No target: the GPU's (sm_90a on an H100), else sm_90.
    assert k.metadata.arch == (kiln._C.get_arch() if kiln._C.has_gpu() else "sm_90")
    assert k.constants == {"BLOCK": 256}
    assert k.signature["x_ptr"] == "*fp32:16"


def test_maxnreg():
    # Triton's maxnreg: the kernel's .maxnreg in the PTX, 16..255, errors naming the kernel.
    k = kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 1024}, maxnreg=40)
    assert re.search(r"\.maxnreg 40\b", k.asm["ptx"]) and k.metadata.maxnreg == 40
    k = kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 1024})
    assert ".maxnreg" not in k.asm["ptx"] and k.metadata.maxnreg is None
    for bad in (8, 256):
        with pytest.raises(ValueError, match=r"kernel 'add_kernel': maxnreg=\d+: expected a "
                                             r"register count per thread from 16 to 255"):
            kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 1024},
                         maxnreg=bad)
    with pytest.raises(TypeError, match="kernel 'add_kernel': maxnreg must be an int"):
        kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 1024}, maxnreg="64")


def test_maxnreg_launch_option_on_the_host():
    # The CPU backend takes maxnreg and has no register cap to apply; a bad one is still an
    # error at the launch, naming the kernel.
    np = pytest.importorskip("numpy")
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    add_kernel[(1,)](x, x, out, 100, BLOCK=128, maxnreg=64, device="cpu")
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(ValueError, match="kernel 'add_kernel': maxnreg=300"):
        add_kernel[(1,)](x, x, out, 100, BLOCK=128, maxnreg=300, device="cpu")
    with pytest.raises(TypeError, match="kernel 'add_kernel': maxnreg must be an int"):
        add_kernel[(1,)](x, x, out, 100, BLOCK=128, maxnreg=64.0, device="cpu")


def test_num_warps_checked_on_every_backend():
    # Triton asserts num_warps is a power of two on every backend; so does Kiln, naming the
    # kernel, at kiln.compile and at a launch (the CPU ran num_warps=3 before); the PTX
    # compile's own message printed the count as a character.
    np = pytest.importorskip("numpy")
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    for bad in (3, 0, 64):
        with pytest.raises(ValueError, match=rf"kernel 'add_kernel': num_warps={bad}: expected "
                                             r"a power of two from 1 to 32"):
            add_kernel[(1,)](x, x, out, 100, BLOCK=128, num_warps=bad, device="cpu")
        with pytest.raises(ValueError, match=rf"num_warps={bad}: expected a power of two"):
            kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 1024},
                         num_warps=bad)
    add_kernel[(1,)](x, x, out, 100, BLOCK=128, num_warps=2, device="cpu")
    np.testing.assert_array_equal(out, 2 * x)


def test_sm80_target():
    k = kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 128}, target="sm_80")
    assert ".target sm_80" in k.asm["ptx"]


def test_signature_errors():
    with pytest.raises(TypeError, match="needs a type in signature"):
        kiln.compile(add_kernel, signature={"x_ptr": "*fp32"}, constexprs={"BLOCK": 16})
    with pytest.raises(TypeError, match="unknown type"):
        kiln.compile(add_kernel, signature=dict(ALIGNED, n="int99"), constexprs={"BLOCK": 16})
    with pytest.raises(TypeError, match="has no parameters"):
        kiln.compile(add_kernel, signature=dict(ALIGNED, z="i32"), constexprs={"BLOCK": 16})


@kiln.jit
def control_flow(x_ptr, out_ptr, n, lo, hi, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(lo, hi):
        acc += x * i
    for j in tl.static_range(3):
        acc = acc + j
    k = 0
    while k < n:
        k += 7
    if MODE == 0:
        acc = acc * 2
    elif MODE == 1:
        acc = acc - 1
    else:
        acc = -acc
    if n > 100:
        acc = acc + 1.0
    elif n > 50:
        acc = acc + 2.0
    else:
        acc = acc + 3.0
    tl.store(out_ptr + offs, acc + k, mask=mask)


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_control_flow(mode):
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "lo": "i32", "hi": "i32"}
    k = kiln.compile(control_flow, signature=sig, constexprs={"MODE": mode, "BLOCK": 128})
    ir = k.asm["kiln"]
    assert ir.count("scf.for") == 1
    assert ir.count("scf.while") == 1
    assert ir.count("scf.if") == 2  # the elif nests an if in the else branch
    assert ".entry control_flow" in k.asm["ptx"]
    expect = {0: "arith.mulf", 1: "arith.subf", 2: "arith.negf"}[mode]
    assert expect in ir


@kiln.jit
def _scale(x, factor: tl.constexpr):
    """A helper, inlined into its callers."""
    return x * factor, factor + 1


@kiln.jit
def _offsets(pid, BLOCK: tl.constexpr):
    return pid * BLOCK + tl.arange(0, BLOCK)


SCALE = tl.constexpr(3)
DT = tl.float16


@kiln.jit
def uses_callees(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = _offsets(tl.program_id(0), BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y, f = _scale(x, SCALE)
    tl.static_assert(SCALE + 1 == 4, "constexpr globals are constexprs")
    z = (y * f).to(DT).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + offs, z, mask=mask)


def test_inlined_calls_tuples_constexpr_globals_and_casts():
    k = kiln.compile(uses_callees, signature={"x_ptr": "*fp32", "out_ptr": "*fp16", "n": "i32"},
                     constexprs={"BLOCK": 256})
    ir = k.asm["kiln"]
    assert "func.call" not in ir  # callees are inlined
    assert "arith.truncf" in ir
    assert "3.000000e+00" in ir


@kiln.jit
def copy_2d(in_ptr, out_ptr, stride_in, stride_out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(in_ptr + rm[:, None] * stride_in + rn[None, :], mask=mask)
    tl.store(out_ptr + rm[:, None] * stride_out + rn[None, :], x, mask=mask)


def test_2d_indexing_and_broadcasting():
    sig = {"in_ptr": "*fp32:16", "out_ptr": "*fp32:16", "stride_in": "i32:16",
           "stride_out": "i32:16", "M": "i32", "N": "i32:16"}
    k = kiln.compile(copy_2d, signature=sig, constexprs={"BM": 32, "BN": 64})
    assert "kiln.expand_dims" in k.asm["kiln"]
    assert "tensor<32x64x!kiln.ptr<f32>>" in k.asm["kiln"]
    assert "ld.global.v4.b32" in k.asm["ptx"]


@kiln.jit
def math_and_select(x_ptr, out_ptr, n, BLOCK: tl.constexpr, OTHER: tl.constexpr):
    offs = tl.arange(0, max(BLOCK, OTHER))
    half: tl.constexpr = min(BLOCK, OTHER) // 2
    mask = offs < tl.cdiv(n, 2)
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    y = tl.exp(x) + tl.log(x) + tl.sqrt(x) + tl.rsqrt(x) + tl.exp2(x) + tl.log2(x)
    y = y + tl.sin(x) * tl.cos(x) + tl.abs(x) + tl.sigmoid(x) + x.exp()
    y = tl.where(x > 0, y, -y)
    y = tl.maximum(tl.minimum(y, 10.0), -10.0) + half
    y = y if n > 3 else y * 2
    tl.store(out_ptr + offs, y, mask=mask)


def test_math_where_minmax_cdiv():
    k = kiln.compile(math_and_select, signature={"x_ptr": "*fp32", "out_ptr": "*fp32",
                                                 "n": "i32"},
                     constexprs={"BLOCK": 64, "OTHER": 128})
    ir = k.asm["kiln"]
    assert "tensor<128xf32>" in ir
    for op in ("math.exp", "math.log", "math.sqrt", "math.rsqrt", "math.sin", "arith.select",
               "arith.minnumf", "arith.maxnumf", "arith.divsi"):
        assert op in ir, op
    assert ".entry math_and_select" in k.asm["ptx"]


@kiln.jit
def loops_with_negative_step(out_ptr, n):
    acc = 0
    for i in range(n, 0, -2):
        acc += i
    lo = 0
    hi = n
    while lo < hi:
        lo = lo + 1
        hi = hi - 1
    tl.store(out_ptr, acc + lo)


def test_negative_step_and_while():
    k = kiln.compile(loops_with_negative_step, signature={"out_ptr": "*i32", "n": "i32"})
    assert "scf.for" in k.asm["kiln"] and "scf.while" in k.asm["kiln"]


@kiln.jit
def dtypes_kernel(x_ptr, out_ptr, flag, scale, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.static_assert(x.dtype == tl.float16)
    tl.static_assert(x.dtype.is_floating() and not out_ptr.dtype.element_ty.is_int())
    if x.dtype.primitive_bitwidth == 16:
        y = x.to(tl.float32) * scale
    else:
        y = x * scale
    if flag:
        y = y + 1
    tl.store(out_ptr + offs, y.to(tl.bfloat16))


def test_fp16_bf16_bool_and_float_args():
    k = kiln.compile(dtypes_kernel, signature={"x_ptr": "*fp16", "out_ptr": "*bf16",
                                               "flag": "i1", "scale": "fp32"},
                     constexprs={"BLOCK": 64})
    assert "bf16" in k.asm["kiln"]


def test_different_constexprs_give_different_ir():
    a = kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 128}).asm["kiln"]
    b = kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 256}).asm["kiln"]
    assert "tensor<128xf32>" in a and "tensor<256xf32>" in b


def test_locations_point_at_the_source():
    k = kiln.compile(add_kernel, signature=ALIGNED, constexprs={"BLOCK": 64})
    assert "test_compile.py" in k.asm["kiln"]


def test_jit_function_is_not_callable_directly():
    with pytest.raises(RuntimeError, match=r"add_kernel\[grid\]"):
        add_kernel(1, 2, 3, 4, 5)


def test_host_helpers():
    assert kiln.cdiv(10, 4) == 3
    assert kiln.next_power_of_2(1000) == 1024
    assert kiln.next_power_of_2(1) == 1
    assert tl.float32.is_floating() and not tl.int32.is_floating()
    assert tl.pointer_type(tl.float16).element_ty == tl.float16
    assert repr(tl.float32) == "kiln.language.float32"


# Triton's fused-softmax tutorial kernel (persistent: programs stride over the rows).
@kiln.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float('inf'))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output, mask=mask)


def test_fused_softmax_tutorial_kernel():
    sig = {"output_ptr": "*fp32:16", "input_ptr": "*fp32:16", "input_row_stride": "i32:16",
           "output_row_stride": "i32:16", "n_rows": "i32", "n_cols": "i32"}
    k = kiln.compile(softmax_kernel, signature=sig, constexprs={"BLOCK_SIZE": 1024,
                                                                "num_stages": 2})
    ir = k.asm["kiln"]
    assert len(re.findall(r"kiln\.reduce\(", ir)) == 2 and "scf.for" in ir
    assert "shfl.sync" in k.asm["ptx"]


@kiln.jit
def _add_combine(a, b):
    return a + b


@kiln.jit
def _argmax_combine(v1, i1, v2, i2):
    take = v1 >= v2
    return tl.where(take, v1, v2), tl.where(take, i1, i2)


@kiln.jit
def reductions(x_ptr, out_ptr, idx_ptr, M: tl.constexpr, N: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :])
    rows = tl.sum(x, axis=1)                       # [M]
    cols = tl.max(x, axis=0, keep_dims=True)       # [1, N]
    total = tl.reduce(rows, 0, _add_combine)       # scalar through a user combine
    vmax, imax = tl.reduce((rows, rm), 0, _argmax_combine)
    m2, i2 = tl.max(rows, axis=0, return_indices=True)
    everything = tl.sum(x)                         # axis=None: every axis
    y = tl.softmax(rows) + cols.sum() + total + vmax + m2 + everything + x.min(1).max(0)
    tl.store(out_ptr + rm, y)
    tl.store(idx_ptr, imax + i2 + tl.argmin(rows, axis=0))


def kiln_ir(fn, signature, constexprs):
    """The kernel's IR from the front end alone (no GPU pipeline)."""
    from kiln.compiler import CodeGenerator
    names = fn.arg_names
    specs = ["constexpr" if n in constexprs else signature[n] for n in names]
    values = [constexprs.get(n) for n in names]
    return CodeGenerator(fn.info).generate(specs, values)[0].text


def test_reductions_and_user_combine():
    ir = kiln_ir(reductions, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "idx_ptr": "*i32"},
                 {"M": 16, "N": 64})
    assert len(re.findall(r"kiln\.reduce\(", ir)) == 15  # axis=None on 2-D: two each
    assert "tensor<1x64xf32>" in ir


@kiln.jit
def row_stats(x_ptr, out_ptr, idx_ptr, N: tl.constexpr):
    rn = tl.arange(0, N)
    x = tl.load(x_ptr + rn)
    total = tl.reduce(x, 0, _add_combine)
    vmax, imax = tl.reduce((x, rn), 0, _argmax_combine)
    tl.store(out_ptr, total + vmax + tl.sum(x) + x.max(0))
    tl.store(idx_ptr, imax + tl.argmin(x, axis=0))


def test_reductions_compile_to_shuffles():
    k = kiln.compile(row_stats, signature={"x_ptr": "*fp32:16", "out_ptr": "*fp32",
                                           "idx_ptr": "*i32"}, constexprs={"N": 256})
    assert "shfl.sync" in k.asm["ptx"]


@kiln.jit
def narrow_sum(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    s = tl.sum(x, axis=0)
    tl.static_assert(s.dtype == tl.int32, "int8 sums accumulate in int32 (Triton)")
    f = tl.sum(x, axis=0, dtype=tl.float32)
    tl.static_assert(f.dtype == tl.float32)
    tl.store(out_ptr, s)


def test_sum_dtype_rules():
    kiln.compile(narrow_sum, signature={"x_ptr": "*i8", "out_ptr": "*i32"},
                 constexprs={"BLOCK": 128})


@kiln.jit
def packed_math_kernel(x_ptr, y_ptr, o_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < BLOCK - 1, other=0.0)
    y = tl.load(y_ptr + i)
    tl.store(o_ptr + i, (x - y) * y + x)


@pytest.mark.parametrize("dt, suffix", [("bf16", "bf16x2"), ("fp16", "f16x2")])
def test_16_bit_math_is_packed(dt, suffix):
    # 16-bit float math on pairs of elements a thread holds runs as packed x2 instructions
    # (LLVM's SLP vectorizer over loads that hand out <2 x bf16> / <2 x half> words), as
    # Triton emits it: half the instructions, and pairs kept in one 32-bit register.
    sig = {"x_ptr": f"*{dt}:16", "y_ptr": f"*{dt}:16", "o_ptr": f"*{dt}:16"}
    ptx = kiln.compile(packed_math_kernel, signature=sig, constexprs={"BLOCK": 1024},
                       target="sm_90a", num_warps=4).asm["ptx"]
    assert len(re.findall(rf"\bsub(\.rn)?\.{suffix}\b", ptx)) == 4, ptx
    assert len(re.findall(rf"\bfma\.rn\.{suffix}\b", ptx)) == 4
    assert not re.search(rf"\b(sub|fma\.rn)\.{dt.replace('fp', 'f')}\s", ptx)
