//===- HostRuntime.cpp - Loading and running host (CPU) kernels -----------===//
//
// This file implements the host backend's runtime: host objects are linked in process by one
// ORC LLJIT (each kernel in its own JITDylib, so specializations that share a name do not
// clash; libm and the compiler runtime resolve from the process), and a launch runs the grid
// on $KILN_CPU_THREADS threads that take chunks of linear program ids from a shared counter.
// The generated code calls back into the runtime through the context's function table (the
// ABI in kiln/Conversion/KilnToHost.h): bounds checks in debug mode, device_print and
// device_assert. The first failure of a launch is thrown as kiln::rt::Error after the grid.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

using namespace kiln::rt;

namespace kiln::rt {

struct HostCode {
  HostEntry entry = nullptr;
};

} // namespace kiln::rt

namespace {

/// The context every program of one launch receives. Starts with the function table.
struct LaunchContext {
  void *table[4];
  const Kernel *kernel = nullptr;
  const std::vector<HostBuffer> *buffers = nullptr;
  std::mutex mutex;
  std::atomic<bool> failed{false};
  std::string error;

  void fail(const std::string &message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!failed.exchange(true))
      error = message;
  }
};

std::string programId(int32_t x, int32_t y, int32_t z) {
  return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + ")";
}

/// The buffer nearest to `address` (one containing it is at distance 0), or null.
const HostBuffer *nearestBuffer(uint64_t address, const std::vector<HostBuffer> &buffers) {
  const HostBuffer *nearest = nullptr;
  uint64_t best = UINT64_MAX;
  for (const HostBuffer &b : buffers) {
    uint64_t end = b.begin + b.bytes;
    uint64_t d = address < b.begin ? b.begin - address : address >= end ? address - end : 0;
    if (d < best) {
      best = d;
      nearest = &b;
    }
  }
  return nearest;
}

/// kilnHostCheckAccess's work: masks off the lanes outside every buffer and reports the first
/// of the launch; whether any lane was outside.
bool checkAccess(void *ctxPtr, int32_t px, int32_t py, int32_t pz, const char *site,
                 const uint64_t *ptrs, uint8_t *mask, int64_t n, int64_t elemBytes,
                 int32_t isStore) {
  HostFaultPause pause; // a fault in here is Kiln's, not the kernel's
  auto *ctx = static_cast<LaunchContext *>(ctxPtr);
  bool outside = false;
  if (!ctx->buffers || ctx->buffers->empty())
    return false;
  for (int64_t i = 0; i < n; ++i) {
    if (!mask[i])
      continue;
    uint64_t a = ptrs[i];
    bool inside = false;
    for (const HostBuffer &b : *ctx->buffers)
      if (a >= b.begin && a + uint64_t(elemBytes) <= b.begin + b.bytes) {
        inside = true;
        break;
      }
    if (inside)
      continue;
    mask[i] = 0;
    outside = true;
    if (ctx->failed.load(std::memory_order_relaxed))
      continue;
    // Name the nearest buffer to make the mistake easy to see.
    std::string where;
    if (const HostBuffer *nearest = nearestBuffer(a, *ctx->buffers)) {
      char buf[160];
      std::string arg = nearest->name.empty() ? std::string("buffer argument")
                                              : "buffer argument '" + nearest->name + "'";
      if (a >= nearest->begin)
        std::snprintf(buf, sizeof(buf), "%" PRIu64 " bytes past the end of a %" PRIu64 "-byte %s",
                      a - (nearest->begin + nearest->bytes), nearest->bytes, arg.c_str());
      else
        std::snprintf(buf, sizeof(buf),
                      "%" PRIu64 " bytes before the start of a %" PRIu64 "-byte %s",
                      nearest->begin - a, nearest->bytes, arg.c_str());
      where = buf;
    }
    char addr[32];
    std::snprintf(addr, sizeof(addr), "0x%" PRIx64, a);
    ctx->fail(std::string(site) + ": error: in kernel '" + ctx->kernel->getName() +
              "': out-of-bounds " + (isStore ? "store" : "load") + " in program " +
              programId(px, py, pz) + ": element " + std::to_string(i) + " at address " + addr +
              " is outside every buffer argument" + (where.empty() ? "" : " (" + where + ")") +
              "; expected the mask to cover it");
  }
  return outside;
}

extern "C" void kilnHostCheckAccess(void *ctxPtr, int32_t px, int32_t py, int32_t pz,
                                    const char *site, const uint64_t *ptrs, uint8_t *mask,
                                    int64_t n, int64_t elemBytes, int32_t isStore) {
  // The program stops at its first bad access (its error is the launch's, or another
  // program's came first): nothing of it is still alive here.
  if (checkAccess(ctxPtr, px, py, pz, site, ptrs, mask, n, elemBytes, isStore))
    hostAbortProgram();
}

extern "C" int32_t kilnHostCheckRange(void *ctxPtr, uint64_t begin, uint64_t end) {
  auto *ctx = static_cast<LaunchContext *>(ctxPtr);
  if (begin >= end || !ctx->buffers || ctx->buffers->empty())
    return 1;
  for (const HostBuffer &b : *ctx->buffers)
    if (begin >= b.begin && end <= b.begin + b.bytes)
      return 1;
  return 0;
}

extern "C" void kilnHostPrint(void *ctxPtr, int32_t px, int32_t py, int32_t pz, const char *prefix,
                              const void *data, int32_t kind, int64_t n, int32_t hex) {
  HostFaultPause pause;
  auto *ctx = static_cast<LaunchContext *>(ctxPtr);
  std::lock_guard<std::mutex> lock(ctx->mutex);
  if (n == 0) {
    std::printf("pid %s %s\n", programId(px, py, pz).c_str(), prefix);
    std::fflush(stdout);
    return;
  }
  auto bits16ToFloat = [](uint16_t h, bool bf16) -> double {
    if (bf16) {
      uint32_t u = uint32_t(h) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    int exp = (h >> 10) & 31, man = h & 1023;
    double v = exp == 0    ? std::ldexp(double(man), -24)
               : exp == 31 ? (man ? NAN : INFINITY)
                           : std::ldexp(double(man | 1024), exp - 25);
    return (h & 0x8000) ? -v : v;
  };
  const char *p = static_cast<const char *>(data);
  for (int64_t i = 0; i < n; ++i) {
    std::string value;
    char buf[64];
    auto integer = [&](int64_t v, uint64_t u) {
      if (hex)
        std::snprintf(buf, sizeof(buf), "0x%" PRIx64, u);
      else
        std::snprintf(buf, sizeof(buf), "%" PRId64, v);
    };
    switch (kind) {
    case 0:
    case 1: {
      int8_t v;
      std::memcpy(&v, p + i, 1);
      integer(v, uint8_t(v));
      break;
    }
    case 2: {
      int16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      integer(v, uint16_t(v));
      break;
    }
    case 3: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      integer(v, uint32_t(v));
      break;
    }
    case 4:
    case 9: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      if (kind == 9)
        std::snprintf(buf, sizeof(buf), "0x%" PRIx64, uint64_t(v));
      else
        integer(v, uint64_t(v));
      break;
    }
    case 5:
    case 6: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      std::snprintf(buf, sizeof(buf), "%g", bits16ToFloat(h, kind == 6));
      break;
    }
    case 7: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      std::snprintf(buf, sizeof(buf), "%.9g", f);
      break;
    }
    default: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      std::snprintf(buf, sizeof(buf), "%.17g", d);
      break;
    }
    }
    std::printf("pid %s idx (%" PRId64 ") %s%s\n", programId(px, py, pz).c_str(), i, prefix, buf);
  }
  std::fflush(stdout);
}

void assertFail(void *ctxPtr, int32_t px, int32_t py, int32_t pz, const char *message,
                const char *site) {
  HostFaultPause pause;
  auto *ctx = static_cast<LaunchContext *>(ctxPtr);
  ctx->fail(std::string(site) + ": error: in kernel '" + ctx->kernel->getName() +
            "': device_assert failed in program " + programId(px, py, pz) +
            (message && *message ? std::string(": ") + message : std::string()));
}

extern "C" void kilnHostAssertFail(void *ctxPtr, int32_t px, int32_t py, int32_t pz,
                                   const char *message, const char *site) {
  assertFail(ctxPtr, px, py, pz, message, site);
  hostAbortProgram(); // as on the GPU, where a failed assert stops the kernel
}

/// The process-wide JIT that links host objects.
struct HostLinker {
  std::mutex mutex;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::string error;
  unsigned counter = 0;

  HostLinker() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto created = llvm::orc::LLJITBuilder().create();
    if (!created) {
      error = llvm::toString(created.takeError());
      return;
    }
    jit = std::move(*created);
  }
};

HostLinker &linker() {
  static HostLinker *instance = new HostLinker(); // lives as long as the code it loaded
  return *instance;
}

unsigned threadCount() {
  static unsigned count = [] {
    if (const char *env = std::getenv("KILN_CPU_THREADS")) {
      long v = std::strtol(env, nullptr, 10);
      if (v >= 1)
        return unsigned(v);
    }
    unsigned hw = std::thread::hardware_concurrency();
    return hw ? hw : 1u;
  }();
  return count;
}

} // namespace

std::shared_ptr<HostCode> kiln::rt::loadHostCode(const std::string &object,
                                                 const std::string &kernelName,
                                                 const std::string &entryName) {
  HostLinker &l = linker();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (!l.jit)
    throw Error("kernel '" + kernelName + "': the host JIT is unavailable: " + l.error);
  auto jd = l.jit->createJITDylib("kiln." + std::to_string(l.counter++));
  if (!jd)
    throw Error("kernel '" + kernelName + "': " + llvm::toString(jd.takeError()));
  auto generator = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      l.jit->getDataLayout().getGlobalPrefix());
  if (!generator)
    throw Error("kernel '" + kernelName + "': " + llvm::toString(generator.takeError()));
  jd->addGenerator(std::move(*generator));
  // The soft-float helpers LLVM calls for f16 conversions (__truncdfhf2, __extendhfsf2, ...)
  // are in libgcc_s, which the process's global scope may lack (a Python extension loads it
  // locally).
  if (auto gcc = llvm::orc::DynamicLibrarySearchGenerator::Load(
          "libgcc_s.so.1", l.jit->getDataLayout().getGlobalPrefix()))
    jd->addGenerator(std::move(*gcc));
  else
    llvm::consumeError(gcc.takeError());
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object, kernelName + ".o");
  if (auto err = l.jit->addObjectFile(*jd, std::move(buffer)))
    throw Error("kernel '" + kernelName +
                "': cannot link its host object: " + llvm::toString(std::move(err)));
  auto addr = l.jit->lookup(*jd, entryName);
  if (!addr)
    throw Error("kernel '" + kernelName +
                "': cannot find its host entry: " + llvm::toString(addr.takeError()));
  auto code = std::make_shared<HostCode>();
  code->entry = addr->toPtr<HostEntry>();
  return code;
}

/// "0x..." for an address.
static std::string hexAddress(uint64_t a) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, a);
  return buf;
}

/// Where `address` lies relative to the nearest of `buffers` (by name when it has one), or,
/// without buffers, to the nearest pointer argument below it.
static std::string nearestArgument(uint64_t address, const std::vector<HostBuffer> &buffers,
                                   const std::vector<ArgKind> &signature, void **params) {
  if (const HostBuffer *nearest = nearestBuffer(address, buffers)) {
    std::string what =
        nearest->name.empty() ? "a buffer argument" : "argument '" + nearest->name + "'";
    what += " (" + std::to_string(nearest->bytes) + " bytes at " + hexAddress(nearest->begin) + ")";
    if (address >= nearest->begin && address < nearest->begin + nearest->bytes)
      return "inside " + what + ": memory the kernel may not write (read-only?)";
    if (address < nearest->begin)
      return std::to_string(nearest->begin - address) + " bytes before the start of " + what;
    return std::to_string(address - (nearest->begin + nearest->bytes)) + " bytes past the end of " +
           what;
  }
  int bestIndex = -1;
  uint64_t bestBase = 0;
  for (size_t i = 0; i < signature.size(); ++i) {
    if (signature[i] != ArgKind::Pointer)
      continue;
    uint64_t base = *static_cast<uint64_t *>(params[i]);
    if (base <= address && (bestIndex < 0 || base > bestBase)) {
      bestIndex = int(i);
      bestBase = base;
    }
  }
  if (bestIndex < 0)
    return "below every pointer argument";
  return std::to_string(address - bestBase) + " bytes past pointer argument " +
         std::to_string(bestIndex) + " (" + hexAddress(bestBase) + ")";
}

void Kernel::launchHost(Grid grid, void **params, const std::vector<HostBuffer> &buffers) const {
  if (!host)
    throw Error("kernel '" + name + "' is not a host kernel (compile it with JIT(\"cpu\"))");
  int64_t total = int64_t(grid.x) * grid.y * grid.z;
  if (total == 0)
    return;
  LaunchContext ctx;
  ctx.table[0] = reinterpret_cast<void *>(&kilnHostCheckAccess);
  ctx.table[1] = reinterpret_cast<void *>(&kilnHostPrint);
  ctx.table[2] = reinterpret_cast<void *>(&kilnHostAssertFail);
  ctx.table[3] = reinterpret_cast<void *>(&kilnHostCheckRange);
  ctx.kernel = this;
  ctx.buffers = &buffers;
  int32_t dims[3] = {int32_t(grid.x), int32_t(grid.y), int32_t(grid.z)};
  HostEntry entry = host->entry;

  // Programs [begin, end) on this thread under the fault guard. On a fault, the chunk's
  // programs are run again one at a time to name the one that faults (the launch has failed:
  // its outputs are void; a deterministic kernel repeats the same accesses).
  auto runChunk = [&](HostFaultScope &guard, int64_t begin, int64_t end) {
    HostFault fault;
    if (guard.run(entry, params, dims, begin, end, &ctx, fault))
      return true;
    if (fault.signal == kHostAborted) // stopped after reporting its error
      return false;
    int64_t culprit = -1;
    HostFault exact;
    for (int64_t id = begin; end - begin > 1 && id < end && culprit < 0; ++id)
      if (!guard.run(entry, params, dims, id, id + 1, &ctx, exact))
        culprit = id, fault = exact;
    std::string where;
    if (culprit >= 0 || end - begin == 1) {
      int64_t id = culprit >= 0 ? culprit : begin;
      where = "in program " + programId(int32_t(id % grid.x), int32_t(id / grid.x % grid.y),
                                        int32_t(id / grid.x / grid.y));
    } else {
      where = "in one of the programs " + std::to_string(begin) + " to " + std::to_string(end - 1) +
              " (linear ids)";
    }
    if (fault.signal == SIGFPE)
      ctx.fail("kernel '" + name + "': arithmetic fault (SIGFPE) " + where +
               ": an integer division by zero or overflow. Rerun with KILN_DEBUG=1 (or "
               "debug=True) for the source line");
    else
      ctx.fail("kernel '" + name + "': memory fault (" +
               (fault.signal == SIGBUS ? "SIGBUS" : "SIGSEGV") + ") " + where + " at address " +
               hexAddress(fault.address) + ", " +
               nearestArgument(fault.address, buffers, signature, params) +
               "; the kernel accessed memory outside its arguments (an offset or a mask that "
               "lets it through). Rerun with KILN_DEBUG=1 (or debug=True) for the source line "
               "of the access");
    return false;
  };

  unsigned threads = std::min<int64_t>(threadCount(), total);
  if (threads <= 1) {
    HostFaultScope guard;
    runChunk(guard, 0, total);
  } else {
    // Chunks small enough to balance, large enough that the counter is not contended.
    int64_t chunk = std::max<int64_t>(1, total / (int64_t(threads) * 8));
    std::atomic<int64_t> next{0};
    auto work = [&] {
      HostFaultScope guard;
      while (!ctx.failed.load(std::memory_order_relaxed)) {
        int64_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
        if (begin >= total || !runChunk(guard, begin, std::min(total, begin + chunk)))
          return;
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t)
      pool.emplace_back(work);
    work();
    for (std::thread &t : pool)
      t.join();
  }
  if (ctx.failed)
    throw Error(ctx.error);
}

//===----------------------------------------------------------------------===//
// Backend choice and memory for either backend
//===----------------------------------------------------------------------===//

bool kiln::rt::useHostBackend() {
  const char *env = std::getenv("KILN_BACKEND");
  std::string backend = env ? env : "auto";
  if (backend == "cpu")
    return true;
  if (backend == "gpu")
    return false;
  return !hasGPU();
}

Buffer::Buffer(size_t n, bool host) : bytes(n) {
  if (!host) {
    device = std::make_unique<DeviceBuffer>(n);
    return;
  }
  hostData = std::aligned_alloc(64, (n + 63) / 64 * 64 + 64);
  if (!hostData)
    throw Error("cannot allocate " + std::to_string(n) + " bytes of host memory");
}

Buffer::~Buffer() { std::free(hostData); }

uint64_t Buffer::get() const {
  return device ? device->get() : uint64_t(reinterpret_cast<uintptr_t>(hostData));
}

void Buffer::copyFromHost(const void *src, size_t n) {
  if (device)
    return device->copyFromHost(src, n);
  std::memcpy(hostData, src, std::min(n, bytes));
}

void Buffer::copyToHost(void *dst, size_t n) const {
  if (device)
    return device->copyToHost(dst, n);
  std::memcpy(dst, hostData, std::min(n, bytes));
}

void Buffer::fill32(uint32_t value) {
  if (device)
    return device->fill32(value);
  for (size_t i = 0; i + 4 <= bytes; i += 4)
    std::memcpy(static_cast<char *>(hostData) + i, &value, 4);
}
