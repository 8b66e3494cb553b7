//===- JIT.cpp - Compile, cache and load kernels --------------------------===//
//
// This file implements kiln::rt::JIT. A kernel's key is SHA-256 of its IR, options, target
// architecture, payload and compiler version. Lookup goes memory -> disk -> compile.
//
// What a GPU entry holds: the kernels the JIT loads are cached as PTX and assembled by the
// driver's JIT (cuModuleLoadDataEx), which compiles a whole program: nvJitLink and cuLink
// assemble PTX as relocatable code, which costs registers (LayerNorm backward: 155 instead of
// 139 per thread, one CTA per SM instead of two at 256 threads). The driver keeps its own cache
// of what it assembled (~/.nv/ComputeCache). compileToCubin asks for a cubin (nvJitLink) and
// is cached under its own key. A disk entry is
//   "KILNBIN3" | u32 numWarps | u32 sharedBytes | u32 payloadKind | u32 nameLen | name |
//   u32 nargs | kinds | u16 TMA box rows per argument | u64 payloadLen | payload |
//   u64 xxh3(all preceding bytes)
// written to a unique temporary file and renamed into place (atomic on POSIX), so concurrent
// writers of one key never expose a partial file; a reader that finds a short or mismatching
// entry counts it corrupt, recompiles and replaces it.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "RuntimeInternal.h"
#include "kiln/Compiler.h"
#include "kiln/Conversion/KilnToHost.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/xxhash.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <unistd.h>
#include <unordered_map>

using namespace kiln::rt;

namespace {
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'B', 'I', 'N', '3'};
/// What the payload holds: a cubin from nvJitLink, PTX for the driver's JIT, or a host object.
enum PayloadKind : uint32_t { kCubin = 1, kPTX = 2, kHostObject = 3 };
/// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (cuda.h): needed above 48 KB.
constexpr int kFuncAttrMaxDynamicShared = 8;
/// CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES and CU_FUNC_ATTRIBUTE_NUM_REGS (cuda.h).
constexpr int kFuncAttrLocalBytes = 3, kFuncAttrNumRegs = 4;
/// CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (cuda.h): the kernel's static shared memory.
constexpr int kFuncAttrStaticShared = 1;
/// CU_JIT_ERROR_LOG_BUFFER and CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES (cuda.h).
constexpr int kJitErrorLogBuffer = 5, kJitErrorLogBufferSize = 6;

std::string hexKey(const std::string &source, const std::string &target) {
  llvm::SHA256 sha;
  sha.update(source);
  sha.update(llvm::StringRef("\0", 1));
  sha.update(target + "/" + kiln::buildId());
  auto digest = sha.final();
  static const char *hex = "0123456789abcdef";
  std::string out;
  for (uint8_t b : digest) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

template <typename T> void put(std::string &out, T v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof(T));
}
template <typename T> bool readField(const char *&p, const char *end, T &v) {
  if (size_t(end - p) < sizeof(T))
    return false;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return true;
}
} // namespace

/// A compiled kernel: what is cached in memory and on disk, plus its loaded code: the host
/// backend's in `kernel`, a GPU kernel's per device (a copy of `kernel` with its function).
struct JIT::Entry {
  std::string payload;
  uint32_t payloadKind = kCubin;
  Kernel kernel;
  bool loaded = false;
  std::map<int, Kernel> onDevice;
};

struct JIT::Impl {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<Entry>> memory;
};

std::string kiln::rt::getCacheDir() {
  // An empty variable is an unset one (as kiln.knobs reads it): "" is no directory, and would
  // put the cache in whatever directory the process runs in.
  auto env = [](const char *name) -> const char * {
    const char *v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  if (const char *dir = env("KILN_CACHE_DIR"))
    return dir;
  llvm::SmallString<128> path;
  if (const char *xdg = env("XDG_CACHE_HOME"))
    path = xdg;
  else if (const char *home = env("HOME"))
    llvm::sys::path::append(path, home, ".cache");
  else
    path = "/tmp";
  llvm::sys::path::append(path, "kiln");
  return path.str().str();
}

JIT::JIT(std::string arch_, std::string cacheDir_)
    : arch(std::move(arch_)), cacheDir(std::move(cacheDir_)), impl(std::make_unique<Impl>()) {
  if (arch.empty()) {
    perDevice = true;
    arch = kiln::rt::getArch(currentDevice()); // the device's, not the member accessor
  }
  if (cacheDir.empty())
    cacheDir = getCacheDir();
}
JIT::~JIT() = default;

static std::string serialize(const JIT &jit, const std::string &payload, uint32_t kind,
                             const Kernel &k, const std::vector<ArgKind> &sig) {
  std::string out(kMagic, sizeof(kMagic));
  put<uint32_t>(out, k.getNumWarps());
  put<uint32_t>(out, k.getSharedBytes());
  put<uint32_t>(out, kind);
  put<uint32_t>(out, k.getName().size());
  out += k.getName();
  put<uint32_t>(out, sig.size());
  for (ArgKind a : sig)
    put<uint8_t>(out, uint8_t(a));
  for (size_t i = 0; i < sig.size(); ++i)
    put<uint16_t>(out, i < k.getTensorMapBoxRows().size() ? k.getTensorMapBoxRows()[i] : 0);
  put<uint64_t>(out, payload.size());
  out += payload;
  put<uint64_t>(out, llvm::xxh3_64bits(llvm::StringRef(out)));
  return out;
}

std::shared_ptr<JIT::Entry> JIT::lookupOrCompile(const kiln::KernelSource &source,
                                                 kiln::CompileOptions options, bool cubin,
                                                 const std::string &targetArch) {
  options.arch = targetArch;
  options.emitCubin = false;
  // Host code is specific to this machine's CPU; a cubin (relocatable, from nvJitLink) is
  // not the PTX the loader assembles as a whole program.
  std::string target = options.key();
  if (isHost())
    target += "/" + kiln::getHostTargetId();
  if (cubin && !isHost())
    target += "/cubin";
  std::string key = hexKey(source.getText(), target);
  bool debug = options.debug;
  if (auto it = impl->memory.find(key); it != impl->memory.end()) {
    ++stats.memoryHits;
    return it->second;
  }
  auto entry = std::make_shared<Entry>();
  llvm::SmallString<256> path(cacheDir);
  llvm::sys::path::append(path, key + ".kbin");

  // Disk: verify everything before trusting anything.
  if (auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                                /*RequiresNullTerminator=*/false)) {
    llvm::StringRef data = (*buffer)->getBuffer();
    const char *p = data.data(), *end = data.end();
    bool ok = data.size() > sizeof(kMagic) + 8 && std::memcmp(p, kMagic, sizeof(kMagic)) == 0;
    uint64_t stored = 0;
    if (ok) {
      std::memcpy(&stored, end - 8, 8);
      ok = llvm::xxh3_64bits(data.drop_back(8)) == stored;
    }
    uint32_t warps = 0, shared = 0, kind = 0, nameLen = 0, nargs = 0;
    uint64_t payloadLen = 0;
    p += sizeof(kMagic);
    end -= 8;
    ok = ok && readField(p, end, warps) && readField(p, end, shared) && readField(p, end, kind) &&
         readField(p, end, nameLen) && size_t(end - p) >= nameLen;
    if (ok) {
      entry->kernel.name.assign(p, nameLen);
      p += nameLen;
      ok = readField(p, end, nargs) && size_t(end - p) >= nargs;
    }
    if (ok) {
      for (uint32_t i = 0; i < nargs; ++i)
        entry->kernel.signature.push_back(ArgKind(uint8_t(p[i])));
      p += nargs;
      for (uint32_t i = 0; ok && i < nargs; ++i) {
        uint16_t rows = 0;
        ok = readField(p, end, rows);
        entry->kernel.tensorMapBoxRows.push_back(rows);
      }
      ok = ok && readField(p, end, payloadLen) && size_t(end - p) == payloadLen;
    }
    if (ok) {
      entry->payload.assign(p, payloadLen);
      entry->payloadKind = kind;
      entry->kernel.numWarps = warps;
      entry->kernel.sharedBytes = shared;
      entry->kernel.debug = debug;
      ++stats.diskHits;
      impl->memory[key] = entry;
      return entry;
    }
    ++stats.corruptEntries;
    entry = std::make_shared<Entry>();
  }

  // Compile in process (a CompileError, located at the user's line, goes to the caller).
  kiln::CompiledKernel compiled = kiln::compileKernel(source, options);
  ++stats.compiles;
  entry->kernel.name = compiled.name;
  entry->kernel.signature = compiled.signature;
  entry->kernel.numWarps = compiled.numWarps; // the launch's (a producer warpgroup added)
  entry->kernel.sharedBytes = compiled.sharedBytes;
  entry->kernel.tensorMapBoxRows = compiled.tensorMapBoxRows;
  entry->kernel.tensorMapBoxRows.resize(entry->kernel.signature.size(), 0);
  entry->kernel.debug = debug;
  std::vector<char> binary;
  std::string error;
  if (isHost()) {
    entry->payload.assign(compiled.hostObject.begin(), compiled.hostObject.end());
    entry->payloadKind = kHostObject;
  } else if (cubin) {
    if (!kiln::assembleWithNvJitLink(compiled.ptx, targetArch, binary, error))
      throw Error("kernel '" + compiled.name + "': no cubin: " + error);
    entry->payload.assign(binary.begin(), binary.end());
    entry->payloadKind = kCubin;
  } else {
    entry->payload = compiled.ptx + '\0'; // the driver JIT takes a NUL-terminated image
    entry->payloadKind = kPTX;
  }

  // Publish atomically: unique temporary file in the cache directory, then rename.
  if (!llvm::sys::fs::create_directories(cacheDir)) {
    std::string blob = serialize(*this, entry->payload, entry->payloadKind, entry->kernel,
                                 entry->kernel.signature);
    std::string tmp = path.str().str() + ".tmp." + std::to_string(::getpid()) + "." +
                      std::to_string(reinterpret_cast<uintptr_t>(entry.get()));
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(blob.data(), blob.size());
    }
    if (llvm::sys::fs::rename(tmp, path))
      llvm::sys::fs::remove(tmp); // a failed publish only costs a recompile later
  }
  impl->memory[key] = entry;
  return entry;
}

const Kernel &JIT::get(const kiln::KernelSource &source, const kiln::CompileOptions &options,
                       int device) {
  std::lock_guard<std::mutex> lock(impl->mutex);
  if (isHost()) {
    std::shared_ptr<Entry> entry = lookupOrCompile(source, options, /*cubin=*/false, arch);
    if (entry->payloadKind != kHostObject)
      throw Error("kernel '" + entry->kernel.name + "': cached entry is not host code");
    if (!entry->loaded) {
      entry->kernel.host = loadHostCode(entry->payload, entry->kernel.name,
                                        kiln::host::getEntryName(entry->kernel.name));
      entry->loaded = true;
    }
    return entry->kernel;
  }
  if (device < 0)
    device = currentDevice();
  std::shared_ptr<Entry> entry = lookupOrCompile(source, options, /*cubin=*/false,
                                                 perDevice ? kiln::rt::getArch(device) : arch);
  if (auto it = entry->onDevice.find(device); it != entry->onDevice.end())
    return it->second;
  if (entry->payloadKind == kHostObject)
    throw Error("kernel '" + entry->kernel.name + "': cached entry is host code");
  // Load into the device's primary context (where torch and the CUDA runtime work too).
  DeviceGuard guard(device);
  const Driver &d = driver();
  Kernel kernel = entry->kernel;
  void *module = nullptr;
  // PTX (what get() caches) is assembled by the driver's JIT as a whole program; a cubin
  // loads as it is. The error log names what failed.
  std::string log(4096, '\0');
  int jitOptions[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize};
  void *values[] = {log.data(), reinterpret_cast<void *>(uintptr_t(log.size()))};
  if (int result = d.cuModuleLoadDataEx(&module, entry->payload.data(), 2, jitOptions, values)) {
    log.resize(std::strlen(log.c_str()));
    throw Error("kernel '" + kernel.name +
                "': the driver could not load it on cuda:" + std::to_string(device) + ": " +
                describeError(result, "cuModuleLoadDataEx") + (log.empty() ? "" : "\n" + log));
  }
  check(d.cuModuleGetFunction(&kernel.function, module, kernel.name.c_str()),
        "cuModuleGetFunction");
  // Dynamic shared memory past the default needs the kernel's opt-in.
  if (kernel.sharedBytes > 0)
    check(d.cuFuncSetAttribute(kernel.function, kFuncAttrMaxDynamicShared, kernel.sharedBytes),
          "cuFuncSetAttribute");
  int regs = 0, local = 0, staticShared = 0;
  check(d.cuFuncGetAttribute(&regs, kFuncAttrNumRegs, kernel.function), "cuFuncGetAttribute");
  check(d.cuFuncGetAttribute(&staticShared, kFuncAttrStaticShared, kernel.function),
        "cuFuncGetAttribute");
  kernel.staticSharedBytes = unsigned(staticShared);
  check(d.cuFuncGetAttribute(&local, kFuncAttrLocalBytes, kernel.function), "cuFuncGetAttribute");
  kernel.numRegs = unsigned(regs);
  kernel.localBytes = unsigned(local);
  kernel.device = device;
  kernel.context = primaryContext(device);
  return entry->onDevice.emplace(device, std::move(kernel)).first->second;
}

const Kernel &JIT::compile(const kiln::KernelSource &source, const kiln::CompileOptions &options) {
  std::lock_guard<std::mutex> lock(impl->mutex);
  return lookupOrCompile(source, options, /*cubin=*/false, arch)->kernel;
}

std::vector<char> JIT::compileToCubin(const kiln::KernelSource &source,
                                      const kiln::CompileOptions &options) {
  std::lock_guard<std::mutex> lock(impl->mutex);
  std::shared_ptr<Entry> entry = lookupOrCompile(source, options, /*cubin=*/!isHost(), arch);
  if (entry->payloadKind != kCubin)
    throw Error("kernel '" + entry->kernel.name + "' has no cubin (host code)");
  return std::vector<char>(entry->payload.begin(), entry->payload.end());
}
