//===- Common.h - What the GPU and host lowerings share ---------*- C++ -*-===//
//
// This file declares the helpers both lowerings of the kiln dialect use: the checks every
// kernel must pass, row-major strides, constant strings in the module, applying a
// reduce/scan combine region to scalar values, and the LLVM atomicrmw of an RMW kind.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_COMMON_H
#define KILN_CONVERSION_COMMON_H

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace kiln {

/// Reports, at their locations, what no backend can compile: kernel declarations, kernels
/// returning values, tile arguments, invalid kiln.divisibility hints, tiles whose shape is not
/// static powers of two, and calls. Fails if there is any.
mlir::LogicalResult checkKernels(mlir::ModuleOp module);
/// Reports, at their source locations, the ops the GPU path cannot lower yet and kernel
/// arguments that are tiles; fails if there is any.
mlir::LogicalResult checkGPUSupport(mlir::ModuleOp module);

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> getRowMajorStrides(llvm::ArrayRef<int64_t> shape);

/// The address of a NUL-terminated constant string `text` in the module of `at` (one internal
/// llvm.mlir.global per distinct text, named `<prefix><hash>`).
mlir::Value getStringConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::Operation *at,
                              llvm::StringRef text, llvm::StringRef prefix);

/// The llvm.func `name` of `type` in the module of `at`, declared at the module's start on
/// first use (libdevice functions, vprintf, the assert handler).
mlir::LLVM::LLVMFuncOp getOrInsertFunction(mlir::OpBuilder &b, mlir::Operation *at,
                                           llvm::StringRef name, mlir::LLVM::LLVMFunctionType type);

/// Clones the ops of a combine region (block arguments: the accumulators, then the new
/// values) at the builder's insertion point with `acc` and `next` for its arguments; returns
/// the values it yields.
llvm::SmallVector<mlir::Value> applyCombineRegion(mlir::OpBuilder &b, mlir::Region &region,
                                                  mlir::ArrayRef<mlir::Value> acc,
                                                  mlir::ArrayRef<mlir::Value> next);

/// The LLVM atomicrmw operation of an RMW kind on elements of `elem` (add and fadd by the
/// element type; max/min signed or float).
mlir::LLVM::AtomicBinOp getLLVMAtomicBinOp(RMWKind kind, mlir::Type elem);

} // namespace kiln

#endif // KILN_CONVERSION_COMMON_H
