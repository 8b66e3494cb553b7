//===- JitLink.cpp - PTX to cubin through nvJitLink -----------------------===//
//
// This file implements in-process assembly of PTX into a cubin with nvJitLink, opened with
// dlopen so that libkiln has no link-time dependency on the CUDA toolkit.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler.h"

#include <dlfcn.h>
#include <mutex>

namespace {

/// nvJitLink's C API (nvJitLink.h, CUDA 12+): a handle, an int result, NVJITLINK_SUCCESS = 0.
using Handle = void *;
using CreateFn = int (*)(Handle *, uint32_t, const char **);
using DestroyFn = int (*)(Handle *);
using AddDataFn = int (*)(Handle, int, const void *, size_t, const char *);
using CompleteFn = int (*)(Handle);
using SizeFn = int (*)(Handle, size_t *);
using GetFn = int (*)(Handle, void *);
constexpr int kInputPTX = 2; // NVJITLINK_INPUT_PTX

struct NvJitLink {
  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  AddDataFn addData = nullptr;
  CompleteFn complete = nullptr;
  SizeFn cubinSize = nullptr, errorLogSize = nullptr;
  GetFn cubin = nullptr, errorLog = nullptr;
  bool ok = false;
};

const NvJitLink &getNvJitLink() {
  static NvJitLink api;
  static std::once_flag once;
  std::call_once(once, [] {
    void *lib = nullptr;
    for (const char *name :
         {"libnvJitLink.so.13", "libnvJitLink.so.12", "libnvJitLink.so",
          "/usr/local/cuda/lib64/libnvJitLink.so.13", "/usr/local/cuda/lib64/libnvJitLink.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!lib)
      return;
    api.create = reinterpret_cast<CreateFn>(dlsym(lib, "nvJitLinkCreate"));
    api.destroy = reinterpret_cast<DestroyFn>(dlsym(lib, "nvJitLinkDestroy"));
    api.addData = reinterpret_cast<AddDataFn>(dlsym(lib, "nvJitLinkAddData"));
    api.complete = reinterpret_cast<CompleteFn>(dlsym(lib, "nvJitLinkComplete"));
    api.cubinSize = reinterpret_cast<SizeFn>(dlsym(lib, "nvJitLinkGetLinkedCubinSize"));
    api.cubin = reinterpret_cast<GetFn>(dlsym(lib, "nvJitLinkGetLinkedCubin"));
    api.errorLogSize = reinterpret_cast<SizeFn>(dlsym(lib, "nvJitLinkGetErrorLogSize"));
    api.errorLog = reinterpret_cast<GetFn>(dlsym(lib, "nvJitLinkGetErrorLog"));
    api.ok = api.create && api.destroy && api.addData && api.complete && api.cubinSize &&
             api.cubin && api.errorLogSize && api.errorLog;
  });
  return api;
}

} // namespace

bool kiln::assembleWithNvJitLink(llvm::StringRef ptx, llvm::StringRef arch,
                                 std::vector<char> &cubin, std::string &error) {
  const NvJitLink &api = getNvJitLink();
  if (!api.ok) {
    error = "nvJitLink (libnvJitLink.so) not found";
    return false;
  }
  std::string archOpt = "-arch=" + arch.str();
  const char *options[] = {archOpt.c_str(), "-O3"};
  Handle handle = nullptr;
  if (api.create(&handle, 2, options) != 0) {
    error = "nvJitLinkCreate failed for " + archOpt;
    return false;
  }
  bool ok = api.addData(handle, kInputPTX, ptx.data(), ptx.size(), "kiln.ptx") == 0 &&
            api.complete(handle) == 0;
  if (ok) {
    size_t size = 0;
    ok = api.cubinSize(handle, &size) == 0;
    cubin.resize(size);
    ok = ok && api.cubin(handle, cubin.data()) == 0;
  }
  if (!ok) {
    size_t size = 0;
    api.errorLogSize(handle, &size);
    std::string log(size, '\0');
    if (size)
      api.errorLog(handle, log.data());
    error = "nvJitLink rejected the PTX: " + log;
  }
  api.destroy(&handle);
  return ok;
}
