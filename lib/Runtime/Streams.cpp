//===- Streams.cpp - Streams, CUDA graphs, raw copies, memory counters ----===//
//
// This file implements what a program that keeps its own device memory needs beside kernels:
// streams it owns, stream capture into CUDA graphs replayed with one launch (a model's decode
// step), copies and fills at raw addresses (views into a larger allocation), and the counters
// behind kiln.memory_allocated / max_memory_allocated.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <atomic>

using namespace kiln::rt;

namespace {
constexpr int kMaxCountedDevices = 64;
std::atomic<int64_t> allocated[kMaxCountedDevices];
std::atomic<int64_t> peak[kMaxCountedDevices];

constexpr unsigned kStreamNonBlocking = 1;    // CU_STREAM_NON_BLOCKING
constexpr int kCaptureModeThreadLocal = 1;    // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
constexpr int kErrorCaptureInvalidated = 901; // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED

int resolve(int ordinal) { return ordinal < 0 ? currentDevice() : ordinal; }

bool counted(int ordinal) { return ordinal >= 0 && ordinal < kMaxCountedDevices; }
} // namespace

void kiln::rt::noteDeviceMemory(int ordinal, int64_t bytes) {
  if (!counted(ordinal))
    return;
  int64_t now = allocated[ordinal].fetch_add(bytes) + bytes;
  int64_t seen = peak[ordinal].load();
  while (now > seen && !peak[ordinal].compare_exchange_weak(seen, now)) {
  }
}

size_t kiln::rt::memoryAllocated(int ordinal) {
  return counted(ordinal) ? size_t(allocated[ordinal].load()) : 0;
}

size_t kiln::rt::maxMemoryAllocated(int ordinal) {
  return counted(ordinal) ? size_t(peak[ordinal].load()) : 0;
}

void kiln::rt::resetPeakMemory(int ordinal) {
  if (counted(ordinal))
    peak[ordinal].store(allocated[ordinal].load());
}

void kiln::rt::copyHostToDevice(CUdeviceptr dst, const void *src, size_t bytes, int ordinal,
                                CUstream stream) {
  DeviceGuard guard(resolve(ordinal));
  if (stream)
    check(driver().cuMemcpyHtoDAsync(dst, src, bytes, stream), "cuMemcpyHtoDAsync");
  else
    check(driver().cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
}

void kiln::rt::copyDeviceToHost(void *dst, CUdeviceptr src, size_t bytes, int ordinal,
                                CUstream stream) {
  DeviceGuard guard(resolve(ordinal));
  if (stream)
    check(driver().cuMemcpyDtoHAsync(dst, src, bytes, stream), "cuMemcpyDtoHAsync");
  else
    check(driver().cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH");
}

void kiln::rt::copyDeviceToDevice(CUdeviceptr dst, CUdeviceptr src, size_t bytes, int ordinal,
                                  CUstream stream) {
  DeviceGuard guard(resolve(ordinal));
  if (stream)
    check(driver().cuMemcpyDtoDAsync(dst, src, bytes, stream), "cuMemcpyDtoDAsync");
  else
    check(driver().cuMemcpyDtoD(dst, src, bytes), "cuMemcpyDtoD");
}

void kiln::rt::fillDevice32(CUdeviceptr dst, uint32_t value, size_t count, int ordinal,
                            CUstream stream) {
  DeviceGuard guard(resolve(ordinal));
  if (stream)
    check(driver().cuMemsetD32Async(dst, value, count, stream), "cuMemsetD32Async");
  else
    check(driver().cuMemsetD32(dst, value, count), "cuMemsetD32");
}

Stream::Stream(int ordinal) : device(resolve(ordinal)) {
  DeviceGuard guard(device);
  check(driver().cuStreamCreate(&stream, kStreamNonBlocking), "cuStreamCreate");
}

Stream::~Stream() {
  if (stream)
    driver().cuStreamDestroy(stream);
}

void Stream::synchronize() const {
  DeviceGuard guard(device);
  check(driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
}

Graph::~Graph() { reset(); }

void Graph::reset() {
  const Driver &d = driver();
  if (capturing) { // abandoned mid-capture: end it so that the stream is usable again
    void *partial = nullptr;
    d.cuStreamEndCapture(capturing, &partial);
    if (partial)
      d.cuGraphDestroy(partial);
    capturing = nullptr;
  }
  if (exec)
    d.cuGraphExecDestroy(exec);
  if (graph)
    d.cuGraphDestroy(graph);
  exec = graph = nullptr;
}

void Graph::beginCapture(CUstream stream, int ordinal) {
  if (capturing)
    throw Error("kiln.CUDAGraph: a capture is already running on this graph");
  if (!stream)
    throw Error("kiln.CUDAGraph: the default stream cannot be captured; capture on a "
                "kiln.Stream (or another stream the program created)");
  reset();
  device = resolve(ordinal);
  DeviceGuard guard(device);
  check(driver().cuStreamBeginCapture(stream, kCaptureModeThreadLocal), "cuStreamBeginCapture");
  capturing = stream;
}

size_t Graph::endCapture() {
  if (!capturing)
    throw Error("kiln.CUDAGraph: capture_end without capture_begin");
  const Driver &d = driver();
  DeviceGuard guard(device);
  CUstream stream = capturing;
  capturing = nullptr;
  int result = d.cuStreamEndCapture(stream, &graph);
  if (result == kErrorCaptureInvalidated)
    throw Error("kiln.CUDAGraph: the capture was invalidated by an operation that cannot be "
                "captured (a synchronization, a blocking copy, work on another stream that "
                "joined it); " +
                describeError(result, "cuStreamEndCapture"));
  check(result, "cuStreamEndCapture");
  check(d.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  captured = stream;
  size_t nodes = 0;
  check(d.cuGraphGetNodes(graph, nullptr, &nodes), "cuGraphGetNodes");
  return nodes;
}

void Graph::launch(CUstream stream) const {
  if (!exec)
    throw Error("kiln.CUDAGraph: replay before a capture ended");
  DeviceGuard guard(device);
  check(driver().cuGraphLaunch(exec, stream ? stream : captured), "cuGraphLaunch");
}
