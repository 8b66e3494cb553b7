"""@kiln.autotune and kiln.Config on the CPU backend: the fastest config is chosen, kept in
memory (a second launch does not time again) and on disk (a new process does not either); a
new key value or dtype tunes again; reset_to_zero and restore_value keep in-place kernels
right; configs that fail to compile are skipped, and when all fail the error lists each;
unknown key names warn and are ignored (as Triton ignores them), conflicting meta-parameters
are ValueErrors naming the kernel; the progress line and KILN_PRINT_AUTOTUNING / TRITON_PRINT_AUTOTUNING.

Each test uses its own cache directory, so that tunings are never read from an earlier run.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
import kiln.language as tl

FAST = dict(warmup=1, rep=3)  # ms of warm-up and timed runs per config: keeps tests short


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(d))
    monkeypatch.delenv("KILN_PRINT_AUTOTUNING", raising=False)
    monkeypatch.delenv("TRITON_PRINT_AUTOTUNING", raising=False)
    return d


def grid_1d(meta):
    return (kiln.cdiv(meta["n"], meta["BLOCK"]),)


def arrays(n, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype),
            np.zeros(n, dtype))


def tuning_lines(err):
    return [line for line in err.splitlines() if line.startswith("kiln.autotune:")]


# ---------------------------------------------------------------- Config

def test_config_attributes():
    c = kiln.Config({"BLOCK": 128}, num_warps=8, num_stages=2)
    assert c.kwargs == {"BLOCK": 128}
    assert (c.num_warps, c.num_stages, c.num_ctas, c.maxnreg, c.pre_hook) == (8, 2, 1, None,
                                                                             None)
    assert c.all_kwargs() == {"BLOCK": 128, "num_warps": 8, "num_stages": 2}
    assert str(c) == "BLOCK: 128, num_warps: 8, num_stages: 2"
    assert kiln.Config({"BLOCK": 128}).all_kwargs() == {"BLOCK": 128, "num_warps": 4,
                                                        "num_stages": 3}
    assert c == kiln.Config({"BLOCK": 128}, num_warps=8, num_stages=2)
    with pytest.raises(ValueError, match="num_ctas"):
        kiln.Config({}, num_ctas=2)
    # maxnreg is a launch option like num_warps (applied on the GPU)
    assert kiln.Config({}, maxnreg=128).all_kwargs() == {"num_warps": 4, "num_stages": 3,
                                                         "maxnreg": 128}


# ---------------------------------------------------------------- choosing and caching

@kiln.jit(device="cpu")
def scaled_add(x, y, out, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * alpha + tl.load(y + offs, mask=m), mask=m)


def test_picks_fastest_and_caches_in_memory(capfd):
    # A timer of our own makes the choice deterministic: it reports the time the config's
    # pre_hook announces (BLOCK=64 is "fastest"), and counts its calls.
    fake_ms = {32: 3.0, 64: 1.0, 128: 2.0}
    current, timed = [], []

    def announce(nargs):
        current.append(nargs["BLOCK"])

    def do_bench(fn, quantiles):
        fn()
        timed.append(current[-1])
        return [fake_ms[current[-1]], 0.0, 0.0]

    tuned = kiln.autotune([kiln.Config({"BLOCK": b}, pre_hook=announce) for b in fake_ms],
                          key=["n"], do_bench=do_bench)(scaled_add)
    x, y, out = arrays(1000)
    compiled = tuned[grid_1d](x, y, out, 1000, 2.0)
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    assert compiled.metadata.arch == "cpu"
    assert tuned.best_config.kwargs == {"BLOCK": 64}
    assert sorted(timed) == [32, 64, 128]
    assert {c.kwargs["BLOCK"]: t for c, t in tuned.configs_timings.items()} == fake_ms
    assert tuning_lines(capfd.readouterr().err) == [
        "kiln.autotune: scaled_add [3/3] best BLOCK=64,num_warps=4,num_stages=3 1.000 ms "
        f"(3 configs in {tuned.bench_time:.2f} s) for n=1000"]

    out[:] = 0
    tuned[grid_1d](x, y, out, 1000, 3.0)  # same key: no new timing, no output
    np.testing.assert_allclose(out, 3 * x + y, rtol=1e-6)
    assert len(timed) == 3
    assert tuning_lines(capfd.readouterr().err) == []
    assert list(tuned.cache.values()) == [tuned.best_config]


@kiln.autotune([kiln.Config({"BLOCK": 32}), kiln.Config({"BLOCK": 256}, num_warps=2)],
               key=["n"], **FAST)
@kiln.jit(device="cpu")
def add_rekeyed(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def test_new_key_or_dtype_tunes_again(capfd):
    for n, dtype, tunes in [(300, np.float32, True), (300, np.float32, False),
                            (500, np.float32, True), (300, np.float64, True),
                            (500, np.float32, False)]:
        x, y, out = arrays(n, dtype)
        add_rekeyed[grid_1d](x, y, out, n)
        np.testing.assert_allclose(out, x + y)
        assert len(tuning_lines(capfd.readouterr().err)) == (1 if tunes else 0), (n, dtype)
        assert add_rekeyed.best_config in add_rekeyed.configs
    assert len(add_rekeyed.cache) == 3
    assert (300, "float64", "float64", "float64") in add_rekeyed.cache


DISK_SCRIPT = """
import sys
import numpy as np
import kiln
import kiln.language as tl

@kiln.autotune([kiln.Config({"BLOCK": b}) for b in (16, 64, 256)], key=["n"], warmup=1, rep=3)
@kiln.jit(device="cpu")
def add_on_disk(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

x = np.arange(777, dtype=np.float32)
out = np.zeros_like(x)
add_on_disk[lambda meta: (kiln.cdiv(meta["n"], meta["BLOCK"]),)](x, x, out, 777)
assert (out == 2 * x).all()
print("best", add_on_disk.best_config.kwargs["BLOCK"], add_on_disk.configs_timings is None)
"""


def test_disk_cache_reused_by_a_new_process(tmp_path, cache_dir):
    script = tmp_path / "disk.py"
    script.write_text(DISK_SCRIPT)
    env = dict(os.environ, KILN_CACHE_DIR=str(cache_dir))

    def run():
        r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout.split(), tuning_lines(r.stderr)

    (_, first, tuned), lines = run()
    assert tuned == "False" and len(lines) == 1 and "best BLOCK=" + first in lines[0]
    assert len(list((cache_dir / "autotune").glob("*.json"))) == 1
    (_, second, tuned), lines = run()
    assert (second, tuned, lines) == (first, "True", [])  # the disk's choice, no timing


def test_corrupt_disk_entry_tunes_again(cache_dir, capfd):
    @kiln.autotune([kiln.Config({"BLOCK": 16}), kiln.Config({"BLOCK": 64})], key=["n"], **FAST)
    @kiln.jit(device="cpu")
    def add_corrupt(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    x, y, out = arrays(100)
    add_corrupt[grid_1d](x, y, out, 100)
    (entry,) = (cache_dir / "autotune").glob("*.json")
    entry.write_text("{ not json")
    add_corrupt.cache.clear()
    capfd.readouterr()
    add_corrupt[grid_1d](x, y, out, 100)
    assert len(tuning_lines(capfd.readouterr().err)) == 1
    np.testing.assert_allclose(out, x + y)


# ---------------------------------------------------------------- in-place kernels

@kiln.jit(device="cpu")
def sum_into(x, total, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(total, tl.sum(tl.load(x + offs, mask=offs < n, other=0.0), axis=0))


@pytest.mark.parametrize("reset", [True, False])
def test_reset_to_zero(reset):
    tuned = kiln.autotune([kiln.Config({"BLOCK": 32}), kiln.Config({"BLOCK": 128})], key=["n"],
                          reset_to_zero=["total"] if reset else None, **FAST)(sum_into)
    x = np.ones(1000, np.float32)
    total = np.zeros(1, np.float32)
    tuned[grid_1d](x, total, 1000)
    if reset:
        assert total[0] == 1000.0
    else:  # the timed runs accumulated into total too
        assert total[0] > 2000.0


@kiln.jit(device="cpu")
def increment(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x + offs, tl.load(x + offs, mask=m) + 1.0, mask=m)


def test_restore_value():
    tuned = kiln.autotune([kiln.Config({"BLOCK": 32}), kiln.Config({"BLOCK": 128})], key=["n"],
                          restore_value=["x"], **FAST)(increment)
    x = np.arange(500, dtype=np.float32)
    tuned[grid_1d](x, 500)
    np.testing.assert_array_equal(x, np.arange(500, dtype=np.float32) + 1)


# ---------------------------------------------------------------- failures and errors

@kiln.jit(device="cpu")
def copy_tiles(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m), mask=m)


def test_failing_config_is_skipped(capfd):
    tuned = kiln.autotune([kiln.Config({"BLOCK": 48}), kiln.Config({"BLOCK": 64})], key=["n"],
                          **FAST)(copy_tiles)
    x, _, out = arrays(200)
    tuned[grid_1d](x, out, 200)
    np.testing.assert_array_equal(out, x)
    assert tuned.best_config.kwargs == {"BLOCK": 64}
    (failed, error), = tuned.configs_errors.items()
    assert failed.kwargs == {"BLOCK": 48} and isinstance(error, kiln.CompilationError)
    assert "1 failed" in tuning_lines(capfd.readouterr().err)[0]


def test_all_configs_fail():
    tuned = kiln.autotune([kiln.Config({"BLOCK": 3}), kiln.Config({"BLOCK": 48}, num_warps=2)],
                          key=["n"], **FAST)(copy_tiles)
    x, _, out = arrays(200)
    with pytest.raises(kiln.AutotuneError) as info:
        tuned[grid_1d](x, out, 200)
    text = str(info.value)
    assert text.startswith("kiln.autotune: every config of kernel 'copy_tiles' (n=200) "
                           "failed:\n")
    assert "[1] BLOCK: 3, num_warps: 4, num_stages: 3: CompilationError: " in text
    assert "[2] BLOCK: 48, num_warps: 2, num_stages: 3: CompilationError: " in text
    assert "power of two, found 3" in text and "power of two, found 48" in text
    assert isinstance(info.value, kiln.KilnError) and len(info.value.errors) == 2


def test_bad_names_are_value_errors():
    configs = [kiln.Config({"BLOCK": 32}), kiln.Config({"BLOCK": 64})]
    # An unknown key name is ignored with a warning, as Triton ignores it.
    with pytest.warns(UserWarning, match=r"kernel 'copy_tiles': key names \['size'\] are not "
                                         r"parameters of the kernel"):
        tuned = kiln.autotune(configs, key=["n", "size"])(copy_tiles)
    assert tuned.keys == ["n"]
    with pytest.raises(ValueError, match=r"kernel 'copy_tiles': reset_to_zero names are "
                                         r"\['y'\]"):
        kiln.autotune(configs, key=["n"], reset_to_zero=["y"])(copy_tiles)
    with pytest.raises(ValueError, match=r"kernel 'copy_tiles': config \{BLOCK_M: 32.*sets "
                                         r"\['BLOCK_M'\]"):
        kiln.autotune([kiln.Config({"BLOCK_M": 32})], key=["n"])(copy_tiles)
    with pytest.raises(TypeError, match="above @kiln.jit"):
        kiln.autotune(configs, key=["n"])(lambda x: x)

    tuned = kiln.autotune(configs, key=["n"], **FAST)(copy_tiles)
    x, _, out = arrays(64)
    with pytest.raises(ValueError, match=r"kernel 'copy_tiles': conflicting meta-parameters "
                                         r"\['BLOCK'\]"):
        tuned[grid_1d](x, out, 64, BLOCK=32)
    with pytest.raises(RuntimeError, match=r"copy_tiles\[grid\]"):
        tuned(x, out, 64)


# ---------------------------------------------------------------- pruning, output

def test_prune_configs_by(capfd):
    seen = []

    def early(configs, nargs, **kwargs):
        seen.append(sorted(nargs))
        return [c for c in configs if c.kwargs["BLOCK"] <= nargs["n"]]

    def model(**meta):
        return meta["BLOCK"]  # smaller is "faster"

    tuned = kiln.autotune([kiln.Config({"BLOCK": b}) for b in (16, 32, 256)], key=["n"],
                          prune_configs_by={"early_config_prune": early, "perf_model": model,
                                            "top_k": 1}, **FAST)(copy_tiles)
    x, _, out = arrays(100)
    tuned[grid_1d](x, out, 100)
    np.testing.assert_array_equal(out, x)
    assert tuned.best_config.kwargs == {"BLOCK": 16}
    assert seen == [["n", "out", "x"]]
    assert tuning_lines(capfd.readouterr().err) == []  # one config left: nothing to time


def test_print_switches(monkeypatch, capfd):
    x, _, out = arrays(100)
    monkeypatch.setenv("KILN_PRINT_AUTOTUNING", "0")
    quiet = kiln.autotune([kiln.Config({"BLOCK": 16}), kiln.Config({"BLOCK": 32})], key=["n"],
                          **FAST)(copy_tiles)
    quiet[grid_1d](x, out, 100)
    assert capfd.readouterr() == ("", "")

    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    loud = kiln.autotune([kiln.Config({"BLOCK": 16}), kiln.Config({"BLOCK": 64})], key=["n"],
                         **FAST)(copy_tiles)
    loud[grid_1d](x, out, 100)
    captured = capfd.readouterr()
    assert captured.err == ""
    assert captured.out.startswith("Kiln autotuning for function copy_tiles finished after ")
    assert f"best config selected: {loud.best_config};" in captured.out


def test_progress_line_updates_in_place_on_a_terminal(tmp_path, cache_dir):
    """Under a pseudo-terminal the line is rewritten with carriage returns and ends with the
    choice and a newline."""
    pty = pytest.importorskip("pty")
    script = tmp_path / "tty.py"
    script.write_text(DISK_SCRIPT)
    env = dict(os.environ, KILN_CACHE_DIR=str(cache_dir))
    code = textwrap.dedent(f"""
        import os, pty, sys
        pid, fd = pty.fork()
        if pid == 0:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.execv(sys.executable, [sys.executable, {str(script)!r}])
        data = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
        os.waitpid(pid, 0)
        sys.stdout.write(repr(data.decode()))
    """)
    del pty
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    text = eval(r.stdout)
    assert text.count("\r") >= 4 and "[1/3] BLOCK=16" in text and "[3/3] best" in text
    assert text.rstrip("\r\n").endswith("for n=777\x1b[K"), text
