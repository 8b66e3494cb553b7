"""kiln.runtime.graphs: streams Kiln owns, CUDA graphs recorded by stream capture, and device
memory counters -- what a program that runs without torch needs to replay a step (a model's
decode step) with one launch:

    s = kiln.Stream()
    g = kiln.CUDAGraph()
    with kiln.graph(g, stream=s):       # launches with stream=s.handle are recorded
        step(stream=s.handle)
    g.replay()                          # the whole step, one launch, same addresses
    s.synchronize()

A kernel launched during a capture must have been launched once before it (its compile and
module load are not stream work); inputs change between replays by copying into the same
buffers (`DeviceArray.copy_(host, stream=s)`). Names follow torch.cuda (CUDAGraph,
capture_begin/capture_end/replay, graph, memory_allocated/max_memory_allocated).
"""

from .. import _C
from .driver import _device_index

__all__ = ["Stream", "CUDAGraph", "graph", "memory_allocated", "max_memory_allocated",
           "reset_peak_memory_stats"]


class Stream:
    """A non-blocking CUDA stream of `device` (None: the current device), destroyed with the
    object. `handle` is the int every launch takes as `stream=`."""

    def __init__(self, device=None):
        self._stream = _C.Stream(_device_index(device))

    @property
    def handle(self):
        return self._stream.handle

    @property
    def device(self):
        return self._stream.device

    def synchronize(self):
        """Waits for the stream's work (a kernel fault is raised here, naming the kernel)."""
        self._stream.synchronize()

    def __int__(self):
        return self.handle

    def __repr__(self):
        return f"kiln.Stream(device={self.device}, handle=0x{self.handle:x})"


class CUDAGraph:
    """A CUDA graph: capture_begin(stream) ... capture_end() records what is queued on the
    stream, replay() launches all of it again."""

    def __init__(self):
        self._graph = _C.Graph()
        self._stream = None
        self.num_nodes = 0

    def capture_begin(self, stream, device=None):
        self._stream = stream  # keeps a kiln.Stream alive as long as the graph can replay
        self._graph.capture_begin(int(getattr(stream, "handle", stream)), _device_index(device))

    def capture_end(self):
        self.num_nodes = self._graph.capture_end()
        return self.num_nodes

    def replay(self, stream=None):
        """Launches the recorded work on `stream` (None: the stream it was captured on)."""
        self._graph.replay(0 if stream is None else int(getattr(stream, "handle", stream)))

    @property
    def ready(self):
        return self._graph.ready


class graph:
    """with kiln.graph(g, stream=s): records what is launched on `s` into `g` (a new
    kiln.Stream when `stream` is None: launch with stream=g_ctx.stream.handle)."""

    def __init__(self, cuda_graph, stream=None, device=None):
        self.cuda_graph = cuda_graph
        self.stream = stream if stream is not None else Stream(device)
        self.device = device

    def __enter__(self):
        self.cuda_graph.capture_begin(self.stream, self.device)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:  # end the capture so the stream is usable; keep the error
            try:
                self.cuda_graph.capture_end()
            except Exception:
                pass
            return False
        self.cuda_graph.capture_end()
        return False


def _ordinal(device):
    i = _device_index(device)
    return _C.current_device() if i < 0 else i


def memory_allocated(device=None):
    """Bytes of device memory Kiln arrays hold now on `device` (None: the current one)."""
    return _C.memory_allocated(_ordinal(device))


def max_memory_allocated(device=None):
    """The most bytes Kiln arrays held on `device` since start or reset_peak_memory_stats."""
    return _C.max_memory_allocated(_ordinal(device))


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory(_ordinal(device))
