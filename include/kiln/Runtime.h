//===- Runtime.h - Kiln's GPU runtime ---------------------------*- C++ -*-===//
//
// This file declares Kiln's runtime: the CUDA driver API opened with dlopen (no link-time
// dependency on libcuda), device memory and events for tests and benchmarks, the compile cache
// (memory, then disk), and kernels bound to their launch configuration.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include "kiln/Compile.h"
#include "kiln/DType.h"
#include "kiln/Target/NVIDIA/TensorMap.h"
#include "kiln/kiln_c.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::rt {

/// Opaque CUDA driver handles (layout-compatible with cuda.h).
using CUstream = struct CUstream_st *;
using CUfunction = struct CUfunc_st *;
using CUdeviceptr = uint64_t;

/// Every runtime failure: a missing driver, a CUDA error (naming the call and the error), a
/// bad launch (naming the kernel and what was expected).
class KILN_EXPORT Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// True when libcuda loads and reports at least one device. Never throws.
KILN_EXPORT bool hasGPU();
/// The number of CUDA devices; 0 without a driver or a GPU. Never throws.
KILN_EXPORT int deviceCount();
/// The compile target of device `ordinal` ("sm_80", "sm_90a" for compute capability 9.0: the
/// arch-specific target with wgmma); throws Error without a GPU.
KILN_EXPORT std::string getArch(int ordinal = 0);
/// The device launches default to: the one whose context is current on this thread (set by
/// setDevice, torch.cuda.set_device, cupy.cuda.Device, ...), else 0. Throws without a GPU.
KILN_EXPORT int currentDevice();
/// The CUdevice_attribute `attribute` (cuda.h) of device `ordinal`, as cuDeviceGetAttribute
/// reports it; throws Error without a GPU or for an unknown attribute.
KILN_EXPORT int getDeviceAttribute(int ordinal, int attribute);
/// Makes device `ordinal`'s primary context current on this thread (the context torch and the
/// CUDA runtime use for that device). Throws Error naming the devices that exist.
KILN_EXPORT void setDevice(int ordinal);
/// The device holding the device memory at `ptr` (any address inside an allocation), or -1
/// when the driver does not know it as device memory (host memory, managed or freed).
KILN_EXPORT int pointerDevice(CUdeviceptr ptr);
/// Waits for all work of the current device (of `ordinal` when given).
KILN_EXPORT void synchronize();
KILN_EXPORT void synchronize(int ordinal);

/// Makes device `ordinal`'s primary context current for the guard's lifetime, then restores the
/// context that was current before (none: the new one stays, as the CUDA runtime would leave it).
class KILN_EXPORT DeviceGuard {
public:
  explicit DeviceGuard(int ordinal);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard &) = delete;
  DeviceGuard &operator=(const DeviceGuard &) = delete;

private:
  void *previous = nullptr;
  bool restore = false;
};

/// Device memory owned by the object, on the current device or on device `ordinal` (-1: the
/// current one).
class KILN_EXPORT DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(size_t bytes, int ordinal);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  CUdeviceptr get() const { return ptr; }
  size_t size() const { return bytes; }
  /// The device the memory is on.
  int getDevice() const { return device; }
  void copyFromHost(const void *src, size_t n);
  void copyToHost(void *dst, size_t n) const;
  void copyFromDevice(const DeviceBuffer &src, size_t n, CUstream stream = nullptr);
  /// Fills with a 32-bit pattern (used to poison outputs before a run).
  void fill32(uint32_t value);

private:
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  int device = 0;
};

/// Bytes of device memory DeviceBuffers hold now on device `ordinal`, and the most they held
/// since the process started or resetPeakMemory(ordinal) (what a model reports as its peak).
KILN_EXPORT size_t memoryAllocated(int ordinal);
KILN_EXPORT size_t maxMemoryAllocated(int ordinal);
KILN_EXPORT void resetPeakMemory(int ordinal);

/// Copies and fills at raw addresses of device `ordinal`'s memory (-1: the current device), in
/// that device's context. With a null `stream` they complete before returning (host copies are
/// synchronous); with a stream they are queued on it (cuMemcpy*Async, cuMemsetD32Async), and a
/// host buffer must then stay alive and unchanged until the stream reaches the copy.
KILN_EXPORT void copyHostToDevice(CUdeviceptr dst, const void *src, size_t bytes, int ordinal,
                                  CUstream stream = nullptr);
KILN_EXPORT void copyDeviceToHost(void *dst, CUdeviceptr src, size_t bytes, int ordinal,
                                  CUstream stream = nullptr);
KILN_EXPORT void copyDeviceToDevice(CUdeviceptr dst, CUdeviceptr src, size_t bytes, int ordinal,
                                    CUstream stream = nullptr);
KILN_EXPORT void fillDevice32(CUdeviceptr dst, uint32_t value, size_t count, int ordinal,
                              CUstream stream = nullptr);

/// A CUDA stream of device `ordinal` (-1: the current device) owned by the object: created
/// non-blocking (it does not wait for the legacy default stream), destroyed with it.
class KILN_EXPORT Stream {
public:
  explicit Stream(int ordinal = -1);
  ~Stream();
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  CUstream get() const { return stream; }
  int getDevice() const { return device; }
  /// Waits until the stream's work is done (a kernel fault shows here, naming the kernel).
  void synchronize() const;

private:
  CUstream stream = nullptr;
  int device = 0;
};

/// A CUDA graph recorded by stream capture and replayed with one launch: what the launches,
/// copies and fills queued on `stream` between beginCapture and endCapture did, with the same
/// arguments (addresses and scalars) every replay. Capture is thread-local (other threads'
/// work is unaffected); the legacy default stream cannot be captured.
class KILN_EXPORT Graph {
public:
  Graph() = default;
  ~Graph();
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  /// Starts recording `stream` (a stream of this process, not the default stream). Throws
  /// Error when a capture is already running or the stream is the default one.
  void beginCapture(CUstream stream, int ordinal = -1);
  /// Ends the recording and instantiates the graph; returns its number of nodes. Throws Error
  /// (naming the cause the driver gives) when the capture was invalidated by an operation that
  /// may not be captured (a synchronization, a copy to pageable memory, ...).
  size_t endCapture();
  /// Replays the instantiated graph on `stream` (null: the stream it was captured on).
  void launch(CUstream stream = nullptr) const;
  bool isCapturing() const { return capturing != nullptr; }
  bool isReady() const { return exec != nullptr; }

private:
  void reset();
  void *graph = nullptr, *exec = nullptr;
  CUstream capturing = nullptr, captured = nullptr;
  int device = 0;
};

/// True when kernels run on the host backend by default: $KILN_BACKEND is "cpu", or it is
/// unset (or "auto") and there is no GPU. "gpu" forces the device (and errors without one).
KILN_EXPORT bool useHostBackend();

/// Memory for kernel arguments on either backend: 64-byte aligned host memory for host
/// kernels (get() is its address), device memory otherwise. Owned by the object.
class KILN_EXPORT Buffer {
public:
  Buffer(size_t bytes, bool host);
  ~Buffer();
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  bool isHost() const { return !device; }
  /// The address kernels take: a host address or a CUdeviceptr.
  uint64_t get() const;
  size_t size() const { return bytes; }
  void copyFromHost(const void *src, size_t n);
  void copyToHost(void *dst, size_t n) const;
  void fill32(uint32_t value);

private:
  size_t bytes = 0;
  void *hostData = nullptr;
  std::unique_ptr<DeviceBuffer> device;
};

/// Times device work with events on a stream: milliseconds between start() and stop().
class KILN_EXPORT EventTimer {
public:
  EventTimer();
  ~EventTimer();
  void start(CUstream stream = nullptr);
  float stop(CUstream stream = nullptr);

private:
  void *begin = nullptr, *end = nullptr;
};

/// The kind of a kernel parameter, as the launch checks it.
/// TensorMap: the 128-byte CUtensorMap of a tensor descriptor, passed by value; its Arg holds
/// the host address of the map (kTensorMapAlign-aligned), which must outlive the launch.
/// (kiln/DType.h: the kinds every door shares.)
using kiln::ArgKind;
using kiln::toString;

/// One launch argument: a device pointer or a scalar, tagged with its kind.
struct KILN_EXPORT Arg {
  ArgKind kind;
  uint64_t bits; ///< the value's bytes, zero-extended
  static Arg ptr(CUdeviceptr p) { return {ArgKind::Pointer, p}; }
  static Arg i32(int32_t v) { return {ArgKind::I32, uint32_t(v)}; }
  static Arg i64(int64_t v) { return {ArgKind::I64, uint64_t(v)}; }
  static Arg tensorMap(const void *map) { return {ArgKind::TensorMap, uint64_t(map)}; }
  static Arg f32(float v);
  static Arg f64(double v);
};

/// The tensor-map geometry the compiler and the host encoding share (TMA boxes, map size):
/// kiln/Target/NVIDIA/TensorMap.h.
using nvidia::getTensorMapBox;
using nvidia::kTensorMapAlign;
using nvidia::kTensorMapBytes;
using nvidia::TensorMapBox;

/// Encodes into `out` (kTensorMapBytes, kTensorMapAlign-aligned) the tensor map of a row-major
/// tensor of `shape` at device address `base`, `strides` in elements for every dimension but
/// the last, copied in `box` (elements out of bounds read as zero). Throws Error when the
/// driver refuses (base not 16-byte aligned, a stride not a multiple of 16 bytes, ...).
KILN_EXPORT void encodeTensorMap(void *out, const TensorMapBox &box, ArgKind elemKind,
                                 uint64_t base, const std::vector<int64_t> &shape,
                                 const std::vector<int64_t> &strides);

/// encodeTensorMap of `block` boxes where a kernel reads the map, else zeros into `out`: the
/// kernel copies through it (`boxRows` > 0, getTensorMapBoxRows) and the TMA can (getTensor
/// MapBox), and for a `guarded` map (one the compiler made, read only where its extents and
/// strides are positive: the loop as written runs otherwise) every extent and stride is
/// positive.
KILN_EXPORT void encodeTensorMapIfRead(void *out, const std::vector<int64_t> &block,
                                       ArgKind elemKind, uint64_t base,
                                       const std::vector<int64_t> &shape,
                                       const std::vector<int64_t> &strides, unsigned boxRows,
                                       bool guarded);

/// The kind of a tensor map's elements of dtype code `code` (numpy's type characters, as the
/// launchers and tensor map recipes spell them): 'h' f16, 'H' bf16, 'f' f32, 'i' / 'I' 32-bit
/// integers, and bytes for 'c' / 'C' and fp8 'e' (e4m3) / 'E' (e5m2), which the TMA moves as
/// they are; F64 for any other code (encodeTensorMap refuses it with a clear message).
KILN_EXPORT ArgKind tensorElementKind(char code);

/// The value of a field of a tensor map recipe (an extent or a stride), from its `source`: a
/// constant (-1 - value), else `word(index)`, the value of the argument the low 32 bits name,
/// times the factor in the bits from 32 where there is one (an extent `NUM_TOKENS * TOPK`:
/// an int32 argument, multiplied in int32 as the kernel does). Both launchers decode recipes
/// with it (encodeRecipeTensorMap; the Python launcher's maps, whose indices name arguments
/// or tuple elements).
template <class Word> int64_t recipeFieldValue(int64_t source, Word &&word) {
  if (source < 0)
    return -1 - source;
  int64_t factor = source >> 32, value = word(source & 0xFFFFFFFF);
  if (!factor)
    return value;
  return int32_t(uint32_t(int64_t(int32_t(uint32_t(uint64_t(value)))) * factor));
}

/// Encodes into `out` (kTensorMapBytes, kTensorMapAlign-aligned) the tensor map the compiler
/// appended to a kernel with `recipe` (kiln::addPointerTileMaps), from the launch's packed
/// argument words `args` (one per parameter of the kernel before its maps, as `signature`
/// passes them) and `boxRows`, the kernel's box rows for that map (getTensorMapBoxRows). Leaves
/// zeros where the kernel never reads the map: `boxRows` 0, or an extent or the stride not
/// positive (its loop of pointer loads runs instead), unless the recipe ends in a 0 guard
/// flag (the C++ DSL's make_tensor_descriptor: the kernel reads the map unguarded, so a
/// map the driver refuses throws). Throws Error for a malformed recipe.
KILN_EXPORT void encodeRecipeTensorMap(void *out, const std::vector<int64_t> &recipe,
                                       const std::vector<ArgKind> &signature, const uint64_t *args,
                                       unsigned boxRows);

/// A launch grid (programs along x, y, z).
struct Grid {
  unsigned x = 1, y = 1, z = 1;
};

/// The architecture name of the host backend: JIT("cpu") compiles kernels for this machine's
/// CPU, and its kernels run on the host with host pointers as their pointer arguments.
using kiln::kHostArch;

/// Host memory a pointer argument may reach: [begin, begin + bytes), and the argument's name
/// (may be empty) for messages. Debug-mode host kernels check every unmasked load and store
/// against the buffers of their launch; a memory fault names the nearest one.
struct HostBuffer {
  uint64_t begin = 0;
  uint64_t bytes = 0;
  std::string name;
};

/// The host backend's loaded code of one kernel (lib/Runtime/HostRuntime.cpp).
struct HostCode;

/// A compiled kernel loaded on the device: its function, signature and launch configuration.
/// `launch` checks the arguments against the signature; a PreparedLaunch skips that.
class KILN_EXPORT Kernel {
public:
  const std::string &getName() const { return name; }
  bool isLoaded() const { return function != nullptr; }
  const std::vector<ArgKind> &getSignature() const { return signature; }
  unsigned getNumWarps() const { return numWarps; }
  /// Dynamic shared memory every launch gets (the kernel's shared rings), in bytes.
  unsigned getSharedBytes() const { return sharedBytes; }
  /// Static shared memory of the loaded kernel (the ops' scratch pool), as the driver reports
  /// it (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES); 0 before it is loaded and for host kernels.
  unsigned getStaticSharedBytes() const { return staticSharedBytes; }
  /// Registers per thread and local memory (spills and stack) per thread in bytes, as the
  /// driver reports them for the loaded kernel; 0 before it is loaded and for host kernels.
  unsigned getNumRegs() const { return numRegs; }
  unsigned getLocalBytes() const { return localBytes; }
  /// Per parameter: the rows of the TMA boxes the kernel copies through that tensor map
  /// (getTensorMapBox's `boxRows`), or 0 (not a tensor map, or one the kernel does not copy
  /// through, whose bytes it never reads).
  const std::vector<uint16_t> &getTensorMapBoxRows() const { return tensorMapBoxRows; }
  /// Checks `args` against the signature (count and kinds), then launches.
  void launch(Grid grid, CUstream stream, const std::vector<Arg> &args) const;
  /// Launches with already-packed parameter pointers (one per parameter); no checks. The
  /// launch runs on the kernel's device and leaves the current context as it found it;
  /// `stream` must belong to that device. A host kernel runs the whole grid on the host
  /// before returning (`stream` unused). `programmaticDependentLaunch` (Triton's launch_pdl)
  /// lets the grid start while the stream's previous kernel finishes (cuLaunchKernelEx with
  /// programmatic stream serialization, sm_90+): the kernel waits for it with
  /// griddepcontrol.wait (tl.extra.cuda.gdc_wait).
  void launchRaw(Grid grid, CUstream stream, void **params,
                 bool programmaticDependentLaunch = false) const;
  /// True for a kernel of the host backend (compiled by JIT("cpu")).
  bool isHost() const { return host != nullptr; }
  /// True when the kernel was compiled in debug mode (host: bounds-checked accesses).
  bool isDebug() const { return debug; }
  /// The device the kernel is loaded on (its launches run there, whatever device is current);
  /// -1 for host kernels and kernels compiled but not loaded.
  int getDevice() const { return device; }
  /// Runs a host kernel over `grid`: programs in parallel on a thread pool of
  /// $KILN_CPU_THREADS threads (default: all cores; 1 runs them in order on this thread).
  /// A debug-mode kernel checks every unmasked access against `buffers` (empty: unchecked)
  /// and throws Error naming the kernel, the source line and the program id of the first
  /// access outside them; `tl.device_assert` failures throw likewise. In any mode, a memory
  /// fault of the kernel's code (SIGSEGV, SIGBUS) throws Error naming the kernel, the program,
  /// the address and the nearest buffer (or pointer argument) instead of killing the process.
  void launchHost(Grid grid, void **params, const std::vector<HostBuffer> &buffers = {}) const;

private:
  friend class JIT;
  std::string name;
  std::vector<ArgKind> signature;
  std::vector<uint16_t> tensorMapBoxRows;
  unsigned numWarps = 4;
  unsigned sharedBytes = 0, staticSharedBytes = 0;
  unsigned numRegs = 0, localBytes = 0;
  bool debug = false;
  int device = -1;
  void *context = nullptr; ///< the primary context of `device`
  CUfunction function = nullptr;
  /// The host backend's loaded code (null for GPU kernels).
  std::shared_ptr<HostCode> host;
};

/// A kernel bound to fixed argument storage: a launch is cuLaunchKernel on pointers into that
/// storage, nothing else. Update an argument with set(); the kinds were checked once.
class KILN_EXPORT PreparedLaunch {
public:
  PreparedLaunch(const Kernel &kernel, const std::vector<Arg> &args);
  void set(unsigned index, Arg arg);
  void operator()(Grid grid, CUstream stream = nullptr) const {
    kernel->launchRaw(grid, stream, const_cast<void **>(params.data()));
  }

private:
  const Kernel *kernel;
  std::vector<uint64_t> storage;
  std::vector<void *> params;
};

/// Where compiled kernels live on disk: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
/// ~/.cache/kiln (an empty variable counts as unset).
KILN_EXPORT std::string getCacheDir();

/// Statistics of a JIT, for tests and benchmarks.
struct JITStats {
  unsigned memoryHits = 0, diskHits = 0, compiles = 0, corruptEntries = 0;
};

/// Compiles kiln-dialect kernels (kiln/Compile.h's compileKernel) and loads them, through the
/// memory and disk caches. The cache key hashes the module's text, the options, the target
/// architecture and the compiler version. Disk
/// entries are written atomically (temporary file + rename) and verified when read; a corrupt
/// or truncated entry is recompiled and replaced.
class KILN_EXPORT JIT {
public:
  /// `arch` empty: each device's own architecture (a machine with an sm_80 and an sm_90 GPU
  /// gets a binary for each); kHostArch ("cpu"): the host backend, which works without a GPU
  /// and caches host object code the same way; else that architecture for every device.
  explicit JIT(std::string arch = "", std::string cacheDir = "");
  ~JIT();
  /// The kernel of `source` compiled with `options` (options.arch is ignored: the JIT's
  /// target, or with a per-device JIT that of `device`) and loaded on device `device` (-1: the
  /// current one). A kernel is compiled once per architecture and options and loaded once
  /// per device. Throws CompileError (located at the first error) when it does not compile,
  /// Error when it does not load, and Error without a GPU (except for the host backend).
  const Kernel &get(const kiln::KernelSource &source, const kiln::CompileOptions &options = {},
                    int device = -1);
  bool isHost() const { return arch == kHostArch; }
  /// The same kernel compiled (or found in the caches) but not loaded: its signature and name
  /// are known, launching it throws. Works without a GPU, and fills the cache get() reads.
  const Kernel &compile(const kiln::KernelSource &source, const kiln::CompileOptions &options = {});
  /// Compiles (or finds in the caches) without loading: a cubin assembled by nvJitLink (as
  /// relocatable code, cached apart from the PTX that get() has the driver assemble as a whole
  /// program). Works without a GPU; throws when nvJitLink is missing.
  std::vector<char> compileToCubin(const kiln::KernelSource &source,
                                   const kiln::CompileOptions &options = {});
  const JITStats &getStats() const { return stats; }
  /// The architecture compile() targets (per-device JITs: that of the device current when
  /// the JIT was made).
  const std::string &getArch() const { return arch; }

private:
  struct Entry;
  std::shared_ptr<Entry> lookupOrCompile(const kiln::KernelSource &source,
                                         kiln::CompileOptions options, bool cubin,
                                         const std::string &target);
  std::string arch, cacheDir;
  bool perDevice = false; ///< compile for each device's architecture
  JITStats stats;
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_H
