//===- CudaDriver.cpp - The CUDA driver API through dlopen ----------------===//
//
// This file implements Kiln's access to the CUDA driver: libcuda.so.1 is opened on first use,
// so libkiln loads on machines without a driver; every driver call is checked and a failure
// becomes a kiln::rt::Error naming the call and the CUDA error. It also implements device
// buffers, event timers and kernel launches with argument checking.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <vector>

using namespace kiln::rt;

namespace {
/// CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR (cuda.h).
constexpr int kAttrCCMajor = 75, kAttrCCMinor = 76;
/// CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL (cuda.h).
constexpr int kPointerAttrDeviceOrdinal = 9;
/// CUDA_ERROR_INVALID_CONTEXT and CUDA_ERROR_INVALID_HANDLE (cuda.h): what a launch on a
/// stream of another device's context fails with.
constexpr int kErrorInvalidContext = 201, kErrorInvalidHandle = 400;

/// At most this many devices per process (the launch path reads these tables without locks).
constexpr int kMaxDevices = 64;

/// Every device's CUdevice handle (filled once) and primary context (retained on first use,
/// never released: modules loaded in it live as long as the process).
struct Devices {
  std::once_flag once;
  int count = 0;
  int handles[kMaxDevices] = {};
  std::atomic<void *> contexts[kMaxDevices] = {};
  std::mutex retainMutex;
};
Devices &devices() {
  static Devices *d = new Devices(); // never destroyed: kernels may launch at exit
  return *d;
}

std::string deviceName(int ordinal) {
  return ordinal < 0 ? std::string("an unknown device") : "cuda:" + std::to_string(ordinal);
}
} // namespace

const Driver &kiln::rt::driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      d.loadError = std::string("no CUDA driver/GPU: cannot open libcuda.so.1 (") + dlerror() + ")";
      return;
    }
    bool ok = true;
    auto load = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) {
        ok = false;
        d.loadError = std::string("no usable CUDA driver: libcuda.so.1 lacks ") + name;
      }
    };
    load(d.cuInit, "cuInit");
    load(d.cuDeviceGetCount, "cuDeviceGetCount");
    load(d.cuDeviceGet, "cuDeviceGet");
    load(d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
    load(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    load(d.cuCtxSetCurrent, "cuCtxSetCurrent");
    load(d.cuCtxGetCurrent, "cuCtxGetCurrent");
    load(d.cuCtxGetDevice, "cuCtxGetDevice");
    load(d.cuStreamGetCtx, "cuStreamGetCtx");
    load(d.cuPointerGetAttribute, "cuPointerGetAttribute");
    load(d.cuCtxSynchronize, "cuCtxSynchronize");
    load(d.cuStreamSynchronize, "cuStreamSynchronize");
    load(d.cuStreamIsCapturing, "cuStreamIsCapturing");
    load(d.cuModuleLoadDataEx, "cuModuleLoadDataEx");
    load(d.cuModuleGetFunction, "cuModuleGetFunction");
    load(d.cuFuncSetAttribute, "cuFuncSetAttribute");
    load(d.cuFuncGetAttribute, "cuFuncGetAttribute");
    load(d.cuLaunchKernel, "cuLaunchKernel");
    load(d.cuMemAlloc, "cuMemAlloc_v2");
    load(d.cuMemFree, "cuMemFree_v2");
    load(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    load(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    load(d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    load(d.cuMemsetD32, "cuMemsetD32_v2");
    load(d.cuEventCreate, "cuEventCreate");
    load(d.cuEventRecord, "cuEventRecord");
    load(d.cuEventSynchronize, "cuEventSynchronize");
    load(d.cuEventElapsedTime, "cuEventElapsedTime");
    load(d.cuEventDestroy, "cuEventDestroy_v2");
    load(d.cuGetErrorName, "cuGetErrorName");
    load(d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    load(d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    load(d.cuMemcpyDtoD, "cuMemcpyDtoD_v2");
    load(d.cuMemsetD32Async, "cuMemsetD32Async");
    load(d.cuStreamCreate, "cuStreamCreate");
    load(d.cuStreamDestroy, "cuStreamDestroy_v2");
    load(d.cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    load(d.cuStreamEndCapture, "cuStreamEndCapture");
    load(d.cuGraphInstantiate, "cuGraphInstantiateWithFlags");
    load(d.cuGraphLaunch, "cuGraphLaunch");
    load(d.cuGraphExecDestroy, "cuGraphExecDestroy");
    load(d.cuGraphDestroy, "cuGraphDestroy");
    load(d.cuGraphGetNodes, "cuGraphGetNodes");
    load(d.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled");
    // Optional: only launches with launch_pdl need it.
    d.cuLaunchKernelEx =
        reinterpret_cast<decltype(d.cuLaunchKernelEx)>(dlsym(lib, "cuLaunchKernelEx"));
    if (!ok)
      return;
    int count = 0;
    if (d.cuInit(0) != 0 || d.cuDeviceGetCount(&count) != 0 || count == 0) {
      d.loadError = "no CUDA driver/GPU: cuInit found no device";
      return;
    }
    d.available = true;
  });
  return d;
}

namespace {
/// The errors a faulting kernel leaves in its context (cuda.h): CUDA_ERROR_ILLEGAL_ADDRESS
/// (700) and 710..719 (assert, hardware stack error, illegal instruction, misaligned address,
/// invalid address space, invalid PC, launch failed, ...). They are sticky: every later call
/// in that context fails with them.
bool isKernelFault(int result) { return result == 700 || (result >= 710 && result <= 719); }

/// The last Kiln kernel launched on each device (its name lives as long as the process, as
/// the JIT's kernels do), for the message of a sticky fault seen by a later call.
struct LastLaunch {
  std::atomic<const char *> kernel{nullptr};
  std::atomic<CUstream> stream{nullptr};
};
LastLaunch lastLaunch[kMaxDevices];

} // namespace

std::string kiln::rt::describeError(int result, const char *call) {
  const char *name = nullptr;
  const Driver &d = driver();
  if (d.cuGetErrorName)
    d.cuGetErrorName(result, &name);
  std::string what = std::string("CUDA error in ") + call + ": " + (name ? name : "unknown") +
                     " (" + std::to_string(result) + ")";
  if (!isKernelFault(result))
    return what;
  // A kernel faulted earlier; this call only observed it. Name the likely culprit.
  int device = -1;
  try {
    device = currentContextDevice();
  } catch (const Error &) { // the context may be too broken to say
  }
  what += ": a kernel faulted on " + deviceName(device) +
          ", and the device's context is unusable from now on";
  if (device >= 0 && device < kMaxDevices) {
    if (const char *kernel = lastLaunch[device].kernel.load(std::memory_order_relaxed)) {
      char stream[32];
      std::snprintf(stream, sizeof(stream), "%p",
                    static_cast<void *>(lastLaunch[device].stream.load(std::memory_order_relaxed)));
      what += std::string("; the last Kiln kernel launched there was '") + kernel + "' (stream " +
              stream + ")";
    }
  }
  return what + ". Rerun with KILN_DEBUG=1 (each launch then waits for its kernel and names "
                "the one that faults) or under compute-sanitizer";
}

void kiln::rt::check(int result, const char *call) {
  if (result != 0)
    throw Error(describeError(result, call));
}

const Driver &kiln::rt::requireDriver() {
  const Driver &d = driver();
  if (!d.available)
    throw Error(d.loadError);
  // Respect the context the caller (torch, CuPy, the CUDA runtime) made current; with none,
  // device 0's primary context, as the CUDA runtime's first call does.
  void *ctx = nullptr;
  if (d.cuCtxGetCurrent(&ctx) != 0 || !ctx)
    check(d.cuCtxSetCurrent(primaryContext(0)), "cuCtxSetCurrent");
  return d;
}

bool kiln::rt::hasGPU() { return driver().available; }

/// The device table, its handles filled on first use.
static Devices &deviceTable(const Driver &d) {
  Devices &devs = devices();
  std::call_once(devs.once, [&] {
    int count = 0;
    if (d.cuDeviceGetCount(&count) != 0)
      count = 0;
    devs.count = std::min(count, kMaxDevices);
    for (int i = 0; i < devs.count; ++i)
      if (d.cuDeviceGet(&devs.handles[i], i) != 0)
        devs.handles[i] = -1;
  });
  return devs;
}

void *kiln::rt::primaryContext(int ordinal) {
  const Driver &d = driver();
  if (!d.available)
    throw Error(d.loadError);
  Devices &devs = deviceTable(d);
  if (ordinal < 0 || ordinal >= devs.count)
    throw Error("device " + std::to_string(ordinal) + " does not exist: this machine has " +
                std::to_string(devs.count) + " CUDA device" + (devs.count == 1 ? "" : "s") +
                " (0.." + std::to_string(devs.count - 1) + ")");
  if (void *ctx = devs.contexts[ordinal].load(std::memory_order_acquire))
    return ctx;
  std::lock_guard<std::mutex> lock(devs.retainMutex);
  if (void *ctx = devs.contexts[ordinal].load(std::memory_order_acquire))
    return ctx;
  void *ctx = nullptr;
  check(d.cuDevicePrimaryCtxRetain(&ctx, devs.handles[ordinal]), "cuDevicePrimaryCtxRetain");
  devs.contexts[ordinal].store(ctx, std::memory_order_release);
  return ctx;
}

int kiln::rt::deviceCount() {
  const Driver &d = driver();
  return d.available ? deviceTable(d).count : 0;
}

/// The ordinal of the device of context `ctx` (current on this thread when `current`); -1
/// when it is none of the machine's devices.
static int ordinalOfContext(const Driver &d, void *ctx, bool current) {
  // A primary context Kiln retained: found without a driver call.
  Devices &devs = deviceTable(d);
  for (int i = 0; i < devs.count; ++i)
    if (devs.contexts[i].load(std::memory_order_acquire) == ctx)
      return i;
  // Else ask the driver, with `ctx` current for the question.
  void *previous = nullptr;
  if (!current) {
    check(d.cuCtxGetCurrent(&previous), "cuCtxGetCurrent");
    check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  }
  int handle = 0;
  int result = d.cuCtxGetDevice(&handle);
  if (!current)
    d.cuCtxSetCurrent(previous);
  check(result, "cuCtxGetDevice");
  for (int i = 0; i < devs.count; ++i)
    if (devs.handles[i] == handle)
      return i;
  return -1;
}

int kiln::rt::currentContextDevice() {
  const Driver &d = driver();
  void *ctx = nullptr;
  if (!d.available || d.cuCtxGetCurrent(&ctx) != 0 || !ctx)
    return -1;
  return ordinalOfContext(d, ctx, /*current=*/true);
}

int kiln::rt::currentDevice() {
  const Driver &d = driver();
  if (!d.available)
    throw Error(d.loadError);
  int ordinal = currentContextDevice();
  return ordinal < 0 ? 0 : ordinal;
}

void kiln::rt::setDevice(int ordinal) {
  check(driver().cuCtxSetCurrent(primaryContext(ordinal)), "cuCtxSetCurrent");
}

int kiln::rt::pointerDevice(CUdeviceptr ptr) {
  const Driver &d = driver();
  int ordinal = -1;
  if (!d.available || !ptr ||
      d.cuPointerGetAttribute(&ordinal, kPointerAttrDeviceOrdinal, ptr) != 0)
    return -1;
  return ordinal;
}

DeviceGuard::DeviceGuard(int ordinal) {
  const Driver &d = driver();
  if (!d.available)
    throw Error(d.loadError);
  void *ctx = primaryContext(ordinal), *current = nullptr;
  check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current == ctx)
    return;
  check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  previous = current;
  restore = current != nullptr;
}

DeviceGuard::~DeviceGuard() {
  if (restore)
    driver().cuCtxSetCurrent(previous);
}

std::string kiln::rt::getArch(int ordinal) {
  const Driver &d = requireDriver();
  int device = 0, major = 0, minor = 0;
  check(d.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  check(d.cuDeviceGetAttribute(&major, kAttrCCMajor, device), "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&minor, kAttrCCMinor, device), "cuDeviceGetAttribute");
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  // Hopper's warpgroup MMA and setmaxnreg exist only in the arch-specific target, whose code
  // runs on compute capability 9.0 exactly, which this device is.
  if (major == 9 && minor == 0)
    arch += "a";
  return arch;
}

int kiln::rt::getDeviceAttribute(int ordinal, int attribute) {
  const Driver &d = requireDriver();
  int device = 0, value = 0;
  check(d.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  check(d.cuDeviceGetAttribute(&value, attribute, device), "cuDeviceGetAttribute");
  return value;
}

void kiln::rt::synchronize() { check(requireDriver().cuCtxSynchronize(), "cuCtxSynchronize"); }

void kiln::rt::synchronize(int ordinal) {
  DeviceGuard guard(ordinal);
  check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

DeviceBuffer::DeviceBuffer(size_t n) : DeviceBuffer(n, -1) {}

DeviceBuffer::DeviceBuffer(size_t n, int ordinal) : bytes(n), device(ordinal) {
  if (ordinal < 0) { // in the current context, whichever it is
    check(requireDriver().cuMemAlloc(&ptr, n), "cuMemAlloc");
    device = currentDevice();
    noteDeviceMemory(device, int64_t(n));
    return;
  }
  DeviceGuard guard(ordinal);
  check(driver().cuMemAlloc(&ptr, n), "cuMemAlloc");
  noteDeviceMemory(device, int64_t(n));
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr) {
    driver().cuMemFree(ptr);
    noteDeviceMemory(device, -int64_t(bytes));
  }
}
// Copies and fills run in the buffer's device context (the copy engines of its device).
void DeviceBuffer::copyFromHost(const void *src, size_t n) {
  copyHostToDevice(ptr, src, n, device);
}
void DeviceBuffer::copyToHost(void *dst, size_t n) const { copyDeviceToHost(dst, ptr, n, device); }
void DeviceBuffer::copyFromDevice(const DeviceBuffer &src, size_t n, CUstream stream) {
  DeviceGuard guard(device);
  check(driver().cuMemcpyDtoDAsync(ptr, src.ptr, n, stream), "cuMemcpyDtoDAsync");
}
void DeviceBuffer::fill32(uint32_t value) { fillDevice32(ptr, value, bytes / 4, device); }

EventTimer::EventTimer() {
  const Driver &d = requireDriver();
  check(d.cuEventCreate(&begin, 0), "cuEventCreate");
  check(d.cuEventCreate(&end, 0), "cuEventCreate");
}
EventTimer::~EventTimer() {
  driver().cuEventDestroy(begin);
  driver().cuEventDestroy(end);
}
void EventTimer::start(CUstream stream) {
  check(driver().cuEventRecord(begin, stream), "cuEventRecord");
}
float EventTimer::stop(CUstream stream) {
  const Driver &d = driver();
  check(d.cuEventRecord(end, stream), "cuEventRecord");
  check(d.cuEventSynchronize(end), "cuEventSynchronize");
  float ms = 0;
  check(d.cuEventElapsedTime(&ms, begin, end), "cuEventElapsedTime");
  return ms;
}

Arg Arg::f32(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return {ArgKind::F32, b};
}
Arg Arg::f64(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return {ArgKind::F64, b};
}

void Kernel::launch(Grid grid, CUstream stream, const std::vector<Arg> &args) const {
  PreparedLaunch(*this, args)(grid, stream);
}

namespace {
/// cuda.h's CUlaunchAttribute and CUlaunchConfig (CUDA 12): the attribute's id, padded to 8
/// bytes, then a 64-byte value union; the launch's geometry, stream and attributes.
struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmaticStreamSerializationAllowed;
  } value;
};
struct LaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream stream;
  LaunchAttribute *attrs;
  unsigned numAttrs;
};
/// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (cuda.h).
constexpr int kLaunchAttrProgrammaticSerialization = 6;
} // namespace

void Kernel::launchRaw(Grid grid, CUstream stream, void **params,
                       bool programmaticDependentLaunch) const {
  if (host)
    return launchHost(grid, params);
  const Driver &d = driver();
  if (!d.available)
    throw Error(d.loadError);
  if (!function)
    throw Error("kernel '" + name + "' is not loaded on a device (get it with JIT::get)");
  // The kernel's device, whatever context is current: a cheap thread-local read when it is
  // already this one (the common case); otherwise switch for the launch and switch back, so
  // the caller's current device (torch's, CuPy's) is left as it was.
  void *current = nullptr;
  d.cuCtxGetCurrent(&current);
  if (current != context)
    check(d.cuCtxSetCurrent(context), "cuCtxSetCurrent");
  int result = 0;
  if (programmaticDependentLaunch) {
    if (!d.cuLaunchKernelEx)
      throw Error("kernel '" + name + "': launch_pdl needs cuLaunchKernelEx (a CUDA 12 driver)");
    LaunchAttribute attr{};
    attr.id = kLaunchAttrProgrammaticSerialization;
    attr.value.programmaticStreamSerializationAllowed = 1;
    LaunchConfig config{grid.x, grid.y, grid.z, numWarps * 32, 1, 1, sharedBytes, stream, &attr, 1};
    result = d.cuLaunchKernelEx(&config, function, params, nullptr);
  } else {
    result = d.cuLaunchKernel(function, grid.x, grid.y, grid.z, numWarps * 32, 1, 1, sharedBytes,
                              stream, params, nullptr);
  }
  if (result == 0 && device < kMaxDevices) {
    lastLaunch[device].kernel.store(name.c_str(), std::memory_order_relaxed);
    lastLaunch[device].stream.store(stream, std::memory_order_relaxed);
  }
  // Debug mode: wait for the kernel (unless the stream is being captured into a graph), so
  // that a fault is reported here, naming it.
  int capturing = 0;
  if (result == 0 && debug && d.cuStreamIsCapturing(stream, &capturing) == 0 && !capturing)
    result = d.cuStreamSynchronize(stream);
  if (current != context && current)
    d.cuCtxSetCurrent(current);
  if (result == 0)
    return;
  if (debug && isKernelFault(result)) {
    const char *error = nullptr;
    d.cuGetErrorName(result, &error);
    throw Error("kernel '" + name + "' faulted on " + deviceName(device) + ": " +
                (error ? error : "error") + " (" + std::to_string(result) +
                "), seen when debug mode waited for the launch; the device's context is "
                "unusable from now on. compute-sanitizer shows the faulting access");
  }
  std::string what = describeError(result, "cuLaunchKernel");
  void *streamCtx = nullptr;
  if ((result == kErrorInvalidHandle || result == kErrorInvalidContext) && stream &&
      d.cuStreamGetCtx(stream, &streamCtx) == 0 && streamCtx != context) {
    int other = -1;
    try {
      other = ordinalOfContext(d, streamCtx, /*current=*/false);
    } catch (const Error &) {
    }
    what += ": kernel '" + name + "' runs on " + deviceName(device) +
            " (the device of its arguments) but the stream belongs to " + deviceName(other) +
            "; pass a stream of " + deviceName(device);
  } else {
    what += " (kernel '" + name + "' on " + deviceName(device) + ")";
  }
  throw Error(what);
}

PreparedLaunch::PreparedLaunch(const Kernel &kernel, const std::vector<Arg> &args)
    : kernel(&kernel), storage(kernel.getSignature().size()), params(kernel.getSignature().size()) {
  const std::vector<ArgKind> &sig = kernel.getSignature();
  auto describe = [&] {
    std::string s;
    for (size_t i = 0; i < sig.size(); ++i)
      s += (i ? ", " : "") + std::string(toString(sig[i]));
    return s;
  };
  if (args.size() != sig.size())
    throw Error("kernel '" + kernel.getName() + "' expects " + std::to_string(sig.size()) +
                " arguments (" + describe() + "), got " + std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i)
    set(i, args[i]);
}

void PreparedLaunch::set(unsigned index, Arg arg) {
  ArgKind expected = kernel->getSignature().at(index);
  if (arg.kind != expected)
    throw Error("kernel '" + kernel->getName() + "' argument " + std::to_string(index) +
                ": expected " + toString(expected) + ", got " + toString(arg.kind));
  storage[index] = arg.bits; // little-endian: the low bytes hold narrower scalars
  // A tensor map is passed by value: the driver copies its 128 bytes from the caller's map.
  params[index] = expected == ArgKind::TensorMap ? reinterpret_cast<void *>(arg.bits)
                                                 : static_cast<void *>(&storage[index]);
}

void kiln::rt::encodeTensorMap(void *out, const TensorMapBox &box, ArgKind elemKind, uint64_t base,
                               const std::vector<int64_t> &shape,
                               const std::vector<int64_t> &strides) {
  const Driver &d = requireDriver();
  int dataType;
  unsigned elemBytes;
  switch (elemKind) {
  case ArgKind::F16:
    dataType = 6, elemBytes = 2;
    break;
  case ArgKind::BF16:
    dataType = 9, elemBytes = 2;
    break;
  case ArgKind::F32:
    dataType = 7, elemBytes = 4;
    break;
  case ArgKind::I8:
    dataType = 0, elemBytes = 1;
    break;
  case ArgKind::I32:
    dataType = 3, elemBytes = 4;
    break;
  default:
    throw Error(std::string("a tensor map of ") + toString(elemKind) +
                " elements is not supported");
  }
  if (shape.size() != box.rank || strides.size() + 1 != box.rank)
    throw Error("tensor map: expected " + std::to_string(box.rank) + " extents and " +
                std::to_string(box.rank - 1) + " strides");
  uint64_t dims[5], byteStrides[4];
  uint32_t elementStrides[5] = {1, 1, 1, 1, 1};
  for (unsigned i = 0; i < box.rank; ++i)
    dims[i] = uint64_t(shape[box.rank - 1 - i]);
  for (unsigned i = 0; i + 1 < box.rank; ++i)
    byteStrides[i] = uint64_t(strides[box.rank - 2 - i]) * elemBytes;
  int swizzle = box.swizzleBytes == 128 ? 3 : box.swizzleBytes == 64 ? 2 : 1;
  // No interleave, L2 promotion of 256 bytes (as Triton), out-of-bounds elements read zero.
  check(d.cuTensorMapEncodeTiled(out, dataType, box.rank, reinterpret_cast<void *>(base), dims,
                                 byteStrides, box.dims, elementStrides, 0, swizzle, 3, 0),
        "cuTensorMapEncodeTiled");
}

kiln::rt::ArgKind kiln::rt::tensorElementKind(char code) {
  switch (code) {
  case 'h':
    return ArgKind::F16;
  case 'H':
    return ArgKind::BF16;
  case 'f':
    return ArgKind::F32;
  case 'c':
  case 'C':
  case 'e':
  case 'E':
    return ArgKind::I8;
  case 'i':
  case 'I':
    return ArgKind::I32;
  default:
    return ArgKind::F64;
  }
}

void kiln::rt::encodeRecipeTensorMap(void *out, const std::vector<int64_t> &recipe,
                                     const std::vector<ArgKind> &signature, const uint64_t *args,
                                     unsigned boxRows) {
  // [base, dtype code, rank, block (rank), extents (rank), strides (rank - 1)], then
  // optionally a guard flag (0: the kernel reads the map unguarded; absent: guarded)
  const int64_t rank = recipe.size() >= 3 ? recipe[2] : 0;
  const bool flagged = rank >= 1 && recipe.size() == size_t(3 * rank + 3);
  // The elements a recipe may name (tensorElementKind of its dtype code): 16-bit floats, and
  // bytes (fp8, int8, uint8) the TMA moves as they are.
  const ArgKind kind = rank >= 1 && recipe[1] > 0 && recipe[1] < 128
                           ? tensorElementKind(char(recipe[1]))
                           : ArgKind::F64;
  if (rank < 1 || (recipe.size() != size_t(3 * rank + 2) && !flagged) || recipe[0] < 0 ||
      size_t(recipe[0]) >= signature.size() ||
      !(kind == ArgKind::F16 || kind == ArgKind::BF16 || kind == ArgKind::I8))
    throw Error("internal error: a malformed tensor map recipe");
  // A field's value (recipeFieldValue): a constant, or the word of a scalar parameter (an
  // int32 one where a factor multiplies it).
  auto value = [&](int64_t source) {
    return recipeFieldValue(source, [&](int64_t p) {
      if (size_t(p) >= signature.size() || (source >> 32 && signature[p] != ArgKind::I32))
        throw Error("internal error: a tensor map recipe names parameter " + std::to_string(p) +
                    " of " + std::to_string(signature.size()));
      uint64_t word = args[p];
      return signature[p] == ArgKind::I32 ? int64_t(int32_t(uint32_t(word))) : int64_t(word);
    });
  };
  std::vector<int64_t> block(recipe.begin() + 3, recipe.begin() + 3 + rank), shape, strides;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(int64_t(int32_t(value(recipe[3 + rank + i])))); // int32 extents
  for (int64_t i = 0; i + 1 < rank; ++i)
    strides.push_back(value(recipe[3 + 2 * rank + i]));
  encodeTensorMapIfRead(out, block, kind, args[recipe[0]], shape, strides, boxRows,
                        /*guarded=*/!flagged || recipe.back() != 0);
}

void kiln::rt::encodeTensorMapIfRead(void *out, const std::vector<int64_t> &block, ArgKind elemKind,
                                     uint64_t base, const std::vector<int64_t> &shape,
                                     const std::vector<int64_t> &strides, unsigned boxRows,
                                     bool guarded) {
  std::memset(out, 0, kTensorMapBytes);
  if (!boxRows)
    return;
  unsigned elemBytes =
      elemKind == ArgKind::I8                                                             ? 1
      : elemKind == ArgKind::F16 || elemKind == ArgKind::BF16 || elemKind == ArgKind::I16 ? 2
      : elemKind == ArgKind::F32 || elemKind == ArgKind::I32                              ? 4
                                                                                          : 8;
  auto positive = [](const std::vector<int64_t> &v) {
    return std::all_of(v.begin(), v.end(), [](int64_t e) { return e > 0; });
  };
  std::optional<TensorMapBox> box = getTensorMapBox(block, elemBytes, boxRows);
  if (!box || (guarded && !(positive(shape) && positive(strides))))
    return;
  encodeTensorMap(out, *box, elemKind, base, shape, strides);
}
