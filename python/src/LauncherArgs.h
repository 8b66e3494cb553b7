//===- LauncherArgs.h - Reading kernel[grid](...) arguments -----*- C++ -*-===//
//
// This file declares what Launcher.cpp's launch path uses from LauncherArgs.cpp: the
// per-argument reader that appends an argument's key tag and extracts its parameter bits,
// the interned names and type caches of the hot path, and the descriptor and device
// bookkeeping of one launch. Internal to the extension.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_LAUNCHERARGS_H
#define KILN_PYTHON_LAUNCHERARGS_H

#include "Launcher.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::python {

namespace pyb = pybind11;

/// How arguments of one Python type reach their device pointer (ArrayInterface: host
/// memory through __array_interface__, as numpy arrays).
enum class Access : uint8_t {
  Torch,
  DeviceArray,
  CudaArrayInterface,
  ArrayInterface,
  DLPack,
  Descriptor,  ///< kiln.TensorDescriptor (or Triton's: base, shape, strides, block_shape)
  NumpyScalar, ///< np.int64, np.float32, np.bool_...: the Python scalar its item() holds
  None
};

/// Interned attribute names used on the hot path.
struct Names {
  pyb::object dtype = pyb::str("dtype"), dataPtr = pyb::str("data_ptr"),
              isCuda = pyb::str("is_cuda"), cai = pyb::str("__cuda_array_interface__"),
              dlpack = pyb::str("__dlpack__"), numWarps = pyb::str("num_warps"),
              numStages = pyb::str("num_stages"), maxnreg = pyb::str("maxnreg"),
              enableFpFusion = pyb::str("enable_fp_fusion"), stream = pyb::str("stream"),
              getDevice = pyb::str("get_device"), device = pyb::str("device"),
              debug = pyb::str("debug"), ai = pyb::str("__array_interface__"),
              numCtas = pyb::str("num_ctas"), launchPdl = pyb::str("launch_pdl"),
              externLibs = pyb::str("extern_libs");
};

/// What launch-time code knows about Python types and torch.
struct TypeCache {
  std::unordered_map<PyTypeObject *, Access> access;
  std::unordered_map<PyObject *, char> torchDTypes;
  std::unordered_map<PyObject *, char> arrayDTypes; // numpy dtype objects (kept alive)
  pyb::object torchStream; // torch._C._cuda_getCurrentRawStream, once torch is seen
};
Names &names();
TypeCache &types();

/// What a launch reads from a tensor descriptor argument: the kernel takes its tensor map,
/// base pointer, extents and strides as separate parameters (python/kiln/codegen.py).
struct DescriptorArg {
  alignas(kiln::rt::kTensorMapAlign) uint8_t map[kiln::rt::kTensorMapBytes];
  uint64_t base = 0;
  char dtype = 0;
  std::vector<int64_t> shape, strides, block;
};

/// What the arguments of one GPU launch say about where it runs.
struct LaunchPlace {
  bool sawTorch = false; ///< a torch tensor was passed: torch's current stream is the default
  int device = -1;       ///< the device of the tensor arguments; -1: none seen yet
  PyObject *deviceParam = nullptr; ///< the name of the first argument on `device`
};

/// Bytes per element of a dtype code.
unsigned itemSizeOf(char code);
[[noreturn]] void typeError(const std::string &msg);
/// The Python type name of `obj`.
std::string typeName(PyObject *obj);
/// Serializes a constexpr value into the key.
void appendConstexpr(std::string &key, PyObject *v);
/// Appends argument `v`'s key tag (kind, dtype, specialization) for parameter `p` and sets
/// its parameter bits; notes its device in `place`; fills `hostBuf` (host arrays, for the CPU
/// backend's checks) and `desc` (tensor descriptors) when given.
void readArg(const Launcher::Param &p, PyObject *v, std::string &key, uint64_t &bits,
             LaunchPlace &place, const std::string &kernel, kiln::rt::HostBuffer *hostBuf,
             DescriptorArg *desc);
/// The arg_params field of element k of a tuple argument: index | (kTupleField + k) << 16
/// (TUPLE_FIELD in python/kiln/compiler/code_generator.py); at most kMaxTupleElements.
constexpr int kTupleField = 0x20;
constexpr int kMaxTupleElements = kDerivedMapField - kTupleField;
/// A tuple argument (Triton 3.3's tuple parameters): of what readArg reads but tensor
/// descriptors, and of tuples of those (nested, a NamedTuple too). Appends '(', the count, each
/// element's tag (a nested tuple's in parentheses) and ')' to `key`; sets the bits of the
/// elements, depth first, in `bits`; appends the host arrays' memory to `hostBufs` when given.
void readTuple(const Launcher::Param &p, PyObject *v, std::string &key, std::vector<uint64_t> &bits,
               LaunchPlace &place, const std::string &kernel,
               std::vector<kiln::rt::HostBuffer> *hostBufs);
/// The spec string Python compiles a parameter for, from its key tag at `pos` (advanced).
std::string specOf(const std::string &key, size_t &pos);
/// The index of the parameter named `k` (interned names compare by pointer first), or n.
size_t findParam(const std::vector<Launcher::Param> &params, PyObject *k);

} // namespace kiln::python

#endif // KILN_PYTHON_LAUNCHERARGS_H
