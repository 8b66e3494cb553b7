"""Idioms of Triton code written elsewhere, each in a kernel of our own that uses it the way
those sources do, run on the CPU backend against numpy (session 34 ran such kernels, imports
swapped, outside the repo; these keep the idioms under test):

- a spin lock over `atomic_cas` / `atomic_xchg` guarding per-group partial sums, with a
  first-writer count (Triton's layer-norm tutorial's backward);
- a kernel parameter named `num_warps` (a constexpr the launch option also sets), a 0-d
  accumulator from `tl.zeros(())`, `tensor.cast` and the pointee type of a scalar pointer;
- a loop over rows bounded by the builtin `min` of a run-time value and
  `tl.num_programs(0)`, with `tanh` imported by name from libdevice;
- a constant the module annotates `NAME: tl.constexpr = ...`;
- a @jit activation passed as a constexpr argument and called in the kernel
  (`ACTIVATION: tl.constexpr`, `acc = ACTIVATION(acc)`, as xformers' fused matmul does);
- session 36, from FlagGems, flash-linear-attention and unsloth: `.value` of a helper's
  compile-time argument (`dtype.value`, `n.value`), `p.dtype.element_ty` of a block pointer,
  `_log2` from `kiln.language.standard` on a constexpr, a heuristic computing `num_warps`;
  from Triton's own test_core: `tl.sum(x, dtype=tl.int8)` summing in int8 (it widened to int32:
  a wrong answer), `x.shape == [2]` against a list literal, duplicate `expand_dims` axes an error,
  a conditional expression of two stores as a statement, `Z[None, None, :]` on a scalar pointer;
- SGLang's fp8 MoE (swap_ab) and grouped decode attention: `s[:, None]` of a scalar (shape [1]);
- vLLM's scaled_mm: `if bias_ptr:` (a pointer's truth: not null); FlagGems' sort and diff:
  `X: tl.constexpr = <run-time value>`, helpers decorated `@tl.constexpr`, and Python functions
  called at compile time (`tl.arange(0, triton.next_power_of_2(n + 1))`);
- Triton's test_core: `int8 >> uint8` shifts arithmetically by the left operand's signedness
  (Kiln shifted logically after promotion: a wrong answer); `tl.dot` of int8 tiles with
  `out_dtype=tl.int8` is int32, out_dtype ignored (test_dot3d);
- TorchInductor's triton_helpers: `tl.core.get_int_dtype` (select_one, sort_with_index,
  pow_integer), `tl.core._unwrap_if_constexpr` / `_constexpr_to_value` (its split scan),
  `tensor.logical_and` (its bucketize);
- FlagAttention's `tl.store(..., cache_modifier=".cg")` (L2 only), which Triton's stores take;
- mamba's gated layer-norm backward and selective-state update, flash-linear-attention's GLA
  backward: an optional pointer (`Z=None`) or `None` local advanced only under a constexpr
  flag (`if HAS_Z: Z += stride`) inside a run-time loop, if, or after a run-time return. Only
  the branch taken is compiled, so nothing rebinds the None (Kiln rejected it: "cannot
  reassign 'Z' (constexpr None)");
- a kernel defined inside a function, calling a @jit helper and reading a constexpr it closes
  over (Triton's test_tuple; test_specialization checks the captured value like a global's);
- Triton's test_tuple (test_index): `tl.tuple([v + 1 for v in values])`, a list comprehension
  over a tuple, unrolled at compile time.
"""
import numpy as np
import pytest

import kiln
import kiln.language as tl
from kiln.language.extra.libdevice import tanh
from kiln.language.standard import _log2

CPU = dict(device="cpu")
HALF_LOG2E: tl.constexpr = 0.7213475204444817  # log2(e) / 2, annotated: a constexpr


@kiln.jit
def locked_group_sums(x_ptr, sums_ptr, lock_ptr, n_cols, GROUPS: tl.constexpr,
                      BLOCK: tl.constexpr):
    # Row r adds itself into the partial sum of group r % GROUPS under that group's lock; the
    # first writer of a group stores instead of adding (its count was 0).
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    group = row % GROUPS
    lock = lock_ptr + group
    count = lock + GROUPS
    part = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0) * 2.0
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    if tl.load(count) == 0:
        tl.atomic_xchg(count, 1)
    else:
        part += tl.load(sums_ptr + group * n_cols + cols, mask=mask)
    tl.store(sums_ptr + group * n_cols + cols, part, mask=mask)
    tl.atomic_xchg(lock, 0)


def test_spin_locked_partial_sums_across_programs():
    rows, cols, groups = 157, 50, 6
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    sums = np.full((groups, cols), np.nan, np.float32)  # the first writer must not read it
    locks = np.zeros(2 * groups, np.int32)
    locked_group_sums[(rows,)](x, sums, locks, cols, GROUPS=groups, BLOCK=64, **CPU)
    ref = np.stack([2 * x[g::groups].sum(0) for g in range(groups)])
    np.testing.assert_allclose(sums, ref, rtol=1e-5, atol=1e-5)
    assert (locks[:groups] == 0).all() and (locks[groups:] == 1).all()


@kiln.jit
def support_mean(o_ptr, g_ptr, out_ptr, n_cols, block_size: tl.constexpr,
                 num_warps: tl.constexpr):
    # Per row: the mean of g over the support (o > 0), in two passes, rounded to o's type.
    row = tl.program_id(0)
    o_row = o_ptr + row * n_cols
    acc = tl.zeros((), dtype=tl.float32)
    cnt = tl.zeros((), dtype=tl.float32)
    for i in range(0, tl.cdiv(n_cols, block_size)):
        offs = i * block_size + tl.arange(0, block_size)
        mask = offs < n_cols
        o = tl.load(o_row + offs, mask=mask, other=0.0).cast(tl.float32)
        g = tl.load(g_ptr + row * n_cols + offs, mask=mask, other=0.0)
        acc += tl.sum(tl.where(o > 0.0, g, 0.0))
        cnt += tl.sum(tl.where(o > 0.0, 1.0, 0.0))
    mean = tl.cast(acc / tl.maximum(cnt, 1e-9), o_row.dtype.element_ty)
    tl.store(out_ptr + row, mean.to(tl.float32) + num_warps * 0.0)


def test_num_warps_parameter_zero_d_accumulators_and_cast():
    rng = np.random.default_rng(1)
    o = rng.standard_normal((5, 300)).astype(np.float16)
    g = rng.standard_normal((5, 300)).astype(np.float32)
    out = np.zeros(5, np.float32)
    support_mean[(5,)](o, g, out, 300, block_size=128, num_warps=4, **CPU)
    s = o > 0
    ref = ((g * s).sum(1) / s.sum(1)).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(out, ref, rtol=1e-3)


@kiln.jit
def tanh_rows(x_ptr, y_ptr, dsum_ptr, n_cols, ROWS_PER_PROGRAM: tl.constexpr,
              BLOCK: tl.constexpr):
    # Each program takes ROWS_PER_PROGRAM rows, never past the grid's size in rows (the
    # builtin min of a run-time value and num_programs), and sums 1 - tanh^2 of its rows.
    pid = tl.program_id(0)
    start = pid * ROWS_PER_PROGRAM
    end = min((pid + 1) * ROWS_PER_PROGRAM, tl.num_programs(0))
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    x_ptr += start * n_cols
    y_ptr += start * n_cols
    for _ in tl.range(start, end):
        t = tanh((tl.load(x_ptr + cols, mask=mask, other=0.0) * 2.0).cast(tl.float32))
        tl.store(y_ptr + cols, t * tl.exp2(HALF_LOG2E * 0.0), mask=mask)
        total += tl.where(mask, 1 - t * t, 0.0)
        x_ptr += n_cols
        y_ptr += n_cols
    tl.store(dsum_ptr + pid * BLOCK + cols, total)


def test_rows_bounded_by_min_of_num_programs_and_libdevice_tanh_by_name():
    programs, per, cols = 6, 2, 40
    x = np.random.default_rng(2).standard_normal((programs, cols)).astype(np.float32)
    y = np.full_like(x, np.nan)
    dsum = np.full((programs, 64), np.nan, np.float32)
    tanh_rows[(programs,)](x, y, dsum, cols, ROWS_PER_PROGRAM=per, BLOCK=64, **CPU)
    # rows reached: [0, min(2, 6)), [2, 4), [4, 6), then empty ranges
    np.testing.assert_allclose(y, np.tanh(2 * x), rtol=1e-5, atol=1e-6)
    t = np.tanh(2 * x)
    for p in range(programs):
        rows = range(p * per, min((p + 1) * per, programs))
        ref = sum((1 - t[r] * t[r] for r in rows), np.zeros(cols, np.float32))
        np.testing.assert_allclose(dsum[p, :cols], ref, rtol=1e-5, atol=1e-6)


@kiln.jit
def leaky(x):
    return tl.where(x >= 0, x, 0.01 * x)


@kiln.jit
def squared(x):
    return x * x


@kiln.jit
def bias_act(x_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr, ACTIVATION: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask)
    if ACTIVATION is not None:  # (`if ACTIVATION:` is an error here, as in Triton)
        acc = ACTIVATION(acc)
    tl.store(y_ptr + offs, acc, mask=mask)


def test_jit_function_passed_as_a_constexpr_and_called():
    # each function (and None) is its own specialization, keyed by the function's source
    rng = np.random.default_rng(3)
    x, b = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    for act, want in ((leaky, np.where(x + b >= 0, x + b, 0.01 * (x + b))),
                      (squared, (x + b) ** 2), (None, x + b)):
        y = np.full_like(x, np.nan)
        bias_act[(4,)](x, b, y, 100, BLOCK=32, ACTIVATION=act, **CPU)
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    import pytest
    with pytest.raises(kiln.CompilationError, match="unsupported call to"):
        bias_act[(4,)](x, b, np.zeros_like(x), 100, BLOCK=32, ACTIVATION=3, **CPU)


@kiln.jit
def _lowest(dtype):
    # FlagGems' get_dtype_min: Triton hands a helper its compile-time arguments as
    # tl.constexpr objects, and this one reads the dtype through .value.
    dtype_ = dtype.value
    if dtype_.is_floating():
        value: tl.constexpr = float("-inf")
        return value
    width: tl.constexpr = dtype_.int_bitwidth
    value: tl.constexpr = -1 * 2 ** (width - 1)
    return value


@kiln.jit
def _halve(n: tl.constexpr):
    h: tl.constexpr = n.value // 2
    return h


@kiln.jit
def masked_max(inp, out, M, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(inp + offs, mask=offs < M, other=_lowest(inp.type.element_ty))
    tl.store(out, tl.max(x, 0) + 0 * _halve(BLOCK))


def test_constexpr_value_of_helper_arguments():
    for dt in (np.float32, np.int32, np.int16):
        x = (np.random.default_rng(1).standard_normal(10) * 100 - 300).astype(dt)
        o = np.zeros(1, dt)
        masked_max[(1,)](x, o, 10, BLOCK=16, **CPU)
        assert o[0] == x.max()


@kiln.jit
def block_ptr_double(x, y, T, D: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    # flash-linear-attention's store: the block cast to what the block pointer points to.
    i_t = tl.program_id(0)
    p_x = tl.make_block_ptr(x, (T, D), (D, 1), (i_t * BT, 0), (BT, BD), (1, 0))
    p_y = tl.make_block_ptr(y, (T, D), (D, 1), (i_t * BT, 0), (BT, BD), (1, 0))
    b_x = tl.load(p_x, boundary_check=(0, 1)).to(tl.float32)
    tl.store(p_y, (b_x * 2).to(p_y.dtype.element_ty), boundary_check=(0, 1))
    tl.static_assert(p_y.dtype == y.dtype)


def test_block_pointer_dtype_is_a_pointer_type():
    x = np.random.default_rng(2).standard_normal((20, 24)).astype(np.float16)
    y = np.zeros_like(x)
    block_ptr_double[(3,)](x, y, 20, D=24, BT=8, BD=32, **CPU)
    np.testing.assert_array_equal(y, 2 * x)


@kiln.jit
def log2_fill(X, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, N))
    n_dims: tl.constexpr = _log2(x.shape[0])
    tl.store(X + tl.arange(0, N), tl.zeros_like(x) + n_dims)


def test_standard_log2_on_a_constexpr():
    x = np.zeros(32, np.int32)
    log2_fill[(1,)](x, N=32, **CPU)
    assert (x == 5).all()


@kiln.heuristics(values={"BLOCK_N": lambda args: kiln.next_power_of_2(args["N"]),
                         "num_warps": lambda args: 2 if args["N"] <= 64 else 8})
@kiln.jit
def double_row(X, Y, N, BLOCK_N: tl.constexpr):
    o = tl.arange(0, BLOCK_N)
    tl.store(Y + o, tl.load(X + o, mask=o < N) * 2, mask=o < N)


def test_heuristics_compute_launch_options():
    # FlagGems' softmax backward: a heuristic sets num_warps as well as a meta-parameter.
    for n, warps in ((50, 2), (100, 8)):
        x = np.arange(n, dtype=np.float32)
        y = np.zeros_like(x)
        k = double_row[(1,)](x, y, n, **CPU)
        np.testing.assert_array_equal(y, 2 * x)
        assert k.constants["BLOCK_N"] == kiln.next_power_of_2(n)
        assert k.metadata.num_warps == warps


@kiln.jit
def sum_in_dtype(out_ptr, init, IN: tl.constexpr, OUT: tl.constexpr):
    x = tl.full((32, 32), init, dtype=IN)
    tl.store(out_ptr, tl.sum(x, dtype=OUT).to(tl.int32))


def test_sum_with_a_dtype_sums_in_it():
    out = np.zeros(1, np.int32)
    sum_in_dtype[(1,)](out, 7, IN=tl.int8, OUT=tl.int8, **CPU)
    assert out[0] == (7 * 1024) % 256  # wraps in int8 (was 7168: summed in int32)
    sum_in_dtype[(1,)](out, 1, IN=tl.int1, OUT=tl.int1, **CPU)
    assert out[0] == 0  # 1024 ones modulo 2
    sum_in_dtype[(1,)](out, 7, IN=tl.int8, OUT=tl.int32, **CPU)
    assert out[0] == 7168


@kiln.jit
def join_shape(X, Z):
    x = tl.load(X)
    z = tl.join(x, x)
    tl.static_assert(z.shape == [2])
    tl.static_assert(z.shape == (2,))
    tl.static_assert(x.shape == [])
    tl.store(Z + tl.arange(0, 2), z)


@kiln.jit
def expand_twice(X, N: tl.constexpr):
    t = tl.expand_dims(tl.arange(0, N), (0, -3))
    tl.store(X + tl.arange(0, N), tl.reshape(t, (N,)))


def test_shape_against_list_literals_and_expand_dims_axes():
    z = np.zeros(2, np.float32)
    join_shape[(1,)](np.ones(1, np.float32), z, **CPU)
    assert (z == 1).all()
    with pytest.raises(kiln.CompilationError, match=r"duplicate axes, normalized axes = \[0, 0\]"):
        expand_twice[(1,)](np.zeros(32, np.int32), N=32, **CPU)


@kiln.jit
def store_either(XTrue, XFalse, Ret):
    pid = tl.program_id(0)
    tl.store(Ret + pid, tl.load(XTrue)) if pid % 2 == 0 else tl.store(Ret + pid, tl.load(XFalse))


@kiln.jit
def sum_to_scalar_ptr(X, Z, BM: tl.constexpr, BN: tl.constexpr):
    x = tl.load(X + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :])
    tl.store(Z[None, None, :], tl.sum(x, axis=None, keep_dims=True))


def test_void_conditional_expression_and_scalar_slices():
    ret = np.zeros(2, np.float32)
    store_either[(2,)](np.array([3.0], np.float32), np.array([1.5], np.float32), ret, **CPU)
    np.testing.assert_array_equal(ret, [3.0, 1.5])
    x = np.random.default_rng(4).standard_normal((16, 16)).astype(np.float32)
    z = np.zeros((1, 1), np.float32)
    sum_to_scalar_ptr[(1,)](x, z, BM=16, BN=16, **CPU)
    np.testing.assert_allclose(z[0, 0], x.sum(), rtol=1e-5)


@kiln.jit
def scaled_by_scalar(x_ptr, s_ptr, out_ptr, BM: tl.constexpr):
    # SGLang's fp8 block-quant MoE with swap_ab: `a_scale[:, None] * b_scale`, a_scale a
    # scalar there; Triton makes s[:, None] and s[None, :] shape [1].
    s = tl.load(s_ptr)
    tl.static_assert(s[:, None].shape == [1] and s[None, :].shape == [1])
    v = tl.load(x_ptr + tl.arange(0, BM))
    tl.store(out_ptr + tl.arange(0, BM), v * (s[:, None] * 2.0))


def test_none_index_of_a_scalar_is_one_element():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    scaled_by_scalar[(1,)](x, np.array([3.0], np.float32), out, BM=8, **CPU)
    np.testing.assert_array_equal(out, x * 6)


@kiln.jit
def _select_one(x, mask, dim, keep_dims=False):
    # Inductor's select_one: the element of x where mask is set, by an integer sum.
    idtype = tl.core.get_int_dtype(x.dtype.primitive_bitwidth, signed=False)
    ix = x.to(idtype, bitcast=True)
    iy = tl.sum(ix * mask, dim, keep_dims=keep_dims)
    return iy.to(x.dtype, bitcast=True)


@kiln.jit
def inductor_helpers(X, Y, B, N: tl.constexpr, PACK: tl.constexpr):
    o = tl.arange(0, N)
    x = tl.load(X + o)
    last = _select_one(x, (o == N - 1).to(tl.uint32), 0)
    bits: tl.constexpr = tl.core._unwrap_if_constexpr(PACK) * 2
    old: tl.constexpr = tl.core._constexpr_to_value(PACK)
    inside = (x > 0).logical_and(x < 10).logical_or(o == 0)
    tl.store(Y + o, tl.where(inside, x, last) + bits + old)
    tl.store(B + o, tl.core.get_int_dtype(8, True) == tl.int8)


def test_inductor_helper_names():
    x = np.array([5, -3, 12, 7, 0, 9, 20, 4], np.float32)
    y = np.zeros_like(x)
    b = np.zeros(8, np.int32)
    inductor_helpers[(1,)](x, y, b, N=8, PACK=16, **CPU)
    inside = ((x > 0) & (x < 10)) | (np.arange(8) == 0)
    np.testing.assert_array_equal(y, np.where(inside, x, x[-1]) + 48)
    assert (b == 1).all()


@kiln.jit
def store_cg(X, Y, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(Y + o, tl.load(X + o) * 2, cache_modifier=".cg")


def test_store_cache_modifier_cg():
    x = np.arange(16, dtype=np.float32)
    y = np.zeros_like(x)
    store_cg[(1,)](x, y, N=16, **CPU)
    np.testing.assert_array_equal(y, 2 * x)
    ptx = kiln.compile(store_cg, signature={"X": "*fp32:16", "Y": "*fp32:16"},
                       constexprs={"N": 128}, target="sm_90a", num_warps=4).asm["ptx"]
    assert "st.global.cg" in ptx


@kiln.jit
def add_bias_if_given(x_ptr, bias_ptr, y_ptr, N: tl.constexpr):
    # vLLM's scaled_mm: `if bias_ptr:` -- a pointer's truth is `ptr != 0`, as in Triton
    offs = tl.arange(0, N)
    v = tl.load(x_ptr + offs)
    if bias_ptr:
        v += tl.load(bias_ptr + offs)
    tl.store(y_ptr + offs, v)


def test_pointer_truth_value():
    x, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    for bias, want in ((b, x + 1), (None, x)):
        y = np.zeros(8, np.float32)
        add_bias_if_given[(1,)](x, bias, y, N=8, **CPU)
        np.testing.assert_array_equal(y, want)


def _unwrap(o):
    return o.value if isinstance(o, tl.constexpr) else o


@tl.constexpr
def _uint_of(num_bits, signed):
    # FlagGems' sort helpers: plain functions decorated @tl.constexpr, called in kernels
    return tl.core.get_int_dtype(_unwrap(num_bits), _unwrap(signed))


@kiln.jit
def diff_and_bits(in_ptr, coeff_ptr, out_ptr, bits_ptr, tiles, n: tl.constexpr):
    # FlagGems' diff: a Python function on a constexpr, run at compile time
    pid = tl.program_id(0)
    co = tl.arange(0, kiln.next_power_of_2(n + 1))
    m = co < n + 1
    tl.store(out_ptr + pid, tl.sum(tl.load(in_ptr + pid + co, m) * tl.load(coeff_ptr + co, m)))
    # FlagGems' sort: a run-time value under a constexpr annotation stays a run-time value
    TOTAL: tl.constexpr = 4 * tiles
    x = tl.load(in_ptr + tl.arange(0, 4)).to(tl.float32)
    nb: tl.constexpr = x.dtype.primitive_bitwidth
    u = x.to(_uint_of(nb, False), bitcast=True)
    tl.store(bits_ptr + tl.arange(0, 4), (u + TOTAL).to(tl.int64))


@kiln.jit
def python_call_on_a_tensor(x_ptr):
    tl.store(x_ptr, kiln.next_power_of_2(tl.load(x_ptr)))


def test_compile_time_python_calls_and_annotations():
    x = (np.arange(10) ** 2).astype(np.int64)
    coeff = np.array([1, -2, 1], np.int64)
    out = np.zeros(8, np.int64)
    bits = np.zeros(4, np.int64)
    diff_and_bits[(8,)](x, coeff, out, bits, 3, n=2, **CPU)
    np.testing.assert_array_equal(out, np.full(8, 2))
    np.testing.assert_array_equal(bits, x[:4].astype(np.float32).view(np.uint32) + 12)
    with pytest.raises(kiln.CompilationError,
                       match=r"'next_power_of_2' is a Python function: kernels call it at "
                             r"compile time, on compile-time values"):
        python_call_on_a_tensor[(1,)](np.ones(1, np.int32), **CPU)


@kiln.jit
def shift_right(z_ptr, x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(z_ptr + offs, tl.load(x_ptr + offs) >> tl.load(y_ptr + offs))


def test_right_shift_takes_the_left_operands_signedness():
    # Triton's test_shift_op: int8 >> uint8 is an arithmetic shift, computed in uint8
    x = np.array([-128, -16, -1, 100], np.int8)
    y = np.array([1, 2, 3, 1], np.uint8)
    z = np.zeros(4, np.uint8)
    shift_right[(1,)](z, x, y, N=4, **CPU)
    np.testing.assert_array_equal(z, (x.astype(np.int64) >> y.astype(np.int64)).astype(np.uint8))
    z = np.zeros(4, np.int8)  # uint8 >> int8: logical
    shift_right[(1,)](z, x.view(np.uint8), y.astype(np.int8), N=4, **CPU)
    np.testing.assert_array_equal(z.view(np.uint8), x.view(np.uint8) >> y)


@kiln.jit
def int8_dot_out_dtype(x_ptr, y_ptr, z_ptr, N: tl.constexpr, OUT: tl.constexpr):
    r = tl.arange(0, N)
    z = tl.dot(tl.load(x_ptr + r[:, None] * N + r[None, :]),
               tl.load(y_ptr + r[:, None] * N + r[None, :]), out_dtype=OUT)
    tl.static_assert(z.dtype == tl.int32)
    tl.store(z_ptr + r[:, None] * N + r[None, :], z)


def test_int8_dot_ignores_out_dtype():
    rng = np.random.default_rng(0)
    x, y = (rng.integers(-128, 127, (32, 32)).astype(np.int8) for _ in range(2))
    z = np.zeros((32, 32), np.int32)
    int8_dot_out_dtype[(1,)](x, y, z, N=32, OUT=tl.int8, **CPU)
    np.testing.assert_array_equal(z, x.astype(np.int32) @ y.astype(np.int32))


@kiln.jit
def optional_row_pointer(x_ptr, z_ptr, y_ptr, rows, stride, N: tl.constexpr,
                         HAS_Z: tl.constexpr, SKIP_NEGATIVE: tl.constexpr):
    # as mamba's _layer_norm_bwd_kernel walks rows: pointers advanced at the end of each row,
    # the optional one only when it exists
    cols = tl.arange(0, N)
    extra = tl.zeros((N,), tl.float32) if HAS_Z else None
    if SKIP_NEGATIVE:
        if tl.load(x_ptr) < 0:
            return
    for _ in range(rows):
        x = tl.load(x_ptr + cols)
        if HAS_Z:
            x *= tl.load(z_ptr + cols)
            extra += x
        if z_ptr is not None:
            z_ptr += stride
        tl.store(y_ptr + cols, x)
        x_ptr += stride
        y_ptr += stride
        if not HAS_Z:
            pass
        elif rows > 1:
            z_ptr += 0  # a run-time if inside the constexpr-true branch
    if HAS_Z:
        tl.store(y_ptr + cols, extra)


@pytest.mark.parametrize("has_z", [False, True])
@pytest.mark.parametrize("skip_negative", [False, True])
def test_optional_pointer_advanced_under_a_constexpr_flag(has_z, skip_negative):
    rows, n = 5, 16
    rng = np.random.default_rng(1)
    x = np.abs(rng.standard_normal((rows, n))).astype(np.float32)
    z = rng.standard_normal((rows, n)).astype(np.float32)
    y = np.zeros((rows + 1, n), np.float32)
    optional_row_pointer[(1,)](x, z if has_z else None, y, rows, n, N=n, HAS_Z=has_z,
                               SKIP_NEGATIVE=skip_negative, **CPU)
    want = x * z if has_z else x
    np.testing.assert_allclose(y[:rows], want, rtol=1e-6)
    np.testing.assert_allclose(y[rows], want.sum(0) if has_z else 0, rtol=1e-5)


@kiln.jit
def rebinds_none_in_a_taken_branch(x_ptr, z_ptr, rows, HAS_Z: tl.constexpr):
    for _ in range(rows):
        if not HAS_Z:
            z_ptr += 1  # ERR
        tl.store(x_ptr, 1.0)


def test_none_rebound_in_the_branch_taken_is_still_an_error():
    with pytest.raises(kiln.CompilationError,
                       match=r"cannot reassign 'z_ptr' \(constexpr None\) inside a run-time loop"):
        rebinds_none_in_a_taken_branch[(1,)](np.zeros(1, np.float32), None, 2, HAS_Z=False,
                                             **CPU)


@kiln.jit
def _bump(values, k: tl.constexpr):
    return tl.tuple([v + k for v in values])


@kiln.jit
def tuple_comprehension(ptrs, out_ptr, N: tl.constexpr):
    cols = tl.arange(0, N)
    rows = _bump([tl.load(p + cols) for p in ptrs], 1)
    # constexpr items stay constexprs (an index); a compile-time `if` leaves row 1 out
    picked = [(i, rows[i]) for i in (0, 1, 2) if i != 1]
    total = tl.zeros((N,), tl.float32)
    for t in tl.static_range(len(picked)):
        i, r = picked[t]
        total += r * (i + 1)
    tl.store(out_ptr + cols, total)


def test_list_comprehension_over_a_tuple():
    n = 8
    xs = [np.full(n, v, np.float32) for v in (1.0, 2.0, 3.0)]
    out = np.zeros(n, np.float32)
    tuple_comprehension[(1,)](tuple(xs), out, N=n, **CPU)
    np.testing.assert_array_equal(out, np.full(n, (1 + 1) * 1 + (3 + 1) * 3, np.float32))


@kiln.jit
def comprehension_over_a_tensor(x_ptr):
    v = tl.load(x_ptr + tl.arange(0, 4))
    w = [e for e in v]  # ERR
    tl.store(x_ptr, w[0])


def test_comprehension_needs_a_tuple():
    with pytest.raises(kiln.CompilationError, match=r"expected a tuple to iterate over in a "
                                                    r"comprehension, found"):
        comprehension_over_a_tensor[(1,)](np.zeros(4, np.float32), **CPU)
