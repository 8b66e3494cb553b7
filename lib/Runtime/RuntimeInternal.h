//===- RuntimeInternal.h - Driver table shared by the runtime ---*- C++ -*-===//
//
// This file declares the dlopen'ed CUDA driver entry points (signatures as in cuda.h, with
// opaque handles) and the checking helpers the runtime files share.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define KILN_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "kiln/Runtime.h"

#include <string>

namespace kiln::rt {

struct Driver {
  bool available = false;
  std::string loadError;
  int (*cuInit)(unsigned) = nullptr;
  int (*cuDeviceGetCount)(int *) = nullptr;
  int (*cuDeviceGet)(int *, int) = nullptr;
  int (*cuDeviceGetAttribute)(int *, int, int) = nullptr;
  int (*cuDevicePrimaryCtxRetain)(void **, int) = nullptr;
  int (*cuCtxSetCurrent)(void *) = nullptr;
  int (*cuCtxGetCurrent)(void **) = nullptr;
  int (*cuCtxGetDevice)(int *) = nullptr;
  int (*cuStreamGetCtx)(CUstream, void **) = nullptr;
  int (*cuPointerGetAttribute)(void *, int, CUdeviceptr) = nullptr;
  int (*cuCtxSynchronize)() = nullptr;
  int (*cuStreamSynchronize)(CUstream) = nullptr;
  int (*cuStreamIsCapturing)(CUstream, int *) = nullptr;
  int (*cuModuleLoadDataEx)(void **, const void *, unsigned, int *, void **) = nullptr;
  int (*cuModuleGetFunction)(CUfunction *, void *, const char *) = nullptr;
  int (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  int (*cuFuncGetAttribute)(int *, int, CUfunction) = nullptr;
  int (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **) = nullptr;
  /// cuLaunchKernelEx (CUDA 12+; null when the driver lacks it): launches with attributes.
  int (*cuLaunchKernelEx)(const void *config, CUfunction, void **, void **) = nullptr;
  int (*cuMemAlloc)(CUdeviceptr *, size_t) = nullptr;
  int (*cuMemFree)(CUdeviceptr) = nullptr;
  int (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
  int (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
  int (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  int (*cuMemsetD32)(CUdeviceptr, unsigned, size_t) = nullptr;
  int (*cuEventCreate)(void **, unsigned) = nullptr;
  int (*cuEventRecord)(void *, CUstream) = nullptr;
  int (*cuEventSynchronize)(void *) = nullptr;
  int (*cuEventElapsedTime)(float *, void *, void *) = nullptr;
  int (*cuEventDestroy)(void *) = nullptr;
  int (*cuGetErrorName)(int, const char **) = nullptr;
  int (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream) = nullptr;
  int (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream) = nullptr;
  int (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t) = nullptr;
  int (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream) = nullptr;
  int (*cuStreamCreate)(CUstream *, unsigned) = nullptr;
  int (*cuStreamDestroy)(CUstream) = nullptr;
  /// Stream capture and graphs (cuStreamBeginCapture_v2, cuGraphInstantiateWithFlags).
  int (*cuStreamBeginCapture)(CUstream, int mode) = nullptr;
  int (*cuStreamEndCapture)(CUstream, void **graph) = nullptr;
  int (*cuGraphInstantiate)(void **exec, void *graph, unsigned long long flags) = nullptr;
  int (*cuGraphLaunch)(void *exec, CUstream) = nullptr;
  int (*cuGraphExecDestroy)(void *exec) = nullptr;
  int (*cuGraphDestroy)(void *graph) = nullptr;
  int (*cuGraphGetNodes)(void *graph, void **nodes, size_t *count) = nullptr;
  int (*cuTensorMapEncodeTiled)(void *, int, uint32_t, void *, const uint64_t *, const uint64_t *,
                                const uint32_t *, const uint32_t *, int, int, int, int) = nullptr;
};

/// The driver table (loaded once); `available` false without libcuda or a device.
const Driver &driver();
/// The driver with a context current on this thread: the one Kiln, torch or CuPy made
/// current, else device 0's primary context (as the CUDA runtime does); throws without a GPU.
const Driver &requireDriver();
/// The primary context of device `ordinal`, retained on first use and kept for the process
/// (Kiln's modules on that device live in it). Throws Error for a device that does not exist.
void *primaryContext(int ordinal);
/// The ordinal of the device whose context is current on this thread; -1 when none is.
int currentContextDevice();
/// Counts `bytes` (negative: freed) against device `ordinal`'s memoryAllocated (Streams.cpp).
void noteDeviceMemory(int ordinal, int64_t bytes);
/// "CUDA error in <call>: <name> (<code>)" for a failed driver call.
std::string describeError(int result, const char *call);
/// Throws Error(describeError(result, call)) unless `result` is CUDA_SUCCESS.
void check(int result, const char *call);

} // namespace kiln::rt

#endif // KILN_LIB_RUNTIME_RUNTIMEINTERNAL_H
