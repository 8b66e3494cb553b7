//===- kiln.h - Kiln's embedded C++ DSL -------------------------*- C++ -*-===//
//
// This file declares kiln::lang, the C++ door into Kiln: a kernel is a C++ lambda over
// symbolic tile values, traced once per specialization through kiln::Builder (the same
// semantic layer as the Python front end), compiled by the JIT and launched from C++:
//
//   using namespace kiln::lang;
//   auto add = kiln::kernel("add", [](Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n,
//                                     Const<int> BLOCK) {
//     auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
//     auto mask = offs < n;
//     store(out + offs, load(x + offs, mask) + load(y + offs, mask), mask);
//   });
//   add(grid(cdiv(n, 1024)), stream, x, y, out, n, 1024);
//
// Names follow triton.language. Every op records the C++ call site (file:line, and the column
// where the compiler provides one) through a defaulted `Loc` parameter; a user error throws
// kiln::lang::CompileError naming the kernel and that call site. The header needs neither MLIR
// nor LLVM headers. docs/cpp-dsl.md is the reference. The parts live in kiln/lang/: Value.h,
// Builtins.h, ControlFlow.h, Kernel.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/lang/Builtins.h"
#include "kiln/lang/ControlFlow.h"
#include "kiln/lang/Kernel.h"
#include "kiln/lang/Value.h"

namespace kiln {
/// kiln::kernel is kiln::lang::kernel.
using lang::kernel;
} // namespace kiln

#endif // KILN_KILN_H
