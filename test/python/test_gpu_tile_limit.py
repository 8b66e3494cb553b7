"""A tile too large for GPU registers (more than 1024 elements per thread) is a
CompilationError at its line on the GPU path (compiling it took minutes: the front-end
fuzzer's only hangs), while the CPU backend compiles and runs it (large tiles live in memory
there)."""
import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import marker_line


@kiln.jit
def copy_rows(x_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]  # ERR
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32"}


def test_too_many_elements_per_thread_is_an_error_at_the_line():
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(copy_rows, signature=SIG, constexprs={"R": 16, "C": 65536},
                     target="sm_90", num_warps=4)
    err = info.value
    assert err.kernel == "copy_rows" and err.line == marker_line(copy_rows)
    assert "8192 elements per thread on 4 warps" in err.message
    assert "more warps" in err.message


def test_at_the_limit_compiles():
    k = kiln.compile(copy_rows, signature=SIG, constexprs={"R": 16, "C": 2048},
                     target="sm_90", num_warps=4)
    assert "ld.global" in k.asm["ptx"]


def test_the_cpu_backend_runs_it():
    x = np.arange(16 * 65536, dtype=np.float32)
    y = np.zeros_like(x)
    copy_rows[(1,)](x, y, R=16, C=65536, device="cpu")
    np.testing.assert_array_equal(x, y)
