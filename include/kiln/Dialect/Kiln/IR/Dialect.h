//===- Dialect.h - The kiln tile dialect ------------------------*- C++ -*-===//
//
// This file declares the kiln dialect, its pointer type, enums and operations, and the small
// type helpers that the op constraints use.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_DIALECT_H
#define KILN_DIALECT_KILN_IR_DIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kiln/Dialect/Kiln/IR/KilnDialect.h.inc"
#include "kiln/Dialect/Kiln/IR/KilnEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnTypes.h.inc"

namespace kiln {
/// The element type a pointer (or each pointer of a tile) points to; same shape as `type`.
mlir::Type getPointeeType(mlir::Type type);
/// True for a ranked tensor with static dimensions that are all powers of two (>= 1).
bool hasTileShape(mlir::Type type);
/// An i1 type (tile) with the shape of `type`.
mlir::Type getI1SameShape(mlir::Type type);
/// `type` with its element type replaced by `element` (a scalar for scalars).
mlir::Type getSameShape(mlir::Type type, mlir::Type element);
/// Elements of `element` type (a number or a pointer) one register of a
/// kiln.inline_asm_elementwise invocation of `pack` elements holds: min(32 / bits, pack) for
/// values narrower than 32 bits, else 1.
unsigned getInlineAsmElementsPerRegister(mlir::Type element, unsigned pack);
/// Registers a value of `element` type takes in one invocation of `pack` elements.
unsigned getInlineAsmRegisters(mlir::Type element, unsigned pack);
/// The outputs (`=...`) and inputs (not `=` nor a `~{...}` clobber) an LLVM inline-asm
/// constraint string names.
std::pair<unsigned, unsigned> countInlineAsmConstraints(llvm::StringRef constraints);
/// Global memory as a side-effect resource: loads, stores and atomics touch it.
struct GlobalMemory : mlir::SideEffects::Resource::Base<GlobalMemory> {
  llvm::StringRef getName() final { return "<GlobalMemory>"; }
};
/// Name of the function argument attribute asserting divisibility (as in Triton's
/// tt.divisibility): an integer is a multiple of it, a pointer's address is.
inline constexpr llvm::StringLiteral kDivisibilityAttr = "kiln.divisibility";
/// Name of the attribute of a tensor map argument the compiler added
/// (-kiln-pointer-tiles-to-descriptors): how the launcher encodes it from the other arguments,
/// [base argument, dtype code ('h' f16, 'H' bf16), rank, block..., extents..., strides...]
/// with each extent and stride an argument number, or -1 - value for a constant.
inline constexpr llvm::StringLiteral kTensorMapRecipeAttr = "kiln.tensor_map_recipe";
} // namespace kiln

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.h.inc"

#endif // KILN_DIALECT_KILN_IR_DIALECT_H
