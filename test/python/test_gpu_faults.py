"""A Kiln kernel that faults on the GPU is reported as kiln.KilnError naming it: in debug mode
at the launch itself (which waits for the kernel), in normal mode by the first Kiln call that
sees the fault (here kiln.synchronize()), naming the last Kiln kernel launched on that device.
Each case runs in a process of its own (gpu_fault_child.py): CUDA leaves a faulted context
unusable."""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_fault_child.py")


def run(mode, stderr=False):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, CHILD, mode], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return (r.stdout, r.stderr) if stderr else r.stdout


def test_debug_mode_names_the_kernel_at_its_launch():
    out = run("debug")
    assert "launched" not in out, out
    assert "KilnError: kernel 'far_load' faulted on cuda:0: CUDA_ERROR_ILLEGAL_ADDRESS" in out, out
    assert "compute-sanitizer" in out, out


def test_normal_mode_names_the_last_kernel_at_the_next_kiln_call():
    out = run("normal")
    assert "launched" in out and "no error" not in out, out
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in out and "a kernel faulted on cuda:0" in out, out
    assert "the last Kiln kernel launched there was 'far_load'" in out, out
    assert "KILN_DEBUG=1" in out, out


def test_debug_mode_catches_an_int32_wrap_in_address_arithmetic():
    out, err = run("overflow", stderr=True)
    assert "KilnError: kernel 'wrapped_offsets' faulted on cuda:0: CUDA_ERROR_ASSERT" in out, \
        out + err
    # The device's assert message names the line of the shift.
    assert "int32 overflow in address arithmetic" in err and "gpu_fault_child.py" in err, err
