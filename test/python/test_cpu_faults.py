"""A kernel that touches memory it does not own, on the CPU backend, raises kiln.KilnError and
the process goes on to run the next kernel correctly. The three mutants of issue 25 (offsets
shifted below a buffer, int32 offsets that wrap negative, a store before a buffer):
- launched from Python (which passes every array's memory), in normal mode, each access's span
  is checked against the arrays and the stray one stops at its line before it happens, on
  ordinary heap arrays and on arrays fenced by unmapped address space alike;
- launched with raw addresses and no buffer list (as the C++ API can), nothing is checked, the
  stray access faults on the fenced arrays, and the fault guard names the kernel, the program,
  the address.
A fault outside kernel code is still fatal, as before."""
import ctypes
import inspect
import mmap
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.language as tl

# Every int32 element offset of a 4-byte element lies within 8 GiB of its base.
FENCE = 8 << 30
PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_PROT_NONE, _MAP_NORESERVE = 0, 0x4000  # <sys/mman.h> (Linux)
_kept = []  # fenced regions live as long as the test process


def fenced(n, dtype=np.float32):
    """A numpy array of n elements with FENCE bytes of inaccessible address space on each
    side, its data ending at a page boundary (so one element past the end faults too)."""
    dtype = np.dtype(dtype)
    data = (n * dtype.itemsize + PAGE - 1) // PAGE * PAGE
    total = FENCE + data + FENCE
    base = _libc.mmap(None, total, _PROT_NONE,
                      mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
    if base in (None, ctypes.c_void_p(-1).value):
        pytest.skip("cannot reserve fenced address space")
    start = base + FENCE
    assert _libc.mprotect(start, data, mmap.PROT_READ | mmap.PROT_WRITE) == 0
    _kept.append((base, total))
    end = start + data
    raw = (ctypes.c_char * (n * dtype.itemsize)).from_address(end - n * dtype.itemsize)
    return np.frombuffer(raw, dtype=dtype)


@kiln.jit
def shifted_load(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # Mutant 1: offsets start one block early; the mask lets the negative ones through.
    pid = tl.program_id(0)
    offs = pid * BLOCK - BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), x, mask=pid * BLOCK + tl.arange(0, BLOCK) < n)


@kiln.jit
def wrapped_offsets(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # Mutant 2: `<<` where `+` was meant: pid * BLOCK << k wraps to negative int32 offsets.
    pid = tl.program_id(0)
    offs = pid * BLOCK << tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    good = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + good, x, mask=good < n)


@kiln.jit
def shifted_store(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # Mutant 3: the store's offsets start one block early (on the heap this corrupts memory
    # silently and the process dies later, far from the kernel).
    pid = tl.program_id(0)
    good = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + good, mask=good < n)
    offs = good - BLOCK
    tl.store(out_ptr + offs, x, mask=offs < n)


@kiln.jit
def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def copy_still_works():
    """The process goes on: a correct kernel right after the fault gives the right answer."""
    n = 10_000
    x = np.random.default_rng(1).random(n, dtype=np.float32)
    out = np.full(n, np.nan, np.float32)
    copy[(kiln.cdiv(n, 256),)](x, out, n, BLOCK=256, device="cpu")
    np.testing.assert_array_equal(out, x * 2)


def line_of(kernel, text):
    """The file line of the first line of `kernel`'s source containing `text`."""
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


CASES = [(shifted_load, "x_ptr", "load", "tl.load"), (wrapped_offsets, "x_ptr", "load", "tl.load"),
         (shifted_store, "out_ptr", "store", "tl.store")]
IDS = ["shifted_load", "wrapped_offsets", "shifted_store"]


@pytest.mark.parametrize("kernel,arg,kind,line", CASES, ids=IDS)
@pytest.mark.parametrize("grid", [2, 64])
def test_stray_access_is_an_error_at_its_line_and_the_process_goes_on(kernel, arg, kind, line,
                                                                      grid):
    """Normal mode: every access checks the span of its lanes against the launch's arrays, so
    the stray access is stopped before it happens, on ordinary heap arrays too."""
    n = 64 * 1024
    for x, out in ((fenced(n), fenced(n)), (np.ones(n, np.float32), np.zeros(n, np.float32))):
        with pytest.raises(kiln.KilnError) as e:
            kernel[(grid,)](x, out, n, BLOCK=1024, device="cpu")
        msg = str(e.value)
        name = kernel.fn.__name__
        where = f"test_cpu_faults.py:{line_of(kernel, line)}:"
        assert where in msg and f"in kernel '{name}'" in msg, msg
        # The nearest array is named: `arg` on fenced memory, maybe its heap neighbour else.
        nearest = f"argument '{arg}'" if isinstance(x.base, ctypes.Array) else "argument '"
        assert f"out-of-bounds {kind}" in msg and nearest in msg, msg
        copy_still_works()


@pytest.mark.parametrize("kernel,arg,kind,line", CASES, ids=IDS)
def test_memory_fault_without_buffer_information_is_an_error(kernel, arg, kind, line):
    """Launched with raw addresses and no buffer list (the C++ API can), the stray access is
    not checked and faults: the fault guard turns it into an error naming the kernel, the
    program and the address; the process goes on."""
    n = 64 * 1024
    x, out = fenced(n), fenced(n)
    # Compile (a harmless launch), then launch the same variant with raw addresses.
    compiled = kernel[(0,)](x, out, n, BLOCK=1024, device="cpu")
    args = [x.ctypes.data, out.ctypes.data, n]
    with pytest.raises(kiln.KilnError) as e:
        compiled.handle.launch_host([64, 1, 1], args)
    msg = str(e.value)
    assert f"kernel '{kernel.fn.__name__}'" in msg and "memory fault (SIGSEGV)" in msg, msg
    assert "in program (" in msg and "KILN_DEBUG=1" in msg, msg
    copy_still_works()


def test_fault_on_every_worker_thread_of_a_large_grid():
    """Every program faults, on all threads at once (raw launch, no buffer list): one error."""
    n = 1 << 20
    x, out = fenced(n), fenced(n)
    compiled = shifted_store[(0,)](x, out, n, BLOCK=64, device="cpu")
    with pytest.raises(kiln.KilnError, match="memory fault"):
        compiled.handle.launch_host([n // 64, 1, 1], [x.ctypes.data, out.ctypes.data, n])
    copy_still_works()


def test_debug_mode_names_the_line_on_ordinary_heap_arrays():
    """Debug mode catches the stray store before it lands, with the source line, on arrays
    where normal mode could not see it (the hard case: heap memory of another allocation)."""
    n = 4096
    x = np.ones(n, np.float32)
    out = np.zeros(n, np.float32)
    with pytest.raises(kiln.KilnError) as e:
        shifted_store[(4,)](x, out, n, BLOCK=1024, device="cpu", debug=True)
    msg = str(e.value)
    # The nearest array is named: out_ptr, or x_ptr when the heap put it right before out.
    assert "test_cpu_faults.py" in msg and "out-of-bounds store" in msg, msg
    assert "buffer argument 'out_ptr'" in msg or "buffer argument 'x_ptr'" in msg, msg
    copy_still_works()


CHILD = r"""
import ctypes, sys
import numpy as np
import kiln, kiln.language as tl
sys.path.insert(0, sys.argv[1])
from test_cpu_faults import copy
x = np.ones(1000, np.float32); out = np.zeros(1000, np.float32)
copy[(4,)](x, out, 1000, BLOCK=256, device="cpu")   # Kiln's handler is installed now
assert (out == 2).all()
print("launched", flush=True)
ctypes.string_at(8)  # a fault in Python's own code: not a kernel's
print("survived", flush=True)
"""


def test_a_fault_outside_kernel_code_is_not_swallowed():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", CHILD, os.path.dirname(__file__)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert "launched" in r.stdout and "survived" not in r.stdout, r.stdout + r.stderr
    assert r.returncode == -11, (r.returncode, r.stderr[-2000:])


def test_debug_mode_names_the_line_of_an_int32_wrap():
    """The wrap that produced mutant 2's negative offsets fails the launch in debug mode at
    the line of the shift, before any access; arithmetic that wraps outside addresses (a hash)
    and int32 offsets that stay in range are not flagged."""
    n = 1 << 16
    x, out = np.ones(n, np.float32), np.zeros(n, np.float32)
    with pytest.raises(kiln.KilnError) as e:
        wrapped_offsets[(64,)](x, out, n, BLOCK=1024, device="cpu", debug=True)
    msg = str(e.value)
    where = f"test_cpu_faults.py:{line_of(wrapped_offsets, 'offs = pid * BLOCK <<')}:"
    assert where in msg and "int32 overflow in address arithmetic" in msg, msg
    assert "kernel 'wrapped_offsets'" in msg, msg
    hashed = np.zeros(4096, np.int32)
    hash_store[(4,)](hashed, BLOCK=1024, device="cpu", debug=True)
    i = np.arange(4096, dtype=np.int64)
    np.testing.assert_array_equal(hashed, ((i * -1640531535) & 0xFFFFFFFF).astype(np.uint32)
                                  .view(np.int32))
    copy_still_works()


@kiln.jit
def hash_store(out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    h = offs * -1640531535  # wraps on purpose: not an address
    tl.store(out_ptr + offs, h)


@kiln.jit
def divide_by_lane(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) // (offs % 4), mask=mask)


@kiln.jit
def divide_offsets(out_ptr, BLOCK: tl.constexpr):
    # An offset divided by a lane index that starts at 0: the fuzzer's mutant 1:457, which
    # looped forever on the CPU backend before divisions were guarded.
    offs = tl.program_id(0) * BLOCK // tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + offs % 16, 1)


def test_integer_division_by_zero_is_no_trap_and_an_error_in_debug_mode():
    """x // 0 is undefined (Triton's rule): on the CPU backend it gives some value instead of
    SIGFPE or an endless loop; debug mode fails at the line of the division."""
    n = 64
    x = np.arange(n, dtype=np.int32)
    out = np.full(n, -1, np.int32)
    divide_by_lane[(1,)](x, out, n, BLOCK=64, device="cpu")
    nonzero = np.arange(n) % 4 != 0
    np.testing.assert_array_equal(out[nonzero], x[nonzero] // (np.arange(n) % 4)[nonzero])
    counts = np.zeros(16, np.int32)
    divide_offsets[(4,)](counts, BLOCK=64, device="cpu")
    assert counts.sum() == 256
    with pytest.raises(kiln.KilnError) as e:
        divide_by_lane[(1,)](x, out, n, BLOCK=64, device="cpu", debug=True)
    msg = str(e.value)
    assert "test_cpu_faults.py" in msg and "integer division by zero" in msg, msg
    assert "kernel 'divide_by_lane'" in msg, msg
    copy_still_works()


@kiln.jit
def _long_unmasked_loop(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):  # n far past x: the mask lets every lane through
        cols = start + tl.arange(0, BLOCK) + 1  # (+ 1: no whole-loop range check applies)
        acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@kiln.jit
def _long_loop_assert(out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for i in range(0, n):
        tl.device_assert(i < 3, "i stays below 3")
        acc += 1
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)


def test_a_program_stops_at_its_first_stray_access_and_failed_assert():
    # (fuzz mutant 55:409) A loop of 2^40 / 32 steps whose loads leave x at the first step:
    # the program stops there (before, the stray lanes were masked off and the loop ran on
    # for hours before the error was raised). A failed device_assert stops it too, as on the
    # GPU. Each comes back in well under a second of kernel time, and the next launch is right.
    x = np.ones(600, np.float32)
    out = np.zeros(32, np.float32)
    src, first = inspect.getsourcelines(_long_unmasked_loop.fn)
    line = first + next(i for i, t in enumerate(src) if "acc += tl.load" in t)
    with pytest.raises(kiln.KilnError, match=rf":{line}:\d+: error: in kernel "
                       r"'_long_unmasked_loop': out-of-bounds load in program \(0, 0, 0\)"):
        _long_unmasked_loop[(4,)](x, out, 2 ** 40, BLOCK=32, device="cpu")
    o = np.zeros(16, np.int32)
    with pytest.raises(kiln.KilnError, match=r"device_assert failed in program \(\d, 0, 0\): "
                       r"i stays below 3"):
        _long_loop_assert[(4,)](o, 2 ** 40, BLOCK=16, device="cpu", debug=True)
    _long_unmasked_loop[(1,)](x, out, 600, BLOCK=32, device="cpu")
    want = [sum(1 for s in range(0, 600, 32) if s + i + 1 < 600) for i in range(32)]
    np.testing.assert_array_equal(out, np.array(want, np.float32))
