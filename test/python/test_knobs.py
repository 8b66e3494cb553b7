"""kiln.knobs (Triton's triton.knobs for the settings Kiln has): each knob reads and writes the
environment variable Kiln's code reads where it needs it, so a knob set from Python changes
what the next launch or compile does; scope() and reset() put the variables back."""
import os

import numpy as np
import pytest

import kiln
import kiln.language as tl

KNOBS = [("cache", "dir", "KILN_CACHE_DIR"),
         ("compilation", "allow_non_constexpr_globals", "KILN_ALLOW_NON_CONSTEXPR_GLOBALS"),
         ("compilation", "log_compiles", "KILN_LOG_COMPILES"),
         ("compilation", "libdevice_path", "KILN_LIBDEVICE"),
         ("compilation", "tma_pointer_tiles", "KILN_TMA_POINTER_TILES"),
         ("compilation", "tma_attention_tiles", "KILN_TMA_ATTENTION_TILES"),
         ("autotuning", "print", "KILN_PRINT_AUTOTUNING"),
         ("runtime", "debug", "KILN_DEBUG"),
         ("runtime", "backend", "KILN_BACKEND"),
         ("runtime", "override_arch", "KILN_ARCH"),
         ("runtime", "cpu_threads", "KILN_CPU_THREADS")]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for _, _, key in KNOBS:
        monkeypatch.delenv(key, raising=False)


def test_every_knob_names_its_variable_and_has_a_default():
    for group, name, key in KNOBS:
        g = getattr(kiln.knobs, group)
        assert g.knob_descriptors[name].key == key
        assert name in g.knobs
    assert kiln.knobs.runtime.debug is False and kiln.knobs.autotuning.print is True
    assert kiln.knobs.runtime.backend is None and kiln.knobs.runtime.cpu_threads is None
    assert kiln.knobs.cache.dir.endswith(os.path.join("", "kiln"))
    assert kiln.knobs.compilation.tma_pointer_tiles is True
    assert kiln.knobs.compilation.tma_attention_tiles is True


def test_setting_a_knob_writes_its_variable_and_reading_follows_it(monkeypatch):
    kiln.knobs.runtime.debug = True
    assert os.environ["KILN_DEBUG"] == "1" and kiln.knobs.runtime.debug is True
    kiln.knobs.runtime.debug = False
    assert os.environ["KILN_DEBUG"] == "0" and kiln.knobs.runtime.debug is False
    monkeypatch.setenv("KILN_DEBUG", "yes")  # Kiln's launcher: anything but "" and "0" is on
    assert kiln.knobs.runtime.debug is True
    kiln.knobs.runtime.cpu_threads = 3
    assert os.environ["KILN_CPU_THREADS"] == "3" and kiln.knobs.runtime.cpu_threads == 3
    kiln.knobs.runtime.cpu_threads = None
    assert "KILN_CPU_THREADS" not in os.environ
    monkeypatch.setenv("KILN_ALLOW_NON_CONSTEXPR_GLOBALS", "2")  # the front end: only "1"
    assert kiln.knobs.compilation.allow_non_constexpr_globals is False
    kiln.knobs.runtime.backend = "cpu"
    del kiln.knobs.runtime.backend
    assert "KILN_BACKEND" not in os.environ
    kiln.knobs.runtime.override_arch = kiln.knobs.env  # Triton's: the environment decides
    assert "KILN_ARCH" not in os.environ


def test_wrong_types_are_errors_naming_the_knob(monkeypatch):
    with pytest.raises(TypeError, match=r"kiln.knobs.runtime.cpu_threads \(KILN_CPU_THREADS\) "
                                        r"expects a int or None, found str"):
        kiln.knobs.runtime.cpu_threads = "4"
    with pytest.raises(TypeError, match=r"kiln.knobs.runtime.debug \(KILN_DEBUG\) expects a "
                                        r"bool"):
        kiln.knobs.runtime.debug = 1
    monkeypatch.setenv("KILN_CPU_THREADS", "many")
    with pytest.raises(ValueError, match="KILN_CPU_THREADS='many' is not an int"):
        kiln.knobs.runtime.cpu_threads


def test_scope_and_reset_put_the_variables_back():
    with kiln.knobs.runtime.scope():
        kiln.knobs.runtime.debug = True
        kiln.knobs.runtime.backend = "cpu"
        assert os.environ["KILN_BACKEND"] == "cpu"
    assert "KILN_DEBUG" not in os.environ and "KILN_BACKEND" not in os.environ
    kiln.knobs.autotuning.print = False
    kiln.knobs.autotuning.reset()
    assert "KILN_PRINT_AUTOTUNING" not in os.environ


SCALE = 3.0  # a non-constexpr global


@kiln.jit
def scaled_copy(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * SCALE)


@kiln.jit
def checked_copy(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.device_assert(x < 10, "x below 10")  # checked in debug mode only, as in Triton
    tl.store(out_ptr + offs, x)


GELU_C: tl.constexpr = 0.5  # annotated: a constexpr to kernels, a float to Python


@kiln.jit
def annotated_scale(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.static_assert(GELU_C > 0, "an annotated global is a compile-time value")
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * GELU_C)


def test_a_global_annotated_constexpr_is_one_and_stays_constant():
    global GELU_C
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    annotated_scale[(1,)](x, out, BLOCK=16, device="cpu")
    np.testing.assert_array_equal(out, 0.5 * x)
    try:
        GELU_C = 2.0  # as with tl.constexpr(...) globals (and Triton): an error, not a stale value
        with pytest.raises(ValueError, match=r"kernel 'annotated_scale': global 'GELU_C' changed "
                                             r"since the kernel was compiled \(was 0.5, now 2.0\)"):
            annotated_scale[(1,)](x, out, BLOCK=16, device="cpu")
    finally:
        GELU_C = 0.5
    annotated_scale[(1,)](x, out, BLOCK=16, device="cpu")
    np.testing.assert_array_equal(out, 0.5 * x)
    core = kiln.language.core
    assert core.is_constexpr_annotated({"__annotations__": {"A": "tl.constexpr"}}, "A", 1)
    assert core.is_constexpr_annotated({"__annotations__": {"A": "constexpr"}}, "A", 1.5)
    assert not core.is_constexpr_annotated({"__annotations__": {"A": "float"}}, "A", 1.5)
    assert not core.is_constexpr_annotated({"__annotations__": {"A": float}}, "A", 1.5)
    assert not core.is_constexpr_annotated({"__annotations__": {"A": "tl.constexpr"}}, "A",
                                           [1, 2])  # (not a plain value)
    assert not core.is_constexpr_annotated({}, "A", 1)


def test_knobs_change_what_the_next_compile_and_launch_do():
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    with pytest.raises(kiln.CompilationError, match="SCALE"):
        scaled_copy[(1,)](x, out, BLOCK=16, device="cpu")
    with kiln.knobs.compilation.scope():
        kiln.knobs.compilation.allow_non_constexpr_globals = True
        scaled_copy[(1,)](x, out, BLOCK=16, device="cpu")
    np.testing.assert_array_equal(out, 3 * x)
    # debug mode through the knob, also for a kernel launched before: device_assert acts
    checked_copy[(1,)](x, out, BLOCK=16, device="cpu")
    with kiln.knobs.runtime.scope():
        kiln.knobs.runtime.debug = True
        with pytest.raises(kiln.KilnError, match=r"in kernel 'checked_copy': device_assert "
                                                 r"failed in program \(0, 0, 0\): x below 10"):
            checked_copy[(1,)](x, out, BLOCK=16, device="cpu")
    checked_copy[(1,)](x, out, BLOCK=16, device="cpu")  # off again after the scope
    with kiln.knobs.runtime.scope():
        kiln.knobs.runtime.debug = True
        checked_copy[(1,)](x, out, BLOCK=16, device="cpu", debug=False)  # the option wins


def _module(tmp_path, name, scale):
    import importlib.util
    import textwrap
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(f"""
        import kiln
        import kiln.language as tl
        SCALE = {scale}

        @kiln.jit
        def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) * SCALE)
    """))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plain_globals_key_the_ir_cache_and_are_checked(tmp_path, monkeypatch):
    # With allow_non_constexpr_globals a plain global's value is folded into the kernel: it
    # keys the disk IR cache (the same source with another value compiles anew, never the
    # IR with the old one) and is checked at every launch, the IR from disk included.
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    # (through monkeypatch: the knob writes the variable, which later test modules must not see)
    monkeypatch.setenv("KILN_ALLOW_NON_CONSTEXPR_GLOBALS", "1")
    assert kiln.knobs.compilation.allow_non_constexpr_globals is True
    x = np.ones(16, np.float32)
    out = np.zeros(16, np.float32)
    a = _module(tmp_path, "kscale", 3.0)
    a.k[(1,)](x, out, BLOCK=16, device="cpu")
    assert out[0] == 3.0
    b = _module(tmp_path, "kscale", 4.0)  # the same file and source, another value
    b.k[(1,)](x, out, BLOCK=16, device="cpu")
    assert out[0] == 4.0
    c = _module(tmp_path, "kscale", 4.0)  # served from the disk cache: still checked
    c.k[(1,)](x, out, BLOCK=16, device="cpu")
    c.SCALE = 5.0
    with pytest.raises(ValueError, match=r"kernel 'k': global 'SCALE' changed since the "
                                         r"kernel was compiled \(was 4.0, now 5.0\)"):
        c.k[(1,)](x, out, BLOCK=16, device="cpu")


def test_an_empty_cache_dir_variable_is_unset(monkeypatch, tmp_path):
    # KILN_CACHE_DIR="" reads as the default, in the knob and in the runtime alike (it once
    # put the cache in the working directory)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("KILN_CACHE_DIR", "")
    want = os.path.join(str(tmp_path), "kiln")
    assert kiln.knobs.cache.dir == want
    assert kiln._C.cache_dir() == want
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kiln._C.cache_dir() == os.path.join(str(tmp_path), ".cache", "kiln")
