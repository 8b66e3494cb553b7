"""The front-end fuzzer (test/fuzz/fuzz_kernels.py) on a bounded slice.

- the seed kernels (test/fuzz/seeds.py) run unmutated on the CPU backend, compile to PTX and
  match their numpy references;
- mutants are deterministic, valid Python and selectable by slices (`--start`, `--count`);
- the classifier: ok, error (located or not), signal, hang and internal outcomes from
  made-up process results, and the `error_is_located` criterion;
- a slice of 60 mutants (random seed 0) runs, each in its own subprocess, two at a time, in
  about 15-30 s on a 2-core machine: none may hang, none may end in an internal error, every
  error Kiln raises names the kernel and a line (or the argument), and none may die by a
  signal unless debug mode names the out-of-bounds access that killed it (a stray store into
  heap memory: docs/cpu.md).

Longer runs: `python test/fuzz/fuzz_kernels.py --count 2000` (exit 1 on any bad mutant); the
slice's results are printed with `pytest -s`.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fuzz"))

import fuzz_kernels as fk  # noqa: E402

SLICE_SEED, SLICE_START, SLICE_COUNT = 0, 0, 60
JOBS = 2
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def slice_results():
    mutants = fk.generate(SLICE_SEED, SLICE_START, SLICE_COUNT)
    results = fk.run_mutants(mutants, jobs=JOBS, timeout=TIMEOUT)
    print("\n" + fk.summarize(results))
    return results


# ---------------------------------------------------------------- seeds and generation

def test_seeds_run_unmutated_and_match_numpy():
    results = fk.run_mutants(fk.seed_scripts(), jobs=JOBS, timeout=TIMEOUT)
    assert len(results) == len(fk.SEEDS) >= 6
    bad = [f"{r.seed}: {r.outcome}: {r.detail}" for r in results if r.outcome != "ok"]
    assert not bad, "\n".join(bad)


def test_mutants_are_deterministic_and_sliceable():
    whole = fk.generate(7, 0, 30)
    again = fk.generate(7, 0, 30)
    part = fk.generate(7, 12, 5)
    assert [m.render() for m in whole] == [m.render() for m in again]
    assert [m.render() for m in whole[12:17]] == [m.render() for m in part]
    assert [m.mid for m in part] == [f"7:{i}" for i in range(12, 17)]
    assert [m.render() for m in fk.generate(8, 0, 30)] != [m.render() for m in whole]


def test_mutants_are_valid_python_and_differ_from_their_seed():
    seeds = {s.name: fk.base_mutant(s).render()[0] for s in fk.SEEDS}
    mutants = fk.generate(3, 0, 200)
    kinds = set()
    for m in mutants:
        text, info = m.render()
        compile(text, "mutant.py", "exec")
        seed_text = seeds[m.seed].split("\n", 2)[2]  # without the two header comments
        assert text.split("\n", 2)[2].replace("DEBUG = True", "DEBUG = False") != seed_text
        assert text.splitlines()[info["launch"] - 1].startswith(f"{m.seed}[")
        assert text.splitlines()[info["compile"] - 1].startswith("kiln.compile(")
        kinds.update(part.split(":")[0].replace("[debug] ", "") for part in m.desc.split("; "))
    assert kinds == set(fk.MUTATORS)
    # each seed kernel in turn
    assert [m.seed for m in mutants[:len(fk.SEEDS)]] == [s.name for s in fk.SEEDS]


def test_kernel_and_kind_filters():
    ms = fk.generate(0, 0, 10, kernels=["matmul_dot"], kinds=["grid"])
    assert {m.seed for m in ms} == {"matmul_dot"}
    assert all(m.desc.split("; ")[0].replace("[debug] ", "").startswith("grid:") for m in ms)
    with pytest.raises(ValueError):
        fk.select_seeds(["no_such_kernel"])


# ---------------------------------------------------------------- classification

INFO = {"kernel_first": 19, "host_first": 30, "launch": 36, "compile": 37, "check_first": 38}
SCRIPT = "/tmp/w/mutant_0_1_vec_add.py"
PARAMS = {"x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"}


def traceback(*frames, exc):
    lines = ["Traceback (most recent call last):"]
    for path, line in frames:
        lines += [f'  File "{path}", line {line}, in <module>', "    code()"]
    return "\n".join(lines + exc.splitlines()) + "\n"


def classify(stderr, returncode=1, timed_out=False):
    return fk.classify(returncode, "", stderr, timed_out, "vec_add", SCRIPT, INFO, PARAMS)


def test_classify_ok_signal_hang():
    assert classify("", returncode=0).outcome == "ok"
    r = classify("Fatal Python error: Segmentation fault\n\n"
                 f'  File "{SCRIPT}", line 36 in <module>\n', returncode=-11)
    assert (r.outcome, r.phase, r.bad) == ("signal", "launch", True)
    assert r.detail.startswith("SIGSEGV")
    r = classify("", returncode=-9, timed_out=True)
    assert (r.outcome, r.bad) == ("hang", True)


def test_classify_located_compilation_error():
    exc = (f"kiln.errors.CompilationError: {SCRIPT}:24:9: error: in kernel 'vec_add': "
           "expected a mask for load when `other` is given, found none\n"
           "        x = tl.load(x_ptr + offs, other=0)\n        ^")
    r = classify(traceback((SCRIPT, 36), ("/b/python/kiln/runtime/jit.py", 499), exc=exc))
    assert (r.outcome, r.exc_type, r.phase, r.source) == ("error", "CompilationError",
                                                         "launch", "kiln")
    assert r.located and not r.bad and not fk.is_bad(r)
    assert r.detail.startswith("CompilationError: ")


def test_classify_argument_errors():
    exc = "TypeError: kernel 'vec_add': argument 'n': expected an array, found list"
    r = classify(traceback((SCRIPT, 36), exc=exc))
    assert (r.outcome, r.located, r.bad) == ("error", True, False)
    exc = "TypeError: kiln.compile: parameter 'out_ptr': expected ':16' or ':1', found ':8'"
    r = classify(traceback((SCRIPT, 37), ("/b/python/kiln/runtime/jit.py", 601), exc=exc))
    assert (r.outcome, r.phase, r.located, r.bad) == ("error", "compile", False, True)
    # a CompilationError must name a line even at the launch
    exc = "kiln.errors.CompilationError: error: in kernel 'vec_add': bad 'n'"
    assert classify(traceback((SCRIPT, 36), exc=exc)).located is False


def test_classify_internal_errors():
    r = classify("LLVM ERROR: PTX version 7.8 does not support target 'sm_100'.\n")
    assert (r.outcome, r.bad) == ("internal", True)
    r = classify(traceback((SCRIPT, 36), exc="kiln._C.KilnError: cannot load the module"))
    assert (r.outcome, r.exc_type) == ("internal", "KilnError")
    r = classify(traceback((SCRIPT, 36), ("/b/python/kiln/compiler/code_generator.py", 10),
                           exc="KeyError: 'fp32'"))
    assert (r.outcome, r.source) == ("internal", "kiln")
    r = classify("JIT session error: Symbols not found: [ __truncdfbf2 ]\n" + traceback(
        (SCRIPT, 36), exc="kiln._C.KilnError: kernel 'vec_add': cannot find its host entry"))
    assert r.outcome == "internal"
    r = classify(traceback((SCRIPT, 3), exc="ModuleNotFoundError: No module named 'kiln'"))
    assert (r.outcome, r.phase) == ("internal", "import")


def test_classify_errors_of_the_host_code():
    # raised by the mutant's own host code (a grid lambda at a setup line): not Kiln's message
    exc = "ZeroDivisionError: integer division or modulo by zero"
    r = classify(traceback((SCRIPT, 36), (SCRIPT, 34), ("/b/python/kiln/runtime/driver.py", 9),
                           exc=exc))
    assert (r.outcome, r.source, r.bad) == ("error", "script", False)


def test_error_is_located():
    f = fk.error_is_located
    assert f(f"{SCRIPT}:5:1: error: in kernel 'vec_add': x", "vec_add", SCRIPT)
    assert f("kernel 'vec_add', line 5: x", "vec_add", SCRIPT)
    assert not f(f"{SCRIPT}:5:1: error: in kernel 'other': x", "vec_add", SCRIPT)
    assert not f(f"{SCRIPT}:5:1: error: in kernel 'vec_add_2': x", "vec_add", SCRIPT)
    assert not f("error: in kernel 'vec_add': x", "vec_add", SCRIPT)
    assert f("kernel 'vec_add': argument 'n' is bad", "vec_add", SCRIPT, "launch", "TypeError",
             ["n"])
    assert f("kernel 'vec_add': expected a grid of 1 to 3 dimensions", "vec_add", SCRIPT,
             "launch", "TypeError")
    assert not f("kernel 'vec_add': argument 'n' is bad", "vec_add", SCRIPT, "launch",
                 "CompilationError", ["n"])
    fault = ("kernel 'vec_add': memory fault (SIGSEGV) in program (0, 0, 0) at address 0x10, "
             "4 bytes before the start of argument 'out_ptr' (400 bytes at 0x14)")
    assert f(fault, "vec_add", SCRIPT, "launch", "KilnError", ["out_ptr"])


# ---------------------------------------------------------------- the slice

def test_slice_ran_every_mutant(slice_results):
    assert len(slice_results) == SLICE_COUNT
    assert all(r.outcome in fk.OUTCOMES for r in slice_results)
    assert sum(r.outcome == "ok" for r in slice_results) > 0
    assert sum(r.outcome == "error" for r in slice_results) > 0


def test_slice_errors_name_the_kernel_and_line_and_none_is_internal(slice_results):
    bad = [f"{r.id} {r.seed} [{r.phase}]: {r.mutation}: {r.outcome}: {r.detail}"
           for r in slice_results if r.outcome == "internal" or (
               r.outcome == "error" and r.source == "kiln" and not r.located)]
    assert not bad, "\n".join(bad)


def test_slice_no_hangs(slice_results):
    hung = [f"{r.id} {r.seed}: {r.mutation}" for r in slice_results if r.outcome == "hang"]
    assert not hung, "\n".join(hung)


# Out-of-bounds stores of mutant kernels outside debug mode that land in mapped heap memory
# corrupt it: the process dies later (SIGABRT in malloc/free, SIGSEGV in the garbage
# collector). Kiln's fault guard turns faults on unmapped memory into a KilnError, but cannot
# see these (docs/cpu.md, "What is caught"). Such a death is allowed only where the same
# mutant in debug mode fails with an error at a line of the kernel (Result.triage: an
# out-of-bounds access, or the division by zero that computed its mask); any other death by
# signal fails the test.
def test_slice_signal_deaths_are_stray_accesses_debug_mode_names(slice_results):
    died = [f"{r.id} {r.seed} [{r.phase}]: {r.mutation}: {r.detail} ({r.triage})"
            for r in slice_results if r.outcome == "signal"
            and not ("in debug mode: error" in r.triage and ": error: in kernel '" in r.triage)]
    assert not died, "\n".join(died)
