"""Error messages: every user error is a kiln.CompilationError naming the kernel, the file,
the line (checked against the `# ERR` marker in the source) and what was expected; the
message shows the source line with a caret. Unsupported constructs are named."""
import inspect
import re

import pytest

import kiln
import kiln.language as tl
from error_markers import marker_line

SIG = {"x_ptr": "*fp32", "n": "i32"}
GLOBAL_INT = 3  # not a constexpr: kernels may not read it


def expect_error(fn, message, signature=SIG, constexprs=None, where=None):
    """Compiles `fn`, expects a CompilationError at the `# ERR` line of `where` (default
    `fn`) whose message matches `message` (a regular expression)."""
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(fn, signature=signature, constexprs=constexprs or {})
    err = info.value
    where = where or fn
    assert err.kernel == fn.__name__
    assert err.file == inspect.getsourcefile(where.fn)
    assert err.line == marker_line(where), str(err)
    assert re.search(message, err.message), err.message
    text = str(err)
    assert f":{err.line}:{err.column}: error: in kernel '{fn.__name__}'" in text
    assert "# ERR" in err.source_line
    caret = text.splitlines()[2]
    assert caret.strip() == "^" and len(caret) - 4 == err.column  # 4 = indentation
    return err


# --- memory ----------------------------------------------------------------------------

@kiln.jit
def load_from_int(x_ptr, n):
    v = tl.load(n)  # ERR
    tl.store(x_ptr, v)


def test_load_from_non_pointer():
    expect_error(load_from_int, r"expected a pointer or a tile of pointers for load, found int32")


@kiln.jit
def store_to_int(x_ptr, n):
    tl.store(n, 1.0)  # ERR


def test_store_to_non_pointer():
    expect_error(store_to_int, r"expected a pointer or a tile of pointers for store")


@kiln.jit
def float_mask(x_ptr, n):
    offs = tl.arange(0, 16)
    v = tl.load(x_ptr + offs, mask=offs.to(tl.float32))  # ERR
    tl.store(x_ptr + offs, v)


def test_mask_must_be_int1():
    expect_error(float_mask, r"expected a mask of dtype int1 for load, found fp32\[16\]")


@kiln.jit
def other_without_mask(x_ptr, n):
    offs = tl.arange(0, 16)
    v = tl.load(x_ptr + offs, other=0.0)  # ERR
    tl.store(x_ptr + offs, v)


def test_other_needs_mask():
    expect_error(other_without_mask, r"expected a mask for load when `other` is given")


@kiln.jit
def tile_into_scalar_pointer(x_ptr, n):
    tl.store(x_ptr, tl.arange(0, 16).to(tl.float32))  # ERR


def test_store_tile_through_scalar_pointer():
    expect_error(tile_into_scalar_pointer,
                 r"expected a scalar value for a store through a scalar pointer")


@kiln.jit
def bad_load_keyword(x_ptr, n):
    v = tl.load(x_ptr, mask_value=0.0)  # ERR
    tl.store(x_ptr, v)


def test_unknown_keyword_argument():
    expect_error(bad_load_keyword, r"unexpected keyword argument 'mask_value'")


@kiln.jit
def bad_cache_modifier(x_ptr, n):
    v = tl.load(x_ptr, cache_modifier=".zz")  # ERR
    tl.store(x_ptr, v)


def test_bad_cache_modifier():
    expect_error(bad_cache_modifier, r"expected a load cache modifier")


# --- tile creation ---------------------------------------------------------------------

@kiln.jit
def arange_not_pow2(x_ptr, n):
    offs = tl.arange(0, 10)  # ERR
    tl.store(x_ptr + offs, 1.0)


def test_arange_power_of_two():
    expect_error(arange_not_pow2, r"expected arange length end - start to be a power of two, "
                                  r"found 10")


@kiln.jit
def arange_runtime(x_ptr, n):
    offs = tl.arange(0, n)  # ERR
    tl.store(x_ptr + offs, 1.0)


def test_arange_needs_constexpr():
    expect_error(arange_runtime, r"expected a constexpr integer for arange end, found "
                                 r"tensor<int32>")


@kiln.jit
def bad_axis(x_ptr, n):
    pid = tl.program_id(3)  # ERR
    tl.store(x_ptr + pid, 1.0)


def test_program_id_axis():
    expect_error(bad_axis, r"expected program_id axis 0, 1 or 2, found 3")


@kiln.jit
def full_with_tile(x_ptr, n):
    t = tl.full([16], tl.arange(0, 16), tl.float32)  # ERR
    tl.store(x_ptr + tl.arange(0, 16), t)


def test_full_needs_scalar():
    expect_error(full_with_tile, r"expected a scalar fill value for full, found int32\[16\]")


# --- arithmetic and types --------------------------------------------------------------

@kiln.jit
def ptr_plus_float(x_ptr, n):
    p = x_ptr + 1.5  # ERR
    tl.store(p, 1.0)


def test_pointer_plus_float():
    err = expect_error(ptr_plus_float, r"expected an integer offset for pointer '\+', found "
                                       r"pointer<fp32> and fp32")
    assert err.source_line[err.column - 1] == "+"  # the caret points at the operator


@kiln.jit
def ptr_times_int(x_ptr, n):
    p = x_ptr * 2  # ERR
    tl.store(p, 1.0)


def test_pointer_times_int():
    err = expect_error(ptr_times_int, r"expected numeric operands for '\*'")
    assert err.source_line[err.column - 1] == "*"


@kiln.jit
def broadcast_mismatch(x_ptr, n):
    v = tl.arange(0, 16) + tl.arange(0, 32)  # ERR
    tl.store(x_ptr + v, 1.0)


def test_broadcast_mismatch():
    expect_error(broadcast_mismatch, r"cannot broadcast shapes \[16\] and \[32\]")


@kiln.jit
def bitand_floats(x_ptr, n):
    x = tl.load(x_ptr)
    y = x & x  # ERR
    tl.store(x_ptr, y)


def test_bitwise_on_floats():
    expect_error(bitand_floats, r"expected integer operands for '&', found fp32 and fp32")


@kiln.jit
def exp_of_int(x_ptr, n):
    y = tl.exp(n)  # ERR
    tl.store(x_ptr, y)


def test_math_on_integers():
    expect_error(exp_of_int, r"expected a floating-point argument \(fp16, bf16, fp32, fp64\) "
                             r"for exp, found int32")


@kiln.jit
def floordiv_floats(x_ptr, n):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x // 2.0)  # ERR


def test_floordiv_on_floats():
    expect_error(floordiv_floats, r"expected integer operands for '//'")


@kiln.jit
def mixed_sign_mod(x_ptr, n, u):
    tl.store(x_ptr, (n % u).to(tl.float32))  # ERR


def test_mod_mixed_signedness():
    expect_error(mixed_sign_mod, r"expected operands of one signedness for '%', found int32 "
                                 r"and uint32", signature=dict(SIG, u="u32"))


@kiln.jit
def where_ptr_int(x_ptr, n):
    p = tl.where(n > 0, x_ptr, 0)  # ERR
    tl.store(p, 1.0)


def test_where_pointer_and_int():
    expect_error(where_ptr_int, r"expected where operands of one dtype, found pointer<fp32> "
                                r"and int32")


@kiln.jit
def cast_pointer(x_ptr, n):
    v = x_ptr.to(tl.float32)  # ERR
    tl.store(x_ptr, v)


def test_cast_pointer_to_float():
    expect_error(cast_pointer, r"cannot cast pointer<fp32> to fp32")


@kiln.jit
def pow_tensor(x_ptr, n):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x ** 2)  # ERR


def test_pow_on_tensors():
    expect_error(pow_tensor, r"'\*\*' is not supported on tensors")


@kiln.jit
def expand_bad_axis(x_ptr, n):
    v = tl.expand_dims(tl.arange(0, 16), 3)  # ERR
    tl.store(x_ptr + v, 1.0)


def test_expand_dims_axis():
    expect_error(expand_bad_axis, r"expected expand_dims axis in \[-2, 2\) for a value of "
                                  r"shape \[16\], found 3")


@kiln.jit
def reshape_count(x_ptr, n):
    v = tl.reshape(tl.arange(0, 16), (4, 8))  # ERR
    tl.store(x_ptr + v, 1.0)


def test_reshape_element_count():
    expect_error(reshape_count, r"expected the same number of elements")


@kiln.jit
def int_of_tensor(x_ptr, n):
    k = int(n)  # ERR
    tl.store(x_ptr + k, 1.0)


def test_int_of_tensor():
    expect_error(int_of_tensor, r"int\(\) needs compile-time values.*x\.to\(tl\.int32\)")


@kiln.jit
def bad_index(x_ptr, n):
    offs = tl.arange(0, 16)
    tl.store(x_ptr + offs[0], 1.0)  # ERR


def test_tensor_index():
    expect_error(bad_index, r"unsupported tensor index constexpr 0: kiln tensors take None and "
                            r"':'")


# --- control flow ----------------------------------------------------------------------

@kiln.jit
def carried_type_change(x_ptr, n):
    acc = 0
    for i in range(n):  # ERR
        acc = acc + 1.5
    tl.store(x_ptr, acc)


def test_loop_carried_type_change():
    expect_error(carried_type_change, r"loop-carried value 'acc' changes type from int32 to "
                                      r"fp32")


@kiln.jit
def branch_type_mismatch(x_ptr, n):
    if n > 0:  # ERR
        v = 1
    else:
        v = 2.0
    tl.store(x_ptr, v)


def test_if_branch_type_mismatch():
    expect_error(branch_type_mismatch, r"value 'v' has type int32 in the then branch but fp32 "
                                       r"in the else branch")


@kiln.jit
def tile_condition(x_ptr, n):
    offs = tl.arange(0, 16)
    if offs < n:  # ERR
        tl.store(x_ptr + offs, 1.0)


def test_if_on_a_tile():
    expect_error(tile_condition, r"expected a scalar condition for if, found int1\[16\]")


@kiln.jit
def one_branch_definition(x_ptr, n):
    if n > 0:
        v = 1.0
    tl.store(x_ptr, v)  # ERR


def test_name_defined_in_one_branch():
    expect_error(one_branch_definition, r"'v' is defined in only one branch of the if at line "
                                        r"\d+")


@kiln.jit
def loop_var_after_loop(x_ptr, n):
    for i in range(n):
        pass
    tl.store(x_ptr + i, 1.0)  # ERR


def test_loop_variable_after_loop():
    expect_error(loop_var_after_loop, r"loop variable 'i' is not available after its run-time "
                                      r"loop")


@kiln.jit
def defined_in_loop(x_ptr, n):
    for i in range(n):
        t = i * 2
    tl.store(x_ptr + t, 1.0)  # ERR


def test_name_defined_inside_loop():
    expect_error(defined_in_loop, r"'t' is defined inside the loop at line \d+ and is not "
                                  r"available after it")


@kiln.jit
def reassign_constexpr_in_loop(x_ptr, n, BLOCK: tl.constexpr):
    for i in range(n):  # ERR
        BLOCK = BLOCK + 1
    tl.store(x_ptr, 1.0)


def test_reassign_constexpr_in_loop():
    expect_error(reassign_constexpr_in_loop, r"cannot reassign 'BLOCK' \(constexpr 4\) inside "
                                             r"a run-time loop", constexprs={"BLOCK": 4})


@kiln.jit
def kernel_returns(x_ptr, n):
    return n  # ERR


def test_kernel_cannot_return_value():
    expect_error(kernel_returns, r"a kernel cannot return a value")


@kiln.jit
def bad_iterator(x_ptr, n):
    for i in [1, 2, 3]:  # ERR
        tl.store(x_ptr + i, 1.0)


def test_for_needs_range():
    expect_error(bad_iterator, r"expected range\(\.\.\.\), tl\.range\(\.\.\.\) or "
                               r"tl\.static_range\(\.\.\.\) as the loop iterator")


@kiln.jit
def float_loop_bound(x_ptr, n):
    for i in range(0, 2.5):  # ERR
        tl.store(x_ptr + i, 1.0)


def test_loop_bounds_must_be_integers():
    expect_error(float_loop_bound, r"expected a scalar integer loop upper bound, found fp32")


# --- unsupported constructs (each named) -----------------------------------------------

@kiln.jit
def uses_for_else(x_ptr, n):
    for i in range(n):  # ERR
        pass
    else:
        pass


@kiln.jit
def uses_lambda(x_ptr, n):
    f = lambda v: v  # ERR  # noqa: E731
    tl.store(x_ptr, f(1.0))


@kiln.jit
def uses_listcomp(x_ptr, n):
    vals = [i for i in range(4)]  # ERR
    tl.store(x_ptr, vals[0])


@kiln.jit
def uses_with(x_ptr, n):
    with open("f"):  # ERR
        pass


@kiln.jit
def uses_try(x_ptr, n):
    try:  # ERR
        pass
    except Exception:
        pass


@kiln.jit
def uses_chained_compare(x_ptr, n):
    c = 0 < n < 10  # ERR
    tl.store(x_ptr, c.to(tl.float32))


@kiln.jit
def uses_dot_scaled(x_ptr, n):
    a = tl.load(x_ptr + tl.arange(0, 16)[:, None] + tl.arange(0, 16)[None, :])
    c = tl.dot_scaled(a, None, "e3m2", a, None, "e4m3")  # ERR
    tl.store(x_ptr, 1.0)


@kiln.jit
def uses_sorted(x_ptr, n):
    s = sorted((3, 1))  # ERR


@kiln.jit
def uses_subscript_store(x_ptr, n):
    t = (1, 2)
    t[0] = 3  # ERR


@pytest.mark.parametrize("fn,message", [
    (uses_for_else, r"unsupported construct: 'else' clauses on loops"),
    (uses_lambda, r"unsupported construct: lambda expressions"),
    (uses_listcomp, r"expected a tuple to iterate over in a comprehension, found a range"),
    (uses_with, r"unsupported construct: 'with' statements"),
    (uses_try, r"unsupported construct: 'try' statements"),
    (uses_chained_compare, r"unsupported construct: chained comparisons"),
    (uses_dot_scaled, r"dot_scaled's lhs_format 'e3m2' is not supported: expected one of "
                      r"e2m1, e4m3, e5m2, bf16, fp16"),
    (uses_sorted, r"Python builtin 'sorted' is not supported in kernels"),
    (uses_subscript_store, r"unsupported construct: assignments to subscripts"),
], ids=lambda v: getattr(v, "__name__", None))
def test_unsupported_construct(fn, message):
    expect_error(fn, message)


# --- names, globals, constexprs, calls -------------------------------------------------

@kiln.jit
def undefined_name(x_ptr, n):
    tl.store(x_ptr, foo)  # ERR  # noqa: F821


def test_undefined_name():
    expect_error(undefined_name, r"name 'foo' is not defined")


@kiln.jit
def reads_plain_global(x_ptr, n):
    tl.store(x_ptr + GLOBAL_INT, 1.0)  # ERR


def test_plain_global_is_rejected():
    expect_error(reads_plain_global, r"cannot access global variable 'GLOBAL_INT' \(int\).*"
                                     r"tl\.constexpr")


@kiln.jit
def constexpr_from_tensor(x_ptr, n):
    k: tl.constexpr = n  # a run-time value stays one (Triton)
    tl.store(x_ptr + tl.arange(0, k), 1.0)  # ERR


def test_constexpr_annotation_of_a_run_time_value_errs_where_a_constant_is_needed():
    expect_error(constexpr_from_tensor, r"arange")


@kiln.jit
def failing_static_assert(x_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 32 == 0, f"BLOCK={BLOCK} must be a multiple of 32")  # ERR
    tl.store(x_ptr, 1.0)


def test_static_assert_message():
    expect_error(failing_static_assert, r"static assertion failed: BLOCK=48 must be a multiple "
                                        r"of 32", constexprs={"BLOCK": 48})


@kiln.jit
def bad_unpack(x_ptr, n):
    a, b = (1, 2, 3)  # ERR
    tl.store(x_ptr, 1.0)


def test_tuple_unpack_count():
    expect_error(bad_unpack, r"cannot unpack a tuple of 3 into 2 names")


@kiln.jit
def _helper_with_error(p):
    return tl.load(p * 2)  # ERR


@kiln.jit
def calls_bad_helper(x_ptr, n):
    v = _helper_with_error(x_ptr)
    tl.store(x_ptr, v)


def test_error_in_inlined_callee_points_into_callee():
    err = expect_error(calls_bad_helper, r"expected numeric operands for '\*'",
                       where=_helper_with_error)
    assert any("called from" in note and "test_errors.py" in note for note in err.notes)


@kiln.jit
def _needs_constexpr(p, K: tl.constexpr):
    tl.store(p + tl.arange(0, K), 0)  # ERR


@kiln.jit
def passes_tensor_as_constexpr(x_ptr, n):
    _needs_constexpr(x_ptr, n)


def test_tensor_passed_for_constexpr_parameter():
    # As in Triton, a tensor passed to a helper's tl.constexpr parameter stays a tensor; the
    # error is where the helper needs a compile-time value.
    expect_error(passes_tensor_as_constexpr, r"arange", where=_needs_constexpr)


@kiln.jit
def _recursive(p):
    _recursive(p)  # ERR


@kiln.jit
def calls_recursive(x_ptr, n):
    _recursive(x_ptr)


def test_recursion():
    expect_error(calls_recursive, r"recursive call to @kiln.jit function '_recursive'",
                 where=_recursive)


@kiln.jit
def static_if_on_float(x_ptr, n, F: tl.constexpr):
    if F:  # ERR
        tl.store(x_ptr, 1.0)


def test_constexpr_condition_type():
    expect_error(static_if_on_float, r"expected a run-time scalar or a constexpr bool/int/None "
                                     r"as the if condition, found constexpr 0\.5",
                 constexprs={"F": 0.5})


@kiln.jit
def literal_out_of_range(x_ptr, n):
    u = n.to(tl.uint8)
    tl.store(x_ptr, (u + 300).to(tl.float32))  # ERR


def test_literal_out_of_range():
    expect_error(literal_out_of_range, r"expected a literal in the range of uint8 for '\+', "
                                       r"found 300")


# --- reductions ------------------------------------------------------------------------

@kiln.jit
def reduce_bad_axis(x_ptr, n):
    s = tl.sum(tl.load(x_ptr + tl.arange(0, 16)), axis=2)  # ERR
    tl.store(x_ptr, s)


def test_reduction_axis_out_of_range():
    expect_error(reduce_bad_axis, r"expected a reduction axis in \[-1, 1\), found 2")


@kiln.jit
def reduce_runtime_axis(x_ptr, n):
    s = tl.max(tl.load(x_ptr + tl.arange(0, 16)), axis=n)  # ERR
    tl.store(x_ptr, s)


def test_reduction_axis_must_be_constexpr():
    expect_error(reduce_runtime_axis, r"expected a constexpr integer for max axis")


@kiln.jit
def xor_sum_floats(x_ptr, n):
    s = tl.xor_sum(tl.load(x_ptr + tl.arange(0, 16)), axis=0)  # ERR
    tl.store(x_ptr, s)


def test_xor_sum_needs_integers():
    expect_error(xor_sum_floats, r"expected an integer tile for xor_sum, found fp32")
