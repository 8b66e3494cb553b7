"""Every public name of kiln.language is one of triton.language (Triton 3.6) and has a test
on the CPU backend: language_names.py finds them (its docstring says how); this prints its
summary line (N names, M with CPU tests, K with GPU tests, tests read)."""
import language_names as ln


def test_every_kiln_name_is_a_triton_name():
    extra = sorted(n for n in ln.kiln_public_names()
                   if n not in ln.TRITON_NAMES and n not in ln.KILN_ONLY)
    assert not extra, (f"kiln.language names that triton.language does not have: {extra}; "
                       f"remove them, or add them to KILN_ONLY with the reason")


def test_every_kiln_name_has_a_cpu_test():
    cover, _ = ln.scan()
    kiln_names = ln.kiln_public_names()
    untested = sorted(n for n in ln.TRITON_NAMES if n in kiln_names and
                      not cover.get(n, ([], []))[0] and n not in ln.NO_CPU_TEST)
    assert not untested, (f"kiln.language names without a CPU test in test/python: "
                          f"{untested} (test them, spelled tl.NAME, or add them to "
                          f"NO_CPU_TEST with the reason)")
    stale = sorted(n for n in ln.NO_CPU_TEST if cover.get(n, ([], []))[0])
    assert not stale, f"NO_CPU_TEST lists names that now have CPU tests: {stale}"


def test_summary(capsys):
    n, m, k, total, missing = ln.report()
    out = capsys.readouterr().out
    with capsys.disabled():
        print("\n" + out.strip())
    assert n == len(ln.TRITON_NAMES) and m <= n and k <= n and total > 0
