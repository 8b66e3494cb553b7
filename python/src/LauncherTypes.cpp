//===- LauncherTypes.cpp - The Python types of the launch path ------------===//
//
// This file implements the CPython types behind kernel[grid](...): the launcher object a
// JITFunction holds and the bound launch kernel[grid] returns (vectorcall, so a launch is two
// C calls), and registerLaunchTypes, which adds them to kiln._C.
//
//===----------------------------------------------------------------------===//

#include "Launcher.h"
#include "LauncherArgs.h"

namespace pyb = pybind11;
using namespace kiln::python;

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
  m.def("_bump_launch_defaults", &bumpLaunchDefaults,
        "every kernel resolves $KILN_DEBUG/$KILN_BACKEND/$KILN_ARCH again at its next launch");
}

PyObject *kiln::python::kilnErrorType = nullptr;
