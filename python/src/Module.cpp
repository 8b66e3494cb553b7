//===- Module.cpp - kiln._C, the Python extension of Kiln -----------------===//
//
// This file implements the pybind11 module kiln._C: the front-end facade (kiln::facade::Session)
// that @kiln.jit drives while walking a kernel's AST, the no-GPU compiler entry point, the
// process-wide JIT (memory and disk cache), a small device array, event timing for
// kiln.testing.do_bench, and the C++ launcher behind kernel[grid](...). It includes only the
// facade header, the runtime header and pybind11, so it builds against a prebuilt libkiln.so
// on machines without LLVM or MLIR.
//
//===----------------------------------------------------------------------===//

#include "Launcher.h"

#include "kiln/Facade/Session.h"
#include "kiln/Runtime.h"

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <mutex>

namespace pyb = pybind11;
using namespace kiln::python;
using kiln::facade::Handle;
using kiln::facade::Session;

namespace {

/// The process-wide JIT: for $KILN_ARCH when set (compiling without a GPU), else for the
/// current device (created on first use).
kiln::rt::JIT &processJIT() {
  static std::unique_ptr<kiln::rt::JIT> jit;
  static std::once_flag once;
  std::call_once(once, [] {
    const char *arch = std::getenv("KILN_ARCH");
    jit = std::make_unique<kiln::rt::JIT>(arch ? arch : "");
  });
  return *jit;
}

/// The process-wide JIT of the host backend (kernels run on this machine's CPU).
kiln::rt::JIT &hostJIT() {
  static std::unique_ptr<kiln::rt::JIT> jit;
  static std::once_flag once;
  std::call_once(once, [] { jit = std::make_unique<kiln::rt::JIT>(kiln::rt::kHostArch); });
  return *jit;
}

/// numpy's dtype name -> bytes per element; 0 when Kiln cannot hold it.
size_t itemSizeOf(const std::string &dtype) {
  static const std::pair<const char *, size_t> sizes[] = {
      {"bool", 1},    {"int8", 1},     {"uint8", 1},  {"int16", 2},  {"uint16", 2},
      {"float16", 2}, {"bfloat16", 2}, {"int32", 4},  {"uint32", 4}, {"float32", 4},
      {"int64", 8},   {"uint64", 8},   {"float64", 8}};
  for (auto &[n, s] : sizes)
    if (dtype == n)
      return s;
  return 0;
}

/// kiln._C.BuildError: a kiln::CompileError (a kernel that does not build or compile, with
/// its location).
PyObject *buildErrorType = nullptr;

} // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Kiln's C++ extension: front-end facade, compiler, JIT and launcher";

  buildErrorType = PyErr_NewException("kiln._C.BuildError", PyExc_Exception, nullptr);
  m.attr("BuildError") = pyb::handle(buildErrorType);
  kilnErrorType = PyErr_NewException("kiln._C.KilnError", PyExc_RuntimeError, nullptr);
  m.attr("KilnError") = pyb::handle(kilnErrorType);
  pyb::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const kiln::CompileError &e) {
      pyb::tuple args = pyb::make_tuple(e.getKernel(), e.getFile(), e.getLine(), e.getColumn(),
                                        e.getMessage(), std::string(e.what()), e.getDiagnostics());
      PyErr_SetObject(buildErrorType, args.ptr());
    } catch (const kiln::rt::Error &e) {
      PyErr_SetString(kilnErrorType, e.what());
    }
  });

  //===--------------------------------------------------------------------===//
  // Front end
  //===--------------------------------------------------------------------===//

  pyb::class_<kiln::facade::ArgSpec>(m, "ArgSpec")
      .def(pyb::init(
               [](std::string name, std::string dtype, int32_t divisibility, bool recipeField) {
                 return kiln::facade::ArgSpec{std::move(name), std::move(dtype), divisibility,
                                              recipeField};
               }),
           pyb::arg("name"), pyb::arg("dtype"), pyb::arg("divisibility") = 0,
           pyb::arg("recipe_field") = true);

  pyb::class_<Session>(m, "Session")
      .def(pyb::init<>())
      .def("set_location", &Session::setLocation)
      .def("begin_kernel", &Session::beginKernel)
      .def("arg", &Session::arg)
      .def("derived_tensor_map", &Session::derivedTensorMap)
      .def("finish_kernel", &Session::finishKernel, pyb::arg("tma_pointer_tiles") = false,
           pyb::arg("attention_tiles") = false)
      .def("tensor_map_recipes", &Session::tensorMapRecipes)
      .def("error", &Session::error)
      .def("dtype", &Session::dtype)
      .def("shape", &Session::shape)
      .def("is_tile", &Session::isTile)
      .def("is_weak", &Session::isWeak)
      .def("int_const", &Session::intConst)
      .def("uint_const", &Session::uintConst)
      .def("float_const", &Session::floatConst)
      .def("bool_const", &Session::boolConst)
      .def("materialize", &Session::materialize)
      .def("program_id", &Session::programId)
      .def("num_programs", &Session::numPrograms)
      .def("arange", &Session::arange)
      .def("full", &Session::full)
      .def("zeros", &Session::zeros)
      .def("binary", &Session::binary)
      .def("unary", &Session::unary)
      .def("libdevice", &Session::libdevice)
      .def("extern_elementwise", &Session::externElementwise)
      .def("inline_asm_elementwise", &Session::inlineAsmElementwise)
      .def("hardware_register", &Session::hardwareRegister)
      .def("grid_dependency", &Session::gridDependency)
      .def("where", &Session::where)
      .def("fma", &Session::fma)
      .def("cast", &Session::cast, pyb::arg("x"), pyb::arg("dtype"), pyb::arg("bitcast") = false,
           pyb::arg("rounding") = "")
      .def("hint", &Session::hint, pyb::arg("x"), pyb::arg("kind"), pyb::arg("values"))
      .def("load", &Session::load)
      .def("store", &Session::store)
      .def("descriptor_load", &Session::descriptorLoad)
      .def("descriptor_store", &Session::descriptorStore)
      .def("atomic_rmw", &Session::atomicRMW)
      .def("atomic_cas", &Session::atomicCAS)
      .def("device_print", &Session::devicePrint, pyb::arg("prefix"), pyb::arg("args"),
           pyb::arg("hex") = false)
      .def("device_assert", &Session::deviceAssert)
      .def("debug_barrier", &Session::debugBarrier)
      .def("assume", &Session::assume)
      .def("expand_dims", &Session::expandDims)
      .def("broadcast_to", &Session::broadcastTo)
      .def("broadcast", &Session::broadcast)
      .def("reshape", &Session::reshape)
      .def("trans", &Session::trans)
      .def("join", &Session::join)
      .def("split", &Session::split)
      .def("interleave", &Session::interleave)
      .def("cat", &Session::cat)
      .def("flip", &Session::flip, pyb::arg("x"), pyb::arg("dim") = std::nullopt)
      .def("gather", &Session::gather)
      .def("sort", &Session::sort, pyb::arg("x"), pyb::arg("dim") = std::nullopt,
           pyb::arg("descending") = false)
      .def("topk", &Session::topk, pyb::arg("x"), pyb::arg("k"), pyb::arg("dim") = std::nullopt)
      .def("histogram", &Session::histogram, pyb::arg("x"), pyb::arg("num_bins"),
           pyb::arg("mask") = -1)
      .def("reduce_op", &Session::reduceOp)
      .def("reduce", &Session::reduce)
      .def("scan", &Session::scan, pyb::arg("inputs"), pyb::arg("axis"), pyb::arg("combine"),
           pyb::arg("reverse") = false)
      .def("scan_op", &Session::scanOp, pyb::arg("op"), pyb::arg("x"), pyb::arg("axis"),
           pyb::arg("reverse") = false, pyb::arg("dtype") = "")
      .def("dot", &Session::dot, pyb::arg("a"), pyb::arg("b"), pyb::arg("acc") = -1,
           pyb::arg("input_precision") = "", pyb::arg("out_dtype") = "fp32",
           pyb::arg("max_num_imprecise_acc") = 0)
      .def("for_loop", &Session::forLoop, pyb::arg("lb"), pyb::arg("ub"), pyb::arg("step"),
           pyb::arg("inits"), pyb::arg("body"), pyb::arg("names") = std::vector<std::string>(),
           pyb::arg("flatten") = false, pyb::arg("warp_specialize") = false)
      .def("if_then_else", &Session::ifThenElse)
      .def("while_loop", &Session::whileLoop);

  //===--------------------------------------------------------------------===//
  // Compiler and JIT
  //===--------------------------------------------------------------------===//

  pyb::class_<kiln::KernelSource>(m, "KernelSource")
      .def(pyb::init([](std::string text) { return kiln::KernelSource(std::move(text)); }),
           pyb::arg("text"))
      .def_property_readonly("text", &kiln::KernelSource::getText,
                             "the module as MLIR text with locations (printed once)")
      .def_property_readonly("is_built", &kiln::KernelSource::isBuilt);

  m.def(
      "compile_module",
      [](const kiln::KernelSource &source, const std::string &arch, unsigned numWarps,
         unsigned numStages, unsigned maxnreg, bool fpFusion, bool cubin) {
        kiln::CompileOptions options;
        options.arch = arch;
        options.numWarps = numWarps ? numWarps : 4;
        options.numStages = numStages;
        options.maxnreg = maxnreg;
        options.fpFusion = fpFusion;
        options.emitCubin = cubin;
        kiln::CompiledKernel r;
        {
          pyb::gil_scoped_release release;
          r = kiln::compileKernel(source, options);
        }
        pyb::dict out;
        out["name"] = r.name;
        out["llvm"] = r.llvmIR;
        out["ptx"] = r.ptx;
        out["cubin"] = pyb::bytes(r.cubin.data(), r.cubin.size());
        out["cubin_error"] = r.cubinError;
        out["shared"] = r.sharedBytes;
        out["static_shared"] = r.staticSharedBytes;
        pyb::list rows;
        for (unsigned v : r.tensorMapBoxRows)
          rows.append(v);
        out["tma_box_rows"] = rows;
        return out;
      },
      pyb::arg("source"), pyb::arg("arch") = "sm_90", pyb::arg("num_warps") = 4,
      pyb::arg("num_stages") = 3, pyb::arg("maxnreg") = 0, pyb::arg("fp_fusion") = true,
      pyb::arg("cubin") = false);
  m.def("build_id", &kiln::buildId);
  m.def("libdevice_functions", &kiln::facade::libdeviceFunctions);
  m.def("version", [] { return std::string(kiln_version()); });

  pyb::class_<KernelHandle>(m, "KernelHandle")
      .def_property_readonly("name", [](const KernelHandle &k) { return k.kernel->getName(); })
      .def_property_readonly("num_warps",
                             [](const KernelHandle &k) { return k.kernel->getNumWarps(); })
      .def_property_readonly("is_host", [](const KernelHandle &k) { return k.kernel->isHost(); })
      .def_property_readonly("n_regs", [](const KernelHandle &k) { return k.kernel->getNumRegs(); })
      .def_property_readonly("shared_bytes",
                             [](const KernelHandle &k) { return k.kernel->getSharedBytes(); })
      .def_property_readonly("static_shared_bytes",
                             [](const KernelHandle &k) { return k.kernel->getStaticSharedBytes(); })
      .def_property_readonly("local_bytes",
                             [](const KernelHandle &k) { return k.kernel->getLocalBytes(); })
      .def(
          "launch_host",
          [](const KernelHandle &k, std::vector<unsigned> grid, std::vector<uint64_t> args,
             std::vector<std::pair<uint64_t, uint64_t>> buffers) {
            // A host kernel over `grid` with raw 64-bit parameter values (pointers as host
            // addresses, floats as their bits); `buffers` ({begin, bytes}) for debug checks.
            if (!k.kernel->isHost())
              throw pyb::value_error("launch_host: '" + k.kernel->getName() +
                                     "' is not a host kernel");
            if (args.size() != k.kernel->getSignature().size())
              throw pyb::value_error("launch_host: '" + k.kernel->getName() + "' takes " +
                                     std::to_string(k.kernel->getSignature().size()) +
                                     " arguments, got " + std::to_string(args.size()));
            grid.resize(3, 1);
            std::vector<void *> ptrs;
            for (uint64_t &a : args)
              ptrs.push_back(&a);
            std::vector<kiln::rt::HostBuffer> bufs;
            for (auto &[begin, bytes] : buffers)
              bufs.push_back({begin, bytes});
            pyb::gil_scoped_release release;
            k.kernel->launchHost({grid[0], grid[1], grid[2]}, ptrs.data(), bufs);
          },
          pyb::arg("grid"), pyb::arg("args"),
          pyb::arg("buffers") = std::vector<std::pair<uint64_t, uint64_t>>{})
      .def_property_readonly("is_debug", [](const KernelHandle &k) { return k.kernel->isDebug(); })
      .def_property_readonly("signature", [](const KernelHandle &k) {
        std::vector<std::string> sig;
        for (kiln::rt::ArgKind a : k.kernel->getSignature())
          sig.push_back(kiln::rt::toString(a));
        return sig;
      });
  m.def(
      "jit_load",
      [](const kiln::KernelSource &source, unsigned numWarps, unsigned numStages, unsigned maxnreg,
         bool fpFusion, bool debug, bool host, int device) {
        // Compiles (or finds in the memory/disk cache) and loads on `device` (-1: the current
        // one); without a GPU (KILN_ARCH set) it compiles only, and launching it throws.
        // `host`: the host backend's JIT, whose kernels run on the CPU.
        kiln::CompileOptions options;
        options.numWarps = numWarps;
        options.numStages = numStages;
        options.maxnreg = maxnreg;
        options.fpFusion = fpFusion;
        options.debug = debug;
        pyb::gil_scoped_release release;
        if (host)
          return KernelHandle{&hostJIT().get(source, options)};
        kiln::rt::JIT &jit = processJIT();
        if (!kiln::rt::hasGPU())
          return KernelHandle{&jit.compile(source, options)};
        return KernelHandle{&jit.get(source, options, device)};
      },
      pyb::arg("source"), pyb::arg("num_warps") = 4, pyb::arg("num_stages") = 3,
      pyb::arg("maxnreg") = 0, pyb::arg("fp_fusion") = true, pyb::arg("debug") = false,
      pyb::arg("host") = false, pyb::arg("device") = -1);
  m.def(
      "jit_stats",
      [](bool host) {
        const kiln::rt::JITStats &s = (host ? hostJIT() : processJIT()).getStats();
        pyb::dict d;
        d["memory_hits"] = s.memoryHits;
        d["disk_hits"] = s.diskHits;
        d["compiles"] = s.compiles;
        d["corrupt_entries"] = s.corruptEntries;
        return d;
      },
      pyb::arg("host") = false);
  m.def("cache_dir", &kiln::rt::getCacheDir);

  //===--------------------------------------------------------------------===//
  // Device
  //===--------------------------------------------------------------------===//

  m.def("has_gpu", &kiln::rt::hasGPU);
  m.def("device_count", &kiln::rt::deviceCount);
  m.def("current_device", &kiln::rt::currentDevice);
  m.def("set_device", &kiln::rt::setDevice, pyb::arg("ordinal"));
  m.def("pointer_device", &kiln::rt::pointerDevice, pyb::arg("ptr"));
  m.def("get_arch", &kiln::rt::getArch, pyb::arg("ordinal") = 0);
  m.def("device_attribute", &kiln::rt::getDeviceAttribute, pyb::arg("ordinal"),
        pyb::arg("attribute"));
  m.def(
      "synchronize",
      [](int device) {
        pyb::gil_scoped_release release;
        if (device < 0)
          kiln::rt::synchronize();
        else
          kiln::rt::synchronize(device);
      },
      pyb::arg("device") = -1);

  pyb::class_<kiln::rt::Stream>(m, "Stream")
      .def(pyb::init<int>(), pyb::arg("device") = -1)
      .def_property_readonly("handle", [](const kiln::rt::Stream &s) { return uint64_t(s.get()); })
      .def_property_readonly("device", &kiln::rt::Stream::getDevice)
      .def("synchronize", &kiln::rt::Stream::synchronize,
           pyb::call_guard<pyb::gil_scoped_release>());

  pyb::class_<kiln::rt::Graph>(m, "Graph")
      .def(pyb::init<>())
      .def(
          "capture_begin",
          [](kiln::rt::Graph &g, uint64_t stream, int device) {
            g.beginCapture(reinterpret_cast<kiln::rt::CUstream>(stream), device);
          },
          pyb::arg("stream"), pyb::arg("device") = -1)
      .def("capture_end", &kiln::rt::Graph::endCapture)
      .def(
          "replay",
          [](const kiln::rt::Graph &g, uint64_t stream) {
            g.launch(reinterpret_cast<kiln::rt::CUstream>(stream));
          },
          pyb::arg("stream") = 0)
      .def_property_readonly("capturing", &kiln::rt::Graph::isCapturing)
      .def_property_readonly("ready", &kiln::rt::Graph::isReady);

  m.def("memory_allocated", &kiln::rt::memoryAllocated, pyb::arg("device"));
  m.def("max_memory_allocated", &kiln::rt::maxMemoryAllocated, pyb::arg("device"));
  m.def("reset_peak_memory", &kiln::rt::resetPeakMemory, pyb::arg("device"));

  pyb::class_<kiln::rt::EventTimer>(m, "EventTimer")
      .def(pyb::init<>())
      .def(
          "start",
          [](kiln::rt::EventTimer &t, uint64_t stream) {
            t.start(reinterpret_cast<kiln::rt::CUstream>(stream));
          },
          pyb::arg("stream") = 0)
      .def(
          "stop",
          [](kiln::rt::EventTimer &t, uint64_t stream) {
            return t.stop(reinterpret_cast<kiln::rt::CUstream>(stream));
          },
          pyb::arg("stream") = 0);

  pyb::class_<DeviceArray>(m, "DeviceArray")
      .def_static(
          "empty",
          [](std::vector<int64_t> shape, std::string dtype, int device) {
            DeviceArray a;
            a.itemSize = itemSizeOf(dtype);
            if (!a.itemSize)
              throw pyb::type_error("kiln.empty: unsupported dtype '" + dtype + "'");
            a.shape = std::move(shape);
            a.dtype = std::move(dtype);
            a.buffer = std::make_shared<kiln::rt::DeviceBuffer>(
                std::max<size_t>(a.numel() * a.itemSize, 1), device);
            return a;
          },
          pyb::arg("shape"), pyb::arg("dtype"), pyb::arg("device") = -1)
      .def_static(
          "from_host",
          [](pyb::buffer b, std::string dtype, int device) {
            pyb::buffer_info info = b.request();
            DeviceArray a;
            a.itemSize = itemSizeOf(dtype);
            if (!a.itemSize || size_t(info.itemsize) != a.itemSize)
              throw pyb::type_error("kiln.from_numpy: unsupported dtype '" + dtype + "'");
            ssize_t expect = info.itemsize;
            for (ssize_t d = info.ndim - 1; d >= 0; --d) {
              if (info.shape[d] != 1 && info.strides[d] != expect)
                throw pyb::value_error("kiln.from_numpy: expected a C-contiguous array");
              expect *= info.shape[d];
            }
            a.shape.assign(info.shape.begin(), info.shape.end());
            a.dtype = std::move(dtype);
            size_t bytes = a.numel() * a.itemSize;
            a.buffer = std::make_shared<kiln::rt::DeviceBuffer>(std::max<size_t>(bytes, 1), device);
            if (bytes)
              a.buffer->copyFromHost(info.ptr, bytes);
            return a;
          },
          pyb::arg("array"), pyb::arg("dtype"), pyb::arg("device") = -1)
      .def(
          "copy_to_host",
          [](const DeviceArray &a, pyb::buffer b, uint64_t stream) {
            pyb::buffer_info info = b.request(true);
            size_t bytes = a.numel() * a.itemSize;
            if (size_t(info.size * info.itemsize) != bytes)
              throw pyb::value_error("copy_to_host: size mismatch");
            if (bytes)
              kiln::rt::copyDeviceToHost(info.ptr, a.dataPtr(), bytes, a.buffer->getDevice(),
                                         reinterpret_cast<kiln::rt::CUstream>(stream));
          },
          pyb::arg("array"), pyb::arg("stream") = 0)
      .def(
          "copy_from_host",
          [](DeviceArray &a, pyb::buffer b, uint64_t stream) {
            pyb::buffer_info info = b.request();
            size_t bytes = a.numel() * a.itemSize;
            if (size_t(info.size * info.itemsize) != bytes)
              throw pyb::value_error("copy_from_host: size mismatch");
            if (bytes)
              kiln::rt::copyHostToDevice(a.dataPtr(), info.ptr, bytes, a.buffer->getDevice(),
                                         reinterpret_cast<kiln::rt::CUstream>(stream));
          },
          pyb::arg("array"), pyb::arg("stream") = 0)
      .def(
          "copy_from_device",
          [](DeviceArray &a, const DeviceArray &src, uint64_t stream) {
            size_t bytes = a.numel() * a.itemSize;
            if (src.numel() * src.itemSize != bytes)
              throw pyb::value_error("copy_: size mismatch (" + std::to_string(bytes) +
                                     " bytes from " + std::to_string(src.numel() * src.itemSize) +
                                     ")");
            if (src.buffer->getDevice() != a.buffer->getDevice())
              throw pyb::value_error("copy_: the arrays are on different devices");
            if (bytes)
              kiln::rt::copyDeviceToDevice(a.dataPtr(), src.dataPtr(), bytes, a.buffer->getDevice(),
                                           reinterpret_cast<kiln::rt::CUstream>(stream));
          },
          pyb::arg("src"), pyb::arg("stream") = 0)
      .def(
          "fill32",
          [](DeviceArray &a, uint32_t v, uint64_t stream) {
            size_t bytes = a.numel() * a.itemSize;
            if (bytes % 4)
              throw pyb::value_error("fill32: the array's size is not a multiple of 4 bytes");
            if (bytes)
              kiln::rt::fillDevice32(a.dataPtr(), v, bytes / 4, a.buffer->getDevice(),
                                     reinterpret_cast<kiln::rt::CUstream>(stream));
          },
          pyb::arg("value"), pyb::arg("stream") = 0)
      .def(
          "_view",
          [](const DeviceArray &a, size_t offsetBytes, std::vector<int64_t> shape,
             std::string dtype) {
            DeviceArray v;
            v.itemSize = itemSizeOf(dtype);
            if (!v.itemSize)
              throw pyb::type_error("kiln.DeviceArray.view: unsupported dtype '" + dtype + "'");
            for (int64_t d : shape)
              if (d < 0)
                throw pyb::value_error("kiln.DeviceArray: negative dimension in a view");
            v.shape = std::move(shape);
            v.dtype = std::move(dtype);
            v.buffer = a.buffer;
            v.offset = a.offset + offsetBytes;
            if (offsetBytes + v.numel() * v.itemSize > a.numel() * a.itemSize)
              throw pyb::index_error("kiln.DeviceArray: the view reaches past its array");
            return v;
          },
          pyb::arg("offset"), pyb::arg("shape"), pyb::arg("dtype"))
      .def("data_ptr", &DeviceArray::dataPtr)
      .def_property_readonly("device", [](const DeviceArray &a) { return a.buffer->getDevice(); })
      .def_property_readonly("shape",
                             [](const DeviceArray &a) {
                               pyb::tuple t(a.shape.size());
                               for (size_t i = 0; i < a.shape.size(); ++i)
                                 t[i] = a.shape[i];
                               return t;
                             })
      .def_readonly("dtype_name", &DeviceArray::dtype)
      .def_readonly("itemsize", &DeviceArray::itemSize)
      .def_property_readonly("nbytes", [](const DeviceArray &a) { return a.numel() * a.itemSize; })
      .def("numel", &DeviceArray::numel);

  //===--------------------------------------------------------------------===//
  // Launch path
  //===--------------------------------------------------------------------===//

  registerLaunchTypes(m);
}
