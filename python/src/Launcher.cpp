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

#include <cstdlib>
#include <cstring>

namespace pyb = pybind11;
using namespace kiln::python;

namespace {

/// DLPack (dlpack.h, v0.8 ABI): only what reading a device pointer and dtype needs.
struct DLDevice {
  int32_t deviceType;
  int32_t deviceId;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byteOffset;
};
struct DLManagedTensor {
  DLTensor tensor;
  void *managerCtx;
  void (*deleter)(DLManagedTensor *);
};
/// kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged (dlpack.h DLDeviceType).
constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;
/// kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool (dlpack.h DLDataTypeCode).
constexpr uint8_t kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6;

/// Pointer alignment Triton specializes on, and the integer divisibility.
constexpr uint64_t kSpecializeAlign = 16;

/// A dtype code in keys and its Triton name.
struct DTypeCode {
  char code;
  const char *name;
};
constexpr DTypeCode kDTypes[] = {{'b', "i1"},  {'c', "i8"},   {'s', "i16"},  {'i', "i32"},
                                 {'l', "i64"}, {'C', "u8"},   {'S', "u16"},  {'I', "u32"},
                                 {'L', "u64"}, {'h', "fp16"}, {'H', "bf16"}, {'f', "fp32"},
                                 {'d', "fp64"}, {'e', "fp8e4nv"}, {'E', "fp8e5"}};

const char *dtypeName(char code) {
  for (const DTypeCode &d : kDTypes)
    if (d.code == code)
      return d.name;
  return "?";
}

/// Maps a dtype spelled by torch ("torch.float32"), numpy or __cuda_array_interface__
/// ("<f4") to its code; 0 when unknown.
char dtypeCodeFromName(const std::string &s) {
  static const std::pair<const char *, char> names[] = {
      {"bool", 'b'},     {"int8", 'c'},    {"int16", 's'},   {"int32", 'i'},  {"int64", 'l'},
      {"uint8", 'C'},    {"uint16", 'S'},  {"uint32", 'I'},  {"uint64", 'L'}, {"float16", 'h'},
      {"bfloat16", 'H'}, {"float32", 'f'}, {"float64", 'd'}, {"half", 'h'},   {"float", 'f'},
      {"double", 'd'},   {"long", 'l'},    {"int", 'i'},     {"short", 's'},  {"b1", 'b'},
      {"i1", 'c'},       {"i2", 's'},      {"i4", 'i'},      {"i8", 'l'},     {"u1", 'C'},
      {"u2", 'S'},       {"u4", 'I'},      {"u8", 'L'},      {"f2", 'h'},     {"f4", 'f'},
      {"f8", 'd'},       {"float8_e4m3fn", 'e'}, {"float8_e5m2", 'E'}};
  std::string name = s;
  if (name.rfind("torch.", 0) == 0)
    name = name.substr(6);
  if (!name.empty() && (name[0] == '<' || name[0] == '|' || name[0] == '='))
    name = name.substr(1);
  for (auto &[n, c] : names)
    if (name == n)
      return c;
  return 0;
}

char dtypeCodeFromDLPack(DLDataType t) {
  if (t.lanes != 1)
    return 0;
  switch (t.code) {
  case kDLBool:
    return 'b';
  case kDLInt:
    return t.bits == 8 ? 'c' : t.bits == 16 ? 's' : t.bits == 32 ? 'i' : t.bits == 64 ? 'l' : 0;
  case kDLUInt:
    return t.bits == 1    ? 'b'
           : t.bits == 8  ? 'C'
           : t.bits == 16 ? 'S'
           : t.bits == 32 ? 'I'
           : t.bits == 64 ? 'L'
                          : 0;
  case kDLFloat:
    return t.bits == 16 ? 'h' : t.bits == 32 ? 'f' : t.bits == 64 ? 'd' : 0;
  case kDLBfloat:
    return t.bits == 16 ? 'H' : 0;
  default:
    return 0;
  }
}

/// The runtime's kind of a tensor element of a dtype code (for tensor maps).
kiln::rt::ArgKind kindOfDType(char code) {
  switch (code) {
  case 'h':
    return kiln::rt::ArgKind::F16;
  case 'H':
    return kiln::rt::ArgKind::BF16;
  case 'f':
    return kiln::rt::ArgKind::F32;
  case 'c':
  case 'C':
  case 'e': // fp8: the TMA moves bytes
  case 'E':
    return kiln::rt::ArgKind::I8;
  case 'i':
  case 'I':
    return kiln::rt::ArgKind::I32;
  default:
    return kiln::rt::ArgKind::F64; // encodeTensorMap refuses it with a clear message
  }
}

/// Bytes per element of a dtype code.
unsigned itemSizeOf(char code) {
  switch (code) {
  case 'b':
  case 'c':
  case 'C':
  case 'e':
  case 'E':
    return 1;
  case 's':
  case 'S':
  case 'h':
  case 'H':
    return 2;
  case 'i':
  case 'I':
  case 'f':
    return 4;
  default:
    return 8;
  }
}

/// The memory [begin, begin + bytes) the elements of a strided array reach: `ptr` is the
/// first element, strides are in bytes (may be negative).
kiln::rt::HostBuffer spanOf(uint64_t ptr, size_t ndim, const int64_t *shape, const int64_t *strides,
                            unsigned itemSize) {
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < ndim; ++d) {
    if (shape[d] == 0)
      return {ptr, 0};
    int64_t reach = (shape[d] - 1) * strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  return {uint64_t(int64_t(ptr) + lo), uint64_t(hi - lo) + itemSize};
}

/// How arguments of one Python type reach their device pointer (ArrayInterface: host
/// memory through __array_interface__, as numpy arrays).
enum class Access : uint8_t {
  Torch,
  DeviceArray,
  CudaArrayInterface,
  ArrayInterface,
  DLPack,
  Descriptor, ///< kiln.TensorDescriptor (or Triton's: base, shape, strides, block_shape)
  None
};

/// Interned attribute names used on the hot path.
struct Names {
  pyb::object dtype = pyb::str("dtype"), dataPtr = pyb::str("data_ptr"),
              isCuda = pyb::str("is_cuda"), cai = pyb::str("__cuda_array_interface__"),
              dlpack = pyb::str("__dlpack__"), numWarps = pyb::str("num_warps"),
              numStages = pyb::str("num_stages"), maxnreg = pyb::str("maxnreg"),
              stream = pyb::str("stream"), getDevice = pyb::str("get_device"),
              device = pyb::str("device"), debug = pyb::str("debug"),
              ai = pyb::str("__array_interface__");
};
Names &names() {
  static Names *n = new Names(); // leaked: outlives interpreter shutdown ordering issues
  return *n;
}

/// What launch-time code knows about Python types and torch.
struct TypeCache {
  std::unordered_map<PyTypeObject *, Access> access;
  std::unordered_map<PyObject *, char> torchDTypes;
  std::unordered_map<PyObject *, char> arrayDTypes; // numpy dtype objects (kept alive)
  pyb::object torchStream; // torch._C._cuda_getCurrentRawStream, once torch is seen
};
TypeCache &types() {
  static TypeCache *c = new TypeCache();
  return *c;
}

Access classify(PyObject *obj) {
  PyTypeObject *type = Py_TYPE(obj);
  auto it = types().access.find(type);
  if (it != types().access.end())
    return it->second;
  Access a = Access::None;
  pyb::handle h(obj);
  if (pyb::isinstance<DeviceArray>(h))
    a = Access::DeviceArray;
  else if (pyb::hasattr(h, "block_shape") && pyb::hasattr(h, "base") &&
           pyb::hasattr(h, "strides") && pyb::hasattr(h, "shape"))
    a = Access::Descriptor;
  else {
    std::string module = pyb::str(pyb::handle((PyObject *)type).attr("__module__"));
    if (module.rfind("torch", 0) == 0 && pyb::hasattr(h, "data_ptr") && pyb::hasattr(h, "dtype"))
      a = Access::Torch;
    else if (pyb::hasattr(h, "__cuda_array_interface__"))
      a = Access::CudaArrayInterface;
    else if (pyb::hasattr(h, "__array_interface__"))
      a = Access::ArrayInterface;
    else if (pyb::hasattr(h, "__dlpack__"))
      a = Access::DLPack;
  }
  if (a == Access::Torch && !types().torchStream) {
    // torch's current stream is the default for launches with torch tensors.
    PyObject *torchC = PyImport_ImportModule("torch._C");
    if (torchC && PyObject_HasAttrString(torchC, "_cuda_getCurrentRawStream"))
      types().torchStream = pyb::module_(pyb::reinterpret_steal<pyb::module_>(torchC))
                                .attr("_cuda_getCurrentRawStream");
    else
      Py_XDECREF(torchC);
    PyErr_Clear();
  }
  types().access.emplace(type, a);
  return a;
}

[[noreturn]] void typeError(const std::string &msg) { throw pyb::type_error(msg); }

std::string typeName(PyObject *obj) { return Py_TYPE(obj)->tp_name; }

} // namespace

/// What a launch reads from a tensor descriptor argument: the kernel takes its tensor map,
/// base pointer, extents and strides as separate parameters (python/kiln/codegen.py).
struct kiln::python::DescriptorArg {
  alignas(kiln::rt::kTensorMapAlign) uint8_t map[kiln::rt::kTensorMapBytes];
  uint64_t base = 0;
  char dtype = 0;
  std::vector<int64_t> shape, strides, block;
};

namespace {

/// Serializes a constexpr value into the key.
void appendConstexpr(std::string &key, PyObject *v) {
  if (v == Py_None) {
    key += 'n';
  } else if (PyBool_Check(v)) {
    key += v == Py_True ? 'T' : 'F';
  } else if (PyLong_CheckExact(v)) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) {
      key += 'I';
      key += pyb::str(v).cast<std::string>();
      key += ';';
    } else {
      key += 'i';
      key.append(reinterpret_cast<const char *>(&x), sizeof(x));
    }
  } else if (PyFloat_CheckExact(v)) {
    double x = PyFloat_AS_DOUBLE(v);
    key += 'f';
    key.append(reinterpret_cast<const char *>(&x), sizeof(x));
  } else if (PyUnicode_CheckExact(v)) {
    Py_ssize_t n = 0;
    const char *s = PyUnicode_AsUTF8AndSize(v, &n);
    if (!s)
      throw pyb::error_already_set();
    key += 's';
    key += std::to_string(n);
    key += ':';
    key.append(s, n);
  } else {
    // dtypes, JIT functions, tuples: by type and repr (slower, still exact).
    key += 'r';
    key += typeName(v);
    key += ':';
    key += pyb::repr(v).cast<std::string>();
    key += ';';
  }
}

} // namespace

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
  backend = parseBackend(device.ptr(), name);
  debugMode = debug.is_none() ? -1 : int8_t(PyObject_IsTrue(debug.ptr()) == 1);
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

size_t Launcher::numVariants() const { return cache.size(); }

/// "kernel 'k': argument 'x'" for messages.
static std::string argText(const Launcher::Param &p, const std::string &kernel) {
  return "kernel '" + kernel + "': argument '" + std::string(pyb::str(p.name)) + "'";
}

/// The dtype code of a host array's dtype (numpy's names, ml_dtypes' "bfloat16"). numpy
/// dtype objects (those with a `name`, few and long-lived) are cached and kept alive.
static char arrayDTypeCode(PyObject *dt) {
  auto &map = types().arrayDTypes;
  auto it = map.find(dt);
  if (it != map.end())
    return it->second;
  pyb::handle h(dt);
  if (!pyb::hasattr(h, "name"))
    return dtypeCodeFromName(pyb::str(h));
  char c = 0;
  std::string order = pyb::hasattr(h, "byteorder") ? pyb::str(h.attr("byteorder")) : "=";
  if (order != ">") // the host is little-endian
    c = dtypeCodeFromName(pyb::str(h.attr("name")));
  Py_INCREF(dt);
  map.emplace(dt, c);
  return c;
}

/// A pointer argument of a host (CPU backend) kernel: numpy arrays and anything with
/// __array_interface__, CPU torch tensors, CPU DLPack tensors. Sets the address, the dtype
/// code and the memory the array spans (for debug-mode bounds checks).
static void readHostArray(const Launcher::Param &p, PyObject *v, const std::string &kernel,
                          uint64_t &ptr, char &dtype, kiln::rt::HostBuffer &buf) {
  pyb::handle h(v);
  int64_t shape[64], strides[64];
  size_t ndim = 0;
  auto fromSequences = [&](pyb::handle shp, pyb::handle str, bool stridesInBytes) {
    pyb::tuple t = pyb::tuple(pyb::reinterpret_borrow<pyb::object>(shp));
    ndim = std::min<size_t>(t.size(), 64);
    for (size_t d = 0; d < ndim; ++d)
      shape[d] = t[d].cast<int64_t>();
    unsigned item = itemSizeOf(dtype);
    if (str.is_none()) {
      int64_t s = item;
      for (size_t d = ndim; d-- > 0;) {
        strides[d] = s;
        s *= shape[d];
      }
    } else {
      pyb::tuple st = pyb::tuple(pyb::reinterpret_borrow<pyb::object>(str));
      for (size_t d = 0; d < ndim && d < st.size(); ++d)
        strides[d] = st[d].cast<int64_t>() * (stridesInBytes ? 1 : item);
    }
  };
  switch (classify(v)) {
  case Access::Torch: {
    pyb::object isCuda = h.attr(names().isCuda);
    if (isCuda.ptr() == Py_True)
      typeError(argText(p, kernel) +
                " is a CUDA tensor; a kernel on the CPU backend takes host memory (CPU tensors, "
                "numpy arrays)");
    dtype = dtypeCodeFromName(pyb::str(h.attr(names().dtype)));
    ptr = h.attr(names().dataPtr)().cast<uint64_t>();
    if (dtype)
      fromSequences(h.attr("shape"), h.attr("stride")(), false);
    break;
  }
  case Access::ArrayInterface: {
    pyb::dict ai = h.attr(names().ai);
    ptr = pyb::tuple(ai["data"])[0].cast<uint64_t>();
    std::string typestr = pyb::str(ai["typestr"]);
    // numpy describes ml_dtypes' bfloat16 as raw bytes ("<V2"): its dtype object names it.
    if (pyb::hasattr(h, "dtype"))
      dtype = arrayDTypeCode(pyb::object(h.attr(names().dtype)).ptr());
    if (!dtype && typestr.size() > 1 && typestr[0] != '>' && typestr[1] != 'V')
      dtype = dtypeCodeFromName(typestr);
    if (dtype)
      fromSequences(ai["shape"], ai.contains("strides") ? pyb::object(ai["strides"]) : pyb::none(),
                    true);
    break;
  }
  case Access::DLPack: {
    pyb::object capsule = h.attr(names().dlpack)();
    auto *m = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (!m)
      throw pyb::error_already_set();
    int32_t dev = m->tensor.device.deviceType;
    if (dev != kDLCPU && dev != kDLCUDAHost)
      typeError(argText(p, kernel) + " is not in host memory (DLPack device type " +
                std::to_string(dev) + "); a kernel on the CPU backend takes host memory");
    ptr = uint64_t(m->tensor.data) + m->tensor.byteOffset;
    dtype = dtypeCodeFromDLPack(m->tensor.dtype);
    ndim = std::min<size_t>(size_t(std::max(m->tensor.ndim, 0)), 64);
    unsigned item = dtype ? itemSizeOf(dtype) : 1;
    int64_t s = item;
    for (size_t d = ndim; d-- > 0;) {
      shape[d] = m->tensor.shape[d];
      strides[d] = m->tensor.strides ? m->tensor.strides[d] * item : s;
      s *= shape[d];
    }
    break; // the capsule's destructor releases the tensor (it was not consumed)
  }
  case Access::Descriptor:
    typeError(argText(p, kernel) + ": a tensor descriptor cannot be a descriptor's base");
  case Access::DeviceArray:
  case Access::CudaArrayInterface:
    typeError(argText(p, kernel) + " is in GPU memory (" + typeName(v) +
              "); a kernel on the CPU backend takes host memory (numpy arrays, CPU torch "
              "tensors, __array_interface__ or CPU DLPack)");
  case Access::None:
    typeError(argText(p, kernel) +
              ": expected an array (numpy, CPU torch tensor, __array_interface__ or "
              "__dlpack__), an int, a float, a bool or None, found " +
              typeName(v));
  }
  if (dtype)
    buf = spanOf(ptr, ndim, shape, strides, itemSizeOf(dtype));
}

/// A pointer argument's parameter bits and key tag (dtype, 16-byte alignment).
static void pointerArg(const Launcher::Param &p, PyObject *v, const std::string &kernel,
                       uint64_t ptr, char dtype, std::string &key, uint64_t &bits) {
  if (!dtype)
    typeError("kernel '" + kernel + "': argument '" + std::string(pyb::str(p.name)) +
              "' has a dtype Kiln does not support (" + typeName(v) + ")");
  bits = ptr;
  key += 'P';
  key += dtype;
  key += (!p.noSpecialize && ptr % kSpecializeAlign == 0) ? 'D' : '-';
}

/// What the arguments of one GPU launch say about where it runs.
struct LaunchPlace {
  bool sawTorch = false; ///< a torch tensor was passed: torch's current stream is the default
  int device = -1;       ///< the device of the tensor arguments; -1: none seen yet
  PyObject *deviceParam = nullptr; ///< the name of the first argument on `device`
};

/// "cuda:N" for a device ordinal.
static std::string cudaName(int device) { return "cuda:" + std::to_string(device); }

/// Notes that argument `p` lives on `device` (-1: memory any device reaches, unchecked);
/// arguments on two devices are an error naming both.
static void noteDevice(LaunchPlace &place, const Launcher::Param &p, int device,
                       const std::string &kernel) {
  if (device < 0)
    return;
  if (place.device < 0) {
    place.device = device;
    place.deviceParam = p.name.ptr();
  } else if (device != place.device) {
    throw pyb::value_error("kernel '" + kernel + "': argument '" + std::string(pyb::str(p.name)) +
                           "' is on " + cudaName(device) + " but argument '" +
                           std::string(pyb::str(place.deviceParam)) + "' is on " +
                           cudaName(place.device) +
                           "; the tensor arguments of a launch must be on one device");
  }
}

/// Reads one runtime argument: appends its tag to `key`, sets its parameter bits, and notes
/// in `place` its device and whether it came from torch (for the default stream). `hostBuf` is
/// null for GPU launches; for host launches it receives the memory an array argument spans.
static void readArg(const Launcher::Param &p, PyObject *v, std::string &key, uint64_t &bits,
                    LaunchPlace &place, const std::string &kernel, kiln::rt::HostBuffer *hostBuf,
                    DescriptorArg *desc = nullptr);

/// Reads a tensor descriptor: its base tensor as a pointer argument, its extents, strides and
/// block shape (checked as TMA requires them, on every backend alike), and appends to `key` the
/// element dtype, the block shape and which extents are multiples of 16.
static void readDescriptor(const Launcher::Param &p, PyObject *v, std::string &key,
                           LaunchPlace &place, const std::string &kernel,
                           kiln::rt::HostBuffer *hostBuf, DescriptorArg &d) {
  pyb::handle h(v);
  auto fail = [&](const std::string &what) {
    typeError(argText(p, kernel) + " (a tensor descriptor): " + what);
  };
  auto ints = [&](const char *attr, std::vector<int64_t> &out) {
    out.clear();
    pyb::object seq = h.attr(attr);
    if (!pyb::isinstance<pyb::sequence>(seq))
      fail(std::string("expected a sequence of integers as ") + attr);
    for (pyb::handle x : seq) {
      long long value = PyLong_AsLongLong(x.ptr());
      if (value == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        fail(std::string("expected a sequence of integers as ") + attr + ", found " +
             std::string(pyb::repr(seq)));
      }
      out.push_back(value);
    }
  };
  ints("shape", d.shape);
  ints("strides", d.strides);
  ints("block_shape", d.block);
  size_t rank = d.block.size();
  if (rank < 1 || rank > 5 || d.shape.size() != rank || d.strides.size() != rank)
    fail("expected shape, strides and block_shape of one rank from 1 to 5, found " +
         std::to_string(d.shape.size()) + ", " + std::to_string(d.strides.size()) + " and " +
         std::to_string(rank) + " entries");
  if (d.strides.back() != 1)
    fail("expected a contiguous last dimension (stride 1), found stride " +
         std::to_string(d.strides.back()));
  for (int64_t b : d.block)
    if (b <= 0 || (b & (b - 1)))
      fail("expected a block_shape of powers of two, found " + std::to_string(b));
  for (int64_t e : d.shape)
    if (e < 0 || e > INT32_MAX)
      fail("expected extents between 0 and 2^31 - 1, found " + std::to_string(e));
  std::string sub;
  uint64_t ptr = 0;
  pyb::object base = h.attr("base");
  readArg(p, base.ptr(), sub, ptr, place, kernel, hostBuf);
  if (sub.size() < 2 || sub[0] != 'P')
    fail("expected a tensor as its base, found " + typeName(base.ptr()));
  d.base = ptr;
  d.dtype = sub[1];
  unsigned itemSize = itemSizeOf(d.dtype);
  if (ptr % 16)
    fail("expected a base address aligned to 16 bytes, found one at " + std::to_string(ptr % 16) +
         " bytes past");
  for (size_t i = 0; i + 1 < rank; ++i)
    if ((d.strides[i] * int64_t(itemSize)) % 16)
      fail("expected strides of multiples of 16 bytes (but the last), found " +
           std::to_string(d.strides[i]) + " elements of " + std::to_string(itemSize) +
           " bytes");
  d.strides.pop_back();
  key += 'T';
  key += d.dtype;
  key += char('0' + rank);
  for (int64_t b : d.block)
    key.append(reinterpret_cast<const char *>(&b), sizeof(b));
  for (int64_t e : d.shape)
    key += (!p.noSpecialize && e % kSpecializeAlign == 0) ? 'D' : '-';
}

static void readArg(const Launcher::Param &p, PyObject *v, std::string &key, uint64_t &bits,
                    LaunchPlace &place, const std::string &kernel, kiln::rt::HostBuffer *hostBuf,
                    DescriptorArg *desc) {
  if (v == Py_None) {
    key += 'N';
    bits = 0;
    return;
  }
  if (PyBool_Check(v)) {
    key += 'B';
    bits = v == Py_True;
    return;
  }
  if (PyLong_Check(v)) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    char width;
    if (overflow > 0) {
      unsigned long long u = PyLong_AsUnsignedLongLong(v);
      if (PyErr_Occurred()) {
        PyErr_Clear();
        typeError("kernel '" + kernel + "': argument '" + std::string(pyb::str(p.name)) +
                  "' = " + std::string(pyb::str(v)) + " does not fit 64 bits");
      }
      bits = u;
      width = 'U';
    } else if (overflow < 0) {
      typeError("kernel '" + kernel + "': argument '" + std::string(pyb::str(p.name)) +
                "' = " + std::string(pyb::str(v)) + " does not fit 64 bits");
    } else {
      if (x == -1 && PyErr_Occurred())
        throw pyb::error_already_set();
      bits = uint64_t(x);
      width = (x >= INT32_MIN && x <= INT32_MAX) ? '4' : '8';
    }
    key += 'I';
    key += width;
    if (p.noSpecialize)
      key += '-';
    else if (width != 'U' && x == 1)
      key += '1';
    else if (bits % kSpecializeAlign == 0)
      key += 'D';
    else
      key += '-';
    return;
  }
  if (PyFloat_Check(v)) {
    float f = float(PyFloat_AS_DOUBLE(v));
    uint32_t b;
    std::memcpy(&b, &f, 4);
    bits = b;
    key += 'F';
    return;
  }

  const Access access = classify(v);
  if (desc && access == Access::Descriptor) {
    bits = 0;
    return readDescriptor(p, v, key, place, kernel, hostBuf, *desc);
  }
  char dtype = 0;
  uint64_t ptr = 0;
  if (hostBuf) {
    readHostArray(p, v, kernel, ptr, dtype, *hostBuf);
    return pointerArg(p, v, kernel, ptr, dtype, key, bits);
  }
  switch (access) {
  case Access::Torch: {
    place.sawTorch = true;
    PyObject *dt = PyObject_GetAttr(v, names().dtype.ptr());
    if (!dt)
      throw pyb::error_already_set();
    auto &map = types().torchDTypes;
    auto it = map.find(dt);
    if (it == map.end()) {
      char c = dtypeCodeFromName(pyb::str(dt));
      it = map.emplace(dt, c).first; // torch dtypes are immortal singletons
      Py_INCREF(dt);
    }
    dtype = it->second;
    Py_DECREF(dt);
    // The tensor's device: with one GPU, is_cuda (an attribute read) says it; with several,
    // get_device() (a method call, about 0.25 us more per tensor), -1 for CPU tensors.
    static const bool severalDevices = kiln::rt::deviceCount() > 1;
    long dev;
    if (severalDevices) {
      PyObject *devObj = PyObject_CallMethodNoArgs(v, names().getDevice.ptr());
      if (!devObj)
        throw pyb::error_already_set();
      dev = PyLong_AsLong(devObj);
      Py_DECREF(devObj);
    } else {
      PyObject *isCuda = PyObject_GetAttr(v, names().isCuda.ptr());
      if (!isCuda)
        throw pyb::error_already_set();
      dev = isCuda == Py_True ? 0 : -1;
      Py_DECREF(isCuda);
    }
    if (dev < 0) {
      PyErr_Clear();
      std::string where = pyb::str(pyb::handle(v).attr(names().device));
      typeError("kernel '" + kernel + "': argument '" + std::string(pyb::str(p.name)) + "' is " +
                (where == "cpu" ? "a CPU tensor (on cpu)" : "on " + where) +
                "; expected a CUDA tensor" +
                (place.device >= 0 ? " on " + cudaName(place.device) + " (where argument '" +
                                         std::string(pyb::str(place.deviceParam)) + "' is)"
                                   : std::string()) +
                " (launch with device='cpu' to run the kernel on the host)");
    }
    noteDevice(place, p, int(dev), kernel);
    PyObject *dp = PyObject_CallMethodNoArgs(v, names().dataPtr.ptr());
    if (!dp)
      throw pyb::error_already_set();
    ptr = PyLong_AsUnsignedLongLong(dp);
    Py_DECREF(dp);
    break;
  }
  case Access::DeviceArray: {
    auto &a = pyb::handle(v).cast<DeviceArray &>();
    ptr = a.dataPtr();
    dtype = dtypeCodeFromName(a.dtype);
    if (a.buffer)
      noteDevice(place, p, a.buffer->getDevice(), kernel);
    break;
  }
  case Access::CudaArrayInterface: {
    pyb::dict cai = pyb::handle(v).attr(names().cai);
    ptr = pyb::cast<uint64_t>(pyb::tuple(cai["data"])[0]);
    dtype = dtypeCodeFromName(pyb::str(cai["typestr"]));
    // The interface names no device: the driver knows where the memory is.
    noteDevice(place, p, kiln::rt::pointerDevice(ptr), kernel);
    break;
  }
  case Access::DLPack: {
    pyb::object capsule = pyb::handle(v).attr(names().dlpack)();
    auto *m = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (!m)
      throw pyb::error_already_set();
    int32_t dev = m->tensor.device.deviceType;
    if (dev != kDLCUDA && dev != kDLCUDAManaged && dev != kDLCUDAHost)
      typeError("kernel '" + kernel + "': argument '" + std::string(pyb::str(p.name)) +
                "' is not in CUDA memory (DLPack device type " + std::to_string(dev) + ")" +
                (dev == kDLCPU ? "; launch with device='cpu' to run the kernel on the host" : ""));
    ptr = uint64_t(m->tensor.data) + m->tensor.byteOffset;
    dtype = dtypeCodeFromDLPack(m->tensor.dtype);
    // Pinned host and managed memory are reachable from any device.
    if (dev == kDLCUDA)
      noteDevice(place, p, m->tensor.device.deviceId, kernel);
    break; // the capsule's destructor releases the tensor (it was not consumed)
  }
  case Access::ArrayInterface:
    typeError(argText(p, kernel) + " is a host array (" + typeName(v) +
              "); a GPU kernel takes device memory (CUDA tensors, kiln.DeviceArray); launch "
              "with device='cpu' to run the kernel on the host");
  case Access::Descriptor:
    typeError(argText(p, kernel) + ": a tensor descriptor cannot be a descriptor's base");
  case Access::None:
    typeError("kernel '" + kernel + "': argument '" + std::string(pyb::str(p.name)) +
              "': expected a tensor (torch, __cuda_array_interface__, __dlpack__ or "
              "kiln.DeviceArray), an int, a float, a bool or None, found " +
              typeName(v));
  }
  pointerArg(p, v, kernel, ptr, dtype, key, bits);
}

/// The spec string Python compiles a parameter for, from its key tag.
static std::string specOf(const std::string &key, size_t &pos) {
  char tag = key[pos++];
  switch (tag) {
  case 'N':
    return "none";
  case 'B':
    return "i1";
  case 'F':
    return "fp32";
  case 'I': {
    char width = key[pos++], spec = key[pos++];
    std::string t = width == '4' ? "i32" : width == '8' ? "i64" : "u64";
    return spec == '1' ? t + ":1" : spec == 'D' ? t + ":16" : t;
  }
  case 'P': {
    char dtype = key[pos++], spec = key[pos++];
    return std::string("*") + dtypeName(dtype) + (spec == 'D' ? ":16" : "");
  }
  case 'T': { // "tensordesc:fp16:128x64:D-"
    char dtype = key[pos++];
    int rank = key[pos++] - '0';
    std::string s = std::string("tensordesc:") + dtypeName(dtype) + ":";
    for (int d = 0; d < rank; ++d) {
      int64_t b;
      std::memcpy(&b, key.data() + pos, sizeof(b));
      pos += sizeof(b);
      s += (d ? "x" : "") + std::to_string(b);
    }
    s += ":" + key.substr(pos, rank);
    pos += rank;
    return s;
  }
  default:
    return "?";
  }
}

/// The index of the parameter named `k` (interned names compare by pointer first), or n.
static size_t findParam(const std::vector<Launcher::Param> &params, PyObject *k) {
  const size_t n = params.size();
  for (size_t i = 0; i < n; ++i)
    if (params[i].name.ptr() == k)
      return i;
  for (size_t i = 0; i < n; ++i)
    if (PyUnicode_Compare(params[i].name.ptr(), k) == 0)
      return i;
  return n;
}

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
    }
    else if (PyUnicode_Compare(k, names().stream.ptr()) == 0)
      streamObj = v;
    else if (PyUnicode_Compare(k, names().device.ptr()) == 0)
      launchBackend = parseBackend(v, name);
    else if (PyUnicode_Compare(k, names().debug.ptr()) == 0)
      launchDebug = v == Py_None ? -1 : PyObject_IsTrue(v);
    else
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

  // Backend and debug mode: launch options, else the kernel's (resolved once).
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
  LaunchPlace place;
  for (size_t i = 0; i < n; ++i) {
    if (params[i].isConstexpr) {
      key += 'K';
      appendConstexpr(key, bound[i]);
      bits[i] = 0;
    } else {
      readArg(params[i], bound[i], key, bits[i], place, name, host ? &hostBuffers[i] : nullptr,
              &descs[i]);
    }
  }
  // The device: that of the tensor arguments, else the current one (loaded per device).
  int device = 0;
  if (!host)
    device = place.device >= 0 ? place.device
                               : (kiln::rt::hasGPU() ? kiln::rt::currentDevice() : 0);
  key += 'W';
  key.append(reinterpret_cast<const char *>(&numWarps), sizeof(numWarps));
  key.append(reinterpret_cast<const char *>(&numStages), sizeof(numStages));
  key.append(reinterpret_cast<const char *>(&maxnreg), sizeof(maxnreg));
  key += host ? 'h' : 'g';
  key += debug ? 'd' : '-';
  key.append(reinterpret_cast<const char *>(&device), sizeof(device));

  Variant *variant;
  auto it = cache.find(key);
  if (it != cache.end()) {
    variant = it->second.get();
  } else {
    variant = compileVariant(key, bound, numWarps, numStages, maxnreg, host, debug, device);
  }

  // Captured globals must still hold the values the kernel was compiled with.
  for (auto &[dict, globalName, value] : variant->globals) {
    PyObject *now = PyDict_GetItemWithError(dict.ptr(), globalName.ptr());
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
          kiln::rt::encodeTensorMap(d.map, *box, kindOfDType(d.dtype), d.base, d.shape,
                                    d.strides);
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

  variant->kernel->launchRaw(g, stream, ptrs); // kiln::rt::Error becomes kiln.KilnError
  return variant->compiled.inc_ref().ptr();
}

Launcher::Variant *Launcher::compileVariant(const std::string &keyRef, PyObject **bound,
                                            long numWarps, long numStages, long maxnreg,
                                            bool host, bool debug, int device) {
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
  pyb::tuple result = compileFn(specs, values, numWarps, numStages, host, debug,
                                maxnreg >= 0 ? pyb::object(pyb::int_(maxnreg)) : pyb::none(),
                                device);
  auto v = std::make_shared<Variant>();
  v->kernel = result[0].cast<KernelHandle &>().kernel;
  for (pyb::handle h : pyb::list(result[1]))
    v->argParams.push_back(h.cast<int>());
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
  Variant *raw = v.get();
  cache.emplace(key, std::move(v));
  return raw;
}

//===----------------------------------------------------------------------===//
// The Python types of the launch path (plain CPython: kernel[grid](...) is two C calls)
//===----------------------------------------------------------------------===//

namespace {

/// kiln._C.Launcher: the base class of kiln.jit.JITFunction.
struct LauncherObject {
  PyObject_HEAD Launcher *impl;
};

/// kiln._C.BoundLaunch: what kernel[grid] returns; calling it launches.
struct BoundObject {
  PyObject_HEAD LauncherObject *owner;
  PyObject *grid;
  vectorcallfunc vectorcall;
};

/// Turns the C++ exception in flight into a Python error; returns nullptr.
PyObject *setPythonError() {
  try {
    throw;
  } catch (pyb::error_already_set &e) {
    e.restore();
  } catch (pyb::builtin_exception &e) {
    e.set_error();
  } catch (const kiln::rt::Error &e) {
    PyErr_SetString(kiln::python::kilnErrorType, e.what());
  } catch (const std::exception &e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyObject *boundVectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  auto *b = reinterpret_cast<BoundObject *>(self);
  try {
    return b->owner->impl->launch(b->grid, args, PyVectorcall_NARGS(nargsf), kwnames);
  } catch (...) {
    return setPythonError();
  }
}

void boundDealloc(PyObject *self) {
  auto *b = reinterpret_cast<BoundObject *>(self);
  Py_XDECREF(b->owner);
  Py_XDECREF(b->grid);
  Py_TYPE(self)->tp_free(self);
}

PyTypeObject BoundType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "kiln._C.BoundLaunch";
  t.tp_basicsize = sizeof(BoundObject);
  t.tp_dealloc = boundDealloc;
  t.tp_call = PyVectorcall_Call;
  t.tp_vectorcall_offset = offsetof(BoundObject, vectorcall);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  t.tp_doc = "kernel[grid]: call it with the kernel's arguments to launch";
  return t;
}();

PyObject *launcherNew(PyTypeObject *type, PyObject *, PyObject *) {
  PyObject *self = type->tp_alloc(type, 0);
  if (self)
    reinterpret_cast<LauncherObject *>(self)->impl = new Launcher();
  return self;
}

void launcherDealloc(PyObject *self) {
  auto *l = reinterpret_cast<LauncherObject *>(self);
  PyTypeObject *type = Py_TYPE(self);
  if (PyType_IS_GC(type))
    PyObject_GC_UnTrack(self);
  delete l->impl;
  l->impl = nullptr;
  type->tp_free(self); // a Python subclass's type is released by subtype_dealloc
}

PyObject *launcherSubscript(PyObject *self, PyObject *grid) {
  BoundObject *b = PyObject_New(BoundObject, &BoundType);
  if (!b)
    return nullptr;
  Py_INCREF(self);
  Py_INCREF(grid);
  b->owner = reinterpret_cast<LauncherObject *>(self);
  b->grid = grid;
  b->vectorcall = boundVectorcall;
  return reinterpret_cast<PyObject *>(b);
}

PyObject *launcherSetup(PyObject *self, PyObject *args) {
  PyObject *name, *names, *cflags, *nflags, *hasDefault, *defaults, *compile;
  PyObject *device = Py_None, *debug = Py_None;
  if (!PyArg_ParseTuple(args, "UO!O!O!O!O!O|OO:_setup", &name, &PyList_Type, &names, &PyList_Type,
                        &cflags, &PyList_Type, &nflags, &PyList_Type, &hasDefault, &PyList_Type,
                        &defaults, &compile, &device, &debug))
    return nullptr;
  try {
    auto borrow = [](PyObject *o) { return pyb::reinterpret_borrow<pyb::list>(o); };
    reinterpret_cast<LauncherObject *>(self)->impl->setup(
        pyb::str(name).cast<std::string>(), borrow(names), borrow(cflags), borrow(nflags),
        borrow(hasDefault), borrow(defaults), pyb::reinterpret_borrow<pyb::object>(compile),
        pyb::reinterpret_borrow<pyb::object>(device), pyb::reinterpret_borrow<pyb::object>(debug));
    Py_RETURN_NONE;
  } catch (...) {
    return setPythonError();
  }
}

PyObject *launcherLaunch(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames) {
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "_launch(grid, *args, **kwargs) needs a grid");
    return nullptr;
  }
  try {
    return reinterpret_cast<LauncherObject *>(self)->impl->launch(args[0], args + 1, nargs - 1,
                                                                  kwnames);
  } catch (...) {
    return setPythonError();
  }
}

PyObject *launcherNumVariants(PyObject *self, PyObject *) {
  return PyLong_FromSize_t(reinterpret_cast<LauncherObject *>(self)->impl->numVariants());
}

PyObject *launcherClear(PyObject *self, PyObject *) {
  reinterpret_cast<LauncherObject *>(self)->impl->clearCache();
  Py_RETURN_NONE;
}

PyMethodDef launcherMethods[] = {
    {"_setup", launcherSetup, METH_VARARGS,
     "_setup(name, param_names, constexpr_flags, no_specialize_flags, has_default, defaults, "
     "compile, device=None, debug=None)"},
    {"_launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launcherLaunch)),
     METH_FASTCALL | METH_KEYWORDS, "_launch(grid, *args, **kwargs)"},
    {"_num_variants", launcherNumVariants, METH_NOARGS, "number of compiled variants"},
    {"_clear_variants", launcherClear, METH_NOARGS, "forgets the compiled variants"},
    {nullptr, nullptr, 0, nullptr}};

PyMappingMethods launcherMapping = {nullptr, launcherSubscript, nullptr};

PyTypeObject LauncherType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "kiln._C.Launcher";
  t.tp_basicsize = sizeof(LauncherObject);
  t.tp_dealloc = launcherDealloc;
  t.tp_as_mapping = &launcherMapping;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  t.tp_doc = "The C++ launch path of a @kiln.jit kernel (base of kiln.jit.JITFunction)";
  t.tp_methods = launcherMethods;
  t.tp_new = launcherNew;
  return t;
}();

} // namespace

void kiln::python::registerLaunchTypes(pyb::module_ &m) {
  if (PyType_Ready(&BoundType) < 0 || PyType_Ready(&LauncherType) < 0)
    throw pyb::error_already_set();
  Py_INCREF(&BoundType);
  Py_INCREF(&LauncherType);
  m.add_object("BoundLaunch", reinterpret_cast<PyObject *>(&BoundType));
  m.add_object("Launcher", reinterpret_cast<PyObject *>(&LauncherType));
}

PyObject *kiln::python::kilnErrorType = nullptr;
