"""kiln.DeviceArray views, kiln.Stream, kiln.CUDAGraph (stream capture and replay) and the
device memory counters (python/kiln/runtime/graphs.py, lib/Runtime/Streams.cpp)."""
import numpy as np
import pytest

import kiln
import kiln.language as tl


@kiln.jit
def axpy(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * x + y, mask=mask)


def test_graph_errors_without_a_capture():
    g = kiln.CUDAGraph()
    with pytest.raises(kiln.KilnError, match="replay before a capture ended"):
        g.replay()
    with pytest.raises(kiln.KilnError, match="default stream cannot be captured"):
        g.capture_begin(0)
    assert not g.ready


@pytest.mark.gpu
def test_views_share_memory():
    host = np.arange(24, dtype=np.float32).reshape(4, 6)
    a = kiln.from_numpy(host)
    np.testing.assert_array_equal(a[1].numpy(), host[1])
    np.testing.assert_array_equal(a[1:3].numpy(), host[1:3])
    np.testing.assert_array_equal(a[-1].numpy(), host[-1])
    np.testing.assert_array_equal(a.reshape(6, -1).numpy(), host.reshape(6, 4))
    np.testing.assert_array_equal(a.view("int32").numpy(), host.view(np.int32))
    assert a.view("float16").shape == (4, 12)
    a[2].fill_(7.0)
    host[2] = 7.0
    np.testing.assert_array_equal(a.numpy(), host)
    a[0:2].copy_(a[2:4])
    host[0:2] = host[2:4]
    np.testing.assert_array_equal(a.numpy(), host)
    a[3].copy_(np.full(6, -1, np.float32))
    host[3] = -1
    np.testing.assert_array_equal(a.numpy(), host)
    assert a[1].data_ptr() == a.data_ptr() + 24
    with pytest.raises(IndexError):
        a[4]
    with pytest.raises(IndexError, match="step 1"):
        a[::2]
    with pytest.raises(ValueError, match="cannot reshape"):
        a.reshape(5, 5)
    with pytest.raises(ValueError, match="size mismatch"):
        a[0].copy_(a[0:2])


@pytest.mark.gpu
def test_kernel_on_views_and_a_stream():
    n = 1000
    buf = kiln.zeros([3, n])
    x, y, out = buf[0], buf[1], buf[2]
    xs = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    x.copy_(xs)
    y.fill_(1.0)
    s = kiln.Stream()
    axpy[(kiln.cdiv(n, 256),)](x, y, out, 2.0, n, BLOCK=256, stream=s.handle)
    s.synchronize()
    np.testing.assert_allclose(out.numpy(), 2.0 * xs + 1.0, rtol=1e-6)
    np.testing.assert_array_equal(buf[0].numpy(), xs)  # the other rows untouched


@pytest.mark.gpu
def test_graph_capture_and_replay():
    n = 4096
    x, y, out = kiln.zeros([n]), kiln.zeros([n]), kiln.zeros([n])
    s = kiln.Stream()
    grid = (kiln.cdiv(n, 512),)
    axpy[grid](x, y, out, 3.0, n, BLOCK=512, stream=s.handle)  # compile before capturing
    s.synchronize()
    g = kiln.CUDAGraph()
    with kiln.graph(g, stream=s):
        axpy[grid](x, y, out, 3.0, n, BLOCK=512, stream=s.handle)
        axpy[grid](out, y, out, 3.0, n, BLOCK=512, stream=s.handle)
    assert g.ready and g.num_nodes == 2
    rng = np.random.default_rng(1)
    for _ in range(3):  # new inputs copied into the same buffers, then one replay
        xs, ys = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        x.copy_(xs, stream=s)
        y.copy_(ys, stream=s)
        g.replay()
        s.synchronize()
        np.testing.assert_allclose(out.numpy(), 3.0 * (3.0 * xs + ys) + ys, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_capture_invalidated_is_an_error_and_the_stream_survives():
    n = 256
    x = kiln.zeros([n])
    s = kiln.Stream()
    axpy[(1,)](x, x, x, 1.0, n, BLOCK=256, stream=s.handle)
    g = kiln.CUDAGraph()
    with pytest.raises(kiln.KilnError):
        with kiln.graph(g, stream=s):
            axpy[(1,)](x, x, x, 1.0, n, BLOCK=256, stream=s.handle)
            s.synchronize()  # waiting for a stream that is being captured: not capturable
    assert not g.ready
    axpy[(1,)](x, x, x, 1.0, n, BLOCK=256, stream=s.handle)  # the stream still works
    s.synchronize()


@pytest.mark.gpu
def test_bfloat16_round_trip_and_strides():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    host = (np.arange(12, dtype=np.float32) / 3).astype(ml_dtypes.bfloat16).reshape(3, 4)
    a = kiln.from_numpy(host)
    assert a.dtype == "bfloat16" and a.strides == (8, 2)
    back = a.numpy()
    assert back.dtype == host.dtype
    np.testing.assert_array_equal(back.view(np.uint16), host.view(np.uint16))
    a[1].copy_(host[2])
    np.testing.assert_array_equal(a.numpy()[1].view(np.uint16), host[2].view(np.uint16))
    d = kiln.TensorDescriptor.from_tensor(a, [2, 4])
    assert d.shape == [3, 4] and d.strides == [4, 1]


@pytest.mark.gpu
def test_memory_counters():
    kiln.reset_peak_memory_stats()
    before = kiln.memory_allocated()
    a = kiln.empty([1 << 20], "float32")
    assert kiln.memory_allocated() == before + (4 << 20)
    assert kiln.max_memory_allocated() >= before + (4 << 20)
    del a
    assert kiln.memory_allocated() == before
    assert kiln.max_memory_allocated() >= before + (4 << 20)
