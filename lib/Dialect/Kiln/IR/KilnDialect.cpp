//===- KilnDialect.cpp - kiln dialect registration and types -------------===//
//
// This file implements the kiln dialect's registration, its pointer type and the type helpers
// shared by op constraints, verifiers and the front end.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;

#include "kiln/Dialect/Kiln/IR/KilnDialect.cpp.inc"
#include "kiln/Dialect/Kiln/IR/KilnEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnTypes.cpp.inc"

void KilnDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "kiln/Dialect/Kiln/IR/KilnTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"
      >();
}

Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

LogicalResult PointerType::verify(function_ref<InFlightDiagnostic()> emitError, Type pointeeType) {
  if (isa<FloatType>(pointeeType) || isa<IntegerType>(pointeeType) || isa<PointerType>(pointeeType))
    return success();
  return emitError() << "expected a scalar pointee type (integer, float or !kiln.ptr), found "
                     << pointeeType;
}

Type kiln::getSameShape(Type type, Type element) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.clone(element);
  return element;
}

Type kiln::getPointeeType(Type type) {
  if (auto ptr = dyn_cast<PointerType>(getElementTypeOrSelf(type)))
    return getSameShape(type, ptr.getPointeeType());
  // Not a pointer: returning the type itself makes the TypesMatchWith check fail with a
  // message naming the expected relation instead of crashing.
  return type;
}

bool kiln::hasTileShape(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() &&
         llvm::all_of(tensor.getShape(), [](int64_t d) { return d > 0 && llvm::isPowerOf2_64(d); });
}

Type kiln::getI1SameShape(Type type) {
  return getSameShape(type, IntegerType::get(type.getContext(), 1));
}
