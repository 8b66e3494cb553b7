"""The names of triton.language (Triton 3.6) about values and types, and the last few ops, each
on the CPU backend against numpy and marked `gpu` on the device:

- TRITON_MAX_TENSOR_NUMEL; add, sub, mul (the functions behind + - *); to_tensor (Triton's
  types of Python values);
- squeeze, unsqueeze; bitonic_merge (Triton's merge network, checked against a numpy copy of
  it, and sorting bitonic rows);
- tuple and slice (kernels' tuples and slices, built by name too), constexpr_type (the type of
  a constexpr), condition (a while loop's condition), const (stores through it are errors);
- constexpr_function (called at compile time; its source is part of the kernel's key) and
  target_info (the target being compiled for);
- load_tensor_descriptor / store_tensor_descriptor.
"""
import numpy as np
import pytest

import kiln
import kiln.language as tl
from test_dot_scan import expect_error
from test_language_basics import launch

DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


# --------------------------------------------------------------------------- arithmetic

@kiln.jit
def arith_kernel(x_ptr, y_ptr, o_ptr, N: tl.constexpr):
    tl.static_assert(N * N <= tl.TRITON_MAX_TENSOR_NUMEL)
    r = tl.arange(0, N)
    x = tl.load(tl.add(x_ptr, r))  # pointer + offsets, as x_ptr + r
    y = tl.load(y_ptr + r)
    tl.store(o_ptr + r, tl.add(x, y))
    tl.store(o_ptr + N + r, tl.sub(x, y, sanitize_overflow=False))
    tl.store(o_ptr + 2 * N + r, tl.mul(x, 3))
    c = tl.add(2, 3)  # two constants make an int32 tensor, as in Triton
    tl.static_assert(c.dtype == tl.int32)
    tl.store(o_ptr + 3 * N + r, tl.mul(x, c))


@pytest.mark.parametrize("device", DEVICES)
def test_add_sub_mul(device):
    assert tl.TRITON_MAX_TENSOR_NUMEL == 1048576
    rng = np.random.default_rng(0)
    x = rng.integers(-2**31, 2**31, 16, dtype=np.int64).astype(np.int32)
    y = rng.integers(-2**31, 2**31, 16, dtype=np.int64).astype(np.int32)
    _, _, o = launch(arith_kernel, [x, y, np.zeros(64, np.int32)], device, N=16)
    with np.errstate(over="ignore"):  # int32 wraps around, as on the GPU
        ref = np.concatenate([x + y, x - y, x * np.int32(3), x * np.int32(5)])
    np.testing.assert_array_equal(o, ref)


@kiln.jit
def to_tensor_kernel(i_ptr, u_ptr, l_ptr, f_ptr, d_ptr, b_ptr):
    a = tl.to_tensor(7)
    tl.static_assert(a.dtype == tl.int32)
    tl.store(i_ptr, a)
    u = tl.to_tensor(2**31 + 5)
    tl.static_assert(u.dtype == tl.uint32)
    tl.store(u_ptr, u)
    big = tl.to_tensor(-2**40)
    tl.static_assert(big.dtype == tl.int64)
    tl.store(l_ptr, big)
    f = tl.to_tensor(1.5)
    tl.static_assert(f.dtype == tl.float32)
    tl.store(f_ptr, f)
    d = tl.to_tensor(1e300)  # outside float32's range: float64
    tl.static_assert(d.dtype == tl.float64)
    tl.store(d_ptr, d)
    b = tl.to_tensor(True)
    tl.static_assert(b.dtype == tl.int1)
    tl.store(b_ptr, tl.to_tensor(b).to(tl.int32))


@pytest.mark.parametrize("device", DEVICES)
def test_to_tensor(device):
    arrays = [np.zeros(1, np.int32), np.zeros(1, np.uint32), np.zeros(1, np.int64),
              np.zeros(1, np.float32), np.zeros(1, np.float64), np.zeros(1, np.int32)]
    i, u, big, f, d, b = launch(to_tensor_kernel, arrays, device)
    assert (i[0], u[0], big[0], f[0], d[0], b[0]) == (7, 2**31 + 5, -2**40, 1.5, 1e300, 1)


# --------------------------------------------------------------------------- shapes

@kiln.jit
def squeeze_kernel(x_ptr, o_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    row = tl.load(x_ptr + r[None, :])  # (1, N)
    v = tl.squeeze(row, 0)  # (N,)
    col = tl.unsqueeze(v, 1)  # (N, 1)
    last = tl.squeeze(tl.unsqueeze(v, -1), -1)
    tl.store(o_ptr + r[:, None] * N + r[None, :], col + row)
    tl.store(o_ptr + N * N + r, last)


@pytest.mark.parametrize("device", DEVICES)
def test_squeeze_unsqueeze(device):
    x = np.arange(8, dtype=np.float32) * 1.5
    _, o = launch(squeeze_kernel, [x, np.zeros(72, np.float32)], device, N=8)
    np.testing.assert_array_equal(o[:64].reshape(8, 8), x[:, None] + x[None, :])
    np.testing.assert_array_equal(o[64:], x)


@kiln.jit
def squeeze_err_kernel(x_ptr):
    r = tl.arange(0, 8)
    y = tl.squeeze(tl.load(x_ptr + r[None, :]), 1)  # ERR
    tl.store(x_ptr + r, y)


def test_squeeze_of_a_longer_dimension_is_an_error():
    expect_error(squeeze_err_kernel, r"expected length 1 in dimension 1 for tl.squeeze, "
                 r"found 8", {"x_ptr": "*fp32"})


def bitonic_merge_ref(x, descending):
    """Triton's merge network on the last axis of x, in numpy (the same compare-and-swaps)."""
    x = x.copy()
    n = x.shape[-1]
    half = n // 2
    while half >= 1:
        h = x.reshape(x.shape[:-1] + (n // (2 * half), 2, half))
        a, b = h[..., 0, :].copy(), h[..., 1, :].copy()
        if descending:
            lo, hi = np.where(a > b, a, b), np.where(b > a, a, b)
        else:
            lo, hi = np.where(a > b, b, a), np.where(b > a, b, a)
        x = np.stack([lo, hi], axis=-2).reshape(x.shape)
        half //= 2
    return x


@kiln.jit
def bitonic_kernel(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(o_ptr + offs, tl.bitonic_merge(tl.load(x_ptr + offs), descending=DESC))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("desc", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.float16, np.uint16,
                                   np.float64])
def test_bitonic_merge(device, desc, dtype):
    rng = np.random.default_rng(3)
    M, N = 4, 32
    # Bitonic rows (rising then falling) come out sorted ...
    rows = np.sort(rng.integers(0, 100, (M, N)), axis=1)
    bitonic = np.concatenate([rows[:, ::2], rows[:, 1::2][:, ::-1]], axis=1).astype(dtype)
    _, o = launch(bitonic_kernel, [bitonic, np.zeros((M, N), dtype)], device, M=M, N=N,
                  DESC=desc)
    ref = np.sort(bitonic, axis=1)
    np.testing.assert_array_equal(o, ref[:, ::-1] if desc else ref)
    # ... and any rows as the network leaves them.
    x = rng.integers(0, 100, (M, N)).astype(dtype)
    if dtype == np.float32:
        x[1, 3] = x[2, 30] = np.nan  # kept first in its pair, copied second (Triton's where)
    _, o = launch(bitonic_kernel, [x, np.zeros((M, N), dtype)], device, M=M, N=N, DESC=desc)
    np.testing.assert_array_equal(o, bitonic_merge_ref(x, desc))


@kiln.jit
def bitonic_err_kernel(x_ptr):
    offs = tl.arange(0, 4)[:, None] * 8 + tl.arange(0, 8)[None, :]
    tl.store(x_ptr + offs, tl.bitonic_merge(tl.load(x_ptr + offs), dim=0))  # ERR


def test_bitonic_merge_on_another_dimension_is_an_error():
    expect_error(bitonic_err_kernel, r"expected dim None or 1 \(the last dimension\) for "
                 r"tl.bitonic_merge", {"x_ptr": "*fp32"})


# --------------------------------------------------------------------------- values and types

def test_tuple_slice_constexpr_type_on_the_host():
    t = tl.tuple([1, 2, 3])
    assert isinstance(t, tl.tuple) and isinstance((4, 5), tl.tuple) and not isinstance([1],
                                                                                        tl.tuple)
    assert t == (1, 2, 3) and t.values == [1, 2, 3] and len(t) == 3
    assert t[tl.slice(0, 2, None)] == (1, 2) and isinstance(t[1:], tl.tuple)
    assert t + (4,) == (1, 2, 3, 4)
    assert isinstance(slice(1, 2), tl.slice) and tl.slice(1, 2, None) == slice(1, 2)
    assert tl.constexpr(4).type == tl.constexpr_type(4) != tl.constexpr_type(5)
    assert repr(tl.constexpr_type(4)) == "constexpr_type[4]"
    assert isinstance(tl.condition(True), tl.condition)


@kiln.jit
def tuple_kernel(x_ptr, o_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    t = tl.tuple([x, x * 2.0, x * 3.0])
    tl.static_assert(isinstance(t, tl.tuple) and isinstance((x, N), tl.tuple))
    tl.static_assert(len(t) == 3 and not isinstance(x, tl.tuple))
    first_two = t[tl.slice(0, 2, None)]
    last_two = t[1:]
    tl.static_assert(isinstance(first_two, tl.tuple) and len(last_two) == 2)
    tl.static_assert(N.type == tl.constexpr_type(N) and isinstance(N.type, tl.constexpr_type))
    tl.store(o_ptr + r, first_two[0] + last_two[1])  # x + 3x
    col = x[tl.slice(None, None, None), None]  # x[:, None]
    tl.store(o_ptr + N + r, tl.sum(col, axis=1))


@pytest.mark.parametrize("device", DEVICES)
def test_tuple_slice_constexpr_type_in_a_kernel(device):
    x = np.arange(8, dtype=np.float32)
    _, o = launch(tuple_kernel, [x, np.zeros(16, np.float32)], device, N=8)
    np.testing.assert_array_equal(o, np.concatenate([4 * x, x]))


@kiln.jit
def condition_kernel(o_ptr, n):
    i = 0
    acc = 0
    while tl.condition(i < n, disable_licm=True):
        acc += i
        i += 1
    j = 0
    while tl.condition(j < n):
        if j == 3:
            break
        j += 1
    tl.store(o_ptr, acc)
    tl.store(o_ptr + 1, j)


@pytest.mark.parametrize("device", DEVICES)
def test_condition(device):
    (o,) = _launch_with(condition_kernel, [np.zeros(2, np.int32)], device, 10)
    assert list(o) == [45, 3]


def _launch_with(kernel, arrays, device, *scalars):
    """launch() with scalar arguments after the arrays."""
    if device == "cpu":
        out = [a.copy() for a in arrays]
        kernel[(1,)](*out, *scalars, device="cpu")
        return out
    from test_dot_scan import _gpu_arrays
    to_dev, to_np = _gpu_arrays()
    dev = [to_dev(a) for a in arrays]
    kernel[(1,)](*dev, *scalars)
    return [to_np(d) for d in dev]


@kiln.jit
def const_kernel(x_ptr: tl.const, o_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(o_ptr + r, tl.load(x_ptr + r) + 1.0)


@pytest.mark.parametrize("device", DEVICES)
def test_const_pointer_reads(device):
    x = np.arange(8, dtype=np.float32)
    _, o = launch(const_kernel, [x, np.zeros(8, np.float32)], device, N=8)
    np.testing.assert_array_equal(o, x + 1)


@kiln.jit
def const_err_kernel(x_ptr: tl.const, WHAT: tl.constexpr):
    r = tl.arange(0, 8)
    if WHAT == "store":
        tl.store(x_ptr + r * 2 + 1, 1.0)  # ERR<store>
    else:
        tl.atomic_add(x_ptr, 1.0)  # ERR<atomic>


@pytest.mark.parametrize("what", ["store", "atomic"])
def test_store_through_a_const_pointer_is_an_error(what):
    name = "store" if what == "store" else "atomic_add"
    expect_error(const_err_kernel, rf"{name}: cannot store through a pointer to constant "
                 rf"data \(it comes from a parameter annotated tl.const\)", {"x_ptr": "*fp32"},
                 {"WHAT": what})


# --------------------------------------------------------------------------- compile time

@tl.constexpr_function
def block_for(n, scale=1):
    """The power of two at or above n * scale."""
    return 1 << max(0, (n * scale - 1).bit_length())


@tl.constexpr_function
def same_dtype(x, y):
    return x.dtype == y.dtype


@kiln.jit
def constexpr_function_kernel(x_ptr, o_ptr, N: tl.constexpr):
    B: tl.constexpr = block_for(N)
    tl.static_assert(B == 8 and block_for(N, scale=4) == 32)
    r = tl.arange(0, B)
    x = tl.load(x_ptr + r, mask=r < N, other=0.0)
    tl.static_assert(same_dtype(x, r) == False)  # noqa: E712  (a constexpr bool)
    if tl.target_info.is_cuda():
        on = 1.0
    else:
        on = 0.0
    if tl.target_info.cuda_capability_geq(9, 0):
        geq = 1.0
    else:
        geq = 0.0
    tl.static_assert(not tl.target_info.is_hip() and not tl.target_info.is_hip_cdna3())
    tl.static_assert(not tl.target_info.is_hip_cdna4())
    tl.store(o_ptr + r, x * 2.0, mask=r < N)
    tl.store(o_ptr + N, on)
    tl.store(o_ptr + N + 1, geq)


@pytest.mark.parametrize("device", DEVICES)
def test_constexpr_function_and_target_info(device):
    assert block_for(5) == 8 and block_for(5, scale=4) == 32  # a plain function on the host
    assert kiln.constexpr_function is tl.constexpr_function
    x = np.arange(5, dtype=np.float32)
    _, o = launch(constexpr_function_kernel, [x, np.zeros(7, np.float32)], device, N=5)
    np.testing.assert_array_equal(o[:5], 2 * x)
    gpu = 1.0 if device == "gpu" else 0.0
    assert list(o[5:]) == [gpu, gpu]


def test_constexpr_function_source_is_in_the_kernel_key(monkeypatch):
    key = kiln.jit(constexpr_function_kernel.fn).cache_key
    assert kiln.jit(constexpr_function_kernel.fn).cache_key == key
    monkeypatch.setitem(globals(), "block_for", tl.constexpr_function(lambda n, scale=1: 8))
    assert kiln.jit(constexpr_function_kernel.fn).cache_key != key


def test_target_info_outside_kernels():
    t = tl.target_info.current_target()
    assert t is not None and t.backend in ("cuda", "cpu")
    assert tl.target_info.is_cuda() == (t.backend == "cuda")


# --------------------------------------------------------------------------- descriptors

@kiln.jit
def descriptor_fn_kernel(x_ptr, o_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    dst = tl.make_tensor_descriptor(o_ptr, [M, N], [N, 1], [BM, BN])
    i = tl.program_id(0) * BM
    j = tl.program_id(1) * BN
    block = tl.load_tensor_descriptor(src, [i, j])
    tl.store_tensor_descriptor(dst, [i, j], block * 2.0 + 1.0)


@pytest.mark.parametrize("device", DEVICES)
def test_load_store_tensor_descriptor(device):
    M, N = 20, 24
    x = np.random.default_rng(5).standard_normal((M, N)).astype(np.float32)
    o = np.zeros((M, N), np.float32)
    grid = (2, 3)
    if device == "cpu":
        descriptor_fn_kernel[grid](x, o, M, N, BM=16, BN=8, device="cpu")
    else:
        from test_dot_scan import _gpu_arrays
        to_dev, to_np = _gpu_arrays()
        xd, od = to_dev(x), to_dev(o)
        descriptor_fn_kernel[grid](xd, od, M, N, BM=16, BN=8)
        o = to_np(od)
    np.testing.assert_array_equal(o, x * 2 + 1)


# --------------------------------------------------------------------------- custom fp8

@kiln.jit
def custom_fp8_kernel(x_ptr, WHAT: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if WHAT == "sm80":
        y = tl.extra.cuda.convert_custom_float8_sm80(x, tl.float8e4b15)  # ERR<sm80>
    elif WHAT == "sm70":
        y = tl.extra.cuda.convert_custom_float8_sm70(x, tl.float8e4b15, "rtz")  # ERR<sm70>
    else:
        y = tl.extra.cuda.convert_custom_float8_sm80(x, tl.float32)  # ERR<other>
    tl.store(x_ptr + tl.arange(0, 16), y.to(tl.float16))


@pytest.mark.parametrize("what", ["sm80", "sm70"])
def test_convert_custom_float8_is_an_error(what):
    expect_error(custom_fp8_kernel, rf"tl.extra.cuda.convert_custom_float8_{what}: "
                 r"tl.float8e4b15 \(fp8e4b15\) has no hardware format", {"x_ptr": "*fp16"},
                 {"WHAT": what})
    expect_error(custom_fp8_kernel, r"expected a conversion between tl.float16/tl.float32 and "
                 r"tl.float8e4b15, found fp16 to fp32", {"x_ptr": "*fp16"}, {"WHAT": "other"})


@pytest.mark.parametrize("device", DEVICES)
def test_convert_custom_float8_fails_at_launch(device):
    x = np.zeros(16, np.float16)
    with pytest.raises(kiln.CompilationError, match="convert_custom_float8_sm80"):
        launch(custom_fp8_kernel, [x], device, WHAT="sm80")
