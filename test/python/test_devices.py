"""Kernels on any GPU of the machine (marker `gpu2`: skipped with fewer than two GPUs).

A launch runs on the device of its tensor arguments, on that device's current stream, whatever
device is current; the current device is left as it was; kernels are loaded per device; mixed
devices are a clear error naming the kernel, the argument and both devices. Every output is
poisoned before the launch and checked against torch or numpy."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.language as tl

pytestmark = [pytest.mark.gpu, pytest.mark.gpu2]

HERE = os.path.dirname(os.path.abspath(__file__))


@kiln.jit
def scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def torch_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("torch sees fewer than two CUDA devices")
    return torch


@pytest.fixture
def torch2():
    """torch with two devices; the current device is 0 before and after the test."""
    torch = torch_or_skip()
    torch.cuda.set_device(0)
    yield torch
    torch.cuda.set_device(0)


def relerr(out, ref):
    """||out - ref|| / ||ref|| in float64 (NaN, the poison, when an element was not written)."""
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm()).item()


def launch(torch, device, n=100_003, alpha=3.0):
    """scale_add on fresh tensors of `device` (output poisoned); returns the relative error
    against float64 (the kernel contracts alpha * x + y into one fma)."""
    g = torch.Generator(device="cpu").manual_seed(n)
    x = torch.randn(n, generator=g).to(device)
    y = torch.randn(n, generator=g).to(device)
    out = torch.full_like(x, float("nan"))
    scale_add[(kiln.cdiv(n, 1024),)](x, y, out, n, alpha, BLOCK=1024)
    torch.cuda.synchronize(device)
    assert out.device == x.device
    return relerr(out, alpha * x.double() + y.double())


def test_launch_on_cuda1_while_current_device_is_0(torch2):
    torch = torch2
    assert launch(torch, "cuda:1") < 1e-7
    assert torch.cuda.current_device() == 0, "a launch must not change the current device"
    # torch's work on the current device still goes to device 0 after a Kiln launch on 1.
    assert torch.ones(4, device="cuda").device.index == 0


def test_launch_on_cuda1_after_set_device_1(torch2):
    torch = torch2
    torch.cuda.set_device(1)
    assert launch(torch, "cuda:1") < 1e-7
    assert torch.cuda.current_device() == 1
    # The same kernel on device 0 while device 1 is current.
    assert launch(torch, "cuda:0") < 1e-7
    assert torch.cuda.current_device() == 1


def test_alternating_devices_share_one_compile(torch2):
    torch = torch2
    before = kiln._C.jit_stats()["compiles"]
    for i in range(8):
        assert launch(torch, f"cuda:{i % 2}", n=4099 + 4 * i) < 1e-7
    # One variant per device (the same arch: one PTX, loaded twice).
    assert kiln._C.jit_stats()["compiles"] - before <= 1


def test_mixed_devices_are_a_clear_error(torch2):
    torch = torch2
    x = torch.randn(1024, device="cuda:0")
    y = torch.randn(1024, device="cuda:1")
    out = torch.empty(1024, device="cuda:0")
    with pytest.raises(Exception) as e:
        scale_add[(1,)](x, y, out, 1024, 1.0, BLOCK=1024)
    msg = str(e.value)
    assert "scale_add" in msg and "'y_ptr'" in msg and "cuda:1" in msg and "cuda:0" in msg, msg
    with pytest.raises(TypeError) as e:
        scale_add[(1,)](x, y.cpu(), out, 1024, 1.0, BLOCK=1024)
    msg = str(e.value)
    assert "scale_add" in msg and "'y_ptr'" in msg and "cpu" in msg and "cuda:0" in msg, msg


def test_device1_current_stream(torch2):
    torch = torch2
    n = 1 << 20
    x = torch.randn(n, device="cuda:1")
    y = torch.randn(n, device="cuda:1")
    out = torch.full_like(x, float("nan"))
    s = torch.cuda.Stream(device=1)
    # The stream must wait for the tensors made on device 1's default stream.
    s.wait_stream(torch.cuda.default_stream(1))
    with torch.cuda.stream(s):
        scale_add[(kiln.cdiv(n, 1024),)](x, y, out, n, 2.0, BLOCK=1024)
        z = out * 2  # ordered after the launch on the same stream
    s.synchronize()
    assert relerr(z, 2 * (2 * x.double() + y.double())) < 1e-7
    assert torch.cuda.current_device() == 0


def test_cuda_graph_on_device1(torch2):
    torch = torch2
    n = 8192
    x = torch.randn(n, device="cuda:1")
    y = torch.randn(n, device="cuda:1")
    out = torch.zeros_like(x)
    with torch.cuda.device(1):
        scale_add[(8,)](x, y, out, n, 1.5, BLOCK=1024)  # compiled and loaded before capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            scale_add[(8,)](x, y, out, n, 1.5, BLOCK=1024)
        out.fill_(float("nan"))
        x.copy_(torch.randn(n, device="cuda:1"))
        g.replay()
        torch.cuda.synchronize()
    assert relerr(out, 1.5 * x.double() + y.double()) < 1e-7


@pytest.mark.parametrize("D,S,causal", [(64, 256, True), (128, 512, False)],
                         ids=["causal", "persistent"])
def test_flash_attention_descriptors_on_device1(torch2, D, S, causal):
    # kiln_kernels' descriptor path (tensor maps encoded from the tensors; non-causal at D 128
    # the persistent kernel, one program per multiprocessor of the tensors' device) on cuda:1
    # while the current device is 0, against SDPA on cuda:1.
    torch = torch2
    sys.path.insert(0, os.path.join(HERE, "..", "..", "kernels", "python"))
    from kiln_kernels import flash_attention as fa
    torch.manual_seed(5)
    q, k, v = (torch.randn(2, 2, S, D, device="cuda:1", dtype=torch.float16)
               for _ in range(3))
    out = fa.attention(q, k, v, causal=causal, descriptors=True)
    torch.cuda.synchronize(1)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert out.device == q.device
    assert (out.double() - ref.double()).abs().max().item() < 2e-2
    assert torch.cuda.current_device() == 0


def test_kiln_arrays_on_device1():
    if kiln.device_count() < 2:
        pytest.skip("fewer than two GPUs")
    n = 5000
    rng = np.random.default_rng(1)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    dx, dy = kiln.from_numpy(x, device=1), kiln.from_numpy(y, device=1)
    out = kiln.empty(n, "float32", device=1)
    out.fill32(0x7FC00000)
    assert (dx.device, out.device) == (1, 1)
    scale_add[(kiln.cdiv(n, 1024),)](dx, dy, out, n, 2.0, BLOCK=1024)
    np.testing.assert_allclose(out.numpy(), 2.0 * x.astype(np.float64) + y, rtol=1e-6)
    on0 = kiln.from_numpy(x, device=0)
    with pytest.raises(Exception) as e:
        scale_add[(1,)](on0, dy, out, n, 2.0, BLOCK=1024)
    assert "cuda:1" in str(e.value) and "cuda:0" in str(e.value)


def test_cupy_on_device1():
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("fewer than two GPUs")
    n = 3000
    with cupy.cuda.Device(1):
        x = cupy.arange(n, dtype=cupy.float32)
        y = cupy.ones(n, dtype=cupy.float32)
        out = cupy.full(n, cupy.nan, dtype=cupy.float32)
        cupy.cuda.Device(1).synchronize()
    scale_add[(kiln.cdiv(n, 1024),)](x, y, out, n, 2.0, BLOCK=1024)
    with cupy.cuda.Device(1):
        cupy.cuda.Device(1).synchronize()
        np.testing.assert_array_equal(cupy.asnumpy(out), 2 * np.arange(n, dtype=np.float32) + 1)


# scale_add under the autotuner (BLOCK and num_warps from the configs).
tuned_scale_add = kiln.autotune(
    configs=[kiln.Config({"BLOCK": 256}), kiln.Config({"BLOCK": 1024}, num_warps=8)],
    key=["n"])(scale_add)


def test_autotune_times_on_the_device_of_the_arguments(torch2):
    torch = torch2
    n = 1 << 16
    x = torch.randn(n, device="cuda:1")
    y = torch.randn(n, device="cuda:1")
    out = torch.full_like(x, float("nan"))
    tuned_scale_add[lambda m: (kiln.cdiv(n, m["BLOCK"]),)](x, y, out, n, 0.5)
    torch.cuda.synchronize(1)
    assert relerr(out, 0.5 * x.double() + y.double()) < 1e-7
    assert tuned_scale_add.best_config is not None
    assert all(t > 0 for t in tuned_scale_add.configs_timings.values())
    assert torch.cuda.current_device() == 0


def test_torch_distributed_nccl_two_ranks():
    torch = torch_or_skip()
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1", PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(HERE, "dist_worker.py")]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert sorted(re.findall(r"rank (\d) ok", r.stdout)) == ["0", "1"], r.stdout[-3000:]
    del torch
