//===- Launcher.cpp - The C++ launch path of @kiln.jit kernels ------------===//
//
// This file implements kernel[grid](*args, **kwargs) for kiln.jit. A call binds its
// arguments to the kernel's parameters, computes the specialization key (Triton's rules:
// constexpr values; integers on `== 1` and divisibility by 16; pointers on 16-byte
// alignment; dtypes from the arguments; do_not_specialize), looks the key up, packs the
// parameters and calls cuLaunchKernel, without a per-argument Python loop. Only a miss calls
// back into Python, which compiles the variant and hands back the loaded kernel.
//
// A key is a byte string: per parameter one tag and its specialization, then the launch
// options. The same pass that builds the key extracts each argument's 64 parameter bits, so a
// hit packs without looking at the arguments again.
//
//===----------------------------------------------------------------------===//

#include "Launcher.h"
#include "LauncherArgs.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace pyb = pybind11;

/// See bumpLaunchDefaults (Launcher.h). Starts at 0, as every launcher's resolvedEpoch.
static std::atomic<uint32_t> defaultsEpoch{0};
using namespace kiln::python;

//===----------------------------------------------------------------------===//
// Launcher
//===----------------------------------------------------------------------===//

/// The backend a device= value or $KILN_BACKEND names: "cpu" (or "host") and "gpu" (or
/// "cuda"); a torch.device by its type. None: Unresolved.
static Launcher::Backend parseBackend(PyObject *v, const std::string &kernel) {
  if (v == Py_None)
    return Launcher::Backend::Unresolved;
  pyb::handle h(v);
  std::string s = PyUnicode_Check(v)        ? pyb::str(h).cast<std::string>()
                  : pyb::hasattr(h, "type") ? pyb::str(h.attr("type")).cast<std::string>()
                                            : std::string(pyb::repr(h));
  if (s == "cpu" || s == "host")
    return Launcher::Backend::Host;
  if (s == "gpu" || s == "cuda" || s.rfind("cuda:", 0) == 0)
    return Launcher::Backend::GPU;
  throw pyb::value_error("kernel '" + kernel + "': device=" + std::string(pyb::repr(h)) +
                         ": expected 'cpu' (the host backend) or 'gpu'");
}

void Launcher::setup(const std::string &kernelName, pyb::list paramNames, pyb::list constexprFlags,
                     pyb::list noSpecializeFlags, pyb::list hasDefault, pyb::list defaults,
                     pyb::object compile, pyb::object device, pyb::object debug) {
  name = kernelName;
  params.clear();
  cache.clear();
  backend = declaredBackend = parseBackend(device.ptr(), name);
  debugMode = declaredDebug = debug.is_none() ? -1 : int8_t(PyObject_IsTrue(debug.ptr()) == 1);
  if (paramNames.size() > kMaxParams)
    typeError("kernel '" + name + "': more than " + std::to_string(kMaxParams) + " parameters");
  for (size_t i = 0; i < paramNames.size(); ++i) {
    Param p;
    PyObject *s = paramNames[i].ptr();
    Py_INCREF(s);
    PyUnicode_InternInPlace(&s);
    p.name = pyb::reinterpret_steal<pyb::str>(s);
    p.isConstexpr = pyb::cast<bool>(constexprFlags[i]);
    p.noSpecialize = pyb::cast<bool>(noSpecializeFlags[i]);
    if (pyb::cast<bool>(hasDefault[i]))
      p.defaultValue = pyb::reinterpret_borrow<pyb::object>(defaults[i]);
    params.push_back(std::move(p));
  }
  compileFn = std::move(compile);
}

void Launcher::clearCache() { cache.clear(); }

void kiln::python::bumpLaunchDefaults() { defaultsEpoch.fetch_add(1, std::memory_order_relaxed); }

void Launcher::resolveDefaults() {
  if (backend == Backend::Unresolved) {
    const char *env = std::getenv("KILN_BACKEND");
    const char *arch = std::getenv("KILN_ARCH");
    if (env && *env) {
      pyb::str s(env);
      try {
        backend = parseBackend(s.ptr(), name);
      } catch (pyb::value_error &) {
        throw pyb::value_error("KILN_BACKEND='" + std::string(env) +
                               "': expected 'cpu' (the host backend) or 'gpu'");
      }
    } else if (arch && *arch) {
      // $KILN_ARCH without a GPU compiles GPU variants (kernel.warmup); "cpu" is the host.
      backend = std::string(arch) == kiln::rt::kHostArch ? Backend::Host : Backend::GPU;
    } else {
      backend = kiln::rt::hasGPU() ? Backend::GPU : Backend::Host;
    }
  }
  if (debugMode < 0) {
    const char *env = std::getenv("KILN_DEBUG");
    debugMode = env && *env && std::string(env) != "0";
  }
}

/// Triton's num_ctas launch option: Kiln launches one CTA per program (no thread-block
/// clusters), so only 1 (or None) is accepted; anything else is a clear error.
static void checkNumCtas(PyObject *v, const std::string &name) {
  if (v == Py_None)
    return;
  if (!PyLong_Check(v) || PyBool_Check(v))
    typeError("kernel '" + name + "': num_ctas must be an int, found " + Py_TYPE(v)->tp_name);
  long n = PyLong_AsLong(v);
  if (n != 1)
    throw pyb::value_error("kernel '" + name + "': num_ctas=" + std::to_string(n) +
                           ": Kiln launches one CTA per program (no thread-block clusters); "
                           "expected 1");
}

/// Triton's extern_libs launch option ({"libdevice": path}). Kiln links libdevice itself
/// ($KILN_LIBDEVICE, else the CUDA toolkit's), so the option is checked, not used: a dict
/// naming only libdevice, at a path that exists. Other libraries are an error.
static void checkExternLibs(PyObject *v, const std::string &name) {
  if (v == Py_None)
    return;
  if (!PyDict_Check(v))
    typeError("kernel '" + name + "': extern_libs must be a dict of library name -> path, " +
              "found " + Py_TYPE(v)->tp_name);
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(v, &pos, &key, &value)) {
    std::string lib = pyb::str(key), path = pyb::str(value);
    if (lib != "libdevice")
      throw pyb::value_error("kernel '" + name + "': extern_libs names '" + lib +
                             "': Kiln links only libdevice (extern_libs={'libdevice': path})");
    if (access(path.c_str(), R_OK) != 0)
      throw pyb::value_error("kernel '" + name + "': extern_libs: no libdevice at '" + path + "'");
  }
}

size_t Launcher::numVariants() const { return cache.size(); }
PyObject *Launcher::launch(PyObject *grid, PyObject *const *args, size_t nargs, PyObject *kwnames) {
  const size_t n = params.size();
  if (nargs > n)
    typeError("kernel '" + name + "' takes " + std::to_string(n) + " arguments, got " +
              std::to_string(nargs));

  // Bind: positional first, then keywords (parameters or launch options), then defaults.
  PyObject *bound[kMaxParams];
  for (size_t i = 0; i < n; ++i)
    bound[i] = i < nargs ? args[i] : nullptr;
  long numWarps = 4, numStages = 3, maxnreg = -1; // maxnreg -1: None, no register cap
  bool fpFusion = true;                           // Triton's enable_fp_fusion
  bool pdl = false;                               // Triton's launch_pdl
  PyObject *streamObj = nullptr;
  Backend launchBackend = Backend::Unresolved;
  int launchDebug = -1;
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t j = 0; j < nkw; ++j) {
    PyObject *k = PyTuple_GET_ITEM(kwnames, j), *v = args[nargs + j];
    size_t i = findParam(params, k);
    if (i < n) {
      if (bound[i])
        typeError("kernel '" + name + "' got multiple values for argument '" +
                  std::string(pyb::str(k)) + "'");
      bound[i] = v;
      continue;
    }
    if (PyUnicode_Compare(k, names().numWarps.ptr()) == 0)
      numWarps = PyLong_AsLong(v);
    else if (PyUnicode_Compare(k, names().numStages.ptr()) == 0)
      numStages = PyLong_AsLong(v);
    else if (PyUnicode_Compare(k, names().maxnreg.ptr()) == 0) {
      if (v != Py_None && (!PyLong_Check(v) || PyBool_Check(v)))
        typeError("kernel '" + name + "': maxnreg must be an int (registers per thread), found " +
                  Py_TYPE(v)->tp_name);
      maxnreg = v == Py_None ? -1 : PyLong_AsLong(v); // the range is checked on a compile
    } else if (PyUnicode_Compare(k, names().stream.ptr()) == 0)
      streamObj = v;
    else if (PyUnicode_Compare(k, names().device.ptr()) == 0)
      launchBackend = parseBackend(v, name);
    else if (PyUnicode_Compare(k, names().debug.ptr()) == 0)
      launchDebug = v == Py_None ? -1 : PyObject_IsTrue(v);
    else if (PyUnicode_Compare(k, names().enableFpFusion.ptr()) == 0) {
      if (!PyBool_Check(v))
        typeError("kernel '" + name + "': enable_fp_fusion must be a bool, found " +
                  Py_TYPE(v)->tp_name);
      fpFusion = v == Py_True;
    } else if (PyUnicode_Compare(k, names().numCtas.ptr()) == 0) {
      checkNumCtas(v, name);
    } else if (PyUnicode_Compare(k, names().launchPdl.ptr()) == 0) {
      pdl = PyObject_IsTrue(v) == 1;
    } else if (PyUnicode_Compare(k, names().externLibs.ptr()) == 0) {
      checkExternLibs(v, name);
    } else
      typeError("kernel '" + name + "' got an unexpected keyword argument '" +
                std::string(pyb::str(k)) + "'");
    if (PyErr_Occurred())
      throw pyb::error_already_set();
  }
  for (size_t i = 0; i < n; ++i) {
    if (bound[i])
      continue;
    if (!params[i].defaultValue)
      typeError("kernel '" + name + "' is missing argument '" +
                std::string(pyb::str(params[i].name)) + "'");
    bound[i] = params[i].defaultValue.ptr();
  }

  // Backend and debug mode: launch options, else the kernel's (resolved once, and again
  // after kiln.knobs changed the variables they come from).
  if (uint32_t epoch = defaultsEpoch.load(std::memory_order_relaxed); epoch != resolvedEpoch) {
    backend = declaredBackend;
    debugMode = declaredDebug;
    resolvedEpoch = epoch;
  }
  if (backend == Backend::Unresolved || debugMode < 0)
    resolveDefaults();
  const bool host =
      (launchBackend != Backend::Unresolved ? launchBackend : backend) == Backend::Host;
  const bool debug = launchDebug >= 0 ? launchDebug == 1 : debugMode == 1;

  // Key and parameter bits in one pass (host launches also note each array's memory).
  std::string &key = keyBuffer;
  key.clear();
  uint64_t bits[kMaxParams];
  std::vector<kiln::rt::HostBuffer> hostBuffers(host ? n : 0);
  // Tensor descriptors (rare): read into per-thread storage that lives until the next launch.
  static thread_local std::vector<DescriptorArg> descs;
  if (descs.size() < n)
    descs.resize(n);
  static thread_local std::vector<DescriptorArg> derived; // the kernel's own tensor maps
  // Tuple arguments (rare): their elements' bits, and the host arrays among them.
  static thread_local std::vector<std::vector<uint64_t>> tuples;
  static thread_local std::vector<kiln::rt::HostBuffer> tupleBuffers;
  tupleBuffers.clear();
  LaunchPlace place;
  for (size_t i = 0; i < n; ++i) {
    if (params[i].isConstexpr) {
      key += 'K';
      appendConstexpr(key, bound[i]);
      bits[i] = 0;
    } else if (PyTuple_Check(bound[i])) {
      if (tuples.size() < n)
        tuples.resize(n);
      readTuple(params[i], bound[i], key, tuples[i], place, name, host ? &tupleBuffers : nullptr);
      for (auto &buf : tupleBuffers)
        if (buf.name.empty())
          buf.name = pyb::str(params[i].name);
      bits[i] = 0;
    } else {
      readArg(params[i], bound[i], key, bits[i], place, name, host ? &hostBuffers[i] : nullptr,
              &descs[i]);
    }
  }
  // The device: that of the tensor arguments, else the current one (loaded per device).
  int device = 0;
  if (!host)
    device =
        place.device >= 0 ? place.device : (kiln::rt::hasGPU() ? kiln::rt::currentDevice() : 0);
  key += 'W';
  key.append(reinterpret_cast<const char *>(&numWarps), sizeof(numWarps));
  key.append(reinterpret_cast<const char *>(&numStages), sizeof(numStages));
  key.append(reinterpret_cast<const char *>(&maxnreg), sizeof(maxnreg));
  key += fpFusion ? 'F' : '-';
  key += host ? 'h' : 'g';
  key += debug ? 'd' : '-';
  key.append(reinterpret_cast<const char *>(&device), sizeof(device));

  Variant *variant;
  auto it = cache.find(key);
  if (it != cache.end()) {
    variant = it->second.get();
  } else {
    variant =
        compileVariant(key, bound, numWarps, numStages, maxnreg, fpFusion, host, debug, device);
  }

  // Captured globals must still hold the values the kernel was compiled with. A module's
  // globals are a dict; a nested kernel's scope (jit.py's _CaptureScope) a mapping.
  for (auto &[dict, globalName, value] : variant->globals) {
    pyb::object owned;
    PyObject *now;
    if (PyDict_Check(dict.ptr()))
      now = PyDict_GetItemWithError(dict.ptr(), globalName.ptr());
    else {
      owned = pyb::reinterpret_steal<pyb::object>(PyObject_GetItem(dict.ptr(), globalName.ptr()));
      now = owned.ptr();
      if (!now && PyErr_ExceptionMatches(PyExc_KeyError))
        PyErr_Clear();
    }
    if (now != value.ptr()) {
      if (!now && PyErr_Occurred())
        throw pyb::error_already_set();
      int same = now ? PyObject_RichCompareBool(now, value.ptr(), Py_EQ) : 0;
      if (same < 0)
        throw pyb::error_already_set();
      if (!same)
        throw pyb::value_error(
            "kernel '" + name + "': global '" + std::string(pyb::str(globalName)) +
            "' changed since the kernel was compiled (was " + std::string(pyb::repr(value)) +
            ", now " + (now ? std::string(pyb::repr(now)) : "undefined") +
            "); globals used by a kernel are constants");
    }
  }

  // Grid: a tuple, or a callable of the meta-parameters.
  pyb::object gridTuple = pyb::reinterpret_borrow<pyb::object>(grid);
  if (PyCallable_Check(grid)) {
    pyb::dict meta;
    for (size_t i = 0; i < n; ++i)
      meta[params[i].name] = pyb::handle(bound[i]);
    try {
      gridTuple = pyb::handle(grid)(meta);
    } catch (pyb::error_already_set &e) {
      // The user's callable failed: same exception type, chained, naming the kernel.
      std::string what = pyb::str(e.value());
      pyb::raise_from(e, e.type().ptr(),
                      ("kernel '" + name + "': the grid callable raised " +
                       std::string(pyb::str(e.type().attr("__name__"))) + ": " + what +
                       " (it is called with one argument, the dict of the launch's arguments "
                       "and meta-parameters)")
                          .c_str());
      throw pyb::error_already_set();
    }
  }
  kiln::rt::Grid g;
  {
    PyObject *t = gridTuple.ptr();
    unsigned dims[3] = {1, 1, 1};
    Py_ssize_t size;
    if (PyTuple_Check(t) || PyList_Check(t)) {
      size = PySequence_Fast_GET_SIZE(t);
      if (size < 1 || size > 3)
        typeError("kernel '" + name + "': expected a grid of 1 to 3 dimensions, found " +
                  std::to_string(size));
      for (Py_ssize_t d = 0; d < size; ++d) {
        PyObject *item = PySequence_Fast_GET_ITEM(t, d);
        long long x = PyLong_AsLongLong(item);
        if (x == -1 && PyErr_Occurred()) {
          PyErr_Clear();
          pyb::object idx = pyb::reinterpret_steal<pyb::object>(PyNumber_Index(item));
          if (!idx)
            typeError("kernel '" + name + "': expected integers in the grid, found " +
                      typeName(item));
          x = PyLong_AsLongLong(idx.ptr());
        }
        if (x < 0 || x > UINT32_MAX)
          typeError("kernel '" + name + "': grid dimension " + std::to_string(d) + " is " +
                    std::to_string(x));
        dims[d] = unsigned(x);
      }
    } else {
      long long x = PyLong_AsLongLong(t);
      if (x == -1 && PyErr_Occurred())
        typeError("kernel '" + name +
                  "': expected a grid tuple or a callable returning one, "
                  "found " +
                  typeName(t));
      dims[0] = unsigned(x);
    }
    g = {dims[0], dims[1], dims[2]};
  }
  if (uint64_t(g.x) * g.y * g.z == 0)
    return variant->compiled.inc_ref().ptr();

  // Pack.
  if (derived.size() < variant->derivedMaps.size())
    derived.resize(variant->derivedMaps.size());
  const size_t nk = variant->argParams.size();
  void *ptrs[kMaxParams];
  uint64_t storage[kMaxParams];
  for (size_t j = 0; j < nk; ++j) {
    ptrs[j] = &storage[j];
    int ap = variant->argParams[j], i = ap & 0xFFFF, field = ap >> 16;
    if (!field) {
      storage[j] = bits[i];
      continue;
    }
    if (field >= kTupleField && field < kDerivedMapField) { // an element of a tuple argument
      storage[j] = tuples[i][size_t(field - kTupleField)];
      continue;
    }
    if (field == kDerivedMapField) { // encoded from the launch's arguments
      const Variant::DerivedMap &m = variant->derivedMaps[i];
      DescriptorArg &d = derived[i];
      const auto &rows = variant->kernel->getTensorMapBoxRows();
      unsigned boxRows = j < rows.size() ? rows[j] : 0;
      if (variant->host) {
        std::memset(d.map, 0, sizeof(d.map)); // unused there
      } else {
        // (a source is an argument's index, a tuple element's with its field, or -1 - value;
        // an extent's may carry a factor << 32: the int32 argument times it, in int32)
        auto arg = [&](int64_t src) {
          int f = int((src & 0xFFFFFFFF) >> 16), a = int(src & 0xFFFF);
          return f ? tuples[size_t(a)][size_t(f - kTupleField)] : bits[size_t(a)];
        };
        auto value = [&](int64_t src) {
          return kiln::rt::recipeFieldValue(src, [&](int64_t a) { return int64_t(arg(a)); });
        };
        d.shape.clear();
        d.strides.clear();
        for (int64_t s : m.shape)
          d.shape.push_back(int64_t(int32_t(value(s)))); // int32 extents
        for (int64_t s : m.strides)
          d.strides.push_back(value(s)); // all but the last (1), as encodeTensorMap takes them
        // A compiler's map (guarded) with an extent or stride that is not positive: none (the
        // kernel's loop of pointer loads runs instead, -kiln-pointer-tiles-to-descriptors).
        kiln::rt::encodeTensorMapIfRead(d.map, m.block, kiln::rt::tensorElementKind(m.dtype),
                                        arg(m.base), d.shape, d.strides, boxRows, m.guarded);
      }
      ptrs[j] = d.map;
      continue;
    }
    // A field of a tensor descriptor (see kDescriptorField in python/kiln/codegen.py).
    DescriptorArg &d = descs[i];
    const int rank = int(d.block.size());
    if (field == 1) { // the tensor map, by value: encoded for GPU kernels, unused on the host
      // The kernel chose the rows of its boxes; 0: it never reads this map.
      const auto &rows = variant->kernel->getTensorMapBoxRows();
      unsigned boxRows = j < rows.size() ? rows[j] : 0;
      if (!variant->host && boxRows) {
        auto box = kiln::rt::getTensorMapBox(d.block, itemSizeOf(d.dtype), boxRows);
        if (box)
          kiln::rt::encodeTensorMap(d.map, *box, kiln::rt::tensorElementKind(d.dtype), d.base,
                                    d.shape, d.strides);
        else
          std::memset(d.map, 0, sizeof(d.map));
      }
      ptrs[j] = d.map;
    } else if (field == 2) {
      storage[j] = d.base;
    } else if (field < 3 + rank) {
      storage[j] = uint64_t(d.shape[field - 3]);
    } else {
      storage[j] = uint64_t(d.strides[field - 3 - rank]);
    }
  }

  // The host backend runs the grid here, without the GIL; a debug-mode kernel checks its
  // accesses against the memory of every array argument, and a memory fault in any mode names
  // the nearest one.
  if (variant->host) {
    std::vector<kiln::rt::HostBuffer> buffers;
    for (size_t i = 0; i < n; ++i)
      if (hostBuffers[i].begin || hostBuffers[i].bytes) {
        buffers.push_back(hostBuffers[i]);
        buffers.back().name = pyb::str(params[i].name);
      }
    buffers.insert(buffers.end(), tupleBuffers.begin(), tupleBuffers.end());
    {
      pyb::gil_scoped_release release;
      variant->kernel->launchHost(g, ptrs, buffers); // kiln::rt::Error: kiln.KilnError
    }
    return variant->compiled.inc_ref().ptr();
  }

  // Stream: explicit, else torch's current stream when torch tensors are passed, else 0.
  kiln::rt::CUstream stream = nullptr;
  if (streamObj && streamObj != Py_None) {
    stream = reinterpret_cast<kiln::rt::CUstream>(PyLong_AsUnsignedLongLong(streamObj));
    if (PyErr_Occurred())
      throw pyb::error_already_set();
  } else if (place.sawTorch && types().torchStream) {
    PyObject *index = PyLong_FromLong(device); // a cached small int
    PyObject *s = PyObject_CallOneArg(types().torchStream.ptr(), index);
    Py_DECREF(index);
    if (!s)
      throw pyb::error_already_set();
    stream = reinterpret_cast<kiln::rt::CUstream>(PyLong_AsUnsignedLongLong(s));
    Py_DECREF(s);
  }

  // kiln::rt::Error becomes kiln.KilnError
  variant->kernel->launchRaw(g, stream, ptrs, pdl);
  return variant->compiled.inc_ref().ptr();
}

Launcher::Variant *Launcher::compileVariant(const std::string &keyRef, PyObject **bound,
                                            long numWarps, long numStages, long maxnreg,
                                            bool fpFusion, bool host, bool debug, int device) {
  // Our own copy: the compile callback releases the GIL, and another launch of this kernel
  // may then reuse keyBuffer.
  const std::string key = keyRef;
  pyb::list specs, values;
  size_t pos = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    values.append(pyb::handle(bound[i]));
    if (key[pos] == 'K') {
      // Skip the constexpr's serialization: it ends where the next parameter's tag starts,
      // which is simplest found by re-serializing.
      std::string tmp;
      appendConstexpr(tmp, bound[i]);
      pos += 1 + tmp.size();
      specs.append("constexpr");
    } else {
      specs.append(specOf(key, pos));
    }
  }
  pyb::tuple result =
      compileFn(specs, values, numWarps, numStages, host, debug,
                maxnreg >= 0 ? pyb::object(pyb::int_(maxnreg)) : pyb::none(), device, fpFusion);
  auto v = std::make_shared<Variant>();
  v->kernel = result[0].cast<KernelHandle &>().kernel;
  for (pyb::handle h : pyb::list(result[1])) {
    if (!pyb::isinstance<pyb::list>(h)) {
      v->argParams.push_back(h.cast<int>());
      continue;
    }
    // A tensor map the kernel made from its arguments (CodeGenerator.derived_tensor_map):
    // [base, dtype code, rank, block..., extent sources..., stride sources...], and 1 after
    // them for a map the compiler made (DerivedMap::guarded).
    std::vector<int64_t> r;
    for (pyb::handle x : pyb::reinterpret_borrow<pyb::list>(h))
      r.push_back(x.cast<int64_t>());
    Variant::DerivedMap m;
    size_t rank = r.size() >= 3 ? size_t(r[2]) : 0;
    if (rank == 0 || (r.size() != 3 + 3 * rank - 1 && r.size() != 3 + 3 * rank))
      throw pyb::value_error("internal error: kernel '" + name + "': bad tensor map recipe");
    m.guarded = r.size() == 3 + 3 * rank;
    if (m.guarded)
      r.pop_back();
    m.base = int(r[0]);
    m.dtype = char(r[1]);
    m.block.assign(r.begin() + 3, r.begin() + 3 + rank);
    m.shape.assign(r.begin() + 3 + rank, r.begin() + 3 + 2 * rank);
    m.strides.assign(r.begin() + 3 + 2 * rank, r.end());
    v->argParams.push_back(int(kDerivedMapField << 16 | v->derivedMaps.size()));
    v->derivedMaps.push_back(std::move(m));
  }
  for (pyb::handle g : pyb::list(result[2])) {
    pyb::tuple t = pyb::reinterpret_borrow<pyb::tuple>(g);
    v->globals.emplace_back(t[0], t[1], t[2]);
  }
  v->compiled = result[3];
  v->host = host;
  v->debug = debug;
  if (v->kernel->isHost() != host)
    throw pyb::value_error("internal error: kernel '" + name + "' was compiled for the " +
                           (v->kernel->isHost() ? "host" : "GPU") + ", launched on the " +
                           (host ? "host" : "GPU"));
  if (v->argParams.size() != v->kernel->getSignature().size())
    throw pyb::value_error("internal error: kernel '" + name + "' has " +
                           std::to_string(v->kernel->getSignature().size()) +
                           " parameters, front end passes " + std::to_string(v->argParams.size()));
  // Another thread may have compiled the same variant while the compile callback ran without
  // the GIL: keep the first one (the launch it made may still use it) and use that.
  return cache.emplace(key, std::move(v)).first->second.get();
}
