"""Kiln imports beside the libraries users import with it, in every order: kiln, torch,
triton, numpy and cupy (those installed), each order in a fresh process that then launches a
kernel and checks its answer (import_order_child.py). A crash at import (a signal) or a wrong
answer fails the test with the order and the process's output. The CPU-backend test runs
everywhere (in CI with the modules CI has); the `gpu` test launches on the GPU, on torch CUDA
tensors when torch is among the imports."""
import importlib.util
import itertools
import shutil
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "import_order_child.py")
OTHERS = [m for m in ("torch", "triton", "numpy", "cupy") if importlib.util.find_spec(m)]


def run_orders(backend):
    """Runs every order of kiln and OTHERS in its own process, several at a time; returns the
    failures as (order, description)."""
    orders = list(itertools.permutations(["kiln"] + OTHERS))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("KILN_ARCH", None)  # the child compiles for its own backend
    if backend == "cpu":
        env["KILN_BACKEND"] = "cpu"
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "")

    def one(order):
        try:
            r = subprocess.run([sys.executable, "-X", "faulthandler", CHILD, ",".join(order),
                                backend], env=env, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return order, "hung (300 s)"
        if r.returncode == 0 and f"ok {','.join(order)}" in r.stdout:
            return order, None
        how = f"killed by signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
        return order, f"{how}: {(r.stdout + r.stderr)[-1500:]}"

    workers = max(2, min(16, os.cpu_count() or 2))
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, orders))
    return len(orders), [(o, why) for o, why in results if why]


def describe(n, failures):
    lines = [f"{len(failures)} of {n} import orders failed:"]
    for order, why in failures[:5]:
        lines.append(f"  {' -> '.join(order)}: {why}")
    return "\n".join(lines)


def test_every_import_order_then_a_launch_on_the_cpu_backend():
    n, failures = run_orders("cpu")
    assert not failures, describe(n, failures)


@pytest.mark.gpu
def test_every_import_order_then_a_launch_on_the_gpu():
    n, failures = run_orders("gpu")
    assert not failures, describe(n, failures)


def _defined_dynamic_symbols(path):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    out = subprocess.run([nm, "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def _loaded_library(name):
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith(name):
                return path
    pytest.skip(f"{name} is not loaded from a file")


def test_the_extension_exports_only_its_module_init():
    """The cause of the import-order crash: kiln._C exported definitions it should have kept
    (a statically linked copy of libstdc++'s call_once state, template instantiations), which
    libstdc++.so.6, loaded in the same group, then bound to. Nothing but PyInit__C may leave."""
    import kiln
    assert _defined_dynamic_symbols(kiln._C.__file__) == {"PyInit__C"}


def test_libkiln_exports_only_the_kiln_api():
    import kiln  # noqa: F401
    api = ("kiln_", "_ZN4kiln", "_ZNK4kiln", "_ZTIN4kiln", "_ZTSN4kiln", "_ZTVN4kiln")
    extra = sorted(s for s in _defined_dynamic_symbols(_loaded_library("libkiln.so"))
                   if not s.startswith(api))
    assert not extra, f"libkiln.so exports symbols outside Kiln's API: {extra[:10]}"


CALL_ONCE_EXT = r"""
#include <Python.h>
#include <mutex>
static std::once_flag flag;
static long value = 0;
static PyObject *run(PyObject *, PyObject *) {
  std::call_once(flag, [] { value = 42; });
  return PyLong_FromLong(value);
}
static PyMethodDef methods[] = {{"run", run, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef module = {PyModuleDef_HEAD_INIT, "kiln_test_call_once", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_kiln_test_call_once() { return PyModule_Create(&module); }
"""


def test_a_cpp_extension_using_call_once_after_kiln(tmp_path):
    """What torch's import does, without torch: a C++ extension loaded after kiln (its own
    dlopen group, libstdc++ already loaded by kiln's) runs std::call_once."""
    import sysconfig
    cxx = shutil.which("c++") or shutil.which("g++")
    include = sysconfig.get_paths()["include"]
    if cxx is None or not os.path.exists(os.path.join(include, "Python.h")):
        pytest.skip("no C++ compiler or Python headers")
    src = tmp_path / "ext.cpp"
    src.write_text(CALL_ONCE_EXT)
    so = tmp_path / ("kiln_test_call_once" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([cxx, "-O2", "-shared", "-fPIC", "-std=c++17", f"-I{include}", str(src),
                    "-o", str(so)], check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + [p for p in sys.path if p]))
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c",
                        "import kiln, kiln_test_call_once; print(kiln_test_call_once.run())"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "42", r.stdout + r.stderr
