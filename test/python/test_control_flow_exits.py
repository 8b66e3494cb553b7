"""Early exits in kernels (issue #22): `return` under a run-time condition (statements after a
taken return do not run: no stores, no atomics), values returned from @kiln.jit helpers on
several paths, `break` and `continue` in range / tl.range / static_range / while loops with
loop-carried values, and the errors for what stays unsupported. Semantics are Python's (and
Triton 3.6's, which rejects `return` inside loops; Kiln takes a bare `return` there). CPU
backend against numpy references, the PTX for sm_90 (compile only), and GPU twins (marker
`gpu`)."""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import marker_line

CPU = dict(device="cpu")


def run(kernel, grid, arrays, device, **meta):
    """Launches `kernel` on `arrays` (numpy) on the CPU backend or the GPU; returns the
    arrays as numpy after the launch."""
    if device == "cpu":
        kernel[grid](*arrays, **meta, **CPU)
        return arrays
    dev = [kiln.from_numpy(a) if isinstance(a, np.ndarray) else a for a in arrays]
    kernel[grid](*dev, **meta)
    kiln.synchronize()
    return [d.numpy() if hasattr(d, "numpy") else d for d in dev]


DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


# --- early return in kernels ---------------------------------------------------------------

@kiln.jit
def early_return_kernel(x_ptr, skip_ptr, out_ptr, count_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if tl.load(skip_ptr + pid) != 0:
        return
    o = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.load(x_ptr + o) * 2)
    tl.atomic_add(count_ptr, 1)


@pytest.mark.parametrize("device", DEVICES)
def test_early_return_skips_stores_and_atomics(device):
    n, B = 8, 16
    x = np.arange(n * B, dtype=np.float32)
    skip = np.array([0, 1, 1, 0, 0, 1, 0, 1], np.int32)
    out = np.full(n * B, -1.0, np.float32)
    count = np.zeros(1, np.int32)
    _, _, out, count = run(early_return_kernel, (n,), [x, skip, out, count], device, BLOCK=B)
    want = np.where(np.repeat(skip, B) != 0, -1.0, 2 * x)
    np.testing.assert_array_equal(out, want)
    assert count[0] == (skip == 0).sum()


@kiln.jit
def ignore_index_loss_kernel(x_ptr, label_ptr, loss_ptr, total_ptr, n_cols, stride,
                             ignore_index, BLOCK: tl.constexpr):
    # The pattern of fused cross-entropy kernels (Liger's): ignored rows write zeros and leave
    # early; the others run a row loop (online max / sum of exponentials), write the loss,
    # pass a debug_barrier, then write the gradient in place.
    row = tl.program_id(0)
    base = x_ptr + row * stride
    label = tl.load(label_ptr + row)
    if label == ignore_index:
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            tl.store(base + cols, tl.zeros((BLOCK,), tl.float32), mask=cols < n_cols)
        tl.store(loss_ptr + row, 0.0)
        return
    m = -float("inf")
    d = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(d)
    x_label = tl.load(base + label)
    tl.store(loss_ptr + row, lse - x_label)
    tl.atomic_add(total_ptr, lse - x_label)
    tl.debug_barrier()  # as Liger's cross-entropy: the row's reads are done before it is overwritten
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=0.0)
        g = tl.exp(x - lse) - tl.where(cols == label, 1.0, 0.0)
        tl.store(base + cols, g, mask=cols < n_cols)


def cross_entropy_ref(x, labels, ignore):
    x = x.astype(np.float64)
    lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    loss = np.zeros(len(x))
    grad = np.zeros_like(x)
    for r, lab in enumerate(labels):
        if lab == ignore:
            continue
        loss[r] = lse[r] - x[r, lab]
        grad[r] = np.exp(x[r] - lse[r])
        grad[r, lab] -= 1
    return loss, grad


@pytest.mark.parametrize("device", DEVICES)
def test_ignore_index_early_exit_with_row_loop(device):
    rows, cols, ignore = 6, 100, -100
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    labels = np.array([3, ignore, 99, 0, ignore, 42], np.int32)
    loss, total = np.full(rows, 7.0, np.float32), np.zeros(1, np.float32)
    res = run(ignore_index_loss_kernel, (rows,), [x.copy(), labels, loss, total, cols, cols,
                                                  ignore], device, BLOCK=32)
    want_loss, want_grad = cross_entropy_ref(x, labels, ignore)
    np.testing.assert_allclose(res[2], want_loss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(res[0], want_grad, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[3][0], want_loss.sum(), rtol=1e-5)


@kiln.jit
def nested_return_kernel(a_ptr, b_ptr, out_ptr):
    pid = tl.program_id(0)
    a = tl.load(a_ptr + pid)
    b = tl.load(b_ptr + pid)
    v = a * 10
    if a > 0:
        if b > 0:
            tl.store(out_ptr + pid, 1)
            return
        v = v + 1
        if b < -5:
            return
    else:
        if b == 0:
            return
        else:
            v = v + 2
    tl.store(out_ptr + pid, v)


def nested_return_ref(a, b):
    out = np.full(len(a), -1, np.int32)
    for i, (x, y) in enumerate(zip(a, b)):
        v = x * 10
        if x > 0:
            if y > 0:
                out[i] = 1
                continue
            v += 1
            if y < -5:
                continue
        else:
            if y == 0:
                continue
            v += 2
        out[i] = v
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_nested_ifs_with_returns(device):
    a = np.array([1, 1, 1, 2, -1, -1, 0, 0, 5], np.int32)
    b = np.array([1, -1, -9, 0, 0, 3, 0, -7, -6], np.int32)
    out = np.full(len(a), -1, np.int32)
    res = run(nested_return_kernel, (len(a),), [a, b, out], device)
    np.testing.assert_array_equal(res[2], nested_return_ref(a, b))


@kiln.jit
def both_branches_return_kernel(x_ptr, out_ptr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    if x > 0:
        tl.store(out_ptr + pid, x * 2)
        return
    else:
        tl.store(out_ptr + pid, -x)
        return
    tl.store(out_ptr + pid, 12345)  # dead: both branches returned


@kiln.jit
def elif_chain_kernel(x_ptr, out_ptr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    if x < 0:
        tl.store(out_ptr + pid, -1)
        return
    elif x == 0:
        return
    elif x > 100:
        tl.store(out_ptr + pid, 100)
        return
    tl.store(out_ptr + pid, x)


@pytest.mark.parametrize("device", DEVICES)
def test_return_in_both_branches_and_elif(device):
    x = np.array([3, -4, 0, 7, 250, -1], np.int32)
    out = np.full(len(x), 9, np.int32)
    res = run(both_branches_return_kernel, (len(x),), [x, out.copy()], device)
    np.testing.assert_array_equal(res[1], np.where(x > 0, 2 * x, -x))
    res = run(elif_chain_kernel, (len(x),), [x, out.copy()], device)
    np.testing.assert_array_equal(res[1], np.select([x < 0, x == 0, x > 100],
                                                    [-1, 9, 100], x))


@kiln.jit
def return_after_loop_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # A return under a condition computed by a loop, then more work.
    pid = tl.program_id(0)
    acc = 0.0
    for i in range(0, n, BLOCK):
        o = i + tl.arange(0, BLOCK)
        acc += tl.sum(tl.load(x_ptr + pid * n + o, mask=o < n, other=0.0), axis=0)
    if acc < 0:
        tl.store(out_ptr + pid, -1.0)
        return
    tl.store(out_ptr + pid, acc)


@pytest.mark.parametrize("device", DEVICES)
def test_return_after_row_loop(device):
    x = np.random.default_rng(1).standard_normal((8, 50)).astype(np.float32)
    out = np.zeros(8, np.float32)
    res = run(return_after_loop_kernel, (8,), [x, out, 50], device, BLOCK=16)
    s = x.astype(np.float64).sum(1)
    np.testing.assert_allclose(res[1], np.where(s < 0, -1.0, s), rtol=1e-5, atol=1e-5)


# --- values returned from helpers ----------------------------------------------------------

@kiln.jit
def pick_if_else(c, a, b):
    if c > 0:
        return a
    else:
        return b


@kiln.jit
def pick_then_fall_through(c, a, b):
    if c > 0:
        return a
    return b


@kiln.jit
def sign_nested(x):
    if x >= 0:
        if x == 0:
            return 0.0
        return 1.0
    return -1.0


@kiln.jit
def clamp_or_sum(x, lo, hi, n, BLOCK: tl.constexpr):
    # An early return, then a loop and a second return.
    if x < lo:
        return lo
    if x > hi:
        return hi
    s = x
    for i in range(n):
        s += i
    return s


@kiln.jit
def minmax_pair(a, b):
    if a < b:
        return a, b
    return b, a


@kiln.jit
def helpers_kernel(x_ptr, c_ptr, out_ptr, n):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    c = tl.load(c_ptr + pid)
    tl.store(out_ptr + 0 * 64 + pid, pick_if_else(c, x, x * 10))
    tl.store(out_ptr + 1 * 64 + pid, pick_then_fall_through(c, x, x - 100))
    tl.store(out_ptr + 2 * 64 + pid, sign_nested(x))
    tl.store(out_ptr + 3 * 64 + pid, clamp_or_sum(x, -2.0, 4.0, n, 4))
    lo, hi = minmax_pair(x, c.to(tl.float32))
    tl.store(out_ptr + 4 * 64 + pid, lo)
    tl.store(out_ptr + 5 * 64 + pid, hi)


@pytest.mark.parametrize("device", DEVICES)
def test_values_returned_from_helpers(device):
    x = np.array([-3.0, -1.0, 0.0, 0.5, 1.0, 2.5, 3.0, 5.0], np.float32)
    c = np.array([1, -1, 0, 2, -5, 0, 1, -2], np.int32)
    n = 3
    out = np.zeros(6 * 64, np.float32)
    res = run(helpers_kernel, (len(x),), [x, c, out, n], device)[2].reshape(6, 64)[:, :len(x)]
    np.testing.assert_array_equal(res[0], np.where(c > 0, x, x * 10))
    np.testing.assert_array_equal(res[1], np.where(c > 0, x, x - 100))
    np.testing.assert_array_equal(res[2], np.sign(x))
    np.testing.assert_array_equal(res[3], np.where(x < -2, -2, np.where(x > 4, 4, x + 3)))
    np.testing.assert_array_equal(res[4], np.minimum(x, c))
    np.testing.assert_array_equal(res[5], np.maximum(x, c))


@kiln.jit
def first_positive(x_ptr, n, BLOCK: tl.constexpr):
    # A helper whose early return depends on a loaded tile.
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n, other=0.0)
    if tl.max(x, axis=0) <= 0:
        return tl.zeros((BLOCK,), tl.float32)
    return tl.where(x > 0, x, 0.0)


@kiln.jit
def helper_in_loop_kernel(x_ptr, out_ptr, n, rows, BLOCK: tl.constexpr):
    # Triton rejects a helper with a return under a condition inside a loop; Kiln inlines it.
    acc = tl.zeros((BLOCK,), tl.float32)
    for r in range(rows):
        acc += first_positive(x_ptr + r * n, n, BLOCK)
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@pytest.mark.parametrize("device", DEVICES)
def test_helper_with_return_called_in_loop(device):
    x = np.random.default_rng(2).standard_normal((5, 12)).astype(np.float32)
    x[1] = -np.abs(x[1])
    out = np.zeros(16, np.float32)
    res = run(helper_in_loop_kernel, (1,), [x, out, 12, 5], device, BLOCK=16)
    want = np.zeros(16)
    want[:12] = np.where(x > 0, x, 0).sum(0)
    np.testing.assert_allclose(res[1], want, rtol=1e-6)


@kiln.jit
def guarded_tail(c, d, a, b):
    # The inner if may return; what follows it runs under a "not returned" guard.
    if c > 0:
        if d > 0:
            return a
    return b


@kiln.jit
def split_paths(c, d, x):
    # One branch returns a value from an inner if and defines y after it; the other defines
    # y too: the inner if is built as `if d: return` then `if not d: y = ...`.
    if c > 0:
        if d > 0:
            return x * 100
        y = x + 1
    else:
        y = x + 2
    return y * 2


@kiln.jit
def first_index_above(x_ptr, t, N: tl.constexpr):
    # A return inside an unrolled static_range under a run-time condition.
    for k in tl.static_range(N):
        if tl.load(x_ptr + k) > t:
            return k
    return -1


@kiln.jit
def helper_paths_kernel(x_ptr, c_ptr, d_ptr, out_ptr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    c = tl.load(c_ptr + pid)
    d = tl.load(d_ptr + pid)
    tl.store(out_ptr + 0 * 64 + pid, guarded_tail(c, d, x, -x))
    tl.store(out_ptr + 1 * 64 + pid, split_paths(c, d, x))
    tl.store(out_ptr + 2 * 64 + pid, first_index_above(x_ptr, x, 8).to(tl.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_returns_through_guards_splits_and_static_range(device):
    x = np.array([3.0, -1.0, 2.0, 7.0, 0.5, 1.0, 6.0, 4.0], np.float32)
    c = np.array([1, 1, 0, -1, 2, 2, 0, 1], np.int32)
    d = np.array([1, 0, 1, 0, -1, 5, 0, -3], np.int32)
    out = np.zeros(3 * 64, np.float32)
    res = run(helper_paths_kernel, (8,), [x, c, d, out], device)[3].reshape(3, 64)[:, :8]
    np.testing.assert_array_equal(res[0], np.where((c > 0) & (d > 0), x, -x))
    np.testing.assert_array_equal(res[1], np.where(c > 0, np.where(d > 0, x * 100, (x + 1) * 2),
                                                   (x + 2) * 2))
    first = [next((k for k in range(8) if x[k] > t), -1) for t in x]
    np.testing.assert_array_equal(res[2], first)


@kiln.jit
def pointer_on_one_path_kernel(x_ptr, a_ptr, b_ptr):
    # `p` (a pointer) exists after the inner if only where it did not return.
    pid = tl.program_id(0)
    a = tl.load(a_ptr + pid)
    b = tl.load(b_ptr + pid)
    if a > 0:
        if b > 0:
            return
        p = x_ptr + 2 * pid
    else:
        p = x_ptr + 2 * pid + 1
    tl.store(p, 1.0)


@kiln.jit
def tiles_on_one_path_kernel(x_ptr, a_ptr, out_ptr, BLOCK: tl.constexpr):
    # An int1 and an fp16 tile exist after the inner if only where it did not return.
    pid = tl.program_id(0)
    a = tl.load(a_ptr + pid)
    o = tl.arange(0, BLOCK)
    if a > 0:
        if a > 5:
            return
        m = o < a
        h = tl.load(x_ptr + o).to(tl.float16)
    else:
        m = o < 2
        h = tl.full((BLOCK,), 3.0, tl.float16)
    tl.store(out_ptr + pid * BLOCK + o, h.to(tl.float32), mask=m)


@kiln.jit
def static_range_return_kernel(x_ptr, out_ptr, N: tl.constexpr):
    pid = tl.program_id(0)
    for k in tl.static_range(N):
        v = tl.load(x_ptr + pid * N + k)
        if v < 0:
            return
        tl.store(out_ptr + pid * N + k, v * 2)
    tl.store(out_ptr + pid * N, 100.0)


@kiln.jit
def while_return_kernel(x_ptr, out_ptr, n):
    pid = tl.program_id(0)
    i = 0
    acc = 0.0
    while i < n:
        v = tl.load(x_ptr + pid * n + i)
        if v < 0:
            return
        acc += v
        i += 1
    tl.store(out_ptr + pid, acc)


@pytest.mark.parametrize("device", DEVICES)
def test_exits_through_pointers_tiles_static_range_and_while(device):
    a = np.array([1, 1, -1, 0], np.int32)
    b = np.array([1, -1, 1, 5], np.int32)
    x = np.zeros(8, np.float32)
    res = run(pointer_on_one_path_kernel, (4,), [x, a, b], device)
    want = np.zeros(8, np.float32)
    for p in range(4):
        if a[p] > 0:
            if b[p] > 0:
                continue
            want[2 * p] = 1
        else:
            want[2 * p + 1] = 1
    np.testing.assert_array_equal(res[0], want)

    x = np.arange(8, dtype=np.float32)
    a = np.array([3, 9, 0, 1], np.int32)
    out = np.full(32, -1.0, np.float32)
    res = run(tiles_on_one_path_kernel, (4,), [x, a, out], device, BLOCK=8)
    want = np.full((4, 8), -1.0, np.float32)
    want[0, :3], want[2, :2], want[3, :1] = x[:3], 3.0, x[:1]
    np.testing.assert_array_equal(res[2].reshape(4, 8), want)

    x = np.array([[1, 2, 3, 4], [1, -2, 3, 4], [-1, 2, 3, 4], [1, 2, 3, -4]], np.float32)
    out = np.zeros(16, np.float32)
    res = run(static_range_return_kernel, (4,), [x, out], device, N=4)
    want = np.zeros((4, 4), np.float32)
    for p, row in enumerate(x):
        for k, v in enumerate(row):
            if v < 0:
                break
            want[p, k] = 2 * v
        else:
            want[p, 0] = 100
    np.testing.assert_array_equal(res[1].reshape(4, 4), want)

    out = np.full(4, -7.0, np.float32)
    res = run(while_return_kernel, (4,), [x, out, 4], device)
    np.testing.assert_array_equal(res[1], [r.sum() if (r >= 0).all() else -7 for r in x])


# --- break and continue ----------------------------------------------------------------------

@kiln.jit
def for_break_continue_kernel(x_ptr, out_ptr, n, stop, KIND: tl.constexpr):
    # Sums x[i] for i < n, skipping negative values, stopping at the first value > stop.
    pid = tl.program_id(0)
    base = x_ptr + pid * n
    total = 0.0
    count = 0
    if KIND == 0:
        for i in range(n):
            v = tl.load(base + i)
            if v > stop:
                break
            if v < 0:
                continue
            total += v
            count += 1
    elif KIND == 1:
        for i in tl.range(0, n, 1, num_stages=2):
            v = tl.load(base + i)
            if v < 0:
                continue
            if v > stop:
                break
            total += v
            count += 1
    else:
        i = 0
        while i < n:
            v = tl.load(base + i)
            i += 1
            if v < 0:
                continue
            if v > stop:
                break
            total += v
            count += 1
    tl.store(out_ptr + 2 * pid, total)
    tl.store(out_ptr + 2 * pid + 1, count.to(tl.float32))


def break_continue_ref(x, stop):
    out = []
    for row in x:
        total, count = 0.0, 0
        for v in row:
            if v > stop:
                break
            if v < 0:
                continue
            total += v
            count += 1
        out += [total, count]
    return np.array(out)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", [0, 1, 2], ids=["range", "tl.range", "while"])
def test_break_and_continue_with_accumulators(device, kind):
    x = np.random.default_rng(3).integers(-3, 9, (6, 20)).astype(np.float32)
    x[2] = 1.0  # never stops
    out = np.zeros(12, np.float32)
    res = run(for_break_continue_kernel, (6,), [x, out, 20, 6.5], device, KIND=kind)
    np.testing.assert_array_equal(res[1], break_continue_ref(x, 6.5))


@kiln.jit
def while_true_break_kernel(x_ptr, out_ptr, limit):
    # Walks a linked list stored as next indices until -1 or `limit` steps.
    pid = tl.program_id(0)
    node = pid
    steps = 0
    while True:
        nxt = tl.load(x_ptr + node)
        if nxt < 0:
            break
        steps += 1
        if steps >= limit:
            break
        node = nxt
    tl.store(out_ptr + 2 * pid, node)
    tl.store(out_ptr + 2 * pid + 1, steps)


@pytest.mark.parametrize("device", DEVICES)
def test_while_true_with_break(device):
    nxt = np.array([3, 0, -1, 5, 2, 2, 1, -1], np.int32)
    out = np.zeros(16, np.int32)
    res = run(while_true_break_kernel, (8,), [nxt, out, 4], device)
    want = []
    for p in range(8):
        node, steps = p, 0
        while True:
            if nxt[node] < 0:
                break
            steps += 1
            if steps >= 4:
                break
            node = nxt[node]
        want += [node, steps]
    np.testing.assert_array_equal(res[1], want)


@kiln.jit
def nested_break_kernel(x_ptr, out_ptr, rows, cols):
    # `break` in the inner loop leaves only the inner loop; `continue` in the outer loop.
    total = 0
    for r in range(rows):
        if r == 2:
            continue
        for c in range(cols):
            v = tl.load(x_ptr + r * cols + c)
            if v == 0:
                break
            total += v
        total += 1000
    tl.store(out_ptr, total)


@pytest.mark.parametrize("device", DEVICES)
def test_break_in_nested_loop_leaves_only_the_inner_loop(device):
    x = np.array([[1, 2, 0, 4], [5, 6, 7, 8], [9, 9, 9, 9], [0, 1, 1, 1], [2, 0, 3, 3]],
                 np.int32)
    out = np.zeros(1, np.int32)
    res = run(nested_break_kernel, (1,), [x, out, 5, 4], device)
    want = 0
    for r in range(5):
        if r == 2:
            continue
        for v in x[r]:
            if v == 0:
                break
            want += v
        want += 1000
    assert res[1][0] == want


@kiln.jit
def negative_step_break_kernel(x_ptr, out_ptr, n):
    # The last index (walking down) holding a negative value, or -1.
    found = -1
    for i in range(n - 1, -1, -1):
        if tl.load(x_ptr + i) < 0:
            found = i
            break
    tl.store(out_ptr, found)


@pytest.mark.parametrize("device", DEVICES)
def test_break_in_loop_with_negative_step(device):
    for x in ([1, -2, 3, -4, 5], [1, 2, 3], [-1, 2, 2]):
        x = np.array(x, np.float32)
        out = np.zeros(1, np.int32)
        res = run(negative_step_break_kernel, (1,), [x, out, len(x)], device)
        neg = np.nonzero(x < 0)[0]
        assert res[1][0] == (neg[-1] if len(neg) else -1)


@kiln.jit
def static_range_exits_kernel(x_ptr, out_ptr, STOP: tl.constexpr):
    pid = tl.program_id(0)
    a = 0.0
    for k in tl.static_range(8):  # constexpr exits: plain Python control flow
        if k == 1:
            continue
        if k == STOP:
            break
        a += tl.load(x_ptr + pid * 8 + k)
    b = 0.0
    for k in tl.static_range(8):  # run-time exits
        v = tl.load(x_ptr + pid * 8 + k)
        if v < 0:
            continue
        if v > 5:
            break
        b += v
    tl.store(out_ptr + 2 * pid, a)
    tl.store(out_ptr + 2 * pid + 1, b)


@pytest.mark.parametrize("device", DEVICES)
def test_break_and_continue_in_static_range(device):
    x = np.array([[1, 2, 3, 4, 5, 6, 7, 8], [-1, 2, -3, 9, 1, 1, 1, 1],
                  [6, 1, 1, 1, 1, 1, 1, 1], [0, -1, -1, -1, 2, 3, 4, 5]], np.float32)
    out = np.zeros(8, np.float32)
    res = run(static_range_exits_kernel, (4,), [x, out], device, STOP=5)
    want = []
    for row in x:
        a = sum(row[k] for k in range(5) if k != 1)
        b = 0.0
        for v in row:
            if v < 0:
                continue
            if v > 5:
                break
            b += v
        want += [a, b]
    np.testing.assert_array_equal(res[1], want)


@kiln.jit
def return_in_loop_kernel(x_ptr, out_ptr, n):
    # A bare return inside a loop (Triton rejects it; here it leaves the loop and the kernel).
    pid = tl.program_id(0)
    acc = 0
    for i in range(n):
        v = tl.load(x_ptr + pid * n + i)
        if v < 0:
            tl.store(out_ptr + pid, -acc)
            return
        acc += v
    tl.store(out_ptr + pid, acc)


@pytest.mark.parametrize("device", DEVICES)
def test_bare_return_inside_a_loop(device):
    x = np.array([[1, 2, 3, 4], [1, -1, 5, 5], [-2, 1, 1, 1], [5, 5, 5, -5]], np.int32)
    out = np.zeros(4, np.int32)
    res = run(return_in_loop_kernel, (4,), [x, out, 4], device)
    want = []
    for row in x:
        acc = 0
        for v in row:
            if v < 0:
                acc = -acc
                break
            acc += v
        want.append(acc)
    np.testing.assert_array_equal(res[1], want)


# --- the PTX for sm_90 ---------------------------------------------------------------------

@pytest.mark.parametrize("kernel,signature,constexprs", [
    (ignore_index_loss_kernel, {"x_ptr": "*fp32", "label_ptr": "*i32", "loss_ptr": "*fp32",
                                "total_ptr": "*fp32", "n_cols": "i32", "stride": "i32",
                                "ignore_index": "i32"}, {"BLOCK": 128}),
    (for_break_continue_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                 "stop": "fp32"}, {"KIND": 0}),
    (for_break_continue_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                 "stop": "fp32"}, {"KIND": 2}),
    (helpers_kernel, {"x_ptr": "*fp32", "c_ptr": "*i32", "out_ptr": "*fp32", "n": "i32"}, {}),
    (static_range_exits_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"STOP": 5}),
    (helper_paths_kernel, {"x_ptr": "*fp32", "c_ptr": "*i32", "d_ptr": "*i32",
                           "out_ptr": "*fp32"}, {}),
    (pointer_on_one_path_kernel, {"x_ptr": "*fp32", "a_ptr": "*i32", "b_ptr": "*i32"}, {}),
    (tiles_on_one_path_kernel, {"x_ptr": "*fp32", "a_ptr": "*i32", "out_ptr": "*fp32"},
     {"BLOCK": 128}),
    (nested_break_kernel, {"x_ptr": "*i32", "out_ptr": "*i32", "rows": "i32", "cols": "i32"},
     {}),
    (while_true_break_kernel, {"x_ptr": "*i32", "out_ptr": "*i32", "limit": "i32"}, {}),
    (return_in_loop_kernel, {"x_ptr": "*i32", "out_ptr": "*i32", "n": "i32"}, {}),
], ids=["ignore_index", "for_break", "while_break", "helpers", "static_range", "split_if",
        "pointer_zero", "tile_zeros", "nested_break", "while_true", "return_in_loop"])
def test_exits_compile_to_ptx_for_sm90(kernel, signature, constexprs):
    k = kiln.compile(kernel, signature=signature, constexprs=constexprs, target="sm_90a")
    ptx = k.asm["ptx"]
    assert ".target sm_90a" in ptx and f".entry {kernel.__name__}" in ptx
    assert re.search(r"@%p\d+ bra|bra(\.uni)? ", ptx)  # the exits are branches


# --- errors ---------------------------------------------------------------------------------

def expect_error(fn, message, signature, where=None, constexprs=None):
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(fn, signature=signature, constexprs=constexprs or {})
    err = info.value
    assert err.kernel == fn.__name__
    assert err.line == marker_line(where or fn), str(err)
    assert re.search(message, err.message), err.message
    return err


@kiln.jit
def int_or_float(c, x):
    if c > 0:
        return 1
    return x  # ERR


@kiln.jit
def returns_int_or_float_kernel(c, x_ptr):
    tl.store(x_ptr, int_or_float(c, tl.load(x_ptr)))


@kiln.jit
def tile_or_scalar(c, x_ptr):
    if c > 0:
        return tl.load(x_ptr + tl.arange(0, 4))
    else:
        return tl.load(x_ptr)  # ERR


@kiln.jit
def returns_tile_or_scalar_kernel(c, x_ptr):
    tl.store(x_ptr + tl.arange(0, 4), tile_or_scalar(c, x_ptr))


@kiln.jit
def value_or_nothing(c, x):
    if c > 0:
        return x
    if c < -5:
        return  # ERR


@kiln.jit
def value_or_nothing_kernel(c, x_ptr):
    tl.store(x_ptr, value_or_nothing(c, 1.0))


@kiln.jit
def may_fall_off(c, x):
    if c > 0:
        return x  # ERR
    x = x + 1


@kiln.jit
def may_fall_off_kernel(c, x_ptr):
    tl.store(x_ptr, may_fall_off(c, tl.load(x_ptr)))


@kiln.jit
def value_return_in_loop(n, x):
    for i in range(n):
        if i == x:
            return i  # ERR
    return -1


@kiln.jit
def value_return_in_loop_kernel(n, x_ptr):
    tl.store(x_ptr, value_return_in_loop(n, 3))


@kiln.jit
def kernel_returns_value_late(n, x_ptr):
    if n > 0:
        return n  # ERR


@kiln.jit
def returns_dtype(c, x):
    if c > 0:
        return tl.float32  # ERR
    return tl.float16


@kiln.jit
def returns_dtype_kernel(c, x_ptr):
    tl.store(x_ptr, tl.load(x_ptr).to(returns_dtype(c, 1)))


@kiln.jit
def constexpr_after_exit_kernel(n, x_ptr):
    s: tl.constexpr = 3
    if n > 0:
        return
    tl.store(x_ptr, 1.0)
    s = 4  # ERR


@kiln.jit
def exits_by_constexpr_kernel(c, x_ptr, SKIP: tl.constexpr):
    if c > 0:
        if SKIP:
            return
        y = 1.0
    else:
        y = 2.0
    tl.store(x_ptr, y)  # ERR


SIG = {"c": "i32", "x_ptr": "*fp32"}


@pytest.mark.parametrize("kernel,where,message", [
    (returns_int_or_float_kernel, int_or_float,
     r"'int_or_float' returns int32 at line \d+ but fp32 here: every return of a function "
     r"must give the same types and shapes"),
    (returns_tile_or_scalar_kernel, tile_or_scalar,
     r"returns fp32\[4\] at line \d+ but fp32 here"),
    (value_or_nothing_kernel, value_or_nothing, r"returns fp32 at line \d+ but nothing here"),
    (may_fall_off_kernel, may_fall_off,
     r"'may_fall_off' returns a value at line \d+ but can reach its end without returning one"),
    (returns_dtype_kernel, returns_dtype,
     r"a value returned under a run-time condition must be a tensor or a tuple of tensors, "
     r"found dtype fp32"),
], ids=["int_vs_float", "tile_vs_scalar", "value_vs_nothing", "falls_off_end", "dtype"])
def test_returned_value_errors(kernel, where, message):
    expect_error(kernel, message, SIG, where=where)


def test_value_return_inside_loop_is_an_error():
    expect_error(value_return_in_loop_kernel,
                 r"'return' with a value inside a run-time loop is not supported",
                 {"n": "i32", "x_ptr": "*i32"}, where=value_return_in_loop)


def test_kernel_cannot_return_a_value_under_a_condition():
    expect_error(kernel_returns_value_late, r"a kernel cannot return a value",
                 {"n": "i32", "x_ptr": "*fp32"})


def test_constexpr_reassigned_after_an_exit():
    expect_error(constexpr_after_exit_kernel, r"cannot reassign 's' \(constexpr 3\)",
                 {"n": "i32", "x_ptr": "*fp32"})


# --- a differential fuzz slice (test/fuzz/exits_fuzz.py: random programs against Python) ---

def _exits_fuzz():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fuzz"))
    import exits_fuzz
    return exits_fuzz


@pytest.mark.parametrize("device,count", [("cpu", 80), pytest.param("gpu", 40,
                                                                    marks=pytest.mark.gpu)])
def test_random_programs_agree_with_python(device, count, tmp_path):
    fz = _exits_fuzz()
    bad = [why for seed in range(count) if (why := fz.check(seed, str(tmp_path), device))]
    assert not bad, "\n".join(bad)


def test_random_programs_compile_to_ptx_for_sm90(tmp_path):
    fz = _exits_fuzz()
    for seed in range(0, 40, 4):
        kernel, _ = fz.load(seed, str(tmp_path))
        k = kiln.compile(kernel, signature={"x_ptr": "*i32", "out_ptr": "*i32"}, constexprs={},
                         target="sm_90a")
        assert ".entry kernel" in k.asm["ptx"]


def test_name_after_a_branch_that_exits_by_a_constexpr():
    # Valid Python that Kiln cannot carry (the exiting branch is built first and only its
    # build shows the exit): a clear error where the name is read; without SKIP it works.
    expect_error(exits_by_constexpr_kernel, r"'y' is assigned by the if at line \d+ only on the "
                 r"path that does not exit, and Kiln could not carry it out of the if; define "
                 r"'y' before the if", SIG, constexprs={"SKIP": True})
    x = np.zeros(1, np.float32)
    exits_by_constexpr_kernel[(1,)](1, x, SKIP=False, **CPU)
    assert x[0] == 1.0


# --- names given another type after an early return -------------------------------------

@kiln.jit
def retype_after_return(x_ptr, out_ptr, n, m, BLOCK: tl.constexpr, NESTED: tl.constexpr):
    # flash-attention's rotary kernel: return past the end, then the pointer becomes a block
    # of pointers and a scalar another type; the returned path never reads them
    pid = tl.program_id(0)
    s = 0
    if NESTED:
        if m > 0:
            if pid * BLOCK >= n:
                return
    else:
        if pid * BLOCK >= n:
            return
    x_ptr = x_ptr + pid * BLOCK + tl.arange(0, BLOCK)
    s = tl.load(out_ptr + n) * 0.5
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), tl.load(x_ptr) * 2 + s)


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("device", DEVICES)
def test_name_retyped_after_an_early_return(device, nested):
    n, block = 16, 8
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n + 1, np.float32)  # out[n] = 0: s adds nothing; program 2 returns
    (out,) = run(retype_after_return, (3,), [x, out], device, n=n, m=1, BLOCK=block,
                 NESTED=nested)[1:]
    np.testing.assert_array_equal(out[:n], 2 * x)


@kiln.jit
def retype_after_break(x_ptr, out_ptr, n):
    v = 0
    for i in range(n):
        if i == 2:  # ERR
            break
        v = tl.load(x_ptr + i) * 1.5
    tl.store(out_ptr, v)


def test_name_retyped_after_a_break_is_still_an_error():
    # After a break the value from before the if leaves the loop: both types meet (Triton
    # rejects the loop-carried int32 becoming fp32 too)
    expect_error(retype_after_break, r"has type int32 in the then branch but fp32 in the "
                 r"else branch|has type fp32 in the then branch but int32 in the else branch",
                 {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, where=retype_after_break)
