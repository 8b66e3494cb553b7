//===- LauncherArgs.cpp - Reading kernel[grid](...) arguments -------------===//
//
// This file implements what the launcher reads from each argument of a launch: dtype codes
// (numpy, torch, DLPack, ml_dtypes), device pointers through __cuda_array_interface__,
// DLPack, torch's data_ptr and __array_interface__, host array spans for the CPU backend's
// checks, tensor descriptors, and the specialization key each argument contributes
// (kiln/Specialization.h). Declared in LauncherArgs.h.
//
//===----------------------------------------------------------------------===//

#include "LauncherArgs.h"

#include "kiln/Specialization.h"

#include <cstdlib>
#include <cstring>

namespace pyb = pybind11;

namespace kiln::python {

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

/// A dtype code in keys and its Triton name.
struct DTypeCode {
  char code;
  const char *name;
};
constexpr DTypeCode kDTypes[] = {{'b', "i1"},   {'c', "i8"},      {'s', "i16"},  {'i', "i32"},
                                 {'l', "i64"},  {'C', "u8"},      {'S', "u16"},  {'I', "u32"},
                                 {'L', "u64"},  {'h', "fp16"},    {'H', "bf16"}, {'f', "fp32"},
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
      {"bool", 'b'},       {"int8", 'c'},    {"int16", 's'},    {"int32", 'i'},
      {"int64", 'l'},      {"uint8", 'C'},   {"uint16", 'S'},   {"uint32", 'I'},
      {"uint64", 'L'},     {"float16", 'h'}, {"bfloat16", 'H'}, {"float32", 'f'},
      {"float64", 'd'},    {"half", 'h'},    {"float", 'f'},    {"double", 'd'},
      {"long", 'l'},       {"int", 'i'},     {"short", 's'},    {"b1", 'b'},
      {"i1", 'c'},         {"i2", 's'},      {"i4", 'i'},       {"i8", 'l'},
      {"u1", 'C'},         {"u2", 'S'},      {"u4", 'I'},       {"u8", 'L'},
      {"f2", 'h'},         {"f4", 'f'},      {"f8", 'd'},       {"float8_e4m3fn", 'e'},
      {"float8_e5m2", 'E'}};
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

Names &names() {
  static Names *n = new Names(); // leaked: outlives interpreter shutdown ordering issues
  return *n;
}

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
    else if (module == "numpy" && pyb::isinstance(h, pyb::module_::import("numpy").attr("generic")))
      a = Access::NumpyScalar; // (before __array_interface__, which numpy's scalars have too)
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
  case Access::NumpyScalar: // (read as its scalar before; here where an array must be)
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
  key += kiln::specializePointer(ptr, {!p.noSpecialize}) == kiln::Specialization::DivisibleBy16
             ? 'D'
             : '-';
}

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
void readArg(const Launcher::Param &p, PyObject *v, std::string &key, uint64_t &bits,
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
  // Row strides under 2^40 bytes (the TMA's limit; no tensor has rows that far apart): a
  // larger one would wrap the block's addresses around the base.
  constexpr int64_t kMaxStrideBytes = int64_t(1) << 40;
  for (size_t i = 0; i + 1 < rank; ++i) {
    if (d.strides[i] <= -kMaxStrideBytes / int64_t(itemSize) ||
        d.strides[i] >= kMaxStrideBytes / int64_t(itemSize))
      fail("expected strides under 2^40 bytes, found " + std::to_string(d.strides[i]) +
           " elements of " + std::to_string(itemSize) + " bytes");
    if ((d.strides[i] * int64_t(itemSize)) % 16)
      fail("expected strides of multiples of 16 bytes (but the last), found " +
           std::to_string(d.strides[i]) + " elements of " + std::to_string(itemSize) + " bytes");
  }
  d.strides.pop_back();
  key += 'T';
  key += d.dtype;
  key += char('0' + rank);
  for (int64_t b : d.block)
    key.append(reinterpret_cast<const char *>(&b), sizeof(b));
  for (int64_t e : d.shape)
    key += (!p.noSpecialize && e % kiln::kSpecializationDivisor == 0) ? 'D' : '-';
}

void readArg(const Launcher::Param &p, PyObject *v, std::string &key, uint64_t &bits,
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
    kiln::Specialization spec = width == 'U'
                                    ? kiln::specializeUInt(bits, /*wide=*/true, {!p.noSpecialize})
                                    : kiln::specializeInt(x, {!p.noSpecialize});
    key += spec == kiln::Specialization::EqualsOne       ? '1'
           : spec == kiln::Specialization::DivisibleBy16 ? 'D'
                                                         : '-';
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
  if (access == Access::NumpyScalar) {
    // np.int64 (from np.prod(shape), a shape's element), np.float32, np.bool_: the Python
    // scalar each holds, as if it had been passed (before, a 0-d array: a pointer).
    pyb::object item = pyb::handle(v).attr("item")();
    if (PyLong_Check(item.ptr()) || PyFloat_Check(item.ptr()) || PyBool_Check(item.ptr()))
      return readArg(p, item.ptr(), key, bits, place, kernel, hostBuf, desc);
    typeError("kernel '" + kernel + "': argument '" + std::string(pyb::str(p.name)) +
              "' is a numpy scalar of type " + typeName(v) +
              ", expected an integer, float or bool scalar, or an array");
  }
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
  case Access::NumpyScalar: // (read as its scalar before; here where a tensor must be)
  case Access::None:
    typeError("kernel '" + kernel + "': argument '" + std::string(pyb::str(p.name)) +
              "': expected a tensor (torch, __cuda_array_interface__, __dlpack__ or "
              "kiln.DeviceArray), an int, a float, a bool or None, found " +
              typeName(v));
  }
  pointerArg(p, v, kernel, ptr, dtype, key, bits);
}

/// The elements of tuple `v` (and of the tuples in it, depth first) appended to `bits`.
static void readTupleElements(const Launcher::Param &p, PyObject *v, std::string &key,
                              std::vector<uint64_t> &bits, LaunchPlace &place,
                              const std::string &kernel,
                              std::vector<kiln::rt::HostBuffer> *hostBufs, int depth) {
  const Py_ssize_t size = PyTuple_GET_SIZE(v);
  if (depth > 8)
    typeError(argText(p, kernel) + ": expected tuples nested at most 8 deep");
  key += '(';
  key += char(std::min<Py_ssize_t>(size, 127));
  if (!PyTuple_CheckExact(v)) { // a NamedTuple: the kernel reads its fields by name
    PyTypeObject *type = Py_TYPE(v);
    key += '#';
    key.append(reinterpret_cast<const char *>(&type), sizeof(type));
  }
  for (Py_ssize_t k = 0; k < size; ++k) {
    PyObject *e = PyTuple_GET_ITEM(v, k);
    if (PyTuple_Check(e)) {
      readTupleElements(p, e, key, bits, place, kernel, hostBufs, depth + 1);
      continue;
    }
    if (classify(e) == Access::Descriptor)
      typeError(argText(p, kernel) + ": element " + std::to_string(k) + " is a " + typeName(e) +
                "; a tuple argument holds tensors, ints, floats, bools, None and tuples of them");
    if (bits.size() >= size_t(kMaxTupleElements))
      typeError(argText(p, kernel) + ": expected a tuple of at most " +
                std::to_string(kMaxTupleElements) + " elements (nested ones counted)");
    kiln::rt::HostBuffer buf;
    bits.push_back(0);
    readArg(p, e, key, bits.back(), place, kernel, hostBufs ? &buf : nullptr, nullptr);
    if (hostBufs && (buf.begin || buf.bytes))
      hostBufs->push_back(buf);
  }
  key += ')';
}

void readTuple(const Launcher::Param &p, PyObject *v, std::string &key, std::vector<uint64_t> &bits,
               LaunchPlace &place, const std::string &kernel,
               std::vector<kiln::rt::HostBuffer> *hostBufs) {
  bits.clear();
  readTupleElements(p, v, key, bits, place, kernel, hostBufs, 0);
}

/// The spec string Python compiles a parameter for, from its key tag.
std::string specOf(const std::string &key, size_t &pos) {
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
  case '(': { // a tuple: "(spec,spec,...)"
    int size = key[pos++];
    if (key[pos] == '#') // a NamedTuple's type (keyed, not part of the spec)
      pos += 1 + sizeof(PyTypeObject *);
    std::string s = "(";
    for (int k = 0; k < size; ++k)
      s += (k ? "," : "") + specOf(key, pos);
    ++pos; // ')'
    return s + ")";
  }
  default:
    return "?";
  }
}

/// The index of the parameter named `k` (interned names compare by pointer first), or n.
size_t findParam(const std::vector<Launcher::Param> &params, PyObject *k) {
  const size_t n = params.size();
  for (size_t i = 0; i < n; ++i)
    if (params[i].name.ptr() == k)
      return i;
  for (size_t i = 0; i < n; ++i)
    if (PyUnicode_Compare(params[i].name.ptr(), k) == 0)
      return i;
  return n;
}

} // namespace kiln::python
