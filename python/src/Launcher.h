//===- Launcher.h - Kiln's Python extension: shared declarations -*- C++ -*-===//
//
// This file declares what the pieces of kiln._C share: the device array type (kiln.empty,
// kiln.from_numpy), the handle of a loaded kernel, and the launcher that implements
// kernel[grid](...) in C++.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_SRC_LAUNCHER_H
#define KILN_PYTHON_SRC_LAUNCHER_H

#include "kiln/Runtime.h"

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace kiln::python {

/// At most this many kernel parameters (keeps the launch path free of heap allocation).
constexpr size_t kMaxParams = 128;
/// The arg_params field of a tensor map the kernel made from its arguments (above the
/// fields of a tensor descriptor argument, kDescriptorField in python/kiln/compiler).
constexpr int kDerivedMapField = 0x7F;

/// A contiguous device array over kiln::rt::DeviceBuffer: kiln.empty / kiln.from_numpy.
struct DeviceArray {
  std::shared_ptr<kiln::rt::DeviceBuffer> buffer;
  std::vector<int64_t> shape;
  std::string dtype; ///< numpy's name: "float32", "int32", "float16", "bfloat16", ...
  size_t itemSize = 0;
  size_t offset = 0; ///< bytes into the buffer: a view (a[i], a[i:j], reshape, view(dtype))
  uint64_t dataPtr() const { return buffer ? buffer->get() + offset : 0; }
  size_t numel() const {
    size_t n = 1;
    for (int64_t d : shape)
      n *= size_t(d);
    return n;
  }
};

/// A tensor descriptor argument as one launch read it (Launcher.cpp).
struct DescriptorArg;

/// A kernel loaded by the process-wide JIT (it lives as long as the process).
struct KernelHandle {
  const kiln::rt::Kernel *kernel = nullptr;
};

/// kernel[grid](*args, **kwargs) for one @kiln.jit function. JITFunction (Python) derives
/// from it, so `kernel[grid]` and the call are C++ up to cuLaunchKernel.
class Launcher {
public:
  struct Param {
    pybind11::str name;            ///< interned
    bool isConstexpr = false;      ///< annotated tl.constexpr
    bool noSpecialize = false;     ///< listed in do_not_specialize
    pybind11::object defaultValue; ///< null when the parameter has none
  };
  /// One compiled specialization.
  struct Variant {
    const kiln::rt::Kernel *kernel = nullptr;
    /// For each kernel parameter, the index of the Python parameter it comes from.
    std::vector<int> argParams;
    /// Tensor maps of descriptors the kernel made from its arguments (tl.make_tensor_
    /// descriptor), encoded at each launch: argParams entries kDerivedMapField << 16 | k.
    struct DerivedMap {
      int base = 0;
      char dtype = 0;
      std::vector<int64_t> block;
      /// Per extent, then per stride: a Python parameter index, or -1 - value (a constant).
      std::vector<int64_t> shape, strides;
      /// Made by the compiler (-kiln-pointer-tiles-to-descriptors), whose kernel reads it only
      /// where its extents and strides are positive: left unencoded elsewhere.
      bool guarded = false;
    };
    std::vector<DerivedMap> derivedMaps;
    /// (globals dict, name, value) the kernel read at compile time.
    std::vector<std::tuple<pybind11::object, pybind11::object, pybind11::object>> globals;
    /// What kernel[grid](...) returns (the Python CompiledKernel).
    pybind11::object compiled;
    /// A kernel of the host backend (runs on the CPU), compiled in debug mode.
    bool host = false, debug = false;
  };
  /// Where launches run: decided by device= (at launch or in @kiln.jit), else
  /// $KILN_BACKEND, else the GPU when there is one or $KILN_ARCH is set, else the host.
  enum class Backend : uint8_t { Unresolved, GPU, Host };

  /// Declares the parameters and the Python function that compiles a missing variant:
  /// compile(specs: list[str], values: list, num_warps, num_stages, host, debug, maxnreg,
  ///         device, fp_fusion) ->
  ///   (KernelHandle, arg_params: list[int], globals: list[tuple], compiled).
  /// `device` ("cpu", "gpu" or None) and `debug` (bool or None) are @kiln.jit's; None defers
  /// to $KILN_BACKEND / $KILN_DEBUG, read at the first launch.
  void setup(const std::string &kernelName, pybind11::list paramNames,
             pybind11::list constexprFlags, pybind11::list noSpecializeFlags,
             pybind11::list hasDefault, pybind11::list defaults, pybind11::object compile,
             pybind11::object device = pybind11::none(), pybind11::object debug = pybind11::none());
  /// Binds the vectorcall arguments (`nargs` positional, then one per name in `kwnames`),
  /// specializes, looks up (compiling on a miss) and launches. Returns a new reference to
  /// the variant's CompiledKernel; errors are thrown as C++ exceptions.
  PyObject *launch(PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames);
  void clearCache();
  size_t numVariants() const;
  /// Resolves the backend and debug mode not given to setup ($KILN_BACKEND, $KILN_DEBUG).
  void resolveDefaults();

private:
  Variant *compileVariant(const std::string &key, PyObject **bound, long numWarps, long numStages,
                          long maxnreg, bool fpFusion, bool host, bool debug, int device);

  std::string name;
  std::vector<Param> params;
  pybind11::object compileFn;
  std::unordered_map<std::string, std::shared_ptr<Variant>> cache;
  std::string keyBuffer;
  Backend backend = Backend::Unresolved;         ///< of launches without device=
  int8_t debugMode = -1;                         ///< of launches without debug= (-1: unresolved)
  Backend declaredBackend = Backend::Unresolved; ///< the decorator's device= (setup)
  int8_t declaredDebug = -1;                     ///< the decorator's debug= (setup)
  uint32_t resolvedEpoch = 0; ///< launchDefaultsEpoch() when backend/debugMode were resolved
};

/// Bumped by kiln.knobs when $KILN_DEBUG, $KILN_BACKEND or $KILN_ARCH change: every launcher
/// then resolves its defaults again at its next launch (one relaxed load per launch).
void bumpLaunchDefaults();

/// Adds kiln._C.Launcher (with kernel[grid]) and kiln._C.BoundLaunch (vectorcall) to `m`.
void registerLaunchTypes(pybind11::module_ &m);

/// kiln._C.KilnError (kiln::rt::Error in Python).
extern PyObject *kilnErrorType;

} // namespace kiln::python

#endif // KILN_PYTHON_SRC_LAUNCHER_H
