"""Specialization (Triton's rules), computed by the C++ launch path: kernel.warmup(...)
binds the arguments, computes the key and compiles a missing variant without launching, so
these run without a GPU (KILN_ARCH=sm_90 from conftest) on objects exposing
__cuda_array_interface__ with made-up addresses."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

import kiln
import kiln.language as tl


class FakeArray:
    """Device memory as __cuda_array_interface__ describes it (never dereferenced here)."""

    def __init__(self, ptr, typestr="<f4", n=1024):
        self.__cuda_array_interface__ = {"data": (ptr, False), "typestr": typestr,
                                         "shape": (n,), "version": 3}


ALIGNED, UNALIGNED = 0x7F0000000000, 0x7F0000000004


def fresh_kernel():
    @kiln.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) +
                 tl.load(y_ptr + offs, mask=mask), mask=mask)
    return add


def args(ptr=ALIGNED, typestr="<f4"):
    return [FakeArray(ptr, typestr) for _ in range(3)]


def test_integer_specialization():
    k = fresh_kernel()
    c16 = k.warmup(*args(), 1024, BLOCK=128, grid=(1,))
    assert c16.signature["n"] == "i32:16"
    assert k.num_variants == 1
    k.warmup(*args(), 2048, BLOCK=128)  # also divisible by 16: same variant
    assert k.num_variants == 1
    c = k.warmup(*args(), 1000, BLOCK=128)
    assert c.signature["n"] == "i32" and k.num_variants == 2
    one = k.warmup(*args(), 1, BLOCK=128)
    assert "n" not in one.signature  # == 1 becomes a constant, as in Triton
    assert k.num_variants == 3
    big = k.warmup(*args(), 1 << 40, BLOCK=128)
    assert big.signature["n"] == "i64:16"
    neg = k.warmup(*args(), -7, BLOCK=128)
    assert neg.signature["n"] == "i32"


def test_pointer_alignment_and_dtype():
    k = fresh_kernel()
    a = k.warmup(*args(ALIGNED), 100, BLOCK=64)
    assert a.signature["x_ptr"] == "*fp32:16"
    assert "ld.global.v4" not in a.asm["ptx"] or True
    b = k.warmup(*args(UNALIGNED), 100, BLOCK=64)
    assert b.signature["x_ptr"] == "*fp32"
    h = k.warmup(*args(ALIGNED, "<f2"), 100, BLOCK=64)
    assert h.signature["x_ptr"] == "*fp16:16"
    assert k.num_variants == 3
    assert "tensor<64xf16>" in h.asm["kiln"]


def test_constexpr_and_launch_options_are_in_the_key():
    k = fresh_kernel()
    k.warmup(*args(), 1024, BLOCK=128)
    k.warmup(*args(), 1024, BLOCK=256)
    k.warmup(*args(), 1024, BLOCK=256, num_warps=8)
    k.warmup(*args(), 1024, BLOCK=256, num_warps=8, num_stages=2)
    assert k.num_variants == 4
    k.warmup(*args(), 1024, BLOCK=256, num_warps=8, num_stages=2)
    assert k.num_variants == 4


def test_do_not_specialize():
    @kiln.jit(do_not_specialize=["n"])
    def k(x_ptr, n, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), n.to(tl.float32))
    a = k.warmup(FakeArray(ALIGNED), 1024, BLOCK=16)
    b = k.warmup(FakeArray(ALIGNED), 1, BLOCK=16)
    assert a.signature["n"] == "i32" and b.signature["n"] == "i32"
    assert k.num_variants == 1


def test_scalar_kinds():
    @kiln.jit
    def k(x_ptr, f, b, none_arg, BLOCK: tl.constexpr):
        v = tl.full([BLOCK], f, tl.float32)
        if none_arg is None:
            v = v + 1
        if b:
            v = v * 2
        tl.store(x_ptr + tl.arange(0, BLOCK), v)
    c = k.warmup(FakeArray(ALIGNED), 2.5, True, None, BLOCK=16)
    assert c.signature == {"x_ptr": "*fp32:16", "f": "fp32", "b": "i1"}
    assert c.constants == {"BLOCK": 16, "none_arg": None}


def test_numpy_scalars_are_scalars():
    # np.int64 (np.prod(shape), an element of a shape array), np.float32 and np.bool_ are the
    # scalars they hold, specialized as such (they were read as 0-d arrays: pointers).
    np = pytest.importorskip("numpy")

    @kiln.jit
    def k(x_ptr, n, f, b, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        v = tl.full([BLOCK], f, tl.float32)
        if b:
            v = v * 2
        tl.store(x_ptr + o, v, mask=o < n)
    c = k.warmup(FakeArray(ALIGNED), np.prod(np.array([4, 8])), np.float32(2.5), np.bool_(True),
                 BLOCK=64)
    assert c.signature == {"x_ptr": "*fp32:16", "n": "i32:16", "f": "fp32", "b": "i1"}
    assert k.warmup(FakeArray(ALIGNED), np.int64(1), 1.0, False, BLOCK=64).constants["n"] == 1
    assert k.warmup(FakeArray(ALIGNED), np.int32(7), np.float64(1.0), np.bool_(False),
                    BLOCK=64).signature["n"] == "i32"
    assert k.warmup(FakeArray(ALIGNED), np.uint64(2**40 + 1), 1.0, False,
                    BLOCK=64).signature["n"] == "i64"
    with pytest.raises(TypeError, match="argument 'f' is a numpy scalar of type"):
        k.warmup(FakeArray(ALIGNED), 8, np.complex64(1), False, BLOCK=64)
    x = np.zeros(8, np.float32)  # and launched on the CPU backend
    k[(1,)](x, np.int64(5), np.float32(1.5), np.bool_(False), BLOCK=8, device="cpu")
    np.testing.assert_array_equal(x, [1.5] * 5 + [0.0] * 3)


def test_log_compiles_says_what_changed(capfd, monkeypatch):
    monkeypatch.setenv("KILN_LOG_COMPILES", "1")
    k = fresh_kernel()
    k.warmup(*args(), 1024, BLOCK=128)
    k.warmup(*args(), 1000, BLOCK=128)
    k.warmup(*args(), 1000, BLOCK=64)
    k.warmup(*args(UNALIGNED), 1000, BLOCK=64, num_warps=2)
    err = capfd.readouterr().err.splitlines()
    lines = [line for line in err if line.startswith("kiln: compiled add")]
    assert len(lines) == 4
    assert "first variant" in lines[0] and "n=i32:16" in lines[0]
    assert "n i32:16 -> i32 (specialization)" in lines[1]
    assert "BLOCK int:128 -> int:64 (constexpr)" in lines[2]
    assert "x_ptr *fp32:16 -> *fp32 (specialization)" in lines[3]
    assert "num_warps 4 -> 2 (launch option)" in lines[3]
    assert k.compile_log[1] == lines[1]


def test_binding_errors():
    k = fresh_kernel()
    with pytest.raises(TypeError, match="missing argument 'BLOCK'"):
        k.warmup(*args(), 1024)
    with pytest.raises(TypeError, match="takes 5 arguments, got 6"):
        k.warmup(*args(), 1024, 16, 17)
    with pytest.raises(TypeError, match="unexpected keyword argument 'BLOK'"):
        k.warmup(*args(), 1024, BLOK=16)
    with pytest.raises(TypeError, match="multiple values for argument 'n'"):
        k.warmup(*args(), 1024, n=3, BLOCK=16)
    with pytest.raises(TypeError, match=r"argument 'x_ptr': expected a tensor .* found list"):
        k.warmup([1, 2], *args()[1:], 1024, BLOCK=16)
    with pytest.raises(TypeError, match="does not fit 64 bits"):
        k.warmup(*args(), 1 << 70, BLOCK=16)


def test_defaults_and_keyword_arguments():
    @kiln.jit
    def k(x_ptr, n, scale=2.0, BLOCK: tl.constexpr = 32):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * scale, mask=offs < n)
    c = k.warmup(x_ptr=FakeArray(ALIGNED), n=5)
    assert c.constants == {"BLOCK": 32} and c.signature["scale"] == "fp32"


def test_grid_callable_sees_the_meta_parameters():
    k = fresh_kernel()
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (0,)
    k[grid](*args(), 1000, BLOCK=256)
    assert seen["BLOCK"] == 256 and seen["n"] == 1000


def test_changed_constexpr_global_is_detected(tmp_path):
    src = textwrap.dedent("""
        import kiln
        import kiln.language as tl
        SCALE = tl.constexpr(2)

        @kiln.jit
        def k(x_ptr):
            tl.store(x_ptr, SCALE * 1.0)
    """)
    path = tmp_path / "kglobals.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("kglobals", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.k.warmup(FakeArray(ALIGNED))
    mod.SCALE = tl.constexpr(3)
    with pytest.raises(ValueError, match="global 'SCALE' changed since the kernel was compiled"):
        mod.k.warmup(FakeArray(ALIGNED))


def _load(tmp_path, name, src):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(src))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cache_key_covers_callees(tmp_path):
    body = """
        import kiln
        import kiln.language as tl

        @kiln.jit
        def helper(x):
            return x * {factor}

        @kiln.jit
        def k(x_ptr):
            tl.store(x_ptr, helper(tl.load(x_ptr)))
    """
    a = _load(tmp_path, "ka", body.format(factor=2))
    b = _load(tmp_path, "kb", body.format(factor=3))
    c = _load(tmp_path, "kc", body.format(factor=2))
    assert a.k.cache_key != b.k.cache_key
    assert a.k.cache_key == c.k.cache_key  # same sources, same key (file path not included)


def test_fresh_process_reuses_the_ir_cache(tmp_path):
    """A second process finds the kernel's IR (and the runtime's binary) in the disk cache."""
    mod = tmp_path / "kwarm.py"
    mod.write_text(textwrap.dedent("""
        import kiln
        import kiln.language as tl

        class A:
            def __init__(self, p):
                self.__cuda_array_interface__ = {"data": (p, False), "typestr": "<f4",
                                                 "shape": (4,), "version": 3}

        @kiln.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)

        k.warmup(A(1 << 40), 100, BLOCK=64)
        print(k.compile_log[0])
        print(kiln._C.jit_stats())
    """))
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path / "cache"), KILN_ARCH="sm_90",
               PYTHONPATH=os.pathsep.join(sys.path))
    first = subprocess.run([sys.executable, str(mod)], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    second = subprocess.run([sys.executable, str(mod)], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert "(built)" in first.stdout and "'compiles': 1" in first.stdout
    assert "(IR from the disk cache)" in second.stdout
    assert "'disk_hits': 1" in second.stdout and "'compiles': 0" in second.stdout


def test_jit_variants_expose_their_asm():
    k = fresh_kernel()
    c = k.warmup(*args(), 1024, BLOCK=512)  # 4 warps: 4 fp32 per thread, one 128-bit access
    assert "kiln.divisibility = 16" in c.asm["kiln"]
    assert "ptx" in c.asm and "ld.global.v4.b32" in c.asm["ptx"]
    assert {"kiln", "llvm", "ptx"} <= set(c.asm)
    assert c.metadata.num_warps == 4 and c.handle.name == "add"


def test_nested_kernel_sees_the_variables_it_closes_over():
    # Names resolve as in Triton (globals and closure variables): a kernel defined in a
    # function calls a @jit helper and reads a constexpr of that function; the captured value
    # is checked at each launch like a global's.
    np = pytest.importorskip("numpy")

    def make():
        SCALE = tl.constexpr(3)

        @kiln.jit
        def helper(x):
            return x + 1

        @kiln.jit
        def k(p):
            tl.store(p, helper(SCALE))

        def rescale(v):
            nonlocal SCALE
            SCALE = v
        return k, rescale
    k, rescale = make()
    z = np.zeros(1, np.int32)
    k[(1,)](z, device="cpu")
    assert z[0] == 4
    rescale(tl.constexpr(5))
    with pytest.raises(ValueError, match="global 'SCALE' changed since the kernel was compiled"):
        k[(1,)](z, device="cpu")
