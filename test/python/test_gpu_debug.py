"""tl.device_print and tl.device_assert on the GPU (vprintf / __assertfail), each in a fresh
process: printf output appears at synchronization, and a failed assertion leaves the CUDA
context unusable, so neither may share the test process."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu


def run_script(tmp_path, body):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if k not in ("KILN_BACKEND", "KILN_DEBUG")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True,
                          timeout=300)


def test_device_print_on_gpu(tmp_path):
    r = run_script(tmp_path, """
        import numpy as np
        import kiln
        import kiln.language as tl

        @kiln.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0)
            tl.device_print("vals", x)
            tl.device_print("n", n, hex=True)

        k[(2,)](kiln.from_numpy(np.array([11, 22, 33, 255], np.int32)), 255, BLOCK=4)
        kiln.synchronize()
        print("done")
    """)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    vals = [l for l in out.splitlines() if "vals: " in l]
    assert len(vals) == 8, out  # 2 programs x 4 elements, each printed once (its owner)
    for v in (11, 22, 33, 255):
        assert sum(l.rstrip().endswith(f": {v}") for l in vals) == 2, out
    assert sum("idx (3)" in l for l in vals) == 2, out
    hexes = [l for l in out.splitlines() if "n: " in l]
    assert len(hexes) == 2 and all(l.rstrip().endswith("0xff") for l in hexes), out


def test_device_assert_on_gpu(tmp_path):
    r = run_script(tmp_path, """
        import numpy as np
        import kiln
        import kiln.language as tl

        @kiln.jit(debug=True)
        def k(x_ptr, n):
            tl.device_assert(tl.program_id(0) < n, "pid out of range")

        x = kiln.from_numpy(np.zeros(4, np.int32))
        k[(3,)](x, 3)
        kiln.synchronize()
        print("in range: ok")
        try:
            k[(4,)](x, 3)
            kiln.synchronize()
            print("no error")
        except Exception as e:
            print("caught:", e)
    """)
    out = r.stdout + r.stderr
    assert "in range: ok" in out, out
    assert "no error" not in out, out
    assert "caught:" in out and "assert" in out.lower(), out
    assert "pid out of range" in out, out
