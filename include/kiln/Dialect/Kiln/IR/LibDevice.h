//===- LibDevice.h - The libdevice functions Kiln exposes -------*- C++ -*-===//
//
// This file declares the table of the NVIDIA libdevice functions that
// kiln.language.extra.cuda.libdevice exposes (those of Triton's module of the same name): for
// each function its overloads, each one a libdevice symbol with its argument and result
// dtypes. The Builder dispatches on it, the kiln.extern_elementwise verifier checks known
// symbols against it, and the CPU backend finds what a symbol computes through it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_LIBDEVICE_H
#define KILN_DIALECT_KILN_IR_LIBDEVICE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir {
class MLIRContext;
class Type;
} // namespace mlir

namespace kiln::libdevice {

/// Argument and result dtypes are one letter each: f fp32, d fp64, i int32, u uint32,
/// l int64, L uint64.
mlir::Type getCodeType(char code, mlir::MLIRContext &ctx);
/// Triton's name of a code's dtype ("fp32", "uint64", ...).
llvm::StringRef getCodeDTypeName(char code);

/// One overload: `symbol` takes arguments of the dtypes `args` and returns `result`.
struct Overload {
  std::string symbol;
  std::string args;
  char result;
};

/// A libdevice function of kiln.language.extra.cuda.libdevice.
struct Function {
  std::string name;
  llvm::SmallVector<Overload, 2> overloads;
  /// True when fp16/bf16 (and fp8) arguments may be computed in fp32 and the result rounded
  /// back; false for functions whose rounding or bits the promotion would change (the
  /// rounding-mode arithmetic, conversions and bit casts).
  bool promotes = true;
};

/// Every function, in the order of Triton's module.
llvm::ArrayRef<Function> getFunctions();
/// The function called `name`, or null.
const Function *lookupFunction(llvm::StringRef name);
/// The function and overload whose libdevice symbol is `symbol`; {null, null} when none.
std::pair<const Function *, const Overload *> lookupSymbol(llvm::StringRef symbol);

} // namespace kiln::libdevice

#endif // KILN_DIALECT_KILN_IR_LIBDEVICE_H
